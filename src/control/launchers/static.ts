// Static replicas (`replicas.urls`): each URL is one replica that runs elsewhere. Sluice does not
// start or stop them; it only decides whether to route to them (probes, see replica-set.ts).

/** What the set needs from one static URL. */
export interface StaticTarget {
  /** `http://10.0.0.5:9000`: scheme, host and port. */
  origin: string;
  /** The `Host` header value: `10.0.0.5:9000` (the port only when not the default). */
  host: string;
  /** For the TCP probe: host name (IPv6 without brackets) and port. */
  probeHost: string;
  probePort: number;
}

/** Parses a base URL the config loader has validated (http:, no path other than `/`, no query). */
export function staticTarget(url: string): StaticTarget {
  const parsed = new URL(url);
  if (parsed.protocol !== 'http:') throw new Error(`replica URL must use http: (${url})`);
  const hostname = parsed.hostname.startsWith('[') ? parsed.hostname.slice(1, -1) : parsed.hostname;
  return {
    origin: parsed.origin,
    host: parsed.host,
    probeHost: hostname,
    probePort: parsed.port === '' ? 80 : Number(parsed.port),
  };
}
