// Metering as a card hold: reserve an upper bound before the upstream call, then settle the
// actual usage or release the hold. The upstream's output is capped at what the hold covers.
import { randomUUID } from 'node:crypto';
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import {
  type AccountCommand,
  accountCommand,
  accountDecideEarly,
  accountDecider,
  type AccountState,
  accountState,
  accountStateChecked,
  availableTokens,
  balanceOf,
  isKeyExpired,
  isModelAllowedForKey,
  isModelEnabled,
  isPlanActive,
  keyAvailableTokens,
  keyExpired,
  keyLimitExceeded,
} from '../accounts/index.ts';
import { DomainError } from '../ledger/errors.ts';
import { definedOnly, type CachePrice, type ChatApi, type FailedChannel, type ReleaseReason, type UpstreamTrail } from '../ledger/events.ts';
import { chatCharge, imageCharge, DEFAULT_TOKENS_PER_IMAGE } from '../money/pricing.ts';
import { UpstreamError, type Usage } from '../upstream/port.ts';
import { isAbortError } from '../upstream/abort.ts';
import { rateStatus, type RateDecision } from '../ledger/call-rate.ts';
import { holdEventId } from '../ledger/event-ids.ts';
import { isDatabaseUnavailable } from '../eventstore/db.ts';
import { findEvent, type ReleaseRetry } from './release-retry.ts';
import { LEDGER_DEADLINE_MS, ledgerBudget, type LedgerBudget } from './ledger-deadline.ts';
import { DatabaseDeadlinePassed } from '../eventstore/errors.ts';
import type { KeyCaller } from '../http/caller.ts';

export interface Hold {
  holdId: string;
  accountId: string;
  amount: number;
  multiplierMilli: number;
  model: string;
  maxCompletionTokens: number;
  metadata: ReturnType<typeof metadataFor>;
  /** The model's cache weights when the hold was taken: the charge uses the same price. */
  cache: CachePrice;
  /** Where the account stands on its plan's call rate after this call (none without a rate). */
  rate: RateDecision | null;
  /**
   * Resolves once the hold is committed. A chat hold is handed out as soon as it is decided, so
   * the upstream call can start while the hold's append is in flight; the reply waits for this
   * (and fails if a concurrent process took the tokens first: the decision was overturned).
   */
  committed: Promise<void>;
  /** The call's shared bound on waiting for the ledger (every step below waits within it). */
  budget: LedgerBudget;
}

export const DEFAULT_MAX_COMPLETION_TOKENS = 8192;

/** Why a hold is released when its upstream call failed: the caller left, the request was refused, or the upstream failed. */
export function releaseReasonOf(err: unknown, clientLeft: boolean): 'client_aborted' | 'invalid_request' | 'upstream_error' {
  if (clientLeft || isAbortError(err)) return 'client_aborted';
  return err instanceof UpstreamError && err.kind === 'request' ? 'invalid_request' : 'upstream_error';
}

/** A refusal for want of tokens (the account's, or the key's limit): a chat hold may be re-sized on a fresher state. */
export const isResizable = (err: unknown): boolean => err instanceof DomainError && (err.code === 'insufficient_quota' || err.code === 'key_limit_exceeded');

/** The error of a call that could not be settled in the ledger: its hold is queued for release. */
export class LedgerUnreachable extends Error {
  constructor(cause: unknown) {
    super('the ledger could not be reached to settle the call', { cause });
    this.name = 'LedgerUnreachable';
  }
}

/** How often a chat hold is re-sized after concurrent calls won the race for the same tokens. */
const MAX_RESIZES = 100;

