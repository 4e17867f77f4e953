// The tokensPerDay and tokensPerMonth windows of a cell set of the limit table (limit-layout.ts):
// calendar windows in UTC, a day from 00:00 to 24:00 UTC and a month the calendar month. A budget
// over a day or a month is what a bill or a quota usually means, every gateway agrees on where a
// window starts without talking, and a refused request learns exactly when it may come back (the
// next reset), where a rolling window's would depend on when its oldest tokens were used.
//
// Each window is one bucket of two cells: its period (days or months since 1970) and the tokens
// settled in it. A settlement into a later period than the bucket's resets it first, as a
// second's bucket of the minute window does (token-window.ts `settleBucket`).

/** A day in ms. */
export const DAY_MS = 86_400_000;

/** The day (since 1970-01-01, UTC) of the time `ms`. */
export function dayOf(ms: number): number {
  return Math.floor(ms / DAY_MS);
}

/** When the day after the one of `ms` begins (ms). */
export function nextDayAt(ms: number): number {
  return (dayOf(ms) + 1) * DAY_MS;
}

/** The month (months since January 1970, UTC) of the time `ms`. */
export function monthOf(ms: number): number {
  const d = new Date(ms);
  return (d.getUTCFullYear() - 1970) * 12 + d.getUTCMonth();
}

/** When month `month` (monthOf) begins (ms). */
export function monthStartAt(month: number): number {
  return Date.UTC(1970 + Math.floor(month / 12), month % 12, 1);
}

/** Whole seconds from `ms` until `resetAt` (ms), at least 1: a refusal's Retry-After. */
export function secondsUntil(ms: number, resetAt: number): number {
  return Math.max(1, Math.ceil((resetAt - ms) / 1000));
}

/**
 * A thread's calendar: the current month and its bounds, taken again only when the clock leaves
 * them (no Date per request).
 */
export class Calendar {
  month = -1;
  private start = 0;
  /** When the next month begins (ms). */
  monthEnd = 0;

  /** Sets `month` and `monthEnd` for the time `ms`. */
  at(ms: number): void {
    if (ms >= this.start && ms < this.monthEnd) return;
    this.month = monthOf(ms);
    this.start = monthStartAt(this.month);
    this.monthEnd = monthStartAt(this.month + 1);
  }
}
