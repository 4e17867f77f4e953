// Status lines with the standard reason phrase (RFC 9110 section 15), built once per process:
// `statusLine(200)` is `"200 OK"`. A code without a registered phrase keeps the number alone
// followed by a space, which RFC 9112 section 4 allows (the reason phrase may be empty).
import { STATUS_CODES } from 'node:http';

const LINES: string[] = [];
for (let code = 100; code <= 999; code++) {
  const phrase = STATUS_CODES[code];
  LINES[code] = phrase === undefined ? `${code} ` : `${code} ${phrase}`;
}

export function statusLine(code: number): string {
  return LINES[code] ?? `${code} `;
}
