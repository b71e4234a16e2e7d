// A year of a paid gateway's traffic for the finance bench (issue 41), written straight into the
// events table with COPY: every event from the real deciders (the account decider through
// SimAccount, payments as RecordPayment decides them), checked by validateEvent, hashed by the
// event store's own code (canonical.ts) and given the time it happens at, so the log spans `days`
// UTC days as a real one would. The position origin is moved past the seeded events afterwards
// (as bench/corrections-seed.ts does), so the gateway's appends number after them.
//
// What happens in it, per account (50 by default), from a join day in the first 90 days:
//   - most accounts pay for a monthly plan (small, medium or large: PaymentReceived +
//     SubscriptionStarted, then PaymentReceived + SubscriptionRenewed each period, renewed from three
//     hours before to an hour after the period's end); some stop renewing after a few periods
//     (their last plan lot expires);
//   - some have a free monthly plan (promotional tokens), renewed for free; a few of those buy packs;
//   - an account whose tokens run out within a period buys a pack (PaymentReceived +
//     ExtraTokensGranted) and goes on; a call between a period's end and its renewal is refused;
//   - every 37th payment is half refunded days later, every 149th disputed and lost (with a fee);
//   - chat calls (QuotaReserved, then ChatCharged seconds later) at random times of each day, on
//     three models per account, answered by a primary channel (or, one call in ten, a backup), each
//     (channel, upstream model) priced by an upstream cost rate from the first day (the primary ones
//     changed on day 200).
// The number of calls a day is what the target size leaves for the days left (weekdays busier), so
// the log ends near `events` events; plan quotas are sized from the expected use, so some accounts
// leave tokens unused (breakage) and some need packs.
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import pg from 'pg';
import pgCopy from 'pg-copy-streams';
import type { Database } from '../src/eventstore/db.ts';
import { createPostgresEventStore } from '../src/eventstore/postgres.ts';
import { chainHash, eventBody, GENESIS_HASH } from '../src/eventstore/canonical.ts';
import type { EventMetadata, NewEvent, ProjectedEvent } from '../src/eventstore/port.ts';
import type { AccountCommand } from '../src/accounts/account-decider.ts';
import { SNAPSHOT_VERSION } from '../src/ledger/command-handler.ts';
import { validateEvent } from '../src/ledger/event-catalogue.ts';
import { DomainError } from '../src/ledger/errors.ts';
import { streams, type DomainEvent, type PlanTerms } from '../src/ledger/events.ts';
import { SEED_MODELS, REASONING_EFFORTS } from '../src/catalogue/seed-models.ts';
import { paymentIdFor } from '../src/books/payments.ts';
import { toMilli } from '../src/money/pricing.ts';
import { SimAccount } from './ledger-traffic.ts';

const DAY_MS = 86_400_000;
const CURRENCY = 'USD';
const APIS = ['chat.completions', 'messages', 'responses'] as const;
const MODEL_MILLI = new Map(SEED_MODELS.map((m) => [m.id, toMilli(m.multiplier)]));
/** Tokens a call bills on average (the prompt and completion sizes below, times a mean multiplier of about 1.6). */
const MEAN_CALL_TOKENS = 2_200;
/** Events written per COPY statement (one transaction each). */
const EVENTS_PER_COPY = 250_000;
/** Text sent to the COPY stream at a time. */
const CHUNK_CHARS = 1 << 20;

export interface FinanceSeedOptions {
  /** About how many events the log holds. */
  events: number;
  /** UTC days the log spans, ending with yesterday (default 400). */
  days?: number;
  accounts?: number;
  log?: (line: string) => void;
}

export interface FinanceSeedResult {
  events: number;
  calls: number;
  /** Calls the decider refused (tokens out on a free plan, a churned account): not in the log. */
  refused: number;
  payments: number;
  planPayments: number;
  packs: number;
  freeRenewals: number;
  refunds: number;
  disputes: number;
  /** Paid plans that stopped renewing (their last lot expires: breakage at its end). */
  churned: number;
  firstDay: string;
  lastDay: string;
  /** Events in the log at the end of each day (for a fold that stops at a day's end). */
  eventsByDayEnd: Map<string, number>;
  generateSeconds: number;
  /** Events of the days after the log (continuing the same accounts), not written: for timing the projector's pages. */
  continuation(count: number): ProjectedEvent[];
}

