// The console's formatting of times, signed differences, per-mille values and money (minor units).
export { fmt } from '../../shared/format.ts';
import { fmt } from '../../shared/format.ts';

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
