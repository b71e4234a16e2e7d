// Money as a value, and the one rounding rule. Amounts are integers in the settlement currency's
// minor unit (cents for USD, yen for JPY); arithmetic goes through dinero.js on big integers, so no
// float ever touches money. A value finer than a minor unit (a token's share of a price) is kept
// exact as a rate: `amount` minor units per `per` tokens. It is rounded only where an amount is
// booked, by the cumulative rule: book round(total so far) - round(total before), so the rounded
// parts of a whole always add up to the rounded whole and no minor unit appears or vanishes.
import * as currencies from 'dinero.js/currencies';
import { allocate, calculator, convert, dinero, halfUp, toDecimal, toSnapshot, transformScale, type DineroCurrency } from 'dinero.js/bigint';
import { invalid, InvariantViolation } from '../ledger/errors.ts';

/** An amount in minor units of an ISO 4217 currency. */
export interface Money {
  amount: number;
  currency: string;
}

/** An exact price per token: `amount` minor units for every `per` tokens (per >= 1). */
export interface Rate {
  amount: number;
  per: number;
}

export const DEFAULT_CURRENCY = 'USD';

const byCode = new Map<string, DineroCurrency<number>>(
  Object.values(currencies as unknown as Record<string, DineroCurrency<number>>)
    .filter((c) => typeof c === 'object' && c !== null && typeof c.code === 'string')
    .map((c) => [c.code, c]),
);

/** The ISO 4217 currency with this code (upper case); an invalid error for any other string. */
export function currencyOf(code: unknown): DineroCurrency<number> {
  const c = typeof code === 'string' ? byCode.get(code) : undefined;
  if (!c) throw invalid(`currency must be an ISO 4217 code such as USD or EUR`, { param: 'currency' });
  return c;
}

const bigCurrency = (code: string): DineroCurrency<bigint> => {
  const c = currencyOf(code);
  return { code: c.code, base: BigInt(c.base as number), exponent: BigInt(c.exponent) };
};

/** Digits after the decimal point of the currency (2 for USD, 0 for JPY, 3 for KWD). */
export const minorDigits = (code: string): number => currencyOf(code).exponent;

/** A whole, non-negative (or positive) number of minor units; an invalid error naming `param` otherwise. */
export function requireMinorUnits(value: unknown, param: string, { allowZero = false } = {}): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < (allowZero ? 0 : 1))
    throw invalid(`${param} must be a whole number of minor units (cents) ${allowZero ? '>= 0' : '>= 1'}`, { param });
  return value;
}

/** A money value checked: a known currency and a whole number of minor units. */
export function money(amount: unknown, currency: unknown, param = 'amount', opts: { allowZero?: boolean } = {}): Money {
  return { amount: requireMinorUnits(amount, param, opts), currency: currencyOf(currency).code };
}

const toDinero = (m: Money) => dinero({ amount: BigInt(m.amount), currency: bigCurrency(m.currency) });
const fromDinero = (d: ReturnType<typeof toDinero>): Money => {
  const s = toSnapshot(d);
  return { amount: Number(s.amount), currency: s.currency.code };
};

/** "12.34" for 1234 USD cents, "1234" for 1234 JPY: the amount in major units, exact. */
export const formatMoney = (m: Money): string => toDecimal(toDinero(m));

/** Splits `total` in proportion to `ratios` (dinero's allocation: the parts add up to the total exactly). */
export function allocateMoney(total: Money, ratios: number[]): Money[] {
  if (ratios.every((r) => r === 0)) return ratios.map(() => ({ amount: 0, currency: total.currency }));
  return allocate(
    toDinero(total),
    ratios.map((r) => BigInt(r)),
  ).map(fromDinero);
}

/** The rate at which `price` buys `tokens` tokens (exact: no rounding). */
export function rateOf(price: Money, tokens: number): Rate {
  if (!Number.isSafeInteger(tokens) || tokens < 1) throw invalid('tokens must be a whole number >= 1', { param: 'tokens' });
  return { amount: price.amount, per: tokens };
}

