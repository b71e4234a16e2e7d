// Generated ledger traffic for the benchmarks: accounts that reserve quota and are charged for
// chat calls, exactly as the gateway does it. Events come from the real account decider (so
// they are schema-valid and carry realistic data), and every append has an exact expected revision
// and carries the decider state as its snapshot when the command handler's would (snapshotDue).
import { randomUUID } from 'node:crypto';
import type { AppendRequest, EventMetadata, NewEvent } from '../src/eventstore/port.ts';
import { accountDecider, type AccountCommand } from '../src/accounts/account-decider.ts';
import { type AccountState } from '../src/accounts/account-state.ts';
import { SNAPSHOT_VERSION, snapshotDue } from '../src/ledger/command-handler.ts';
import { streams, type DomainEvent, type PlanTerms } from '../src/ledger/events.ts';
import { SEED_MODELS, REASONING_EFFORTS } from '../src/catalogue/seed-models.ts';
import { toMilli } from '../src/money/pricing.ts';

const PLAN: PlanTerms = { planId: 'bench', name: 'Bench', quota: 1_000_000_000_000, validityDays: 3650, requestsPerMinute: 600, models: ['*'] };
const APIS = ['chat.completions', 'messages', 'responses'] as const;
const MODEL_MILLI = new Map(SEED_MODELS.map((m) => [m.id, toMilli(m.multiplier)]));

function toNew(events: DomainEvent[], metadata: EventMetadata): NewEvent[] {
  return events.map((e) => ({ id: randomUUID(), type: e.type, data: e.data as unknown as Record<string, unknown>, metadata }));
}

/** One account stream and its key: the decider state and revision follow every append. */
export class SimAccount {
  readonly accountId: string;
  readonly keyId: string;
  readonly stream: string;
  state: AccountState = accountDecider.initialState();
  revision = -1;
  private n = 0;
  private openHold: string | null = null;
  /** The subscription's call rate (default the bench plan's 600 a minute). */
  requestsPerMinute = PLAN.requestsPerMinute;

  constructor(
    readonly tag: string,
    readonly index: number,
    /** Every call on this model (default: the seed models in turn). */
    readonly model?: string,
  ) {
    this.accountId = `acct_${tag}_${index}`;
    this.keyId = `key_${tag}_${index}`;
    this.stream = streams.account(this.accountId);
  }

  /** The account decider's events for a command, the state moved past them (the caller appends them, at revision + 1 on). */
  decide(cmd: AccountCommand): DomainEvent[] {
    const events = accountDecider.decide(cmd, this.state);
    this.state = events.reduce(accountDecider.evolve, this.state);
    return events;
  }

  private metadata(): EventMetadata {
    return { correlationId: randomUUID(), causationId: null, actor: `key:${this.keyId}` };
  }

  /** AccountOpened + SubscriptionStarted on the account stream, KeyIssued on the key stream. */
  setup(now: Date): AppendRequest[] {
    const admin: EventMetadata = { correlationId: randomUUID(), causationId: null, actor: 'admin:bench' };
    const events = [
      ...this.decide({ type: 'Open', accountId: this.accountId, name: `Bench account ${this.index}` }),
      ...this.decide({ type: 'Subscribe', accountId: this.accountId, plan: { ...PLAN, requestsPerMinute: this.requestsPerMinute }, now }),
    ];
    const expected = this.revision;
    const snapshot = this.snapshotFor(events.length);
    this.revision += events.length;
    return [
      {
        stream: this.stream,
        expectedRevision: expected === -1 ? 'no_stream' : expected,
        events: toNew(events, admin),
        snapshot,
      },
      {
        stream: streams.key(this.keyId),
        expectedRevision: 'no_stream',
        events: toNew([this.keyIssued()], admin),
      },
    ];
  }

  /** The KeyIssued of the account's key (the first event of its key stream). */
  keyIssued(): DomainEvent {
    return {
      type: 'KeyIssued',
      data: {
        keyId: this.keyId,
        accountId: this.accountId,
        name: 'bench',
        hash: randomUUID().replace(/-/g, '').repeat(2),
        last4: String(1000 + (this.index % 9000)),
      },
    };
  }

  /** The next command's events: a QuotaReserved when no hold is open, else the ChatCharged settling it. */
  nextEvents(now: Date): DomainEvent[] {
    this.n++;
    if (this.openHold === null) {
      const holdId = randomUUID();
      this.openHold = holdId;
      const model = this.model ?? SEED_MODELS[(this.index + this.n) % SEED_MODELS.length].id;
      return this.decide({ type: 'Reserve', holdId, requestId: `req_${holdId}`, keyId: this.keyId, model, kind: 'chat', amount: 4096, now, ttlMs: 600_000 });
    }
    const holdId = this.openHold;
    this.openHold = null;
    const model = this.state.holds.get(holdId)!.model;
    return this.decide({
      type: 'SettleChat',
      holdId,
      multiplierMilli: MODEL_MILLI.get(model)!,
      promptTokens: 200 + ((this.n * 37) % 1500),
      completionTokens: 20 + ((this.n * 13) % 800),
      reasoningEffort: this.n % 3 === 0 ? REASONING_EFFORTS[this.n % REASONING_EFFORTS.length] : null,
      api: APIS[this.n % APIS.length],
      streamed: this.n % 2 === 0,
      aborted: false,
    });
  }

  /** The decider state as the snapshot of an append of `appended` events, when one is due. */
  private snapshotFor(appended: number): AppendRequest['snapshot'] {
    return snapshotDue(this.revision, appended) ? { v: SNAPSHOT_VERSION, s: this.state } : undefined;
  }

  /** One command's append (one event), with the new state as snapshot when due; it must succeed. */
  nextAppend(now = new Date()): AppendRequest {
    const events = this.nextEvents(now);
    const request: AppendRequest = {
      stream: this.stream,
      expectedRevision: this.revision,
      events: toNew(events, this.metadata()),
      snapshot: this.snapshotFor(events.length),
    };
    this.revision += events.length;
    return request;
  }

  /** With a spacing, the calls of nextBulk are that many ms apart (within the plan's call rate however many are seeded at once). */
  spacingMs = 0;
  private clock = 0;

  /** `pairs` reserve/charge pairs in one append (the bulk seeding path). */
  nextBulk(pairs: number, now = new Date()): AppendRequest {
    const expected = this.revision;
    const events: DomainEvent[] = [];
    for (let i = 0; i < pairs * 2; i++) {
      if (this.spacingMs && i % 2 === 0) this.clock = Math.max(this.clock + this.spacingMs, now.getTime());
      events.push(...this.nextEvents(this.spacingMs ? new Date(this.clock) : now));
    }
    const snapshot = this.snapshotFor(events.length);
    this.revision += events.length;
    return { stream: this.stream, expectedRevision: expected, events: toNew(events, this.metadata()), snapshot };
  }
}

/** Plan and model-price events every ledger starts with (13 events). */
export function catalogueSetup(): AppendRequest[] {
  const admin: EventMetadata = { correlationId: randomUUID(), causationId: null, actor: 'admin:bench' };
  const out: AppendRequest[] = [{ stream: streams.plan(PLAN.planId), expectedRevision: 'any', events: toNew([{ type: 'PlanDefined', data: PLAN }], admin) }];
  for (const m of SEED_MODELS) {
    out.push({
      stream: streams.model(m.id),
      expectedRevision: 'any',
      events: toNew([{ type: 'ModelPriced', data: { modelId: m.id, multiplierMilli: toMilli(m.multiplier), status: 'ACTIVE', alias: m.alias } }], admin),
    });
  }
  return out;
}
