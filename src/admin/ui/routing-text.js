// How the overview page words a service's replica choice, its replicas' load readings and their
// ejections, and its limited tokens' use, from the `routing`, `loads`, `ejections` and `limits`
// fields of /status, each pool: who holds which unit, who waits (`pools`), and each router: its
// models and their state (`routers`). Pure functions: no DOM, so they are tested in Node as they
// are shipped.

/** `fewest in flight`, `queue-aware`, and the affinity header when there is one. */
export function routingText(routing) {
  if (routing === undefined || routing === null) return '';
  const policy = routing.policy === 'queue-aware' ? 'queue-aware (the replicas’ own queues)' : 'fewest in flight';
  const parts = [policy];
  if (routing.affinityHeader) parts.push(`sessions by ${routing.affinityHeader}`);
  if (routing.prefix) parts.push(prefixText(routing.prefix));
  return parts.join(' · ');
}

/** `prompt prefixes: 62 % expected cache hits (svc-1 70 %, svc-2 51 %)`, or `prompt prefixes: no blocks yet`. */
function prefixText(prefix) {
  const percent = (rate) => `${Math.round(rate * 100)} %`;
  if (prefix.hitRate === null) return 'prompt prefixes: no blocks yet';
  const each = prefix.replicas.filter((r) => r.hitRate !== null).map((r) => `${r.replica} ${percent(r.hitRate)}`);
  return `prompt prefixes: ${percent(prefix.hitRate)} expected cache hits${each.length > 0 ? ` (${each.join(', ')})` : ''}`;
}

/**
 * One line per replica reading: `svc-1: 3 waiting · 12 running · cache 42 % · 120 ms ago` (running
 * with a preset that reads it), or why it is not
 * used (`svc-2: weighed by in flight (status 500)`). Empty without readings.
 */
export function loadsText(loads) {
  if (!Array.isArray(loads)) return '';
  return loads
    .map((l) => {
      if (!l.used) return `${l.replica}: weighed by in flight${l.problem ? ` (${l.problem})` : ''}`;
      const parts = [`${l.waiting} waiting`];
      if (typeof l.running === 'number') parts.push(`${l.running} running`);
      if (l.cacheUsage !== null) parts.push(`cache ${Math.round(l.cacheUsage * 100)} %`);
      if (l.ageMs !== null) parts.push(l.ageMs < 1000 ? `${l.ageMs} ms ago` : `${(l.ageMs / 1000).toFixed(1)} s ago`);
      return `${l.replica}: ${parts.join(' · ')}`;
    })
    .join('\n');
}

/**
 * One line per replica ever ejected for failing requests in a row: `svc-1: ejected (reset), back
 * in 25 s · 2 ejections`, or `svc-1: back in rotation · ejected once (timeout)`. `now` is epoch ms.
 * Empty without ejections.
 */
export function ejectionsText(ejections, now) {
  if (!Array.isArray(ejections)) return '';
  return ejections
    .map((e) => {
      const times = e.ejections === 1 ? 'once' : `${e.ejections} times`;
      if (!e.ejected) return `${e.replica}: back in rotation · ejected ${times} (last: ${e.reason})`;
      const left = Math.max(0, Math.ceil((Date.parse(e.until) - now) / 1000));
      return `${e.replica}: ejected (${e.reason}), back in ${left} s · ejected ${times}`;
    })
    .join('\n');
}

/**
 * One line per limited token: `chat: 12 of 60 requests/min · 3 of 4 in flight · 41200 of 100000
 * tokens/min (6000 reserved) · 812000 of 2000000 tokens/day UTC, resets 00:00 UTC · 9100000 of
 * 50000000 tokens/month UTC, resets 2026-12-01`. Empty without limited tokens.
 */
export function limitsText(limits) {
  if (!Array.isArray(limits)) return '';
  return limits
    .map((t) => {
      const parts = [];
      if (t.requestsPerMinute) parts.push(`${t.requestsPerMinute.used} of ${t.requestsPerMinute.limit} requests/min`);
      if (t.concurrent) parts.push(`${t.concurrent.used} of ${t.concurrent.limit} in flight`);
      if (t.tokensPerMinute) {
        const reserved = t.tokensPerMinute.reserved > 0 ? ` (${t.tokensPerMinute.reserved} reserved)` : '';
        parts.push(`${t.tokensPerMinute.used} of ${t.tokensPerMinute.limit} tokens/min${reserved}`);
      }
      if (t.tokensPerDay) parts.push(`${t.tokensPerDay.used} of ${t.tokensPerDay.limit} tokens/day UTC, resets 00:00 UTC`);
      if (t.tokensPerMonth) parts.push(`${t.tokensPerMonth.used} of ${t.tokensPerMonth.limit} tokens/month UTC, resets ${String(t.tokensPerMonth.resetsAt).slice(0, 10)}`);
      return `${t.token}: ${parts.join(' · ')}`;
    })
    .join('\n');
}

/**
 * A pool, one line each: `gpu · 1 of 2 units free · 3 evictions`, then per unit `unit 0: chat-1
 * (chat)`, `unit 1: coder-4 (coder), stopping` or `unit 1: free`, then per waiting service, first
 * served first, `waiting: embed · 1 unit · priority 0 · 2.2 s`. Empty for anything else.
 */
export function poolText(pool) {
  if (pool === null || typeof pool !== 'object' || !Array.isArray(pool.units)) return '';
  const evictions = Object.values(pool.evictions ?? {}).reduce((a, b) => a + b, 0);
  const lines = [`${pool.name} · ${pool.free} of ${pool.size} ${pool.size === 1 ? 'unit' : 'units'} free · ${evictions} ${evictions === 1 ? 'eviction' : 'evictions'}`];
  for (const u of pool.units) {
    lines.push(u.replica === null ? `unit ${u.unit}: free` : `unit ${u.unit}: ${u.replica} (${u.service})${u.stopping ? ', stopping' : ''}`);
  }
  for (const w of pool.waiting ?? []) {
    const seconds = w.waitingMs < 1000 ? `${w.waitingMs} ms` : `${(w.waitingMs / 1000).toFixed(1)} s`;
    lines.push(`waiting: ${w.service} · ${w.units} ${w.units === 1 ? 'unit' : 'units'} · priority ${w.priority} · ${seconds}`);
  }
  return lines.join('\n');
}

/**
 * A router, one line each: `models · 1 of 3 models ready · {baseUrl}`, then per model
 * `llama-3.1-8b: chat · ready`, then its limited tokens as limitsText words them. Empty for
 * anything else.
 */
export function routerText(router) {
  if (router === null || typeof router !== 'object' || !Array.isArray(router.models)) return '';
  const n = router.models.length;
  const ready = router.models.filter((m) => m.state === 'ready').length;
  // The URL an OpenAI client takes as its base_url: the router's own answers `{baseUrl}/request/v1/…`.
  const lines = [`${router.slug} · ${ready} of ${n} ${n === 1 ? 'model' : 'models'} ready · ${router.baseUrl}/request/v1`];
  for (const m of router.models) lines.push(`${m.id}: ${m.service} · ${m.state}`);
  const limits = limitsText(router.limits);
  if (limits !== '') lines.push(limits);
  return lines.join('\n');
}
