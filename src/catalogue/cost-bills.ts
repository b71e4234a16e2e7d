// Provider bills as the operator imports them: OpenAI's Costs API page (GET /v1/organization/costs,
// grouped by line_item) and Anthropic's Cost Report (GET /v1/organizations/cost_report, grouped by
// description). Each is normalised to one line per UTC day and upstream model, its cost summed
// exactly and rounded once to the settlement currency's minor unit (half up), so the bill can be
// held against Tollgate's own daily cost. The bill is an event; importing the same file twice for
// the same channel appends nothing.
import { createHash } from 'node:crypto';
import type { Decider } from '../ledger/decider.ts';
import type { EventDataByType, StreamEvents, UpstreamBillLine } from '../ledger/events.ts';
import { DomainError, invalid } from '../ledger/errors.ts';
import { minorDigits, roundExact } from '../money/money.ts';
import { csvBillDoc } from './cost-bill-csv.ts';

export type UpstreamBill = EventDataByType['UpstreamBillImported'];
export type BillProvider = UpstreamBill['provider'];
export const BILL_PROVIDERS: readonly BillProvider[] = ['openai', 'anthropic'];
export type BillFormat = 'json' | 'csv';
export const BILL_FORMATS: readonly BillFormat[] = ['json', 'csv'];

/** One cost item of an export: its UTC day, model, and exact amount in minor units (a decimal). */
interface CostItem {
  day: string;
  model: string;
  minor: Exact;
}
/** An exact decimal: digits / 10^scale. */
interface Exact {
  digits: bigint;
  scale: number;
}

const NUMBER = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/** A decimal text (or a JSON number's shortest text) as an exact value; null when it is not one. */
function exactOf(text: string): Exact | null {
  const m = NUMBER.exec(text);
  if (!m) return null;
  const frac = m[3] ?? '';
  let digits = BigInt(`${m[1]}${m[2]}${frac}`);
  let scale = frac.length - Number(m[4] ?? 0);
  if (scale < 0) {
    digits *= 10n ** BigInt(-scale);
    scale = 0;
  }
  return scale > 40 ? null : { digits, scale };
}

const shifted = (e: Exact, places: number): Exact => ({ digits: e.digits, scale: e.scale - places });
const bad = (message: string, param = 'file') => invalid(message, { param });
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const dayOfTime = (ms: number) => new Date(ms).toISOString().slice(0, 10);

function buckets(doc: unknown): Record<string, unknown>[] {
  if (!isObject(doc) || !Array.isArray(doc.data)) throw bad('the file must be the JSON of one page of the export: an object with a "data" array of buckets');
  return doc.data.map((b, i) => {
    if (!isObject(b) || !Array.isArray(b.results)) throw bad(`bucket ${i} has no "results" array`);
    return b;
  });
}

function sameCurrency(given: unknown, currency: string, where: string): void {
  if (typeof given !== 'string' || given.toUpperCase() !== currency)
    throw bad(`${where}: its currency ${JSON.stringify(given)} is not the ledger's settlement currency, ${currency}`);
}

/** OpenAI: buckets of `start_time` (Unix seconds); results with `amount.value` (major units), `amount.currency`, `line_item` ("<model>, <part>"). */
function openAiItems(doc: unknown, currency: string): CostItem[] {
  const exp = minorDigits(currency);
  return buckets(doc).flatMap((b, i) => {
    if (typeof b.start_time !== 'number' || !Number.isSafeInteger(b.start_time)) throw bad(`bucket ${i}: "start_time" must be Unix seconds`);
    const day = dayOfTime(b.start_time * 1000);
    return (b.results as unknown[]).map((r, j) => {
      const where = `bucket ${i}, result ${j}`;
      if (!isObject(r) || !isObject(r.amount)) throw bad(`${where}: no "amount" object`);
      if (typeof r.line_item !== 'string' || !r.line_item) throw bad(`${where}: no "line_item": export the costs grouped by line_item`);
      sameCurrency(r.amount.currency, currency, where);
      // A number in the API's JSON; its decimal text in a CSV export (kept exact).
      const v = r.amount.value;
      const value = typeof v === 'number' && Number.isFinite(v) ? exactOf(String(v)) : typeof v === 'string' ? exactOf(v) : null;
      if (!value) throw bad(`${where}: "amount.value" must be a number`);
      const cut = r.line_item.lastIndexOf(', ');
      return { day, model: cut > 0 ? r.line_item.slice(0, cut) : r.line_item, minor: shifted(value, exp) };
    });
  });
}

