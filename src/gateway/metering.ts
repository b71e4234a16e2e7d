// Metering as a card hold: reserve an upper bound before the upstream call, then settle the
// actual usage or release the hold. The upstream's output is capped at what the hold covers.
import { randomUUID } from 'node:crypto';
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { availableTokens, isModelEnabled, type AccountState } from '../ledger/account.ts';
import { DomainError } from '../ledger/errors.ts';
import type { ChatApi, ReleaseReason } from '../ledger/events.ts';
import { chatCharge, imageCharge, rawTokensCoveredBy, DEFAULT_TOKENS_PER_IMAGE } from '../ledger/pricing.ts';
import { rateStatus, type RateDecision } from '../ledger/call-rate.ts';

export interface Caller { keyId: string; accountId: string; requestId: string }

export interface Hold {
  holdId: string; accountId: string; amount: number; multiplierMilli: number; model: string; maxCompletionTokens: number; metadata: ReturnType<typeof metadataFor>;
  /** Where the account stands on its plan's call rate after this call (none without a rate). */
  rate: RateDecision | null;
  /**
   * Resolves once the hold is committed. A chat hold is handed out as soon as it is decided, so
   * the upstream call can start while the hold's append is in flight; the reply waits for this
   * (and fails if a concurrent process took the tokens first: the decision was overturned).
   */
  committed: Promise<void>;
}

export const DEFAULT_MAX_COMPLETION_TOKENS = 8192;

/** How often a chat hold is re-sized after concurrent calls won the race for the same tokens. */
const MAX_RESIZES = 100;

export function createMetering(ledger: Ledger, opts: { chatHoldTtlMs?: number; imageHoldTtlMs?: number; tokensPerImage?: number; onAppended?: (position: number) => void } = {}) {
  const chatTtl = opts.chatHoldTtlMs ?? 15 * 60_000;
  const imageTtl = opts.imageHoldTtlMs ?? 5 * 60_000;
  const tokensPerImage = opts.tokensPerImage ?? DEFAULT_TOKENS_PER_IMAGE;
  const meta = (c: Caller) => metadataFor(`key:${c.keyId}`, c.requestId);

  async function state(accountId: string): Promise<AccountState> {
    return ledger.accountState(accountId);
  }

  function chatHoldSize(s: AccountState, promptTokens: number, requestedMax: number | undefined, milli: number) {
    const available = availableTokens(s, new Date());
    let maxCompletion = requestedMax ?? DEFAULT_MAX_COMPLETION_TOKENS;
    if (chatCharge(promptTokens, maxCompletion, milli) > available) maxCompletion = rawTokensCoveredBy(available, milli) - promptTokens;
    if (maxCompletion < 1) {
      throw new DomainError('insufficient_quota', 'insufficient quota', {
        available, needed: chatCharge(promptTokens, 1, milli), planActive: s.subscription ? Date.parse(s.subscription.expiresAt) > Date.now() : false,
      });
    }
    return { maxCompletion, amount: chatCharge(promptTokens, maxCompletion, milli) };
  }

  /**
   * Takes a hold. `early`: answered as soon as the hold is decided (its `committed` tells the
   * rest); otherwise once it is committed, so a hold a concurrent process overturns is re-sized
   * here like one refused at once.
   */
  async function reserve(caller: Caller, model: string, kind: 'chat' | 'image', size: (s: AccountState) => { amount: number; maxCompletion: number }, milli: number, early: boolean): Promise<Hold> {
    for (let attempt = 0; ; attempt++) {
      const s = await state(caller.accountId);
      if (!s.opened) throw new DomainError('not_found', 'account not found');
      if (!isModelEnabled(s, model)) throw new DomainError('model_not_enabled', `model ${model} is not enabled`, { model });
      const { amount, maxCompletion } = size(s);
      const holdId = randomUUID();
      const md = meta(caller);
      try {
        const now = new Date();
        const command = { type: 'Reserve' as const, holdId, requestId: caller.requestId, keyId: caller.keyId, model, kind, amount, now, ttlMs: kind === 'chat' ? chatTtl : imageTtl };
        const { decided, committed } = ledger.accountDecideEarly(caller.accountId, command, md);
        // A refusal rejects `decided` (handled below) and `committed` alike; only one is awaited here.
        const held = committed.then(() => undefined);
        held.catch(() => undefined);
        const { state: after } = await decided;
        if (!early) await held;
        const perMinute = after.subscription?.requestsPerMinute;
        const rate = perMinute && after.rateTat !== undefined ? rateStatus(after.rateTat, perMinute, now.getTime()) : null;
        return { holdId, accountId: caller.accountId, amount, multiplierMilli: milli, model, maxCompletionTokens: maxCompletion, metadata: md, rate, committed: held };
      } catch (err) {
        // A concurrent call took tokens between sizing this hold and granting it: size it again on
        // the newer state. Each refusal means another hold was granted, so this ends; a call is
        // turned away only when the fresh state cannot cover it (size() throws). An image hold
        // has a fixed size, so its refusal is final.
        if (!(err instanceof DomainError && err.code === 'insufficient_quota') || attempt >= MAX_RESIZES || kind === 'image') throw err;
      }
    }
  }

  return {
    reserveChat(caller: Caller, model: string, milli: number, promptTokens: number, requestedMax: number | undefined, opts: { early: boolean }): Promise<Hold> {
      return reserve(caller, model, 'chat', (s) => chatHoldSize(s, promptTokens, requestedMax, milli), milli, opts.early);
    },
    reserveImage(caller: Caller, model: string, milli: number): Promise<Hold> {
      // An image call takes seconds: nothing to gain from starting it before its hold commits.
      return reserve(caller, model, 'image', () => ({ amount: imageCharge(milli, 1, tokensPerImage), maxCompletion: 0 }), milli, false);
    },
    async settleChat(hold: Hold, usage: { promptTokens: number; completionTokens: number }, extra: { reasoningEffort: string | null; api: ChatApi; streamed: boolean; aborted: boolean }) {
      const r = await ledger.account(hold.accountId, { type: 'SettleChat', holdId: hold.holdId, multiplierMilli: hold.multiplierMilli, promptTokens: usage.promptTokens, completionTokens: usage.completionTokens, ...extra }, hold.metadata);
      return { billed: (r.events[0].data as { billed: number }).billed, remaining: availableTokens(r.state, new Date()), position: r.lastPosition };
    },
    async settleImage(hold: Hold, detail: { size: string; edit: boolean }) {
      const r = await ledger.account(hold.accountId, { type: 'SettleImage', holdId: hold.holdId, multiplierMilli: hold.multiplierMilli, images: 1, tokensPerImage, ...detail }, hold.metadata);
      return { billed: (r.events[0].data as { billed: number }).billed, remaining: availableTokens(r.state, new Date()), position: r.lastPosition };
    },
    async release(hold: Hold, reason: ReleaseReason) {
      // A hold whose decision was overturned before it committed holds nothing to release.
      if (!(await hold.committed.then(() => true, () => false))) return;
      const r = await ledger.account(hold.accountId, { type: 'Release', holdId: hold.holdId, reason }, hold.metadata);
      // Reads that follow (subscription) must not show the released hold as still reserved.
      opts.onAppended?.(r.lastPosition);
    },
    async remaining(accountId: string): Promise<number> {
      return availableTokens(await state(accountId), new Date());
    },
    state,
    tokensPerImage,
  };
}

export type Metering = ReturnType<typeof createMetering>;
