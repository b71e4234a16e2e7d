// The fold the books' read models replaced, for the finance bench's side-by-side figures: what
// every finance read did before (src/books/finance-fold.ts foldFinance: the log read from its
// start, a page at a time, through the lot book, up to the window's end; then the window's upstream
// cost), run in a process of its own on a seeded log, with nothing else in it. Prints one JSON
// line: the fold's seconds (upstream cost included, as the report paid it), the upstream cost's
// own seconds (priced once more after the fold), the report's totals and the process's peak RSS.
//   node --import tsx bench/finance-old-fold.ts '{"url":"postgres://...","schema":"...","from":"YYYY-MM-DD","to":"YYYY-MM-DD"}'
import { DEFAULT_PG_TIMEOUTS, openPostgres } from '../src/eventstore/db.ts';
import { openLedger } from '../src/ledger/ledger.ts';
import { foldFinance } from '../src/books/finance-fold.ts';
import { financeRows, sumRows } from '../src/books/finance.ts';
import { upstreamCostBetween } from '../src/catalogue/index.ts';
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
  const seconds = (performance.now() - t) / 1000;
  const totals = sumRows(financeRows(folded));
  t = performance.now();
  await upstreamCostBetween(db, ledger.rmSchema, w.from, w.to);
  const costSeconds = (performance.now() - t) / 1000;
  await ledger.close();
  const result: OldFoldResult = { seconds, costSeconds, totals, peakRssMiB: process.resourceUsage().maxRSS / 1024 };
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  await db.close();
}
