// Charts: grouped horizontal bars on one logarithmic scale (`barsSvg`; p99 on a busy machine is
// tens of times p50, and a linear scale would hide the p50s). The TTFB chart: for each peer, bars
// for p50, p90 and p99 (µs, medians across rounds). Plain SVG, no fonts or scripts fetched;
// deterministic for the same figures.
import type { Derived } from './results.js';

const BAR = 12;
const GAP = 3;
const GROUP_GAP = 14;
const LEFT = 190;
const RIGHT = 70;
const WIDTH = 800;
const TOP = 44;
const SERIES = [
  { key: 'p50', color: '#2b6cb0' },
  { key: 'p90', color: '#68a0d8' },
  { key: 'p99', color: '#b4cde8' },
] as const;

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');


export function ttfbSvg(title: string, peers: { label: string; ttfb: Derived['ttfb'][keyof Derived['ttfb']] }[]): string {
  const rows = peers
    .filter((p) => p.ttfb !== undefined)
    .map((p) => ({ label: p.label, values: Object.fromEntries(SERIES.map((s) => [s.key, p.ttfb![s.key].median ?? 0])) }));
  return barsSvg(title, 'µs', SERIES.map((s) => ({ key: s.key, label: s.key, color: s.color })), rows);
}

/**
 * Grouped horizontal bars on one logarithmic scale: for each row, one bar per series. Plain SVG,
 * deterministic for the same figures.
 */
export function barsSvg(title: string, unit: string, series: readonly { key: string; label: string; color: string }[], rows: readonly { label: string; values: Record<string, number> }[]): string {
  const values = rows.flatMap((r) => series.map((s) => r.values[s.key] ?? 0)).filter((v) => v > 0);
  const lo = 10 ** Math.floor(Math.log10(Math.max(1, Math.min(...values, 1e9))));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(lo * 10, ...values)));
  const plotW = WIDTH - LEFT - RIGHT;
  const groupH = series.length * (BAR + GAP) - GAP;
  const height = TOP + rows.length * (groupH + GROUP_GAP) + 30;
  const x = (v: number): number => LEFT + ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * plotW;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<text x="${LEFT}" y="18" font-size="14" font-weight="bold">${esc(title)}</text>`,
  );
  let lx = LEFT;
  for (const s of series) {
    out.push(`<rect x="${lx}" y="26" width="10" height="10" fill="${s.color}"/>`, `<text x="${lx + 14}" y="35">${esc(s.label)}</text>`);
    lx += 22 + 7 * s.label.length;
  }
  const axisY = height - 26;
  for (let decade = lo; decade <= hi; decade *= 10) {
    for (const m of [1, 2, 5]) {
      const v = decade * m;
      if (v > hi) break;
      const gx = x(v).toFixed(1);
      out.push(`<line x1="${gx}" y1="${TOP - 4}" x2="${gx}" y2="${axisY}" stroke="${m === 1 ? '#cfcfcf' : '#ececec'}"/>`);
      if (m === 1 || hi / lo <= 1000) out.push(`<text x="${gx}" y="${axisY + 14}" text-anchor="middle" fill="#555">${v.toLocaleString('en-US')}</text>`);
    }
  }
  out.push(`<text x="${LEFT - 8}" y="${axisY + 14}" text-anchor="end" fill="#555">${esc(unit)}, log scale</text>`);
  rows.forEach((r, i) => {
    const gy = TOP + i * (groupH + GROUP_GAP);
    out.push(`<text x="${LEFT - 8}" y="${(gy + groupH / 2 + 4).toFixed(1)}" text-anchor="end">${esc(r.label)}</text>`);
    series.forEach((s, j) => {
      const v = r.values[s.key] ?? 0;
      const y = gy + j * (BAR + GAP);
      out.push(
        `<rect x="${LEFT}" y="${y}" width="${Math.max(0.5, x(v) - LEFT).toFixed(1)}" height="${BAR}" fill="${s.color}"/>`,
        `<text x="${(x(v) + 4).toFixed(1)}" y="${y + BAR - 2}" font-size="10" fill="#333">${Math.round(v).toLocaleString('en-US')}</text>`,
      );
    });
  });
  out.push(`<line x1="${LEFT}" y1="${TOP - 4}" x2="${LEFT}" y2="${axisY}" stroke="#888"/>`, '</svg>', '');
  return out.join('\n');
}
