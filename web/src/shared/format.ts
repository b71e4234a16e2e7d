// Number, date and money formatting shared by every page (en-US digits, UTC days): counts, days,
// times to the minute or second, signed differences, per-mille values and amounts in minor units.
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

export const signed = (n: number): string => (n > 0 ? `+${fmt(n)}` : n < 0 ? `−${fmt(-n)}` : '0');
/** To the minute, in UTC. */
export const when = (iso: string | null | undefined): string => (iso ? `${new Date(iso).toISOString().slice(0, 16).replace('T', ' ')} UTC` : '—');
/** To the second, for correction windows. */
export const whenExact = (iso: string | null | undefined): string => (iso ? `${new Date(iso).toISOString().slice(0, 19).replace('T', ' ')} UTC` : '—');
export const dayUtc = (d = new Date()): string => d.toISOString().slice(0, 10);
/** A UTC day `n` days before `day`. */
export function daysBefore(day: string, n: number): string {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() - n);
  return dayUtc(d);
}
export const milli = (v: number | null | undefined): number | null => (v === null || v === undefined ? null : Number(v) / 1000);

/** A datetime-local value (this browser's time zone) as ISO 8601 UTC, or null. */
export function localToIso(v: string): string | null {
  if (!v) return null;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}
export function isoToLocal(d: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** Digits after the decimal point of a currency's minor unit (USD 2, JPY 0). */
export function minorDigits(currency: string): number {
  try {
    return new Intl.NumberFormat('en-US', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
  } catch {
    return 2;
  }
}
/** An amount in minor units as "-12.34 USD" (display only: the gateway computes every amount). */
export function money(minor: number, currency: string): string {
  const digits = minorDigits(currency);
  const major = (Math.abs(minor) / 10 ** digits).toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  return `${minor < 0 ? '−' : ''}${major} ${currency}`;
}
/** A decimal amount typed by the operator ("20", "19.99") as minor units, or null if it is not one. */
export function toMinor(text: string, currency: string): number | null {
  const digits = minorDigits(currency);
  const m = /^(\d{1,12})(?:\.(\d+))?$/.exec(text.trim());
  if (!m || (m[2] ?? '').length > digits) return null;
  return Number(m[1]) * 10 ** digits + Number((m[2] ?? '').padEnd(digits, '0') || 0);
}