/** round(rate x tokens) to the minor unit, half up: the value of `tokens` tokens as one whole. */
export function valueOf(rate: Rate, tokens: number): number {
  return safeAmount(roundExact(BigInt(rate.amount) * BigInt(tokens), BigInt(rate.per)));
}

/** A booked amount as a number: exact only up to 2^53 minor units, so anything larger is a defect, never a rounded figure. */
function safeAmount(minor: bigint): number {
  if (minor > BigInt(Number.MAX_SAFE_INTEGER) || minor < -BigInt(Number.MAX_SAFE_INTEGER))
    throw new InvariantViolation(`an amount of ${minor} minor units is beyond what is kept exactly`);
  return Number(minor);
}

/** round(numerator / denominator) to the minor unit, half up (an exact value finer than a minor unit, rounded). */
export const roundExact = (numerator: bigint, denominator: bigint): bigint => halfUp(numerator, denominator, calculator);

/**
 * THE rounding rule. The amount to book for the tokens from `tokensBefore` to `tokensAfter` at
 * `rate`: the rounded cumulative value after, less the rounded cumulative value before. Every
 * booking of a series calls this with the running totals, so the booked parts sum to the rounded
 * value of the whole series, whatever the order or size of the parts.
 */
export function bookedAmount(rate: Rate, tokensBefore: number, tokensAfter: number): number {
  const [amount, per] = [BigInt(rate.amount), BigInt(rate.per)];
  safeAmount(roundExact(amount * BigInt(tokensAfter), per)); // the whole so far must itself be exact
  return safeAmount(bookedExact(amount * BigInt(tokensBefore), amount * BigInt(tokensAfter), per));
}

/** The same rule on exact running totals (numerators over one `denominator`), for sums too large for a number. */
export function bookedExact(totalBefore: bigint, totalAfter: bigint, denominator: bigint): bigint {
  return roundExact(totalAfter, denominator) - roundExact(totalBefore, denominator);
}

/** The tokens that `part` of the money paid for `tokens` bought, by the same rule (round half up). */
export function tokensFor(part: number, paid: number, tokens: number): number {
  if (paid === 0) return 0;
  return valueOf({ amount: tokens, per: paid }, part);
}

/** A decimal exchange rate ("0.9123") as dinero's scaled amount. */
function scaledRate(rate: string): { amount: bigint; scale: bigint } {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(rate);
  if (!m || /^0*(\.0*)?$/.test(rate)) throw new InvariantViolation(`exchange rate ${rate} is not a positive decimal`);
  return { amount: BigInt(m[1] + (m[2] ?? '')), scale: BigInt((m[2] ?? '').length) };
}

/**
 * `m` in currency `to` at `rate` (units of `to` per unit of `m`'s currency, a decimal), by dinero's
 * conversion, exact until it is rounded half up to `to`'s minor unit.
 */
export function convertMoney(m: Money, to: string, rate: string): Money {
  const target = bigCurrency(to);
  const exact = convert(toDinero(m), target, { [target.code]: scaledRate(rate) });
  return fromDinero(transformScale(exact, target.exponent, halfUp));
}

/**
 * A decimal price of currency `from` (e.g. dollars per million tokens) in currency `to` at `rate`,
 * by dinero's conversion, rounded half up to `digits` decimals and written without trailing zeros.
 */
export function convertDecimal(text: string, from: string, to: string, rate: string, digits: number): string {
  const [whole, fraction = ''] = text.split('.');
  const source = dinero({ amount: BigInt(whole + fraction), currency: bigCurrency(from), scale: BigInt(fraction.length) });
  const exact = convert(source, bigCurrency(to), { [to]: scaledRate(rate) });
  const decimal = toDecimal(transformScale(exact, BigInt(digits), halfUp));
  return decimal.includes('.') ? decimal.replace(/0+$/, '').replace(/\.$/, '') : decimal;
}

/**
 * The part of a series converted at one rate, by the cumulative rule: the converted total after,
 * less the converted total before (so the parts of a refunded payment add up to its conversion).
 */
export const convertedPart = (before: Money, after: Money, to: string, rate: string): number =>
  convertMoney(after, to, rate).amount - convertMoney(before, to, rate).amount;