const copyEscape = (s: string): string =>
  /[\\\t\n\r]/.test(s) ? s.replace(/[\\\t\n\r]/g, (c) => ({ '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' })[c]!) : s;

/**
 * The events as the store writes them (position, id, stream, revision, type, data, metadata,
 * created_at, prev_hash, hash), as COPY text into the events table, or (collect) kept as projected
 * events only. Each stream's hash chain runs on from its head, as the append function's does.
 */
class LogWriter {
  position = 0;
  readonly heads = new Map<string, { revision: number; hash: string }>();
  private text = '';
  private copy: pgCopy.CopyStreamQuery | null = null;
  private inCopy = 0;
  collected: ProjectedEvent[] | null = null;

  constructor(
    private readonly client: pg.Client,
    private readonly schema: string,
  ) {}

  add(stream: string, events: DomainEvent[], metadata: EventMetadata, at: number): void {
    const timestamp = new Date(at).toISOString();
    let head = this.heads.get(stream);
    if (!head) this.heads.set(stream, (head = { revision: -1, hash: GENESIS_HASH }));
    for (const e of events) {
      const event: NewEvent = { id: randomUUID(), type: e.type, data: e.data as unknown as Record<string, unknown>, metadata };
      validateEvent(event);
      const position = ++this.position;
      if (this.collected) {
        this.collected.push({ id: event.id!, type: e.type, position, timestamp, data: event.data });
        continue;
      }
      const revision = head.revision + 1;
      const hash = chainHash(head.hash, eventBody({ id: event.id!, stream, revision, type: e.type, timestamp, data: event.data, metadata }));
      this.text += `${position}\t${event.id}\t${copyEscape(stream)}\t${revision}\t${e.type}\t${copyEscape(JSON.stringify(event.data))}\t${copyEscape(
        JSON.stringify(metadata),
      )}\t${timestamp}\t${head.hash}\t${hash}\n`;
      head.revision = revision;
      head.hash = hash;
      this.inCopy++;
    }
  }

  /** Sends what is buffered when there is enough of it, and ends the COPY statement every EVENTS_PER_COPY events. */
  async flush(force = false): Promise<void> {
    if (this.collected || (!force && this.text.length < CHUNK_CHARS)) return;
    if (this.text.length > 0) {
      if (!this.copy) {
        this.copy = this.client.query(
          pgCopy.from(`COPY "${this.schema}".events (position, id, stream, revision, type, data, metadata, created_at, prev_hash, hash) FROM STDIN`),
        );
      }
      const text = this.text;
      this.text = '';
      if (!this.copy.write(text)) await once(this.copy, 'drain');
    }
    if (this.copy && (force || this.inCopy >= EVENTS_PER_COPY)) {
      const done = finished(this.copy);
      this.copy.end();
      await done;
      this.copy = null;
      this.inCopy = 0;
    }
  }
}

/** A min-heap of things to happen, by time (then by when they were scheduled). */
class Timeline {
  private items: Array<{ at: number; seq: number; run: () => void }> = [];
  private seq = 0;
  /** The time of what runs now. */
  now = 0;
  get size(): number {
    return this.items.length;
  }
  get next(): number {
    return this.items.length ? this.items[0].at : Infinity;
  }
  push(at: number, run: () => void): void {
    const item = { at, seq: this.seq++, run };
    const a = this.items;
    a.push(item);
    for (let i = a.length - 1; i > 0;) {
      const p = (i - 1) >> 1;
      if (!before(a[i], a[p])) break;
      [a[i], a[p]] = [a[p], a[i]];
      i = p;
    }
  }
  pop(): { at: number; run: () => void } {
    const a = this.items;
    const top = a[0];
    const last = a.pop()!;
    if (a.length > 0) {
      a[0] = last;
      for (let i = 0; ;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && before(a[l], a[m])) m = l;
        if (r < a.length && before(a[r], a[m])) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m], a[i]];
        i = m;
      }
    }
    return top;
  }
}
const before = (x: { at: number; seq: number }, y: { at: number; seq: number }) => x.at < y.at || (x.at === y.at && x.seq < y.seq);