/** Anthropic: buckets of `starting_at` (RFC 3339); results with `amount` (minor units as a decimal string), `currency`, `model`. */
function anthropicItems(doc: unknown, currency: string): CostItem[] {
  return buckets(doc).flatMap((b, i) => {
    const at = typeof b.starting_at === 'string' ? Date.parse(b.starting_at) : NaN;
    if (!Number.isFinite(at)) throw bad(`bucket ${i}: "starting_at" must be an RFC 3339 time`);
    const day = dayOfTime(at);
    return (b.results as unknown[]).flatMap((r, j) => {
      const where = `bucket ${i}, result ${j}`;
      if (!isObject(r)) throw bad(`${where} is not an object`);
      sameCurrency(r.currency, currency, where);
      const minor = typeof r.amount === 'string' ? exactOf(r.amount) : null;
      if (!minor) throw bad(`${where}: "amount" must be a decimal string of minor units`);
      // Costs that are not a model's tokens (web search, code execution) have no model: no channel's call made them.
      if (r.model === null || r.model === undefined) {
        if (r.cost_type === 'tokens' || r.cost_type === undefined) throw bad(`${where}: no "model": export the cost report grouped by description`);
        return [];
      }
      if (typeof r.model !== 'string' || !r.model) throw bad(`${where}: "model" must be a string`);
      return [{ day, model: r.model, minor }];
    });
  });
}

/** The lines of a bill: per UTC day and model, the exact sum rounded once, half up (an overall negative is refused). */
export function billLines(provider: BillProvider, doc: unknown, currency: string): UpstreamBillLine[] {
  const items = provider === 'openai' ? openAiItems(doc, currency) : anthropicItems(doc, currency);
  const sums = new Map<string, CostItem>();
  for (const it of items) {
    const key = JSON.stringify([it.day, it.model]);
    const s = sums.get(key);
    if (!s) sums.set(key, it);
    else {
      const scale = Math.max(s.minor.scale, it.minor.scale, 0);
      const up = (e: Exact) => e.digits * 10n ** BigInt(scale - e.scale);
      s.minor = { digits: up(s.minor) + up(it.minor), scale };
    }
  }
  const lines = [...sums.values()].map((s): UpstreamBillLine => {
    const scale = Math.max(0, s.minor.scale);
    const digits = s.minor.digits * 10n ** BigInt(scale - s.minor.scale);
    if (digits < 0n) throw bad(`the bill's cost of ${s.model} on ${s.day} is negative`);
    const costMinor = roundExact(digits, 10n ** BigInt(scale));
    if (costMinor > BigInt(Number.MAX_SAFE_INTEGER)) throw bad(`the bill's cost of ${s.model} on ${s.day} is too large`);
    return { day: s.day, upstreamModel: s.model, costMinor: Number(costMinor), inputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 0 };
  });
  if (lines.length === 0) throw bad('the bill has no cost lines');
  return lines.sort((a, b) => (a.day < b.day ? -1 : a.day > b.day ? 1 : a.upstreamModel < b.upstreamModel ? -1 : a.upstreamModel > b.upstreamModel ? 1 : 0));
}

/** The bill event for a file: its id names the file and the channel, so the same import is recorded once. */
export function billOf(provider: BillProvider, channel: string, file: string, currency: string, format: BillFormat = 'json'): UpstreamBill {
  if (!BILL_PROVIDERS.includes(provider)) throw invalid(`provider must be one of ${BILL_PROVIDERS.join(', ')}`, { param: 'provider' });
  if (!BILL_FORMATS.includes(format)) throw invalid(`format must be one of ${BILL_FORMATS.join(', ')}`, { param: 'format' });
  let doc: unknown;
  if (format === 'csv') doc = csvBillDoc(provider, file);
  else
    try {
      doc = JSON.parse(file);
    } catch {
      throw bad('the file is not JSON (a CSV export is imported with "format": "csv")');
    }
  const sha256 = createHash('sha256').update(file).digest('hex');
  const billId = createHash('sha256').update(`${provider}\n${channel}\n${sha256}`).digest('hex').slice(0, 32);
  return { billId, provider, channel, currency, sha256, lines: billLines(provider, doc, currency) };
}

export const billDecider: Decider<{ imported: boolean }, { type: 'Import'; bill: UpstreamBill }, StreamEvents['upstreamBill']> = {
  initialState: () => ({ imported: false }),
  decide(c, s) {
    if (s.imported) throw new DomainError('already_exists', `bill ${c.bill.billId} is already imported`);
    return [{ type: 'UpstreamBillImported', data: c.bill }];
  },
  evolve: (s, e) => (e.type === 'UpstreamBillImported' ? { imported: true } : s),
};
