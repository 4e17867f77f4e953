// HTTP syntax every layer needs the same way: a token (RFC 9110 section 5.6.2: a method, a header
// field name) and the host and port a replica's origin names.

/** A token: one or more tchar (RFC 9110 section 5.6.2). */
export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * The host (an IPv6 address without its brackets, for a socket) and the port of an `http:` URL
 * (80 when it names none).
 */
export function hostAndPort(url: URL): { host: string; port: number } {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return { host, port: url.port === '' ? 80 : Number(url.port) };
}
