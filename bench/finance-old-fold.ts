// The fold the books' read models replaced, for the finance bench's side-by-side figures: what
// every finance read did before (src/books/finance-fold.ts foldFinance: the log read from its
// start, a page at a time, through the lot book, up to the window's end; then the window's upstream
// cost, priced when read: forEachPricedCall, which the cost fold replaced too), run in a process of
// its own on a seeded log, with nothing else in it. Prints one JSON line: the fold's seconds with
// the pricing (as the report paid it), the pricing's own seconds, the report's totals and the
// process's peak RSS.
//   node --import tsx bench/finance-old-fold.ts '{"url":"postgres://...","schema":"...","from":"YYYY-MM-DD","to":"YYYY-MM-DD"}'
import { DEFAULT_PG_TIMEOUTS, openPostgres } from '../src/eventstore/db.ts';
import { openLedger } from '../src/ledger/ledger.ts';
import { foldFinance } from '../src/books/finance-fold.ts';
import { financeRows, sumRows } from '../src/books/finance.ts';
import { forEachPricedCall } from '../projections/catalogue/upstream-cost.ts';
import { readSide } from '../projections/runner/read-side.ts';
import '../projections/read-models.ts'; // every read model, as the wiring registers them

export interface OldFoldResult {
  seconds: number;
  costSeconds: number;
  totals: ReturnType<typeof sumRows>;
  peakRssMiB: number;
}

const job = JSON.parse(process.argv[2]) as { url: string; schema: string; from: string; to: string };
// No statement timeout: the fold's time is wanted even where a page of its upstream cost would
// outlast a serving process's (the bench times that apart, bench/finance.ts windowParts).
const db = openPostgres(job.url, 4, { ...DEFAULT_PG_TIMEOUTS, statementMs: 0 });
try {
  const ledger = await openLedger({ db, schema: job.schema, readSide: readSide({ db, eventSchema: job.schema, projectHere: false }) });
  const w = { from: job.from, to: job.to };
  let t = performance.now();
  const folded = await foldFinance(ledger, w);
  const foldSeconds = (performance.now() - t) / 1000;
  const totals = sumRows(financeRows(folded));
  // foldFinance now reads the cost fold's days; the old path priced every call of the window.
  t = performance.now();
  let calls = 0;
  await forEachPricedCall(db, ledger.rmSchema, w.from, w.to, () => calls++);
  const costSeconds = (performance.now() - t) / 1000;
  const seconds = foldSeconds + costSeconds;
  await ledger.close();
  const result: OldFoldResult = { seconds, costSeconds, totals, peakRssMiB: process.resourceUsage().maxRSS / 1024 };
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  await db.close();
}
