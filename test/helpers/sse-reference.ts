// The reference count of server-sent events: what an EventSource would dispatch from a text (the
// WHATWG rules, written plainly, for checking src/relay/answer/sse-events.ts against).

/** Events dispatched from `text` (latin1 of the bytes): data events ended by a blank line; a partial last line is not complete. */
export function referenceEventCount(text: string): number {
  if (text.startsWith('\xef\xbb\xbf')) text = text.slice(3);
  const lines = text.split(/\r\n|\r|\n/);
  lines.pop(); // after the last line ending: not a complete line
  let events = 0;
  let data = false;
  for (const line of lines) {
    if (line === '') {
      if (data) events++;
      data = false;
      continue;
    }
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    if ((colon < 0 ? line : line.slice(0, colon)) === 'data') data = true;
  }
  return events;
}
