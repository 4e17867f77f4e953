// The front end's timings that tests wait on, for the build this process (and a gateway it starts
// here) loads: SLUICE_UWS_BUILD, else the newest that loads (docs/architecture.md#the-front-ends-build).
import { loadUwsBuild } from '../../src/http/uws-build.js';

export const UWS_BUILD = await loadUwsBuild(process.env['SLUICE_UWS_BUILD'] || undefined);

/** True with upstream v20.57.0 (@btc-vision/uwebsockets.js), false with uws-pack@20.0.8. */
export const UWS_V57 = UWS_BUILD.upstream === 'v20.57.0';

/**
 * uWS's idle timeout: an idle or silent connection, a head that never completes, a connection no
 * longer read. Measured: closed after about 12 s with uws-pack, about 32 s with v20.57.0.
 */
export const UWS_IDLE_MS = UWS_V57 ? 30_000 : 10_000;
