// Which uWebSockets.js build the front end runs on, chosen once at start
// (docs/architecture.md#the-front-ends-build). Two builds are installed; each ships native binaries
// for some Node versions (ABI) and needs a minimum glibc. The newest one that loads here is used,
// unless SLUICE_UWS_BUILD names one. Every thread loads the same build: the main thread chooses,
// and each worker loads the build named in its init (src/data/worker.ts). It sits with the HTTP
// helpers, below the relay, because the relay asks it what the build can write (`sendsHeadAlone`).
//
// Everything in src/ that calls uWS at run time gets the module from `uws()`; the types come from
// the `uWebSockets.js` package (both builds expose the same API to Sluice).
import { createRequire } from 'node:module';
import type * as UwsModule from 'uWebSockets.js';

export type Uws = typeof UwsModule;

/** A front-end build Sluice can run on, newest first in BUILDS. */
export interface UwsBuild {
  /** The npm package and version, as logged and printed by `sluice --version`. */
  readonly id: string;
  /** The name it is installed under (package.json dependencies). */
  readonly specifier: string;
  /**
   * How it is loaded: uws-pack is ESM only; the other has a CommonJS entry, and on Node 20 an
   * import() of its ESM wrapper whose binary fails to load ends the process instead of rejecting.
   */
  readonly load: 'require' | 'import';
  /** The upstream uWebSockets.js release it repacks. */
  readonly upstream: string;
  /** The Node versions it has binaries for. */
  readonly node: string;
  /** The C library it needs on Linux. */
  readonly libc: string;
  /**
   * Whether `tryEnd` with no bytes writes a Content-Length head and leaves the response open.
   * Upstream made it end the response in May 2025 (uWebSockets "Fix sync. HEAD responses with
   * content-length"), so with v20.57.0 a known-length head can only go with its first body bytes.
   */
  readonly headAlone: boolean;
}

export const BUILDS: readonly UwsBuild[] = [
  {
    id: '@btc-vision/uwebsockets.js@20.57.0',
    specifier: '@btc-vision/uwebsockets.js',
    load: 'require',
    upstream: 'v20.57.0',
    node: 'Node 20, 22, 24 or 25',
    libc: 'glibc >= 2.38 (Debian 13, Ubuntu 24.04, Fedora 39)',
    headAlone: false,
  },
  {
    id: 'uws-pack@20.0.8',
    specifier: 'uWebSockets.js',
    load: 'import',
    upstream: 'v20 (Node 18-22 binaries)',
    node: 'Node 18-22',
    libc: 'glibc >= 2.27',
    headAlone: true,
  },
];

/** No build loads on this platform (or the one SLUICE_UWS_BUILD names does not). */
export class UwsBuildError extends Error {
  readonly code = 'ERR_SLUICE_NO_UWS_BUILD';
}

let loaded: { build: UwsBuild; uws: Uws } | undefined;

/** The uWS module of the build in use; loadUwsBuild must have run on this thread. */
export function uws(): Uws {
  if (loaded === undefined) throw new UwsBuildError('uWebSockets.js used before loadUwsBuild() chose a build');
  return loaded.uws;
}

/** The build in use, or undefined before loadUwsBuild. */
export function uwsBuild(): UwsBuild | undefined {
  return loaded?.build;
}

/** Whether the build in use can send a Content-Length answer's head before its body (`headAlone`). */
export function sendsHeadAlone(): boolean {
  return loaded?.build.headAlone ?? false;
}

/** The C library this process runs on: "glibc 2.36", or a name without a version. */
export function libcName(): string {
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  const glibc = header?.glibcVersionRuntime;
  if (glibc !== undefined) return `glibc ${glibc}`;
  return process.platform === 'linux' ? 'a C library other than glibc (musl?)' : process.platform;
}

/**
 * Loads a build once per thread: `only` (a build id or package name, from a worker's init or
 * SLUICE_UWS_BUILD) or else the newest that loads. Throws a UwsBuildError whose message is the
 * one line `sluice` prints: what this platform is, what each build needs, what to do.
 */
export async function loadUwsBuild(only?: string): Promise<UwsBuild> {
  if (loaded !== undefined) {
    if (only === undefined || matches(loaded.build, only)) return loaded.build;
    throw new UwsBuildError(`uWebSockets.js ${loaded.build.id} is already loaded; cannot switch to ${only}`);
  }
  const candidates = only === undefined ? BUILDS : BUILDS.filter((b) => matches(b, only));
  if (candidates.length === 0) {
    throw new UwsBuildError(`SLUICE_UWS_BUILD=${only} names no uWebSockets.js build; choose one of ${BUILDS.map((b) => b.id).join(', ')}`);
  }
  for (const build of candidates) {
    try {
      // Not a static import: that would fail before this choice could be made.
      const uws = (build.load === 'require' ? createRequire(import.meta.url)(build.specifier) : await import(build.specifier)) as Uws;
      loaded = { build, uws };
      return build;
    } catch {
      // Its loader threw: its binary is missing for this Node or needs a newer C library: try the next one.
    }
  }
  const needs = candidates.map((b) => `${b.id} needs ${b.node} with ${b.libc}`).join('; ');
  throw new UwsBuildError(
    `no uWebSockets.js build loads on Node ${process.version} with ${libcName()}: ${needs}; ` +
      'run Node 22 here, or Node 24 on a newer C library (the node:24-trixie-slim image)',
  );
}

function matches(build: UwsBuild, name: string): boolean {
  return build.id === name || build.specifier === name || build.id.startsWith(`${name}@`);
}
