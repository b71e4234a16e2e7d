// One seeded random run of the replica-agreement suite (test/replica-random.test.ts), in the spirit
// of Jepsen's checkers and TigerBeetle's simulator: a seeded PRNG draws a sequence of steps, each a
// random command on a random gateway (payments, refunds, disputes, codes, grants, subscriptions,
// plan and price changes and their undoing, model and channel states, key controls, keys,
// management keys, members, sign-ins, chat calls plain and streamed, images); the model of the
// expected state (replica-model.ts) says what each answer must be, and is updated from the answer.
// Checkpoints read every account, key, member, plan, model and channel back from the gateways, and
// the end audits the log itself (every call charged once at the model's multiplier, or not at all;
// no hold left open) and the statements. Choices prefer what was touched last (the key just revoked,
// the model just priced), so that a change on one gateway is followed at once by its use on another.
//
// Left out, and why: Stripe's webhooks and Checkout (payments, refunds and disputes go through the
// admin API instead, which decides on the same account stream; replica-agreement.test.ts keeps the
// Stripe cases), renewals and cancellations by Stripe invoice; anything that waits for the clock
// (key expiry, rotation with a grace period: rotations here have none, plan expiry); corrections
// (a window in the past), model aliases and cache weights; outbound webhooks; the Messages and
// Responses dialects and image edits (the same metering as chat and images); sessions' own
// management (sign-out, ending another session). Calls run one at a time, so that every answer has
// one expected value; concurrency is the stall run's (test/replica-random.test.ts).
import OpenAI from 'openai';
import { setTimeout as sleep } from 'node:timers/promises';
import { adminCall, defaultModelsConfig, request, type NamedReply, type Replica } from './replicas.ts';
import type { UpstreamDouble } from './upstream-double.ts';
import {
  applyCharge,
  applySubscription,
  available,
  billedFor,
  emptyModel,
  expectCall,
  newAccount,
  priced,
  Rng,
  sameSet,
  TOKENS_PER_IMAGE,
  type AccountModel,
  type CallExpectation,
  type KeyModel,
  type LotModel,
  type ManagementKeyModel,
  type MemberModel,
  type Model,
} from './replica-model.ts';

export const LUNA = 'cx/gen-6-luna';
export const OPUS = 'alpha-opus-4.6';
/** A model with two channels, each an upstream double of its own (which one served a call is counted). */
export const TWO = 'test/rr-two';
/** Images from an upstream double (cheap), priced at 0.01 so that an image costs 450 tokens. */
export const IMAGE = 'test/rr-image';
/** The simulated upstream slowed down, so that calls are in flight when the database stalls. */
export const SLOW = 'test/rr-slow';
export const FIRST = 'first/up-a';
export const SECOND = 'second/up-b';
export const PICS = 'pics/img-up';

export const CHAT_MODELS = [LUNA, OPUS, TWO];
export const PRICED_MODELS = [LUNA, OPUS, TWO, IMAGE];
export const PROMPTS = ['Say hello.', 'Name a colour.', 'Count to three, please.'];
export const PACK = { id: 'p300', tokens: 300, amount: 300 };
/** 503s that say nothing was done and to ask again (another writer, the log or read models a moment behind). */
const RETRYABLE = new Set(['ledger_contended', 'log_not_readable', 'read_model_behind']);

/** The models config every gateway of a run loads: the default one plus the doubles' channels and the slow model. */
export function replicaModelsConfig(upstreams: { first: string; second: string; pics: string }): Record<string, any> {
  const models = defaultModelsConfig();
  models.providers.first = { type: 'openai-compatible', baseURL: upstreams.first };
  models.providers.second = { type: 'openai-compatible', baseURL: upstreams.second };
  models.providers.pics = { type: 'openai-compatible', baseURL: upstreams.pics };
  models.providers.slow = { type: 'simulated', tokenDelayMs: 100 };
  models.models[TWO] = {
    channels: [
      { provider: 'first', upstreamModel: 'up-a' },
      { provider: 'second', upstreamModel: 'up-b' },
    ],
  };
  models.models[IMAGE] = { provider: 'pics', upstreamModel: 'img-up' };
  models.models[SLOW] = { provider: 'slow', upstreamModel: 'gen-6-luna' };
  return models;
}

export interface StepRecord {
  i: number;
  gateway: string;
  kind: string;
  args: string;
  answer: string;
}

export interface Disagreement {
  step: number;
  kind: string;
  gateway: string;
  message: string;
}

export interface RunOptions {
  seed: number;
  steps: number;
  /** Go on after a disagreement (the model follows the answers) and report them all; else stop at the first. */
  keepGoing: boolean;
  checkEvery: number;
  gateways: Replica[];
  adminToken: string;
  upstreams: { first: UpstreamDouble; second: UpstreamDouble; pics: UpstreamDouble };
  /** The command kinds steps are drawn from (replica-commands.ts). */
  commands: CommandKind[];
  /** How to run this again, when not by its seed and steps alone. */
  replay?: string;
}

