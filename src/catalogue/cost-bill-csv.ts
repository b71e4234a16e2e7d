// Provider bills as CSV: one row per cost result, its columns named after the fields of the same
// provider's cost API (a nested field flattened with "_" or "."), read into the API's own page
// shape so one reader (cost-bills.ts) normalises both. OpenAI: start_time (Unix seconds or an
// RFC 3339 time), amount_value (major units), amount_currency (or currency), line_item. Anthropic:
// starting_at (RFC 3339), amount (minor units), currency, model, cost_type.
import { parse } from 'csv-parse/sync';
import { invalid } from '../ledger/errors.ts';

type CsvRow = Record<string, string>;

const bad = (message: string) => invalid(message, { param: 'file' });

/** The CSV's rows by normalised column name (lower case, "." and spaces as "_"). */
function rowsOf(text: string): CsvRow[] {
  let records: CsvRow[];
  try {
    records = parse(text, {
      bom: true,
      columns: (header: string[]) =>
        header.map((h) =>
          h
            .trim()
            .toLowerCase()
            .replace(/[.\s]+/g, '_'),
        ),
      skip_empty_lines: true,
      trim: true,
    }) as CsvRow[];
  } catch (err) {
    throw bad(`the file is not CSV: ${(err as Error).message}`);
  }
  if (records.length === 0) throw bad('the CSV has a header but no rows');
  return records;
}

function requireColumns(rows: CsvRow[], columns: string[]): void {
  const missing = columns.filter((c) => !(c in rows[0]));
  if (missing.length > 0) throw bad(`the CSV has no ${missing.map((c) => `"${c}"`).join(', ')} column (found: ${Object.keys(rows[0]).join(', ')})`);
}

const cell = (r: CsvRow, name: string): string | null => (r[name] === undefined || r[name] === '' ? null : r[name]);

/** Rows grouped into buckets by `key` (their order kept). */
function bucketsBy<T>(rows: CsvRow[], key: (r: CsvRow, line: number) => string, bucket: (k: string) => Record<string, unknown>, result: (r: CsvRow) => T) {
  const out = new Map<string, Record<string, unknown> & { results: T[] }>();
  rows.forEach((r, i) => {
    const k = key(r, i + 2);
    let b = out.get(k);
    if (!b) out.set(k, (b = { ...bucket(k), results: [] }));
    b.results.push(result(r));
  });
  return { data: [...out.values()] };
}

/** OpenAI's start_time as Unix seconds: a whole number, or an RFC 3339 time (the dashboard's dates). */
function unixSeconds(r: CsvRow, line: number): string {
  const t = cell(r, 'start_time');
  if (t !== null && /^\d{1,12}$/.test(t)) return t;
  const ms = t === null ? NaN : Date.parse(t);
  if (!Number.isFinite(ms)) throw bad(`line ${line}: "start_time" must be Unix seconds or an RFC 3339 time`);
  return String(Math.floor(ms / 1000));
}

function openAiDoc(rows: CsvRow[]): unknown {
  const value = 'amount_value' in rows[0] ? 'amount_value' : 'amount';
  requireColumns(rows, ['start_time', value, 'line_item']);
  return bucketsBy(
    rows,
    unixSeconds,
    (k) => ({ object: 'bucket', start_time: Number(k) }),
    (r) => ({ amount: { value: cell(r, value), currency: cell(r, 'amount_currency') ?? cell(r, 'currency') }, line_item: cell(r, 'line_item') }),
  );
}

function anthropicDoc(rows: CsvRow[]): unknown {
  requireColumns(rows, ['starting_at', 'amount', 'currency', 'model']);
  return bucketsBy(
    rows,
    (r) => cell(r, 'starting_at') ?? '',
    (k) => ({ starting_at: k }),
    (r) => ({ amount: cell(r, 'amount'), currency: cell(r, 'currency'), model: cell(r, 'model'), cost_type: cell(r, 'cost_type') ?? undefined }),
  );
}

/** A provider's CSV export as the JSON page its cost API answers (amounts kept as exact decimal text). */
export function csvBillDoc(provider: 'openai' | 'anthropic', text: string): unknown {
  const rows = rowsOf(text);
  return provider === 'openai' ? openAiDoc(rows) : anthropicDoc(rows);
}
