// Number and date formatting shared by every page (en-US digits, UTC days).
export const fmt = (n: unknown): string => Number(n ?? 0).toLocaleString('en-US');

export function compact(n: number): string {
  const v = Number(n) || 0;
  if (v >= 1e9) return `${+(v / 1e9).toFixed(1)}B`;
  if (v >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (v >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return String(v);
}

export const keyHint = (key: string): string => (key.length > 14 ? `${key.slice(0, 7)}…${key.slice(-4)}` : '…');

export const plural = (n: number, word: string): string => `${fmt(n)} ${word}${n === 1 ? '' : 's'}`;

const DAY_FMT = new Intl.DateTimeFormat('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });
const LONG_FMT = new Intl.DateTimeFormat('en-US', { weekday: 'short', year: 'numeric', month: 'short', day: 'numeric', timeZone: 'UTC' });
/** A UTC day (YYYY-MM-DD) as "Nov 25". */
export const dayLabel = (iso: string): string => DAY_FMT.format(new Date(`${iso}T00:00:00Z`));
export const longDay = (iso: string): string => LONG_FMT.format(new Date(`${iso}T00:00:00Z`));
export const dateOf = (iso: string): string => new Date(iso).toLocaleDateString('en-US', { year: 'numeric', month: 'short', day: 'numeric' });

export function relativeDays(iso: string): string {
  const days = Math.round((Date.parse(iso) - Date.now()) / 86_400_000);
  if (days === 0) return 'today';
  return days > 0 ? `in ${days} day${days === 1 ? '' : 's'}` : `${-days} day${days === -1 ? '' : 's'} ago`;
}