export interface Drawn {
  args: string;
  exec(g: Replica): Promise<void>;
}

export interface CommandKind {
  kind: string;
  /** How often it is drawn, relative to the others (a function: as the state asks). */
  weight: number | ((r: ReplicaRun) => number);
  ready(r: ReplicaRun): boolean;
  draw(r: ReplicaRun, g: Replica): Drawn;
}

export type Json = Record<string, any>;

/** What the last steps touched, by kind. */
export interface Recent {
  account: string;
  plan: string;
  key: KeyModel;
  mgmt: ManagementKeyModel;
  member: MemberModel;
  model: string;
  lot: LotModel;
}
/** How many steps a touched thing stays preferred. */
const RECENT_STEPS = 4;

export const errorCode = (reply: NamedReply): string | null => reply.json?.error?.code ?? null;
const short = (reply: NamedReply): string => `${reply.status}${errorCode(reply) ? ` ${errorCode(reply)}` : ''}`;

export class ReplicaRun {
  readonly rng: Rng;
  readonly model: Model = emptyModel();
  readonly steps: StepRecord[] = [];
  readonly disagreements: Disagreement[] = [];
  /** The gateway's own count of each prompt's tokens (what it sizes a hold on), learnt at setup. */
  readonly promptTokens = new Map<string, number>();
  /** Accounts of the run's own bookkeeping (calibration, the stall's), left out of the random choices. */
  readonly reservedAccounts = new Set<string>();
  private readonly touched = new Map<keyof Recent, { value: unknown; at: number }>();
  readonly counts = { account: 0, plan: 0, key: 0, mgmt: 0, member: 0, ref: 0, refund: 0, dispute: 0, signIns: 0, usedCodes: 0 };
  retries = 0;
  checkpoints = 0;
  private current: StepRecord | null = null;
  private readonly startedAt = new Date();

  constructor(readonly o: RunOptions) {
    this.rng = new Rng(o.seed);
  }

  // ------------------------------------------------------------ recording

  /** Records a disagreement of the current step (the model follows the answer from here on). */
  disagree(message: string): void {
    const s = this.current;
    this.disagreements.push({ step: s?.i ?? -1, kind: s?.kind ?? 'setup', gateway: s?.gateway ?? '-', message });
  }
  expect(ok: boolean, message: () => string): boolean {
    if (!ok) this.disagree(message());
    return ok;
  }
  expectStatus(reply: NamedReply, status: number, what: string): boolean {
    return this.expect(reply.status === status, () => `${what}: expected ${status}, ${reply.show}`);
  }
  private note(reply: NamedReply | string): void {
    if (this.current) this.current.answer += (this.current.answer ? '; ' : '') + (typeof reply === 'string' ? reply : `${reply.from} ${short(reply)}`);
  }

  // ------------------------------------------------------------ HTTP

