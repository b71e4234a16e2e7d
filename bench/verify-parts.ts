// Verify's parts timed one by one, in this process, on a seeded log kept between runs (schema
// --store, default vfy_<charges>; the corrections seeding: a hold and a charge per charge). For
// finding where verify's time goes; bench/corrections.ts --phases verify --skip-apply measures it
// through the gateway, with live calls beside it.
// Run: node --import tsx bench/verify-parts.ts [--charges 100000] [--store name] [--drop-store]
import os from 'node:os';
import { parseArgs } from 'node:util';
import { DEFAULT_PG_TIMEOUTS, openPostgres } from '../src/eventstore/db.ts';
import { openLedger } from '../src/ledger/ledger.ts';
import { readSide } from '../projections/runner/read-side.ts';
import { dropReadModels, replayInto } from '../projections/runner/rebuild.ts';
import { differingRows } from '../projections/runner/compare.ts';
import { checkLots, compareWithRebuild, checkLog } from '../src/audit/verify.ts';
import { verifyLedger } from '../src/audit/verification.ts';
import { keptSeededStore } from './corrections-seed.ts';
import { timePart as time } from './part-timer.ts';
import '../projections/read-models.ts'; // every read model, as the wiring registers them

const { values } = parseArgs({ options: { charges: { type: 'string' }, store: { type: 'string' }, 'drop-store': { type: 'boolean' } } });
const charges = Number(values.charges ?? 100_000);
const schema = values.store ?? `vfy_${charges}`;
const url = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const db = openPostgres(url, 8, { ...DEFAULT_PG_TIMEOUTS, statementMs: 600_000 });
await keptSeededStore(db, schema, charges, time);
const ledger = await openLedger({ db, schema, readSide: readSide({ db, eventSchema: schema, projectHere: true }) });
console.log(
  `load ${os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`,
);
const chains = await time('chains and lots', () => checkLog(ledger));
console.log(`  ${chains.events} events, ${chains.problems.length} problems`);
const scratch = `${schema}_rm_parts`;
await time('replay into a scratch schema', () => replayInto(db, ledger.events, scratch, { scratch: true }));
const compared = await time('comparison', () => differingRows(db, `${schema}_rm`, scratch, 1000));
console.log(`  ${compared.length} differences`);
await dropReadModels(db, scratch);
const diffs = await time('read models (replay + comparison)', () => compareWithRebuild(ledger));
console.log(`  ${diffs.length} differences`);
console.log(`  lots: ${checkLots(chains.lots).length} problems`);
const all = await time('verifyLedger', () => verifyLedger(ledger));
console.log(`  ok ${all.ok}, ${all.events} events`);
await ledger.close();
if (values['drop-store']) await db.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE; DROP SCHEMA IF EXISTS "${schema}_rm" CASCADE`);
await db.close();