/** A deterministic stream of numbers in [0, 1) (the seeding is the same from run to run). */
function randomSource(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Kind = 'paid' | 'free' | 'packs';

type PricedPlan = PlanTerms & { price: number };

interface Account {
  sim: SimAccount;
  kind: Kind;
  plan: PricedPlan;
  /** Relative call volume. */
  weight: number;
  models: string[];
  joinDay: number;
  /** Paid periods after which the account stops renewing (Infinity: never). */
  renewals: number;
  periods: number;
  /** Refused once its plan had ended and its tokens were gone: no more calls. */
  gone: boolean;
}

/** Seeds the log of `schema` (created here) and returns what it holds. */
export async function seedFinanceYear(db: Database, url: string, schema: string, o: FinanceSeedOptions): Promise<FinanceSeedResult> {
  const started = performance.now();
  const days = o.days ?? 400;
  const accountCount = o.accounts ?? 50;
  const log = o.log ?? (() => undefined);
  // The store makes the schema (tables, append functions, position origin); nothing is appended through it.
  await (await createPostgresEventStore(db, { schema, validate: validateEvent })).close();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`SET synchronous_commit = off`);
  const w = new LogWriter(client, schema);
  const random = randomSource(41);
  const tag = 'fin';
  const firstDayStart = Math.floor(Date.now() / DAY_MS) * DAY_MS - days * DAY_MS;
  const dayOf = (d: number) => new Date(firstDayStart + d * DAY_MS).toISOString().slice(0, 10);
  const admin = (): EventMetadata => ({ correlationId: randomUUID(), causationId: null, actor: 'admin:bench' });
  const counts = { calls: 0, refused: 0, payments: 0, planPayments: 0, packs: 0, freeRenewals: 0, refunds: 0, disputes: 0, churned: 0 };

  // Plan sizes from the expected use: a medium plan holds about what an account of weight 1 uses in a month.
  const callsExpected = o.events / 2;
  const monthlyTokens = Math.max(100_000, Math.round(((callsExpected / days / accountCount) * 30 * MEAN_CALL_TOKENS) / 1000) * 1000);
  const plans: Record<string, PricedPlan> = {
    fin_s: { planId: 'fin_s', name: 'Small', quota: Math.round(monthlyTokens * 0.6), validityDays: 30, requestsPerMinute: 600, models: ['*'], price: 1_000 },
    fin_m: { planId: 'fin_m', name: 'Medium', quota: Math.round(monthlyTokens * 1.2), validityDays: 30, requestsPerMinute: 600, models: ['*'], price: 2_500 },
    fin_l: { planId: 'fin_l', name: 'Large', quota: monthlyTokens * 3, validityDays: 30, requestsPerMinute: 600, models: ['*'], price: 6_000 },
    fin_free: { planId: 'fin_free', name: 'Free', quota: Math.round(monthlyTokens * 0.4), validityDays: 30, requestsPerMinute: 600, models: ['*'], price: 0 },
  };
  const pack = { packId: 'fin_pack', packName: 'Top-up', tokens: Math.round(monthlyTokens * 0.25), price: 1_500 };
  const terms = ({ price: _price, ...t }: PricedPlan): PlanTerms => t;

  // The first day's catalogue: currency, plans and their prices, the pack, model multipliers, cost rates.
  const t0 = firstDayStart + 60_000;
  w.add(streams.priceList(), [{ type: 'SettlementCurrencySet', data: { currency: CURRENCY } }], admin(), t0);
  for (const p of Object.values(plans)) {
    w.add(streams.plan(p.planId), [{ type: 'PlanDefined', data: terms(p) }], admin(), t0);
    if (p.price > 0)
      w.add(streams.priceList(), [{ type: 'PlanPriced', data: { planId: p.planId, amount: p.price, currency: CURRENCY, active: true } }], admin(), t0);
  }
  w.add(
    streams.priceList(),
    [
      {
        type: 'TokenPackPriced',
        data: { packId: pack.packId, name: pack.packName, tokens: pack.tokens, amount: pack.price, currency: CURRENCY, active: true },
      },
    ],
    admin(),
    t0,
  );
  for (const m of SEED_MODELS)
    w.add(
      streams.model(m.id),
      [{ type: 'ModelPriced', data: { modelId: m.id, multiplierMilli: toMilli(m.multiplier), status: 'ACTIVE', alias: m.alias } }],
      admin(),
      t0,
    );
  const setRates = (channel: (m: string) => string, scale: number, at: number, effectiveAt: number) => {
    for (const m of SEED_MODELS) {
      const input = (m.multiplier * 2 * scale).toFixed(2);
      w.add(
        streams.upstreamCosts(),
        [
          {
            type: 'UpstreamCostRateSet',
            data: {
              channel: channel(m.id),
              upstreamModel: m.id,
              currency: CURRENCY,
              effectiveAt: new Date(effectiveAt).toISOString(),
              input,
              cacheRead: (m.multiplier * 0.2 * scale).toFixed(2),
              cacheWrite5m: input,
              cacheWrite1h: input,
              output: (m.multiplier * 8 * scale).toFixed(2),
              image: null,
            },
          },
        ],
        admin(),
        at,
      );
    }
  };
  const primary = (m: string) => `primary/${m}`;
  const backup = (m: string) => `backup/${m}`;
  setRates(primary, 1, t0, firstDayStart);
  setRates(backup, 1.3, t0, firstDayStart);

  const timeline = new Timeline();
  const accounts: Account[] = Array.from({ length: accountCount }, (_, i) => {
    const kind: Kind = i % 10 < 7 ? 'paid' : i % 10 < 9 ? 'free' : 'packs';
    const weight = kind === 'paid' ? 0.3 + 2.2 * ((i * 0.618034) % 1) : kind === 'free' ? 0.3 : 0.6;
    const plan = kind !== 'paid' ? plans.fin_free : weight < 0.8 ? plans.fin_s : weight < 1.6 ? plans.fin_m : plans.fin_l;
    const models = [0, 1, 2].map((k) => SEED_MODELS[(i + k * 4) % SEED_MODELS.length].id);
    return {
      sim: new SimAccount(tag, i),
      kind,
      plan,
      weight,
      models,
      joinDay: (i * 7) % 90,
      renewals: kind === 'paid' && i % 9 === 4 ? 4 + (i % 6) : Infinity,
      periods: 0,
      gone: false,
    };
  });

  /** The account decider's events for `cmd` at `at`, written to its stream (null: refused). */
  const decide = (a: Account, cmd: AccountCommand, md: EventMetadata, at: number): DomainEvent[] | null => {
    let events: DomainEvent[];
    try {
      events = a.sim.decide(cmd);
    } catch (err) {
      if (err instanceof DomainError) return null;
      throw err;
    }
    if (events.length > 0) {
      w.add(a.sim.stream, events, md, at);
      a.sim.revision += events.length;
    }
    return events;
  };
  const processor = (): EventMetadata => ({ correlationId: randomUUID(), causationId: null, actor: 'system:stripe' });

  const pay = (a: Account, at: number, grant: 'plan' | 'pack'): boolean => {
    const processorPaymentId = `pi_${randomUUID().replace(/-/g, '')}`;
    const paymentId = paymentIdFor('stripe', processorPaymentId);
    const amount = grant === 'plan' ? a.plan.price : pack.price;
    const events = decide(
      a,
      {
        type: 'RecordPayment',
        paymentId,
        processor: 'stripe',
        processorPaymentId,
        amount,
        currency: CURRENCY,
        fee: Math.round(amount * 0.029) + 30,
        grant: grant === 'plan' ? { kind: 'plan', plan: terms(a.plan) } : { kind: 'pack', packId: pack.packId, packName: pack.packName, tokens: pack.tokens },
        now: new Date(at),
      },
      processor(),
      at,
    );
    if (!events) return false;
    counts.payments++;
    if (grant === 'plan') counts.planPayments++;
    else counts.packs++;
    if (counts.payments % 37 === 0) {
      timeline.push(at + (2 + random() * 8) * DAY_MS, () => {
        if (
          decide(
            a,
            { type: 'RefundPayment', paymentId, refundId: `re_${randomUUID()}`, amount: Math.floor(amount / 2), now: new Date(timeline.now) },
            processor(),
            timeline.now,
          )
        )
          counts.refunds++;
      });
    } else if (counts.payments % 149 === 0) {
      const disputeId = `dp_${randomUUID()}`;
      timeline.push(at + 5 * DAY_MS, () => {
        decide(a, { type: 'OpenDispute', paymentId, disputeId, amount, suspendKeys: false }, processor(), timeline.now);
      });
      timeline.push(at + 20 * DAY_MS, () => {
        if (decide(a, { type: 'CloseDispute', disputeId, outcome: 'lost', fee: 1_500, now: new Date(timeline.now) }, processor(), timeline.now))
          counts.disputes++;
      });
    }
    return true;
  };

  /** The next period: paid (a payment) or free, from three hours before to an hour after the current one ends. */
  const scheduleRenewal = (a: Account) => {
    const expires = Date.parse(a.sim.state.subscription!.expiresAt);
    if (a.kind === 'paid' && a.periods >= a.renewals) {
      counts.churned++;
      return;
    }
    timeline.push(expires + (-3 + random() * 4) * 3_600_000, () => {
      a.periods++;
      if (a.kind === 'paid') pay(a, timeline.now, 'plan');
      else if (decide(a, { type: 'Subscribe', accountId: a.sim.accountId, plan: terms(a.plan), now: new Date(timeline.now) }, admin(), timeline.now))
        counts.freeRenewals++;
      scheduleRenewal(a);
    });
  };

  const join = (a: Account, at: number) => {
    decide(a, { type: 'Open', accountId: a.sim.accountId, name: `Finance bench account ${a.sim.index}` }, admin(), at);
    w.add(streams.key(a.sim.keyId), [a.sim.keyIssued()], admin(), at);
    if (a.kind === 'paid') pay(a, at + 1_000, 'plan');
    else decide(a, { type: 'Subscribe', accountId: a.sim.accountId, plan: terms(a.plan), now: new Date(at + 1_000) }, admin(), at + 1_000);
    scheduleRenewal(a);
  };

  let callNo = 0;
  const call = (a: Account, at: number) => {
    if (a.gone) return;
    const n = ++callNo;
    const holdId = randomUUID();
    const model = a.models[n % a.models.length];
    const md: EventMetadata = { correlationId: randomUUID(), causationId: null, actor: `key:${a.sim.keyId}` };
    const reserve: AccountCommand = {
      type: 'Reserve',
      holdId,
      requestId: `req_${holdId}`,
      keyId: a.sim.keyId,
      model,
      kind: 'chat',
      amount: 4096,
      now: new Date(at),
      ttlMs: 600_000,
    };
    let held = decide(a, reserve, md, at);
    // Out of tokens within a period: a top-up (not between the end of a period and its renewal).
    const planActive = Date.parse(a.sim.state.subscription!.expiresAt) > at;
    if (!held && a.kind !== 'free' && planActive && a.periods < a.renewals && pay(a, at, 'pack')) held = decide(a, reserve, md, at);
    if (!held) {
      counts.refused++;
      // A churned plan that has ended with its tokens gone: the customer has left.
      if (a.kind === 'paid' && a.periods >= a.renewals && !planActive) a.gone = true;
      return;
    }
    counts.calls++;
    const prompt = 200 + ((n * 37) % 1500);
    const channel = n % 10 === 0 ? backup(model) : primary(model);
    timeline.push(at + 300 + random() * 3_700, () => {
      decide(
        a,
        {
          type: 'SettleChat',
          holdId,
          multiplierMilli: MODEL_MILLI.get(model)!,
          promptTokens: prompt,
          completionTokens: 20 + ((n * 13) % 800),
          reasoningEffort: n % 3 === 0 ? REASONING_EFFORTS[n % REASONING_EFFORTS.length] : null,
          api: APIS[n % APIS.length],
          streamed: n % 2 === 0,
          aborted: false,
          ...(n % 4 === 0 ? { cachedTokens: Math.floor(prompt * 0.3) } : {}),
          channel,
          upstreamModel: model,
        },
        md,
        timeline.now,
      );
    });
  };

  // The primary channels' price change on day 200.
  timeline.push(firstDayStart + 200 * DAY_MS + 3_600_000, () => setRates(primary, 0.8, timeline.now, timeline.now));
  for (const a of accounts) timeline.push(firstDayStart + a.joinDay * DAY_MS + 8 * 3_600_000 + a.sim.index * 60_000, () => join(a, timeline.now));

  /** Schedules day `d`'s calls: what the target leaves for the days left, by the accounts' weights. */
  const scheduleCalls = (d: number, callsToday: number) => {
    const active = accounts.filter((a) => a.joinDay <= d && !a.gone);
    const total = active.reduce((s, a) => s + a.weight, 0);
    const dayStart = firstDayStart + d * DAY_MS;
    for (const a of active) {
      const share = (callsToday * a.weight) / total;
      const n = Math.floor(share) + (random() < share % 1 ? 1 : 0);
      // Joining accounts call from their join on.
      const from = a.joinDay === d ? 9 * 3_600_000 : 0;
      for (let k = 0; k < n; k++) timeline.push(dayStart + from + random() * (DAY_MS - from - 10_000), () => call(a, timeline.now));
    }
  };
  const eventsByDayEnd = new Map<string, number>();
  /** Runs everything due before `until`. */
  const runUntil = async (until: number) => {
    while (timeline.next < until) {
      const item = timeline.pop();
      timeline.now = item.at;
      item.run();
      await w.flush();
    }
  };

  let lastReport = performance.now();
  for (let d = 0; d < days; d++) {
    const left = days - d;
    const weekday = new Date(firstDayStart + d * DAY_MS).getUTCDay();
    const factor = weekday === 0 || weekday === 6 ? 0.6 : 1.16;
    const callsToday = Math.max(0, ((o.events - w.position) / 2 / left) * (left > 7 ? factor : 1));
    scheduleCalls(d, callsToday);
    // The last day runs a few seconds past its end, so its calls' charges are in.
    await runUntil(firstDayStart + (d + 1) * DAY_MS + (d === days - 1 ? 5_000 : 0));
    eventsByDayEnd.set(dayOf(d), w.position);
    if (performance.now() - lastReport > 30_000) {
      lastReport = performance.now();
      log(`  seeding: day ${d + 1} of ${days}, ${w.position.toLocaleString('en-US')} events, ${((performance.now() - started) / 1000).toFixed(0)} s`);
    }
  }
  await w.flush(true);
  const generateSeconds = (performance.now() - started) / 1000;

  // Each stream's head (the accounts' state as their snapshot, so a command reads no tail), then
  // the position origin past the seeded events (see postgres-schema.ts).
  const heads = [...w.heads];
  const snapshots = new Map(accounts.map((a) => [a.sim.stream, JSON.stringify({ v: SNAPSHOT_VERSION, s: a.sim.state })]));
  await db.transaction(async (tx) => {
    await tx.query(
      `INSERT INTO "${schema}".streams (stream, revision, last_hash, snapshot, snapshot_revision)
       SELECT s, r, h, j::jsonb, CASE WHEN j IS NULL THEN NULL ELSE r END FROM unnest($1::text[], $2::integer[], $3::text[], $4::text[]) AS u(s, r, h, j)`,
      [heads.map(([s]) => s), heads.map(([, h]) => h.revision), heads.map(([, h]) => h.hash), heads.map(([s]) => snapshots.get(s) ?? null)],
    );
    await tx.query(`UPDATE "${schema}".position_origin SET xid = pg_current_xact_id()::text::bigint, position = $1`, [w.position + 1]);
  });
  await client.end();

  let nextDay = days;
  return {
    events: w.position,
    ...counts,
    firstDay: dayOf(0),
    lastDay: dayOf(days - 1),
    eventsByDayEnd,
    generateSeconds,
    continuation(count: number): ProjectedEvent[] {
      w.collected = [];
      while (w.collected.length < count && nextDay < days + 60) {
        // Continuation is not awaited for COPY: the writer only collects.
        scheduleCalls(nextDay, callsExpected / days);
        const until = firstDayStart + ++nextDay * DAY_MS;
        while (timeline.next < until && w.collected.length < count) {
          const item = timeline.pop();
          timeline.now = item.at;
          item.run();
        }
      }
      const out = w.collected.slice(0, count);
      w.collected = null;
      return out;
    },
  };
}
