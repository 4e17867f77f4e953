// Config loading and validation: defaults, normalization, every rule
// named by key, every problem listed at once, unknown keys, env overrides, YAML and JSON.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfigFile, parseConfig } from '../../src/config/load.js';
import { problemsOf } from '../helpers/config.js';
import type { Config } from '../../src/config/types.js';
import { DEFAULTS } from '../../src/config/schema.js';
import { makeCertificate } from '../helpers/tls.js';

const DIGEST = 'ab'.repeat(32);
const DIGEST2 = 'cd'.repeat(32);

/** A minimal valid config; `patch` edits a deep copy of it. */
function minimal(patch?: (c: any) => void): Record<string, unknown> {
  const c = {
    services: [{ slug: 'demo', tokens: [{ name: 'laptop', sha256: DIGEST }], replicas: { urls: ['http://127.0.0.1:9000'] } }],
  };
  patch?.(c);
  return c;
}

/** Asserts that `raw` is rejected with a problem at `key` whose rule matches `rule`. */
function assertRejected(raw: unknown, key: string, rule: RegExp): void {
  const problems = problemsOf(raw);
  const hit = problems.find((p) => p.key === key);
  assert.ok(hit, `no problem at ${key}; got:\n${problems.map((p) => `${p.key}: ${p.rule}`).join('\n')}`);
  assert.match(hit.rule, rule);
}