  private async send(fn: () => Promise<NamedReply>): Promise<NamedReply> {
    for (let attempt = 0; ; attempt++) {
      const reply = await fn();
      if (reply.status === 503 && RETRYABLE.has(errorCode(reply) ?? '') && attempt < 8) {
        this.retries++;
        await sleep(150);
        continue;
      }
      this.note(reply);
      return reply;
    }
  }
  admin(g: Replica, method: string, path: string, body?: unknown): Promise<NamedReply> {
    return this.send(() => adminCall(g, this.o.adminToken, method, path, body));
  }
  call(g: Replica, path: string, opts: { method?: string; key?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<NamedReply> {
    return this.send(() => request(g, path, opts));
  }
  requestId(tag: string): string {
    return `rr-${this.o.seed}-${this.current?.i ?? 'x'}-${tag}`;
  }

  // ------------------------------------------------------------ choices

  /** Remembers what a step touched: the next few steps prefer it (a change on one gateway, then its use on another). */
  touch<K extends keyof Recent>(kind: K, value: Recent[K]): void {
    this.touched.set(kind, { value, at: this.steps.length });
  }
  /** What was touched of this kind in the last few steps, if anything. */
  fresh<K extends keyof Recent>(kind: K): Recent[K] | undefined {
    const t = this.touched.get(kind);
    return t && this.steps.length - t.at <= RECENT_STEPS ? (t.value as Recent[K]) : undefined;
  }

  userAccounts(): AccountModel[] {
    return [...this.model.accounts.values()].filter((a) => !this.reservedAccounts.has(a.id));
  }
  pickAccount(filter: (a: AccountModel) => boolean = () => true): AccountModel {
    const all = this.userAccounts().filter(filter);
    return this.rng.pickPreferring(
      all,
      all.find((a) => a.id === this.fresh('account')),
    );
  }
  userKeys(): KeyModel[] {
    return this.model.keys.filter((k) => !this.reservedAccounts.has(k.accountId));
  }
  pickKey(filter: (k: KeyModel) => boolean = () => true): KeyModel {
    const all = this.userKeys().filter(filter);
    return this.rng.pickPreferring(all, this.fresh('key'));
  }
  keysOf(accountId: string): KeyModel[] {
    return this.model.keys.filter((k) => k.accountId === accountId);
  }
  account(id: string): AccountModel {
    return this.model.accounts.get(id)!;
  }

  // ------------------------------------------------------------ the run

  /** Prices the run's own models and the pack, reads the seeded prices, and learns the gateway's count of each prompt. */
  async setup(): Promise<void> {
    const [a] = this.o.gateways;
    const must = async (method: string, path: string, body: unknown, status: number) => {
      const r = await this.admin(a, method, path, body);
      if (r.status !== status) throw new Error(`setup: ${method} ${path}: ${r.show}`);
      return r;
    };
    await must('PATCH', `/models/${TWO}`, { multiplier: 1, status: 'ACTIVE' }, 200);
    await must('PATCH', `/models/${IMAGE}`, { multiplier: 0.01, status: 'ACTIVE' }, 200);
    await must('PATCH', `/models/${SLOW}`, { multiplier: 1, status: 'ACTIVE' }, 200);
    await must('PUT', `/packs/${PACK.id}`, { name: '300 tokens', tokens: PACK.tokens, amount: PACK.amount }, 200);
    const listed = (await must('GET', '/models', undefined, 200)).json.data as Json[];
    for (const id of PRICED_MODELS) {
      const row = listed.find((m) => m.model_id === id);
      if (!row) throw new Error(`setup: no model ${id} listed`);
      const channels = id === TWO ? [FIRST, SECOND] : id === IMAGE ? [PICS] : [`simulated/${id.replace(/^cx\//, '')}`];
      this.model.catalog.set(id, { id, milli: Number(row.multiplier_milli), original: Number(row.multiplier_milli), status: row.status, channels });
    }
    for (const c of [FIRST, SECOND]) this.model.channels.set(c, { enabled: true });
    // The gateway's count of each prompt: a call on a simulated model reports it as its usage.
    const cal = await this.openReservedAccount(a, 'calibration', 1_000_000);
    for (const prompt of PROMPTS) {
      const r = await this.call(a, '/v1/chat/completions', {
        key: cal.secret,
        body: { model: LUNA, messages: [{ role: 'user', content: prompt }], max_tokens: 4 },
        headers: { 'x-request-id': `rr-${this.o.seed}-calibration-${this.promptTokens.size}` },
      });
      if (r.status !== 200) throw new Error(`setup: calibration call: ${r.show}`);
      this.promptTokens.set(prompt, r.json.usage.prompt_tokens);
      this.recordServed(
        cal,
        LUNA,
        r.headers.get('x-request-id')!,
        'chat',
        Number(r.json.usage.billed_tokens),
        this.model.catalog.get(LUNA)!.milli,
        r.json.usage,
      );
    }
  }

  /** An account of the run's own (a plan with `quota` tokens, a key), kept out of the random choices; its money is still checked. */
  async openReservedAccount(g: Replica, id: string, quota: number): Promise<KeyModel> {
    const must = async (method: string, path: string, body: unknown, status: number) => {
      const r = await this.admin(g, method, path, body);
      if (r.status !== status) throw new Error(`${method} ${path}: ${r.show}`);
      return r;
    };
    const planId = `plan-${id}`;
    await must('POST', '/plans', { plan_id: planId, name: planId, quota, validity_days: 30, requests_per_minute: 100_000, models: ['*'] }, 201);
    this.model.plans.set(planId, { id: planId, name: planId, quota, models: ['*'], defined: { quota, models: ['*'] } });
    await must('POST', '/accounts', { account_id: id, name: id }, 201);
    this.reservedAccounts.add(id);
    const account = newAccount(id);
    this.model.accounts.set(id, account);
    await must('POST', `/accounts/${id}/subscription`, { plan_id: planId }, 200);
    applySubscription(account, this.model.plans.get(planId)!);
    const k = await must('POST', `/accounts/${id}/keys`, { name: 'own' }, 201);
    const key: KeyModel = {
      handle: `k-${id}`,
      id: k.json.key_id,
      secret: k.json.key,
      accountId: id,
      status: 'active',
      rotated: false,
      pool: k.json.key_id,
      limit: null,
      models: null,
    };
    this.model.keys.push(key);
    return key;
  }

  /** A served call in the model: charged what the answer says, split by the money rule. */
  recordServed(
    key: KeyModel,
    modelId: string,
    requestId: string,
    kind: 'chat' | 'image',
    billed: number,
    milli: number,
    usage: Json | null,
    channel: string | null = null,
  ): void {
    const split = applyCharge(this.model, key, billed);
    this.model.calls.push({
      requestId,
      accountId: key.accountId,
      model: modelId,
      kind,
      billed,
      milli,
      ...split,
      promptTokens: kind === 'chat' ? Number(usage?.prompt_tokens ?? 0) : 0,
      completionTokens: kind === 'chat' ? Number(usage?.completion_tokens ?? 0) : 0,
      images: kind === 'image' ? 1 : 0,
      channel,
    });
  }
  recordRefused(key: KeyModel, modelId: string, requestId: string, kind: 'chat' | 'image'): void {
    this.model.calls.push({
      requestId,
      accountId: key.accountId,
      model: modelId,
      kind,
      billed: null,
      milli: 0,
      fromQuota: 0,
      fromExtra: 0,
      promptTokens: 0,
      completionTokens: 0,
      images: 0,
      channel: null,
    });
  }

  /** The random steps; stops at the first disagreement unless keepGoing. */
  async runSteps(steps = this.o.steps, gateways = this.o.gateways): Promise<void> {
    for (let n = 0; n < steps; n++) {
      const g = this.rng.pick(gateways);
      const kinds = this.o.commands.filter((c) => c.ready(this));
      const kind = this.rng.weighted(kinds.map((c) => [c, typeof c.weight === 'number' ? c.weight : c.weight(this)] as const));
      const drawn = kind.draw(this, g);
      this.current = { i: this.steps.length, gateway: g.name, kind: kind.kind, args: drawn.args, answer: '' };
      this.steps.push(this.current);
      try {
        await drawn.exec(g);
      } catch (err) {
        this.disagree(`the step failed: ${(err as Error).stack ?? err}`);
      }
      if ((n + 1) % this.o.checkEvery === 0) await this.checkpoint(`after ${n + 1} steps`);
      if (this.disagreements.length > 0 && !this.o.keepGoing) return;
    }
  }

  /** A step of the run's own (not drawn), recorded in the sequence like the others. */
  async own(kind: string, args: string, gateway: string, body: () => Promise<void>): Promise<void> {
    this.current = { i: this.steps.length, gateway, kind, args, answer: '' };
    this.steps.push(this.current);
    try {
      await body();
    } catch (err) {
      this.disagree(`${kind} failed: ${(err as Error).stack ?? err}`);
    }
  }

  // ------------------------------------------------------------ checkpoints

  /** Reads back every account's balance, keys, management keys, payments and members, the plans, models and channels. */
  async checkpoint(label: string): Promise<void> {
    this.checkpoints++;
    await this.own('checkpoint', label, '*', async () => {
      const gs = this.o.gateways;
      let turn = 0;
      for (const a of this.model.accounts.values()) {
        const g = gs[turn++ % gs.length];
        await this.checkBalance(g, a);
        await this.checkKeys(g, a);
        await this.checkPayments(g, a);
        if (this.reservedAccounts.has(a.id)) continue;
        await this.checkManagementKeys(g, a);
        for (const each of gs) await this.checkMembers(each, a.id, 'checkpoint');
      }
      for (const g of gs) await this.checkCatalog(g);
      await this.checkPlans(gs[turn % gs.length]);
      for (const g of gs) await this.checkChannels(g);
    });
  }

  async checkBalance(g: Replica, a: AccountModel): Promise<void> {
    const r = await this.admin(g, 'GET', `/accounts/${a.id}/balance`);
    if (!this.expectStatus(r, 200, `balance of ${a.id}`)) return;
    const b = r.json;
    const want = {
      plan: a.plan?.planId ?? null,
      quota_total: a.plan?.quota ?? 0,
      quota_used: a.quotaUsed,
      extra_granted: a.extraGranted,
      extra_used: a.extraUsed,
      remaining: available(a),
      open_holds: 0,
    };
    const got = {
      plan: b.plan?.id ?? null,
      quota_total: Number(b.quota.total),
      quota_used: Number(b.quota.used),
      extra_granted: Number(b.extra_tokens.granted),
      extra_used: Number(b.extra_tokens.used),
      remaining: Number(b.remaining_tokens),
      open_holds: Number(b.open_holds),
    };
    this.expect(
      JSON.stringify(got) === JSON.stringify(want),
      () => `balance of ${a.id} on ${g.name}: ${JSON.stringify(got)}, the model has ${JSON.stringify(want)}`,
    );
  }

  async checkKeys(g: Replica, a: AccountModel): Promise<void> {
    const r = await this.admin(g, 'GET', `/accounts/${a.id}/keys`);
    if (!this.expectStatus(r, 200, `keys of ${a.id}`)) return;
    const rows = new Map((r.json.data as Json[]).map((k) => [k.key_id as string, k]));
    for (const k of this.keysOf(a.id)) {
      const row = rows.get(k.id);
      if (!this.expect(!!row, () => `key ${k.handle} (${k.id}) of ${a.id} is not listed on ${g.name}`)) continue;
      const want = { status: k.status, limit: k.limit, models: k.models ? [...k.models].sort() : null, spent: this.model.poolSpend.get(k.pool) ?? 0 };
      const got = {
        status: row!.status,
        limit: row!.spend_limit ? Number(row!.spend_limit.tokens) : null,
        models: row!.models ? [...row!.models].sort() : null,
        spent: Number(row!.spend.spent),
      };
      this.expect(
        JSON.stringify(got) === JSON.stringify(want),
        () => `key ${k.handle} of ${a.id} on ${g.name}: ${JSON.stringify(got)}, the model has ${JSON.stringify(want)}`,
      );
    }
    this.expect(rows.size === this.keysOf(a.id).length, () => `${a.id} lists ${rows.size} keys on ${g.name}, the model has ${this.keysOf(a.id).length}`);
  }

  async checkPayments(g: Replica, a: AccountModel): Promise<void> {
    const r = await this.admin(g, 'GET', `/accounts/${a.id}/payments`);
    if (!this.expectStatus(r, 200, `payments of ${a.id}`)) return;
    const got = (r.json.data as Json[]).map((p) => `${p.id}:${p.refunded}:${p.tokens_withdrawn}`).sort();
    const want = a.lots.map((l) => `${l.paymentId}:${l.refunded}:${l.withdrawn}`).sort();
    this.expect(sameSet(got, want), () => `payments of ${a.id} on ${g.name}: ${got.join(' ')}, the model has ${want.join(' ')}`);
    const disputes = (r.json.disputes as Json[]).map((d) => `${d.id}:${d.status}`).sort();
    const wantDisputes = a.disputes.map((d) => `${d.id}:${d.outcome ?? 'open'}`).sort();
    this.expect(sameSet(disputes, wantDisputes), () => `disputes of ${a.id} on ${g.name}: ${disputes.join(' ')}, the model has ${wantDisputes.join(' ')}`);
  }

  async checkManagementKeys(g: Replica, a: AccountModel): Promise<void> {
    const r = await this.admin(g, 'GET', `/accounts/${a.id}/management-keys`);
    if (!this.expectStatus(r, 200, `management keys of ${a.id}`)) return;
    const got = (r.json.data as Json[]).map((k) => `${k.key_id}:${k.status}`).sort();
    const want = this.model.managementKeys.filter((k) => k.accountId === a.id).map((k) => `${k.id}:${k.status}`);
    this.expect(sameSet(got, want), () => `management keys of ${a.id} on ${g.name}: ${got.join(' ')}, the model has ${want.join(' ')}`);
  }

  /** The account's members as `g` answers them, against the model (no waiting: a change is visible on every gateway at once). */
  async checkMembers(g: Replica, accountId: string, after: string): Promise<void> {
    const r = await this.admin(g, 'GET', `/accounts/${accountId}/members`);
    if (!this.expectStatus(r, 200, `members of ${accountId}`)) return;
    const got = (r.json.members as Json[]).map((m) => `${m.member_id}:${m.role}:${m.status}`);
    const want = this.model.members.filter((m) => m.accountId === accountId && m.status !== 'removed').map((m) => `${m.id}:${m.role}:${m.status}`);
    if (this.expect(sameSet(got, want), () => `members of ${accountId} on ${g.name} (${after}): [${got.join(' ')}], the model has [${want.join(' ')}]`)) return;
    // Going on after a disagreement: the model takes the members as read (a change answered but not
    // written shows here), so that one lost change is reported once, not at every later read.
    const rows = r.json.members as Json[];
    for (const m of this.model.members.filter((x) => x.accountId === accountId)) {
      const row = rows.find((x) => x.member_id === m.id);
      if (row) Object.assign(m, { role: row.role, status: row.status });
      else m.status = 'removed';
    }
  }

  async checkCatalog(g: Replica): Promise<void> {
    const r = await this.admin(g, 'GET', '/models');
    if (!this.expectStatus(r, 200, 'the models')) return;
    for (const entry of this.model.catalog.values()) {
      const row = (r.json.data as Json[]).find((m) => m.model_id === entry.id);
      this.expect(
        !!row && Number(row.multiplier_milli) === entry.milli && row.status === entry.status,
        () => `model ${entry.id} on ${g.name}: ${JSON.stringify(row ?? null)}, the model has ${entry.milli} ${entry.status}`,
      );
    }
  }

  async checkPlans(g: Replica): Promise<void> {
    const r = await this.admin(g, 'GET', '/plans');
    if (!this.expectStatus(r, 200, 'the plans')) return;
    for (const p of this.model.plans.values()) {
      const row = (r.json.data as Json[]).find((x) => x.plan_id === p.id);
      this.expect(
        !!row && Number(row.quota) === p.quota && sameSet(row.models, p.models),
        () => `plan ${p.id} on ${g.name}: ${JSON.stringify(row ?? null)}, the model has quota ${p.quota} models ${p.models.join(',')}`,
      );
    }
  }

  /** A gateway's channel list is its in-memory view, fed by the event feed: docs/deployment.md gives about 10 ms, so a second is allowed. */
  async checkChannels(g: Replica): Promise<void> {
    const until = Date.now() + 1000;
    for (;;) {
      const r = await adminCall(g, this.o.adminToken, 'GET', '/channels');
      if (!this.expectStatus(r, 200, 'the channels')) return;
      const wrong = [...this.model.channels].filter(([id, c]) => {
        const row = (r.json.data as Json[]).find((x) => x.id === id);
        return !row || (row.state === 'disabled') === c.enabled;
      });
      if (wrong.length === 0) return;
      if (Date.now() > until) {
        this.disagree(
          `channels on ${g.name} a second after the checkpoint began: ${wrong.map(([id, c]) => `${id} should be ${c.enabled ? 'enabled' : 'disabled'}`).join(', ')}`,
        );
        return;
      }
      await sleep(25);
    }
  }

  // ------------------------------------------------------------ the audit of the log

  /** Every event of the log (the admin API's NDJSON export). */
  async events(g: Replica): Promise<Json[]> {
    const res = await fetch(`${g.url}/admin/v1/events`, { headers: { authorization: `Bearer ${this.o.adminToken}` } });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`GET /admin/v1/events on ${g.name}: ${res.status} ${text.slice(0, 300)}`);
    return text
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l));
  }

  /**
   * The log against the model: each call the model says was served has exactly one charge, of the
   * billed tokens its answer gave, at the model's multiplier, split as the model splits it; a call
   * refused or failed has none; every hold is closed; nothing was adjusted (no correction runs here)
   * unless `voidsAllowed`. Then each account's statement, line by line.
   */
  async audit(opts: { voidsAllowed?: boolean } = {}): Promise<void> {
    await this.own('audit', 'the log and the statements', this.o.gateways[0].name, async () => {
      const events = await this.events(this.o.gateways[0]);
      const charges = new Map<string, Json[]>();
      const open = new Map<string, Json>();
      for (const e of events) {
        const d = e.data as Json;
        if (e.type === 'QuotaReserved') open.set(d.holdId, d);
        if (e.type === 'ChatCharged' || e.type === 'ImageCharged') {
          charges.set(d.requestId, [...(charges.get(d.requestId) ?? []), d]);
          open.delete(d.holdId);
        }
        if (e.type === 'ReservationReleased') open.delete(d.holdId);
        if (e.type === 'ChargeAdjusted' && !opts.voidsAllowed) this.disagree(`a ChargeAdjusted in a run without corrections: ${JSON.stringify(d)}`);
      }
      this.expect(open.size === 0, () => `holds left open: ${[...open.values()].map((h) => `${h.holdId} (request ${h.requestId})`).join(', ')}`);
      for (const c of this.model.calls) {
        const got = charges.get(c.requestId) ?? [];
        if (c.billed === null) {
          this.expect(got.length === 0, () => `call ${c.requestId} was answered as refused or failed, yet the log charges it: ${JSON.stringify(got)}`);
          continue;
        }
        const want = { billed: c.billed, multiplierMilli: c.milli, fromQuota: c.fromQuota, fromExtra: c.fromExtra, channel: c.channel ?? undefined };
        const have = got.map((d) => ({
          billed: d.billed,
          multiplierMilli: d.multiplierMilli,
          fromQuota: d.fromQuota,
          fromExtra: d.fromExtra,
          channel: c.channel === null ? undefined : d.channel,
        }));
        this.expect(
          have.length === 1 && JSON.stringify(have[0]) === JSON.stringify(want),
          () => `call ${c.requestId} (${c.model}): the log has ${JSON.stringify(have)}, the model ${JSON.stringify(want)}`,
        );
      }
      const known = new Set(this.model.calls.map((c) => c.requestId));
      for (const [requestId, list] of charges)
        this.expect(known.has(requestId), () => `the log charges request ${requestId}, which no step made: ${JSON.stringify(list)}`);
      await this.auditStatements();
    });
  }

  private async auditStatements(): Promise<void> {
    const from = new Date(this.startedAt.getTime() - 3_600_000).toISOString();
    const to = new Date(Date.now() + 60_000).toISOString();
    let turn = 0;
    for (const a of this.model.accounts.values()) {
      const g = this.o.gateways[turn++ % this.o.gateways.length];
      const r = await this.admin(g, 'GET', `/accounts/${a.id}/statement?from=${from}&to=${to}`);
      if (!this.expectStatus(r, 200, `statement of ${a.id}`)) continue;
      const lines = (r.json.lines as Json[]).filter((l) => l.kind !== 'adjustment');
      const line = (l: Json) =>
        `${l.request_id} ${l.model} x${l.multiplier} ${l.prompt_tokens}+${l.completion_tokens}+${l.images}img billed ${l.billed} (${l.from_quota}/${l.from_extra})`;
      const got = lines.map(line);
      const want = this.model.calls
        .filter((c) => c.accountId === a.id && c.billed !== null)
        .map((c) =>
          line({
            request_id: c.requestId,
            model: c.model,
            multiplier: c.milli / 1000,
            prompt_tokens: c.promptTokens,
            completion_tokens: c.completionTokens,
            images: c.images,
            billed: c.billed,
            from_quota: c.fromQuota,
            from_extra: c.fromExtra,
          }),
        );
      this.expect(
        JSON.stringify(got) === JSON.stringify(want),
        () => `statement of ${a.id} on ${g.name}:\n      ${got.join('\n      ')}\n    the model:\n      ${want.join('\n      ')}`,
      );
    }
  }

  // ------------------------------------------------------------ the report

  /** The seed, the disagreements and the whole sequence up to the last step run. */
  report(): string {
    const lines = [
      `replica-random: seed ${this.o.seed}: ${this.disagreements.length} disagreement(s) in ${this.steps.length} steps on ${this.o.gateways.map((g) => g.name).join(',')}` +
        ` (replay: ${this.o.replay ?? `REPLICA_SEED=${this.o.seed} REPLICA_STEPS=${this.o.steps}${this.o.gateways.length === 3 ? ' REPLICA_GATEWAYS=3' : ''}`})`,
      ...this.disagreements.map((d) => `  DISAGREEMENT at step ${d.step} (${d.kind} on ${d.gateway}): ${d.message}`),
      '  the sequence:',
      ...this.steps.map((s) => `    #${String(s.i).padStart(3)} ${s.gateway} ${s.kind} ${s.args} -> ${s.answer}`),
    ];
    return lines.join('\n');
  }

  summary(): string {
    const served = this.model.calls.filter((c) => c.billed !== null).length;
    const kinds = new Map<string, number>();
    for (const s of this.steps) kinds.set(s.kind, (kinds.get(s.kind) ?? 0) + 1);
    return (
      `replica-random: seed ${this.o.seed}: ${this.steps.length} steps on ${this.o.gateways.map((g) => g.name).join(',')}, ` +
      `${this.disagreements.length} disagreements, ${this.model.calls.length} calls (${served} served), ${this.checkpoints} checkpoints, ${this.retries} retried 503s; ` +
      [...kinds].map(([k, n]) => `${k} ${n}`).join(', ')
    );
  }

  // ------------------------------------------------------------ calls

  /** A chat call, plain (fetch) or streamed (the official openai client), checked against the model and booked. */
  async chat(g: Replica, key: KeyModel, modelId: string, prompt: string, maxTokens: number, streamed: boolean, requestId: string): Promise<void> {
    const promptTokens = this.promptTokens.get(prompt)!;
    const e = expectCall(this.model, key, modelId, { kind: 'chat', promptTokens, maxTokens });
    const ups = this.o.upstreams;
    const before = { first: ups.first.requests.length, second: ups.second.requests.length };
    const body = { model: modelId, messages: [{ role: 'user', content: prompt }], max_tokens: maxTokens };
    let status: number;
    let code: string | null = null;
    let usage: Json | null = null;
    let billed: number | null = null;
    let remaining: number | null = null;
    let shown: string;
    if (streamed) {
      const client = new OpenAI({ apiKey: key.secret, baseURL: `${g.url}/v1`, maxRetries: 0, defaultHeaders: { 'x-request-id': requestId } });
      try {
        const stream = await client.chat.completions.create({
          ...body,
          messages: body.messages as OpenAI.ChatCompletionMessageParam[],
          stream: true,
          stream_options: { include_usage: true },
        });
        for await (const chunk of stream) if (chunk.usage) usage = chunk.usage as Json;
        status = 200;
        billed = usage ? Number(usage.billed_tokens) : null;
      } catch (err) {
        if (!(err instanceof OpenAI.APIError) || err.status === undefined) throw err;
        status = err.status;
        code = (err.code as string | null | undefined) ?? null;
      }
      shown = `gateway ${g.name} answered the stream ${status}${code ? ` ${code}` : ''}${usage ? ` usage ${JSON.stringify(usage)}` : ''}`;
      this.note(`${g.name} ${status}${code ? ` ${code}` : ''} (stream)`);
    } else {
      const r = await this.call(g, '/v1/chat/completions', { key: key.secret, body, headers: { 'x-request-id': requestId } });
      status = r.status;
      code = errorCode(r);
      if (status === 200) {
        usage = r.json.usage;
        billed = Number(r.headers.get('x-tollgate-billed-tokens'));
        remaining = Number(r.headers.get('x-tollgate-remaining-tokens'));
        this.expect(billed === Number(usage?.billed_tokens), () => `the billed header (${billed}) and usage.billed_tokens differ: ${r.show}`);
      }
      shown = r.show;
    }
    const served = { first: ups.first.requests.length - before.first, second: ups.second.requests.length - before.second };
    const what = `${streamed ? 'streamed ' : ''}chat ${requestId} with ${key.handle} on ${modelId}`;
    this.checkCallAnswer(e, status, code, what, shown);
    if (status === 200 && usage && billed !== null) {
      if (e.outcome === 'served') {
        const price = priced(Number(usage.prompt_tokens) + Number(usage.completion_tokens), e.milli);
        const want = billedFor(price, e);
        this.expect(
          billed === want,
          () =>
            `${what}: billed ${billed} for ${usage!.prompt_tokens}+${usage!.completion_tokens} tokens; at ${e.milli}/1000, capped at ${Math.min(e.accountAvailable, e.keyAvailable)}, that is ${want}: ${shown}`,
        );
        this.expect(
          Number(usage.completion_tokens) <= e.maxCompletion,
          () => `${what}: ${usage!.completion_tokens} completion tokens, past the ${e.maxCompletion} its hold covers: ${shown}`,
        );
        if (modelId !== TWO)
          this.expect(
            Number(usage.prompt_tokens) === promptTokens,
            () =>
              `${what}: the simulated upstream counted ${usage!.prompt_tokens} prompt tokens, the gateway's count is ${promptTokens} (the model's assumption)`,
          );
        if (remaining !== null)
          this.expect(
            remaining === e.accountAvailable - billed,
            () => `${what}: x-tollgate-remaining-tokens ${remaining}, the model has ${e.accountAvailable} - ${billed}: ${shown}`,
          );
        // The channel that must serve it gets the request (twice when a hold decided early on a
        // stale balance was overturned: the first request is stopped and the call made again), the other none.
        const ok =
          modelId === TWO
            ? e.channel === FIRST
              ? served.first >= 1 && served.second === 0
              : served.first === 0 && served.second >= 1
            : served.first + served.second === 0;
        this.expect(
          ok,
          () =>
            `${what}: the upstreams got ${FIRST} ${served.first}, ${SECOND} ${served.second}; the model has ${e.channel} serving it (${[...this.model.channels].map(([id, c]) => `${id} ${c.enabled ? 'on' : 'off'}`).join(', ')})`,
        );
        if (served.first + served.second > 1) this.note('(upstream asked twice: an early hold overturned)');
      }
      this.recordServed(
        key,
        modelId,
        requestId,
        'chat',
        billed,
        e.outcome === 'served' ? e.milli : this.model.catalog.get(modelId)!.milli,
        usage,
        e.outcome === 'served' ? e.channel : null,
      );
    } else {
      if (status === 200) this.disagree(`${what}: answered 200 without usage: ${shown}`);
      this.recordRefused(key, modelId, requestId, 'chat');
    }
  }

  async image(g: Replica, key: KeyModel, requestId: string): Promise<void> {
    const e = expectCall(this.model, key, IMAGE, { kind: 'image' });
    const before = this.o.upstreams.pics.requests.length;
    const r = await this.call(g, '/v1/images/generations', {
      key: key.secret,
      body: { model: IMAGE, prompt: 'a small blue square', size: '1024x1024' },
      headers: { 'x-request-id': requestId },
    });
    const what = `image ${requestId} with ${key.handle}`;
    this.checkCallAnswer(e, r.status, errorCode(r), what, r.show);
    if (r.status === 200) {
      const billed = Number(r.json.billed_tokens);
      if (e.outcome === 'served') {
        this.expect(
          billed === billedFor(priced(TOKENS_PER_IMAGE, e.milli), e),
          () => `${what}: billed ${billed}, at ${e.milli}/1000 an image is ${priced(TOKENS_PER_IMAGE, e.milli)}: ${r.show}`,
        );
        this.expect(
          this.o.upstreams.pics.requests.length - before === 1,
          () => `${what}: the image upstream got ${this.o.upstreams.pics.requests.length - before} requests`,
        );
      }
      this.recordServed(
        key,
        IMAGE,
        requestId,
        'image',
        billed,
        e.outcome === 'served' ? e.milli : this.model.catalog.get(IMAGE)!.milli,
        null,
        e.outcome === 'served' ? e.channel : null,
      );
    } else this.recordRefused(key, IMAGE, requestId, 'image');
  }

  private checkCallAnswer(e: CallExpectation, status: number, code: string | null, what: string, shown: string): void {
    if (e.outcome === 'refused')
      this.expect(
        status === e.status && (code === e.code || (e.or !== undefined && code === e.or)),
        () => `${what}: expected ${e.status} ${e.code}${e.or ? ` (or ${e.or})` : ''} (${e.why}), ${shown}`,
      );
    else if (e.outcome === 'no_channel')
      this.expect(
        status === 502 && code === 'upstream_error',
        () => `${what}: every channel of the model is disabled, expected 502 upstream_error (nothing charged), ${shown}`,
      );
    else
      this.expect(
        status === 200,
        () =>
          `${what}: expected 200 (the model has ${e.accountAvailable} tokens${Number.isFinite(e.keyAvailable) ? `, the key's limit leaves ${e.keyAvailable}` : ''}, a hold of ${e.hold}), ${shown}`,
      );
  }
}