export function createMetering(
  ledger: Ledger,
  opts: {
    chatHoldTtlMs?: number;
    imageHoldTtlMs?: number;
    tokensPerImage?: number;
    /** This gateway process, named on its holds (its lease vouches for them). */
    process?: string;
    /** Where holds go that could not be released while the database was out of reach (none: the caller's error stands). */
    retry?: ReleaseRetry;
    /** A call's bound on waiting for the ledger, all its steps together (default LEDGER_DEADLINE_MS). */
    ledgerDeadlineMs?: number;
  } = {},
) {
  const deadlineMs = opts.ledgerDeadlineMs ?? LEDGER_DEADLINE_MS;
  /** Holds of the calls this process is running: the sweeper leaves them alone. */
  const inFlight = new Set<string>();
  const chatTtl = opts.chatHoldTtlMs ?? 15 * 60_000;
  const imageTtl = opts.imageHoldTtlMs ?? 5 * 60_000;
  const tokensPerImage = opts.tokensPerImage ?? DEFAULT_TOKENS_PER_IMAGE;
  const meta = (c: KeyCaller) => metadataFor(`key:${c.keyId}`, c.requestId);

  /** The account as the log has it now (confirmed: one indexed read when this process has it cached). */
  async function state(accountId: string): Promise<AccountState> {
    return accountState(ledger, accountId);
  }

  /**
   * Runs `check` on this process's cached copy of the account; a refusal is confirmed against the
   * log before it is answered (the check runs again on the log's state when another process wrote
   * the account meanwhile). Only a decision that an append checks anyway may pass on the cache.
   */
  async function onCurrentState<T>(accountId: string, check: (s: AccountState) => T, budget?: LedgerBudget): Promise<T> {
    const read = (cached: boolean) => accountStateChecked(ledger, accountId, { cached });
    const first = await (budget ? budget.wait(read(true)) : read(true));
    try {
      return check(first.state);
    } catch (err) {
      if (first.confirmed) throw err;
    }
    const current = await (budget ? budget.wait(read(false)) : read(false));
    return check(current.state);
  }

  function abandon(hold: Pick<Hold, 'holdId' | 'accountId' | 'metadata'>, reason: ReleaseReason, failovers: FailedChannel[], chargeMayHaveCommitted = false) {
    inFlight.delete(hold.holdId);
    opts.retry?.add({ holdId: hold.holdId, accountId: hold.accountId, metadata: hold.metadata, reason, failovers, chargeMayHaveCommitted });
  }

  /**
   * Commits a hold's charge, with deterministic event ids. When the commit fails with the
   * database's connection its outcome is unknown: the log is read for the charge's id (found: it
   * committed), and only then is the charge sent again, all within the call's ledger bound. Past
   * it, the call fails with LedgerUnreachable and its hold is queued for the release retry, which
   * reads the log first and voids a charge that committed after all (the caller got an error).
   */
  async function charge(hold: Hold, command: Extract<AccountCommand, { type: 'SettleChat' | 'SettleImage' }>) {
    const chargeId = holdEventId(hold.holdId, 'charge');
    // The moment the call is answered without its charge: the charge must not commit after it.
    const notAfter = Date.now() + hold.budget.leftMs;
    const billingOf = (billed: number, remaining: number, position: number) => ({ billed, remaining, position });
    const resolve = async () => {
      for (let wait = 100; ; wait = Math.min(wait * 2, 1000)) {
        try {
          // Withdrawn, not appended, once the call has been answered: its hold then gets a plain release.
          const r = await accountCommand(ledger, hold.accountId, command, hold.metadata, (_e, i) => holdEventId(hold.holdId, 'charge', i), {
            gone: () => hold.budget.expired,
            notAfter,
          });
          return billingOf((r.events[0].data as { billed: number }).billed, availableTokens(r.state, new Date()), r.lastPosition);
        } catch (err) {
          if (!isDatabaseUnavailable(err)) throw err;
          // Read the log before anything is sent again; retry the read while the database is away.
          // Once the call gave up, nothing more is sent: the release retry owns the hold.
          for (;;) {
            await new Promise((r) => setTimeout(r, wait));
            if (hold.budget.expired) throw err;
            try {
              const found = await findEvent(ledger, hold.accountId, chargeId);
              if (!found) break;
              const remaining = await state(hold.accountId).then(
                (s) => availableTokens(s, new Date()),
                () => 0,
              );
              return billingOf((found.data as { billed: number }).billed, remaining, found.position);
            } catch (readErr) {
              if (!isDatabaseUnavailable(readErr)) throw readErr;
            }
          }
          if (hold.budget.expired) throw err;
        }
      }
    };
    try {
      return await hold.budget.wait(resolve(), () => abandon(hold, 'other', [], true));
    } catch (err) {
      throw err instanceof DatabaseDeadlinePassed ? new LedgerUnreachable(err) : err;
    } finally {
      inFlight.delete(hold.holdId);
    }
  }

  function chatHoldSize(s: AccountState, keyId: string, promptTokens: number, requestedMax: number | undefined, milli: number, cache: CachePrice) {
    const now = new Date();
    // What the account may spend, and what the key's own limit leaves of it.
    const accountAvailable = availableTokens(s, now);
    const keyAvailable = keyAvailableTokens(s, keyId, now);
    const available = Math.min(accountAvailable, keyAvailable);
    // The upper bound: every prompt token at the dearest of its possible weights (plain, cache read, cache write).
    const w = Math.max(1000, cache.cacheReadMilli ?? 1000, cache.cacheWriteMilli ?? 1000);
    const bound = (completion: number) => chatCharge(promptTokens, completion, milli, { cacheWriteTokens: promptTokens }, { readMilli: w, writeMilli: w });
    let maxCompletion = requestedMax ?? DEFAULT_MAX_COMPLETION_TOKENS;
    if (bound(maxCompletion) > available) maxCompletion = Math.floor((Math.floor((available * 1_000_000) / milli) - promptTokens * w) / 1000);
    if (maxCompletion < 1) {
      if (keyAvailable < accountAvailable) throw keyLimitExceeded(s, keyId, now, bound(1));
      throw new DomainError('insufficient_quota', 'insufficient quota', {
        available,
        needed: bound(1),
        planActive: isPlanActive(balanceOf(s), new Date()),
      });
    }
    return { maxCompletion, amount: bound(maxCompletion) };
  }

  /**
   * Takes a hold. `early`: answered as soon as the hold is decided (its `committed` tells the
   * rest); otherwise once it is committed, so a hold a concurrent process overturns is re-sized
   * here like one refused at once.
   */
  async function reserve(
    caller: KeyCaller,
    model: string,
    kind: 'chat' | 'image',
    size: (s: AccountState) => { amount: number; maxCompletion: number },
    milli: number,
    early: boolean,
    cache: CachePrice = {},
  ): Promise<Hold> {
    const budget = ledgerBudget(deadlineMs);
    for (let attempt = 0; ; attempt++) {
      const { amount, maxCompletion } = await onCurrentState(
        caller.accountId,
        (s) => {
          if (!s.opened) throw new DomainError('not_found', 'account not found');
          if (!isModelEnabled(s, model) || !isModelAllowedForKey(s, caller.keyId, model))
            throw new DomainError('model_not_enabled', `model ${model} is not enabled`, { model });
          if (isKeyExpired(s, caller.keyId, new Date())) throw keyExpired(s, caller.keyId);
          return size(s);
        },
        budget,
      );
      const holdId = randomUUID();
      const md = meta(caller);
      inFlight.add(holdId);
      try {
        const now = new Date();
        const command = {
          type: 'Reserve' as const,
          holdId,
          requestId: caller.requestId,
          keyId: caller.keyId,
          model,
          kind,
          amount,
          now,
          ttlMs: kind === 'chat' ? chatTtl : imageTtl,
          process: opts.process,
        };
        // An early hold may linger for its charge (a fast reply): then both share one append.
        // Withdrawn, not appended, if the call has been answered (its ledger bound passed) before the hold is sent.
        const gone = () => budget.expired;
        const { decided, committed } = accountDecideEarly(ledger, caller.accountId, command, md, { linger: early, gone });
        // A refusal rejects `decided` (handled below) and `committed` alike; only one is awaited here.
        const held = committed.then(() => undefined);
        // A hold whose append failed with the connection may have committed: it is released once
        // the database answers (a release of a hold never committed is refused, and nothing happens).
        held.catch((err: unknown) => {
          if (isDatabaseUnavailable(err)) abandon({ holdId, accountId: caller.accountId, metadata: md }, 'other', []);
          else inFlight.delete(holdId);
        });
        // Given up while the hold's append is in flight: released if it commits after all.
        const late = () =>
          void held.then(
            () => abandon({ holdId, accountId: caller.accountId, metadata: md }, 'other', []),
            () => undefined,
          );
        const { state: after } = await budget.wait(decided, late);
        if (!early) await budget.wait(held, late);
        const perMinute = after.subscription?.requestsPerMinute;
        const rate = perMinute && after.rateTat !== undefined ? rateStatus(after.rateTat, perMinute, now.getTime()) : null;
        return {
          holdId,
          accountId: caller.accountId,
          amount,
          multiplierMilli: milli,
          model,
          maxCompletionTokens: maxCompletion,
          metadata: md,
          rate,
          committed: held,
          cache,
          budget,
        };
      } catch (err) {
        inFlight.delete(holdId);
        // A concurrent call took tokens between sizing this hold and granting it: size it again on
        // the newer state. Each refusal means another hold was granted, so this ends; a call is
        // turned away only when the fresh state cannot cover it (size() throws). An image hold
        // has a fixed size, so its refusal is final.
        if (!isResizable(err) || attempt >= MAX_RESIZES || kind === 'image') throw err;
      }
    }
  }

  return {
    /**
     * Refuses, before any work is spent on the prompt (counting a large one holds the event loop),
     * a chat call its account would refuse whatever the prompt: the account decider's own checks
     * (suspension, model, key expiry, call rate, quota, key limit) on the smallest hold, decided
     * on the cached state and appended nowhere. The hold itself is decided again, exactly.
     */
    async refuseEarly(caller: KeyCaller, model: string, price: { multiplierMilli: number }): Promise<void> {
      const smallest = Math.max(1, chatCharge(0, 1, price.multiplierMilli));
      const probe = { type: 'Reserve' as const, holdId: '', requestId: caller.requestId, keyId: caller.keyId, model, kind: 'chat' as const };
      await onCurrentState(caller.accountId, (s) => accountDecider.decide({ ...probe, amount: smallest, now: new Date(), ttlMs: chatTtl }, s));
    },
    reserveChat(
      caller: KeyCaller,
      model: string,
      price: { multiplierMilli: number } & CachePrice,
      promptTokens: number,
      requestedMax: number | undefined,
      opts: { early: boolean },
    ): Promise<Hold> {
      const cache = definedOnly({ cacheReadMilli: price.cacheReadMilli, cacheWriteMilli: price.cacheWriteMilli });
      return reserve(
        caller,
        model,
        'chat',
        (s) => chatHoldSize(s, caller.keyId, promptTokens, requestedMax, price.multiplierMilli, cache),
        price.multiplierMilli,
        opts.early,
        cache,
      );
    },
    reserveImage(caller: KeyCaller, model: string, milli: number): Promise<Hold> {
      // An image call takes seconds: nothing to gain from starting it before its hold commits.
      return reserve(caller, model, 'image', () => ({ amount: imageCharge(milli, 1, tokensPerImage), maxCompletion: 0 }), milli, false);
    },
    /** Charges what the upstream reported (cached, cache-written and reasoning counts kept), at the hold's price. */
    async settleChat(
      hold: Hold,
      usage: Usage,
      extra: { reasoningEffort: string | null; api: ChatApi; streamed: boolean; aborted: boolean; trail?: UpstreamTrail },
    ) {
      const { trail, ...flags } = extra;
      const detail = definedOnly({
        cachedTokens: usage.cached_tokens,
        cacheWriteTokens: usage.cache_write_tokens,
        cacheWrite1hTokens: usage.cache_write_1h_tokens,
        reasoningTokens: usage.reasoning_tokens,
      });
      const r = await charge(hold, {
        type: 'SettleChat',
        holdId: hold.holdId,
        multiplierMilli: hold.multiplierMilli,
        promptTokens: usage.prompt_tokens,
        completionTokens: usage.completion_tokens,
        ...flags,
        ...detail,
        ...hold.cache,
        ...trail,
      });
      return r;
    },
    async settleImage(hold: Hold, detail: { size: string; edit: boolean }, trail: UpstreamTrail = {}) {
      return charge(hold, { type: 'SettleImage', holdId: hold.holdId, multiplierMilli: hold.multiplierMilli, images: 1, tokensPerImage, ...detail, ...trail });
    },
    async release(hold: Hold, reason: ReleaseReason, failovers: FailedChannel[] = []) {
      // A hold whose decision was overturned before it committed holds nothing to release.
      try {
        const committed = await hold.budget.wait(
          hold.committed.then(
            () => true,
            () => false,
          ),
        );
        if (!committed) return;
        await hold.budget.wait(
          accountCommand(ledger, hold.accountId, { type: 'Release', holdId: hold.holdId, reason, failovers }, hold.metadata, (_e, i) =>
            holdEventId(hold.holdId, 'release', i),
          ),
        );
      } catch (err) {
        // The database is out of reach: released when it is back; the call's own failure stands.
        if (!isDatabaseUnavailable(err) || !opts.retry) throw err;
        abandon(hold, reason, failovers);
        return;
      } finally {
        inFlight.delete(hold.holdId);
      }
    },
    /** A call that ends without settling its hold because the ledger is out of reach: released later. */
    abandon: (hold: Hold, reason: ReleaseReason = 'other') => abandon(hold, reason, []),
    /** Whether this process still runs the call of this hold (or still has to release it). */
    isInFlight: (holdId: string) => inFlight.has(holdId) || (opts.retry?.has(holdId) ?? false),
    /** What the account has left as of this call's own hold: its append left the cached copy current. */
    async remaining(accountId: string): Promise<number> {
      return availableTokens(await accountState(ledger, accountId, { cached: true }), new Date());
    },
    state,
    onCurrentState,
    tokensPerImage,
  };
}

export type Metering = ReturnType<typeof createMetering>;