function withTempDir(fn: (dir: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-config-'));
  try {
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('a minimal config gets every default', () => {
  const config = parseConfig(minimal());
  const expected: Config = {
    listen: { host: '127.0.0.1', port: 8080 },
    workers: 0,
    basePath: '/api/v1/services',
    drainTimeoutMs: 30000,
    log: { level: 'info' },
    limits: { prefix: 'sluice:', onStoreDown: 'allow' },
    pools: [],
    services: [
      {
        slug: 'demo',
        tokens: [{ name: 'laptop', sha256: DIGEST, priority: 0 }],
        methods: ['POST'],
        forwardHeaders: [],
        maxRequestBytes: 104857600,
        timeouts: { responseHeadersMs: 1200000, bodyIdleMs: 300000 },
        queue: { maxRequests: 1000, maxWaitMs: 600000, keepAliveMs: 0 },
        uploads: { bufferBytes: 1048576 },
        sessions: { maxMessageBytes: 16777216, maxMs: 3600000 },
        routing: { affinityMaxLoad: 1.25 },
        replicas: {
          urls: ['http://127.0.0.1:9000'],
          env: {},
          startTimeoutMs: 600000,
          min: 0,
          max: 1,
          idleTimeoutMs: 300000,
          keepAliveMaxMs: 0,
          concurrency: 0,
          units: 1,
        },
      },
    ],
  };
  assert.deepEqual(config, expected);
  assert.equal(config.admin, undefined);
  assert.equal(config.listen.tls, undefined);
});

test('a full config keeps every value it sets', (t) => {
  const tls = makeCertificate();
  t.after(tls.remove);
  const raw = {
    listen: { host: '0.0.0.0', port: 0, tls: { certFile: tls.certFile, keyFile: tls.keyFile } },
    admin: { host: '127.0.0.1', port: 9091, tokens: [{ name: 'ops', sha256: 'cd'.repeat(32) }] },
    workers: 4,
    basePath: '/v2',
    drainTimeoutMs: 1000,
    log: { level: 'debug' },
    limits: { prefix: 'gw:', onStoreDown: 'refuse' },
    pools: [{ name: 'gpu', size: 4 }],
    services: [
      {
        slug: 'launched-1',
        tokens: [{ name: 'a', sha256: DIGEST, priority: 10, limits: { requestsPerMinute: 60, concurrent: 2, tokensPerMinute: 100000 } }, { name: 'b', sha256: DIGEST2, priority: -3 }],
        limits: { concurrent: 1 },
        methods: ['POST', 'PUT'],
        forwardHeaders: ['x-tenant'],
        maxRequestBytes: 1,
        timeouts: { responseHeadersMs: 5, bodyIdleMs: 6 },
        queue: { maxRequests: 0, maxWaitMs: 7, keepAliveMs: 15000 },
        uploads: { bufferBytes: 0 },
        sessions: { maxMessageBytes: 4096, maxMs: 60000 },
        routing: { affinityHeader: 'x-session-id', affinityMaxLoad: 2 },
        replicas: {
          command: ['node', 'server.js', '--port', '{port}'],
          env: { MODEL: 'tiny', THREADS: '4' },
          readyPath: '/health?deep=1',
          startTimeoutMs: 8,
          min: 1,
          max: 3,
          idleTimeoutMs: 9,
          keepAliveMaxMs: 10,
          concurrency: 2,
          pool: 'gpu',
          units: 2,
        },
      },
      {
        slug: 'on-kubernetes',
        tokens: [{ name: 'a', sha256: DIGEST, priority: 0 }],
        methods: ['POST'],
        forwardHeaders: [],
        maxRequestBytes: 10,
        timeouts: { responseHeadersMs: 5, bodyIdleMs: 6 },
        queue: { maxRequests: 10, maxWaitMs: 7, keepAliveMs: 100 },
        uploads: { bufferBytes: 65536 },
        sessions: { maxMessageBytes: 16777216, maxMs: 3600000 },
        routing: { affinityMaxLoad: 1.25 },
        replicas: {
          kubernetes: { namespace: 'models', deployment: 'llama.v2', service: 'llama', port: 8000, kubeconfig: '/etc/sluice/kubeconfig' },
          env: {},
          readyPath: '/health',
          startTimeoutMs: DEFAULTS.startTimeoutMs,
          min: 1,
          max: 4,
          idleTimeoutMs: 9,
          keepAliveMaxMs: 0,
          concurrency: 2,
          units: 1,
        },
      },
    ],
  };
  assert.deepEqual(parseConfig(raw), raw);
});

test('values are normalized: digests, methods, headers, URLs, basePath', () => {
  const config = parseConfig(
    minimal((c) => {
      c.basePath = '/gateway/';
      c.services[0].tokens[0].sha256 = DIGEST.toUpperCase();
      c.services[0].methods = ['post', 'Get', 'POST', 'get'];
      c.services[0].forwardHeaders = ['X-Tenant', 'x-tenant', 'Content-Type', 'accept', 'X-Trace'];
      c.services[0].replicas.urls = ['http://Replica.Local:9000/', 'http://10.0.0.2:80', 'http://[::1]:9001'];
    }),
  );
  const s = config.services[0]!;
  assert.equal(config.basePath, '/gateway');
  assert.equal(s.tokens[0]!.sha256, DIGEST);
  assert.deepEqual(s.methods, ['POST', 'GET']);
  assert.deepEqual(s.forwardHeaders, ['x-tenant', 'x-trace']);
  assert.deepEqual(s.replicas.urls, ['http://replica.local:9000', 'http://10.0.0.2', 'http://[::1]:9001']);
  assert.equal(parseConfig(minimal((c) => (c.basePath = '/'))).basePath, '');
  assert.equal(parseConfig(minimal((c) => (c.basePath = ''))).basePath, '');
});

test('ConfigError.message has one line per problem: key, value, rule', () => {
  try {
    parseConfig(minimal((c) => (c.services[0].timeouts = { responseHeadersMs: -5 })));
    assert.fail('expected a ConfigError');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    assert.equal(err.problems.length, 1);
    assert.deepEqual(err.problems[0]!.key, 'services[0].timeouts.responseHeadersMs');
    assert.equal(err.problems[0]!.value, -5);
    assert.match(err.message, /^services\[0\]\.timeouts\.responseHeadersMs: -5 — must be an integer ≥ 1\b/);
    assert.equal(err.summary, '1 problem');
  }
});

// One row per rule: how to break a minimal config, the key that must be named, the rule text.
const RULES: [name: string, patch: (c: any) => void, key: string, rule: RegExp][] = [
  ['services required', (c) => delete c.services, 'services', /required.*non-empty list of services/],
  ['at least one service', (c) => (c.services = []), 'services', /non-empty list of services/],
  ['slug pattern', (c) => (c.services[0].slug = 'Demo_1'), 'services[0].slug', /lower-case letters/],
  ['slug not ending in -', (c) => (c.services[0].slug = 'demo-'), 'services[0].slug', /ending with a letter or digit/],
  ['slug at most 63 characters', (c) => (c.services[0].slug = 'a'.repeat(64)), 'services[0].slug', /1 to 63/],
  [
    'slugs unique',
    (c) => c.services.push({ ...c.services[0] }),
    'services[1].slug',
    /must be unique \(also services\[0\]\.slug\)/,
  ],
  ['tokens empty, and no router', (c) => (c.services[0].tokens = []), 'services[0].tokens', /must be set, or the service served by a router/],
  ['tokens set, or the service behind a router', (c) => delete c.services[0].tokens, 'services[0].tokens', /must be set, or the service served by a router/],
  ['token name non-empty', (c) => (c.services[0].tokens[0].name = ''), 'services[0].tokens[0].name', /non-empty/],
  [
    'token names unique',
    (c) => c.services[0].tokens.push({ name: 'laptop', sha256: DIGEST2 }),
    'services[0].tokens[1].name',
    /unique within the service/,
  ],
  [
    'token digests unique',
    (c) => c.services[0].tokens.push({ name: 'phone', sha256: DIGEST.toUpperCase() }),
    'services[0].tokens[1].sha256',
    /unique within the service/,
  ],
  ['sha256 64 hex digits', (c) => (c.services[0].tokens[0].sha256 = 'abc'), 'services[0].tokens[0].sha256', /64 hex digits/],
  ['sha256 not 65 digits', (c) => (c.services[0].tokens[0].sha256 = `${DIGEST}0`), 'services[0].tokens[0].sha256', /64 hex digits/],
  ['sha256 hex only', (c) => (c.services[0].tokens[0].sha256 = 'g'.repeat(64)), 'services[0].tokens[0].sha256', /64 hex digits/],
  ['method names are tokens', (c) => (c.services[0].methods = ['POST', 'GE T']), 'services[0].methods[1]', /HTTP method name/],
  ['methods include POST', (c) => (c.services[0].methods = ['GET']), 'services[0].methods', /must include POST/],
  ['header names are tokens', (c) => (c.services[0].forwardHeaders = ['x:y']), 'services[0].forwardHeaders[0]', /header field name/],
  ...[
    'authorization',
    'Proxy-Authorization',
    'cookie',
    'host',
    'connection',
    'keep-alive',
    'te',
    'trailer',
    'transfer-encoding',
    'upgrade',
    'content-length',
    'proxy-connection',
    'x-request-id',
    'accept-encoding',
  ].map(
    (h): [string, (c: any) => void, string, RegExp] => [
      `forwardHeaders refuses ${h}`,
      (c) => (c.services[0].forwardHeaders = ['x-ok', h]),
      'services[0].forwardHeaders[1]',
      /cannot be forwarded/,
    ],
  ),
  ['maxRequestBytes ≥ 1', (c) => (c.services[0].maxRequestBytes = 0), 'services[0].maxRequestBytes', /integer ≥ 1/],
  ['maxRequestBytes integer', (c) => (c.services[0].maxRequestBytes = '10MB'), 'services[0].maxRequestBytes', /integer/],
  ['responseHeadersMs positive', (c) => (c.services[0].timeouts = { responseHeadersMs: 0 }), 'services[0].timeouts.responseHeadersMs', /integer ≥ 1/],
  ['bodyIdleMs integer', (c) => (c.services[0].timeouts = { bodyIdleMs: 1.5 }), 'services[0].timeouts.bodyIdleMs', /integer ≥ 1/],
  [
    'durations fit in a timer',
    (c) => (c.services[0].timeouts = { bodyIdleMs: 2 ** 31 }),
    'services[0].timeouts.bodyIdleMs',
    /≤ 2147483647/,
  ],
  ['uploads.bufferBytes ≥ 0', (c) => (c.services[0].uploads = { bufferBytes: -1 }), 'services[0].uploads.bufferBytes', /integer ≥ 0 .*0 = never hold/],
  ['sessions.maxMessageBytes ≥ 1', (c) => (c.services[0].sessions = { maxMessageBytes: 0 }), 'services[0].sessions.maxMessageBytes', /integer ≥ 1 and ≤ 536870912/],
  ['sessions.maxMessageBytes at most 512 MiB', (c) => (c.services[0].sessions = { maxMessageBytes: 536870913 }), 'services[0].sessions.maxMessageBytes', /≤ 536870912/],
  ['sessions.maxMs ≥ 1', (c) => (c.services[0].sessions = { maxMs: 0 }), 'services[0].sessions.maxMs', /integer ≥ 1/],
  ['sessions has no other key', (c) => (c.services[0].sessions = { idleMs: 5 }), 'services[0].sessions.idleMs', /unknown key/],
  ['uploads.bufferBytes integer', (c) => (c.services[0].uploads = { bufferBytes: '1MiB' }), 'services[0].uploads.bufferBytes', /integer ≥ 0/],
  ['queue.maxRequests ≥ 0', (c) => (c.services[0].queue = { maxRequests: -1 }), 'services[0].queue.maxRequests', /integer ≥ 0/],
  ['queue.maxWaitMs ≥ 1', (c) => (c.services[0].queue = { maxWaitMs: 0 }), 'services[0].queue.maxWaitMs', /integer ≥ 1/],
  ...([-1, 1, 99, 1.5, 2 ** 31, '1000', null] as unknown[]).map((v): (typeof RULES)[number] => [
    `queue.keepAliveMs ${String(v)}`,
    (c) => (c.services[0].queue = { keepAliveMs: v }),
    'services[0].queue.keepAliveMs',
    /must be 0 \(off\) or an integer from 100 to 2147483647/,
  ]),
  ['replicas required', (c) => delete c.services[0].replicas, 'services[0].replicas', /required/],
  ['replicas needs urls or command', (c) => (c.services[0].replicas = {}), 'services[0].replicas.urls', /static replicas need urls, launched replicas need command/],
  [
    'not both urls and command',
    (c) => (c.services[0].replicas.command = ['node']),
    'services[0].replicas.command',
    /not be set together with replicas\.urls/,
  ],
  [
    'not both urls and kubernetes',
    (c) => (c.services[0].replicas.kubernetes = { deployment: 'llama', service: 'llama', port: 'http' }),
    'services[0].replicas.kubernetes',
    /not be set together with replicas\.urls: a service has one kind of replicas/,
  ],
  ...(
    [
      ['kubernetes is an object', 'yes', 'services[0].replicas.kubernetes', /must be \{ deployment, service, port \}/],
      ['kubernetes needs a deployment', { service: 'llama', port: 'http' }, 'services[0].replicas.kubernetes.deployment', /Kubernetes object name/],
      ['kubernetes deployment lower-case', { deployment: 'Llama', service: 'llama', port: 'http' }, 'services[0].replicas.kubernetes.deployment', /lower-case/],
      ['kubernetes deployment ≤ 253', { deployment: 'a'.repeat(254), service: 'llama', port: 'http' }, 'services[0].replicas.kubernetes.deployment', /253/],
      ['kubernetes service starts with a letter', { deployment: 'llama', service: '9b', port: 'http' }, 'services[0].replicas.kubernetes.service', /starting with a letter/],
      ['kubernetes service ≤ 63', { deployment: 'llama', service: 'a'.repeat(64), port: 'http' }, 'services[0].replicas.kubernetes.service', /Service name/],
      ['kubernetes namespace is a label', { namespace: 'a_b', deployment: 'llama', service: 'llama', port: 'http' }, 'services[0].replicas.kubernetes.namespace', /namespace name/],
      ['kubernetes port required', { deployment: 'llama', service: 'llama' }, 'services[0].replicas.kubernetes.port', /port's name .* or the pods' target port number/],
      ['kubernetes port number in range', { deployment: 'llama', service: 'llama', port: 65_536 }, 'services[0].replicas.kubernetes.port', /1 to 65535/],
      ['kubernetes port name has a letter', { deployment: 'llama', service: 'llama', port: '8000' }, 'services[0].replicas.kubernetes.port', /with a letter/],
      ['kubernetes kubeconfig non-empty', { deployment: 'llama', service: 'llama', port: 'http', kubeconfig: '' }, 'services[0].replicas.kubernetes.kubeconfig', /file path/],
      ['kubernetes unknown key', { deployment: 'llama', service: 'llama', port: 'http', replicas: 2 }, 'services[0].replicas.kubernetes.replicas', /unknown key/],
    ] as [string, unknown, string, RegExp][]
  ).map(([name, value, key, rule]): [string, (c: any) => void, string, RegExp] => [name, (c) => (c.services[0].replicas = { kubernetes: value }), key, rule]),
  [
    'a launched service with min 0 needs a queue',
    (c) => (c.services[0].replicas = { command: ['node', 'x.js'] }, (c.services[0].queue = { maxRequests: 0 })),
    'services[0].queue.maxRequests',
    /cold service is refused before it can start a replica/,
  ],
  [
    'a kubernetes service with min 0 needs a queue',
    (c) => (c.services[0].replicas = { kubernetes: { deployment: 'llama', service: 'llama', port: 'http' } }, (c.services[0].queue = { maxRequests: 0 })),
    'services[0].queue.maxRequests',
    /set replicas\.min ≥ 1/,
  ],
  [
    'kubernetes refuses env',
    (c) => (c.services[0].replicas = { kubernetes: { deployment: 'llama', service: 'llama', port: 'http' }, env: { A: 'b' } }),
    'services[0].replicas.env',
    /applies only to launched replicas .*Kubernetes starts the pods/,
  ],
  [
    'kubernetes refuses startTimeoutMs',
    (c) => (c.services[0].replicas = { kubernetes: { deployment: 'llama', service: 'llama', port: 'http' }, startTimeoutMs: 1000 }),
    'services[0].replicas.startTimeoutMs',
    /queue\.maxWaitMs bounds/,
  ],
  ['urls non-empty', (c) => (c.services[0].replicas.urls = []), 'services[0].replicas.urls', /non-empty list/],
  ['urls http only', (c) => (c.services[0].replicas.urls = ['https://a:1']), 'services[0].replicas.urls[0]', /http:\/\/host:port/],
  ['urls no path', (c) => (c.services[0].replicas.urls = ['http://a:1/v1']), 'services[0].replicas.urls[0]', /no path/],
  ['urls no query', (c) => (c.services[0].replicas.urls = ['http://a:1/?x=1']), 'services[0].replicas.urls[0]', /query/],
  ['urls no empty query', (c) => (c.services[0].replicas.urls = ['http://a:1?']), 'services[0].replicas.urls[0]', /query/],
  ['urls no user info', (c) => (c.services[0].replicas.urls = ['http://u:p@a:1']), 'services[0].replicas.urls[0]', /user info/],
  ['urls no fragment', (c) => (c.services[0].replicas.urls = ['http://a:1#x']), 'services[0].replicas.urls[0]', /fragment/],
  ['urls not port 0', (c) => (c.services[0].replicas.urls = ['http://a:0']), 'services[0].replicas.urls[0]', /http:\/\/host:port/],
  ['urls not garbage', (c) => (c.services[0].replicas.urls = ['127.0.0.1:9000']), 'services[0].replicas.urls[0]', /http:\/\/host:port/],
  [
    'urls unique',
    (c) => (c.services[0].replicas.urls = ['http://a:1', 'http://a:1/']),
    'services[0].replicas.urls[1]',
    /must be unique/,
  ],
  ['command non-empty', (c) => (c.services[0].replicas = { command: [] }), 'services[0].replicas.command', /non-empty list/],
  ['command args non-empty', (c) => (c.services[0].replicas = { command: ['node', ''] }), 'services[0].replicas.command[1]', /non-empty string/],
  ['command args strings', (c) => (c.services[0].replicas = { command: ['node', 3] }), 'services[0].replicas.command[1]', /non-empty string/],
  ['env values strings', (c) => (c.services[0].replicas = { command: ['x'], env: { N: 4 } }), 'services[0].replicas.env.N', /must be a string/],
  ['env names', (c) => (c.services[0].replicas = { command: ['x'], env: { 'A-B': 'x' } }), 'services[0].replicas.env["A-B"]', /environment variable name/],
  ['env PORT is Sluice’s', (c) => (c.services[0].replicas = { command: ['x'], env: { PORT: '1' } }), 'services[0].replicas.env.PORT', /set by Sluice/],
  ['readyPath begins with /', (c) => (c.services[0].replicas.readyPath = 'health'), 'services[0].replicas.readyPath', /beginning with '\/'/],
  ['readyPath no spaces', (c) => (c.services[0].replicas.readyPath = '/a b'), 'services[0].replicas.readyPath', /visible ASCII/],
  ['min ≥ 0', (c) => (c.services[0].replicas = { command: ['x'], min: -1 }), 'services[0].replicas.min', /integer ≥ 0/],
  ['max ≥ 1', (c) => (c.services[0].replicas = { command: ['x'], max: 0 }), 'services[0].replicas.max', /integer ≥ 1/],
  ['min ≤ max', (c) => (c.services[0].replicas = { command: ['x'], min: 3, max: 2 }), 'services[0].replicas.min', /not be greater than replicas\.max \(2\)/],
  ['concurrency ≥ 0', (c) => (c.services[0].replicas.concurrency = -1), 'services[0].replicas.concurrency', /integer ≥ 0/],
  ['static replicas: no max', (c) => (c.services[0].replicas.max = 4), 'services[0].replicas.max', /only to launched replicas/],
  ['static replicas: no env', (c) => (c.services[0].replicas.env = { A: 'b' }), 'services[0].replicas.env', /only to launched replicas/],
  ['basePath begins with /', (c) => (c.basePath = 'api'), 'basePath', /must be ""/],
  ['basePath unreserved characters', (c) => (c.basePath = '/a%20b'), 'basePath', /letters, digits/],
  ['basePath no empty segment', (c) => (c.basePath = '/a//b'), 'basePath', /segments/],
  ['basePath no dot segment', (c) => (c.basePath = '/a/../b'), 'basePath', /'\.\.'/],
  ['listen.port range', (c) => (c.listen = { port: 65536 }), 'listen.port', /0 to 65535/],
  ['listen.port integer', (c) => (c.listen = { port: '80' }), 'listen.port', /integer/],
  ['listen.host no port', (c) => (c.listen = { host: 'localhost:80' }), 'listen.host', /host name or IP address/],
  ['listen.host non-empty', (c) => (c.listen = { host: '' }), 'listen.host', /host name or IP address/],
  ['tls needs keyFile', (c) => (c.listen = { tls: { certFile: 'c.pem' } }), 'listen.tls.keyFile', /required/],
  ['tls needs certFile', (c) => (c.listen = { tls: { keyFile: 'k.pem' } }), 'listen.tls.certFile', /required/],
  ['admin needs a port', (c) => (c.admin = { host: '127.0.0.1' }), 'admin.port', /required/],
  ['admin port range', (c) => (c.admin = { port: -1 }), 'admin.port', /0 to 65535/],
  ['admin port differs from listen', (c) => (c.admin = { port: 8080 }), 'admin.port', /must differ from listen\.port/],
  ['workers ≤ 64', (c) => (c.workers = 65), 'workers', /0 to 64/],
  ['workers integer', (c) => (c.workers = 1.5), 'workers', /0 to 64/],
  ['drainTimeoutMs positive', (c) => (c.drainTimeoutMs = 0), 'drainTimeoutMs', /integer ≥ 1/],
  ['log.level known', (c) => (c.log = { level: 'verbose' }), 'log.level', /one of fatal, error, warn, info, debug, trace, silent/],
];

for (const [name, patch, key, rule] of RULES) {
  test(`rule: ${name} (${key})`, () => assertRejected(minimal(patch), key, rule));
}

test('the root must be an object', () => {
  for (const raw of [null, undefined, [], 'services: []', 42]) {
    const problems = problemsOf(raw);
    assert.equal(problems.length, 1);
    assert.match(problems[0]!.rule, /must be an object with a services list/);
  }
});

test('a config with many problems lists every one of them', () => {
  const raw = {
    listen: { port: -1 },
    workers: 100,
    log: { level: 'loud' },
    services: [
      {
        slug: 'Bad Slug',
        tokens: [{ name: '', sha256: 'short' }],
        methods: ['GET'],
        forwardHeaders: ['cookie'],
        timeouts: { responseHeadersMs: -5 },
        queue: { maxWaitMs: 0 },
        replicas: { urls: ['https://x'], command: ['node'] },
      },
      { slug: 'ok', tokens: [], replicas: { command: ['x'], min: 2, max: 1 } },
    ],
  };
  const keys = problemsOf(raw).map((p) => p.key);
  assert.deepEqual(new Set(keys), new Set([
    'listen.port',
    'workers',
    'log.level',
    'services[0].slug',
    'services[0].tokens[0].name',
    'services[0].tokens[0].sha256',
    'services[0].methods',
    'services[0].forwardHeaders[0]',
    'services[0].timeouts.responseHeadersMs',
    'services[0].queue.maxWaitMs',
    'services[0].replicas.urls[0]',
    'services[0].replicas.command',
    'services[1].tokens',
    'services[1].replicas.min',
  ]));
  assert.equal(keys.length, new Set(keys).size, 'each problem is listed once');
});

test('unknown keys are rejected at every level, each named, with a hint for typos', () => {
  const problems = problemsOf(
    minimal((c) => {
      c.lsiten = { port: 1 };
      c.extra = true;
      c.services[0].timeout = { responseHeadersMs: 1 };
      c.services[0].tokens[0].comment = 'x';
      c.services[0].replicas.replicas = 2;
    }),
  );
  const byKey = new Map(problems.map((p) => [p.key, p]));
  assert.equal(problems.length, 5);
  assert.match(byKey.get('lsiten')?.rule ?? '', /^unknown key \(did you mean listen\?\)$/);
  assert.equal(byKey.get('extra')?.rule, 'unknown key');
  assert.equal(byKey.get('extra')?.value, true);
  assert.match(byKey.get('services[0].timeout')?.rule ?? '', /did you mean timeouts\?/);
  assert.equal(byKey.get('services[0].tokens[0].comment')?.rule, 'unknown key');
  assert.equal(byKey.get('services[0].replicas.replicas')?.rule, 'unknown key');
});

test('a token pasted where its digest belongs is rejected without echoing it', () => {
  const secret = 'slc_' + 'A'.repeat(43);
  try {
    parseConfig(minimal((c) => (c.services[0].tokens[0].sha256 = secret)));
    assert.fail('expected a ConfigError');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    assert.match(err.message, /not the token itself/);
    assert.ok(!err.message.includes(secret));
    assert.ok(!JSON.stringify(err.problems).includes(secret));
  }
});

test('the input object is not modified', () => {
  const raw = minimal((c) => (c.services[0].methods = ['post']));
  const before = JSON.stringify(raw);
  parseConfig(raw);
  assert.equal(JSON.stringify(raw), before);
});

test('YAML and JSON files load to the same config', () => {
  withTempDir((dir) => {
    const yamlPath = join(dir, 'config.yaml');
    writeFileSync(
      yamlPath,
      [
        '# a comment',
        'listen: { host: 127.0.0.1, port: 8081 }',
        'services:',
        '  - slug: demo',
        '    tokens:',
        `      - { name: laptop, sha256: "${DIGEST}" }`,
        '    replicas:',
        '      command: ["node", "dist/examples/model-server.js"]',
        '      readyPath: /health',
        '',
      ].join('\n'),
    );
    const jsonPath = join(dir, 'config.json');
    const raw = {
      listen: { host: '127.0.0.1', port: 8081 },
      services: [
        {
          slug: 'demo',
          tokens: [{ name: 'laptop', sha256: DIGEST }],
          replicas: { command: ['node', 'dist/examples/model-server.js'], readyPath: '/health' },
        },
      ],
    };
    writeFileSync(jsonPath, JSON.stringify(raw, null, 2));
    const fromYaml = loadConfigFile(yamlPath, {});
    const fromJson = loadConfigFile(jsonPath, {});
    assert.deepEqual(fromYaml, fromJson);
    assert.deepEqual(fromJson, parseConfig(raw));
    assert.equal(fromYaml.listen.port, 8081);
  });
});

test('a syntax error names its line and column', () => {
  withTempDir((dir) => {
    const yamlPath = join(dir, 'bad.yaml');
    writeFileSync(yamlPath, 'services:\n  - slug: demo\n    tokens: [ { name: a }\nlisten: { port: 1 }\nlisten: 2\n');
    assert.throws(() => loadConfigFile(yamlPath, {}), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.match(err.summary, /^syntax error at line \d+, column \d+$/);
      assert.ok(err.problems.every((p) => /^line \d+, column \d+$/.test(p.key)), err.message);
      assert.ok(err.problems.some((p) => /unique/i.test(p.rule) && p.key.startsWith('line 5,')), err.message);
      return true;
    });
    const jsonPath = join(dir, 'bad.json');
    writeFileSync(jsonPath, '{\n  "services": [\n    {"slug": "demo"\n  ]\n}\n');
    assert.throws(() => loadConfigFile(jsonPath, {}), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.match(err.problems[0]!.key, /^line \d+, column \d+$/);
      return true;
    });
  });
});

test('a missing file is a ConfigError with a one-line reason', () => {
  withTempDir((dir) => {
    assert.throws(() => loadConfigFile(join(dir, 'missing.yaml'), {}), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.match(err.summary, /cannot read the file \(ENOENT/);
      assert.equal(err.problems.length, 1);
      return true;
    });
  });
});

test('SLUICE_HOST, SLUICE_PORT and LOG_LEVEL override the file', () => {
  withTempDir((dir) => {
    const path = join(dir, 'config.json');
    writeFileSync(path, JSON.stringify(minimal((c) => (c.listen = { host: '127.0.0.1', port: 8081 }))));
    const config = loadConfigFile(path, { SLUICE_HOST: '0.0.0.0', SLUICE_PORT: '9999', LOG_LEVEL: 'debug' });
    assert.deepEqual(config.listen, { host: '0.0.0.0', port: 9999 });
    assert.equal(config.log.level, 'debug');
    // Empty means unset.
    const unset = loadConfigFile(path, { SLUICE_HOST: '', SLUICE_PORT: '', LOG_LEVEL: '' });
    assert.deepEqual(unset.listen, { host: '127.0.0.1', port: 8081 });
    assert.equal(unset.log.level, 'info');
    // A file without listen or log sections still takes the overrides.
    const bare = join(dir, 'bare.json');
    writeFileSync(bare, JSON.stringify(minimal()));
    assert.equal(loadConfigFile(bare, { SLUICE_PORT: '0' }).listen.port, 0);
  });
});

test('bad env overrides are validated like the file, naming the variable', () => {
  withTempDir((dir) => {
    const path = join(dir, 'config.json');
    writeFileSync(path, JSON.stringify(minimal()));
    assert.throws(() => loadConfigFile(path, { SLUICE_PORT: '80x', LOG_LEVEL: 'loud', SLUICE_HOST: 'a b' }), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      const byKey = new Map(err.problems.map((p) => [p.key, p]));
      assert.equal(err.problems.length, 3);
      assert.equal(byKey.get('listen.port')?.value, '80x');
      assert.match(byKey.get('listen.port')?.rule ?? '', /SLUICE_PORT/);
      assert.match(byKey.get('listen.host')?.rule ?? '', /SLUICE_HOST/);
      assert.match(byKey.get('log.level')?.rule ?? '', /LOG_LEVEL/);
      assert.throws(() => loadConfigFile(path, { SLUICE_PORT: '70000' }), /listen\.port: 70000 — must be an integer from 0 to 65535/);
      return true;
    });
  });
});
