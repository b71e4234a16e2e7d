// The audit of a stress run: what the clients saw, correlated by request id with what the ledger
// recorded. Pure (records + events in, figures + violations out) so its own test can feed it
// broken ledgers and prove every rule can fail (test/stress/audit-selftest.ts).
import type { StoredEvent } from '../../../src/eventstore/port.ts';
import { chatCharge, DEFAULT_TOKENS_PER_IMAGE, imageCharge } from '../../../src/money/pricing.ts';
import type { CallRecord } from './load.ts';

export interface AuditOptions {
  /** Only these accounts' events are audited (others belong to nobody in this run). */
  accounts: Set<string>;
  /**
   * After the final sweep: no hold may be open, and holds of calls cut by a crash must have been
   * released as expired. Before it, a hold may stay open only for a call cut by a crash.
   */
  final: boolean;
}

export interface AuditFigures {
  calls: number;
  succeeded: number;
  failed: number;
  /** Failed calls by outcome (and HTTP status / error code). */
  failures: Record<string, number>;
  chargesChecked: number;
  /** Billed tokens a client received a complete reply for and the ledger did not charge. */
  tokensLost: number;
  /** Billed tokens charged more than once for one call, or above what the client was told it used. */
  tokensDoubleCharged: number;
  /** Calls the crash cut (no complete reply) that the ledger charged: the charge committed, the reply was lost. */
  chargedButUndelivered: number;
  /** Content chunks streamed to clients by calls a crash cut and that were not charged (released on expiry). */
  uncharged_stream_chunks: number;
  openHolds: number;
  holdsExpired: number;
  /** Released by a sweeper after the lease of the process that took them lapsed (it was killed). */
  holdsOfLostProcesses: number;
  holdsReleased: number;
}

export interface AuditResult {
  figures: AuditFigures;
  violations: string[];
}

type Ev = StoredEvent<Record<string, any>>;

export function auditRun(records: CallRecord[], events: StoredEvent[], opts: AuditOptions): AuditResult {
  const violations: string[] = [];
  const violate = (msg: string) => {
    if (violations.length < 200) violations.push(msg);
  };

  // Prices (with aliases) from the ledger itself, for calls the ledger has no charge for.
  const milliOf = new Map<string, number>();
  const charges = new Map<string, Ev[]>();
  const reservations = new Map<string, Ev>();
  const terminals = new Map<string, Ev[]>();
  for (const e of events as Ev[]) {
    if (e.type === 'ModelPriced') {
      milliOf.set(e.data.modelId, e.data.multiplierMilli);
      if (e.data.alias) milliOf.set(e.data.alias, e.data.multiplierMilli);
      continue;
    }
    if (!opts.accounts.has(e.data.accountId)) continue;
    if (e.type === 'QuotaReserved') {
      if (reservations.has(e.data.holdId)) violate(`hold ${e.data.holdId} reserved twice`);
      reservations.set(e.data.holdId, e);
    } else if (e.type === 'ChatCharged' || e.type === 'ImageCharged') {
      push(charges, e.data.requestId, e);
      push(terminals, e.data.holdId, e);
    } else if (e.type === 'ReservationReleased') {
      push(terminals, e.data.holdId, e);
    }
  }

  const byRequest = new Map<string, CallRecord>();
  for (const r of records) {
    if (byRequest.has(r.requestId)) violate(`request id ${r.requestId} used twice by the client`);
    byRequest.set(r.requestId, r);
  }

  const figures: AuditFigures = {
    calls: records.length,
    succeeded: 0,
    failed: 0,
    failures: {},
    chargesChecked: 0,
    tokensLost: 0,
    tokensDoubleCharged: 0,
    chargedButUndelivered: 0,
    uncharged_stream_chunks: 0,
    openHolds: 0,
    holdsExpired: 0,
    holdsOfLostProcesses: 0,
    holdsReleased: 0,
  };

  // Calls sent again with the same Idempotency-Key are one logical call: one charge at most.
  const groups = new Map<string, CallRecord[]>();
  for (const r of records) if (r.idempotencyKey) push(groups, r.idempotencyKey, r);
  for (const [key, rs] of groups) {
    // (Several charges of one attempt are counted below, per request.)
    const charged = rs.map((r) => charges.get(r.requestId)?.[0]).filter((c): c is Ev => !!c);
    if (charged.length > 1) {
      figures.tokensDoubleCharged += charged.slice(1).reduce((n, c) => n + c.data.billed, 0);
      violate(`Idempotency-Key ${key}: ${charged.length} of its ${rs.length} attempts were charged`);
    }
  }

  for (const r of records) {
    const cs = charges.get(r.requestId) ?? [];
    if (r.replayed) {
      // A replay runs nothing: no charge of its own, and the first attempt's charge stands for it.
      figures.succeeded += r.outcome === 'ok' ? 1 : 0;
      if (r.outcome !== 'ok') {
        figures.failed++;
        figures.failures['replay ' + r.outcome] = (figures.failures['replay ' + r.outcome] ?? 0) + 1;
      }
      if (cs.length) violate(`${r.requestId} was a replay and was charged`);
      const first = groups
        .get(r.idempotencyKey!)!
        .filter((x) => !x.replayed)
        .flatMap((x) => charges.get(x.requestId) ?? []);
      if (r.outcome === 'ok' && first.length !== 1) violate(`${r.requestId} replayed a reply whose call has ${first.length} charges`);
      continue;
    }
    figures.chargesChecked += cs.length;
    if (cs.length > 1) {
      figures.tokensDoubleCharged += cs.slice(1).reduce((n, c) => n + c.data.billed, 0);
      violate(`${r.requestId} (${r.kind}, ${r.outcome}) charged ${cs.length} times`);
    }
    const c = cs[0];
    if (r.outcome === 'ok') {
      figures.succeeded++;
      const milli = c?.data.multiplierMilli ?? milliOf.get(r.model) ?? 1000;
      if (r.kind === 'image') {
        const expected = imageCharge(milli, 1, c?.data.tokensPerImage ?? DEFAULT_TOKENS_PER_IMAGE);
        if (!c) {
          figures.tokensLost += expected;
          violate(`${r.requestId} image delivered, not charged`);
          continue;
        }
        if (c.type !== 'ImageCharged' || c.data.images !== 1) violate(`${r.requestId} image charged as ${c.type} images=${c.data.images}`);
        if (r.billedHeader !== undefined && r.billedHeader !== c.data.billed)
          violate(`${r.requestId} told ${r.billedHeader} billed, ledger says ${c.data.billed}`);
        if (c.data.billed < expected) figures.tokensLost += expected - c.data.billed;
        if (c.data.billed > expected) figures.tokensDoubleCharged += c.data.billed - expected;
      } else {
        const u = r.usage!;
        const expected = chatCharge(u.prompt, u.completion, milli);
        if (!c) {
          figures.tokensLost += expected;
          violate(`${r.requestId} ${r.kind} delivered (${u.prompt}+${u.completion} tokens), not charged`);
          continue;
        }
        if (c.type !== 'ChatCharged') {
          violate(`${r.requestId} chat charged as ${c.type}`);
          continue;
        }
        if (c.data.streamed !== (r.kind === 'stream') || c.data.aborted)
          violate(`${r.requestId} charge says streamed=${c.data.streamed} aborted=${c.data.aborted}`);
        if (c.data.promptTokens !== u.prompt || c.data.completionTokens !== u.completion) {
          violate(`${r.requestId} client saw ${u.prompt}+${u.completion} tokens, charged ${c.data.promptTokens}+${c.data.completionTokens}`);
        }
        if (r.billedHeader !== undefined && r.billedHeader !== c.data.billed)
          violate(`${r.requestId} told ${r.billedHeader} billed, ledger says ${c.data.billed}`);
        if (c.data.billed < expected) figures.tokensLost += expected - c.data.billed;
        if (c.data.billed > expected) figures.tokensDoubleCharged += c.data.billed - expected;
      }
      continue;
    }

    figures.failed++;
    const label = r.outcome === 'http_error' ? `http ${r.status} ${r.errorCode ?? ''}`.trim() : r.outcome;
    figures.failures[label] = (figures.failures[label] ?? 0) + 1;
    if (r.outcome === 'http_error' || r.outcome === 'stream_error') {
      // The gateway answered: it knew the call failed, so nothing may be charged.
      if (c) violate(`${r.requestId} failed with ${label} and was charged ${c.data.billed}`);
    } else if (r.outcome === 'conn_error' || r.outcome === 'cut') {
      // The crash cut the call. The charge is committed before the reply is sent, so a crash
      // between the two leaves a charge for a reply the client never got; otherwise the hold is
      // left open and must expire.
      if (c) {
        figures.chargedButUndelivered++;
        if (c.data.aborted) violate(`${r.requestId} cut by a crash but charged as a client abort`);
      } else if (r.kind === 'stream') {
        figures.uncharged_stream_chunks += r.chunks ?? 0;
      }
    } else if (r.outcome === 'timeout') {
      // The client left: a stream may be charged for what it streamed (documented), nothing else.
      if (c && !(r.kind === 'stream' && c.data.aborted)) violate(`${r.requestId} timed out on the client and was charged ${c.data.billed}`);
    }
  }

  for (const [requestId, cs] of charges) {
    if (!byRequest.has(requestId)) violate(`charge for request ${requestId} that no client sent (${cs.length} event(s))`);
  }

  for (const [holdId, res] of reservations) {
    const ends = terminals.get(holdId) ?? [];
    const r = byRequest.get(res.data.requestId);
    if (!r) violate(`hold ${holdId} for request ${res.data.requestId} that no client sent`);
    if (ends.length > 1) violate(`hold ${holdId} (${res.data.requestId}) settled/released ${ends.length} times: ${ends.map((e) => e.type).join(', ')}`);
    if (ends.length === 0) {
      figures.openHolds++;
      if (opts.final) violate(`hold ${holdId} (${res.data.requestId}) still open after the final sweep`);
      else if (r && !(r.outcome === 'conn_error' || r.outcome === 'cut'))
        violate(`hold ${holdId} open although its call ended with ${r.outcome} ${r.status ?? ''}`);
      continue;
    }
    const end = ends[0];
    if (end.type === 'ReservationReleased') {
      if (end.data.reason === 'expired') {
        figures.holdsExpired++;
        if (r && !(r.outcome === 'conn_error' || r.outcome === 'cut')) violate(`hold ${holdId} expired although its call ended with ${r.outcome}`);
      } else if (end.data.reason === 'process_lost') {
        figures.holdsOfLostProcesses++;
        if (r && !(r.outcome === 'conn_error' || r.outcome === 'cut'))
          violate(`hold ${holdId} released as its process's lease lapsed although its call ended with ${r.outcome}`);
      } else figures.holdsReleased++;
      if (r?.outcome === 'ok') violate(`hold ${holdId} of a delivered call was released (${end.data.reason}), not charged`);
    }
  }
  for (const [holdId] of terminals) if (!reservations.has(holdId)) violate(`settle/release of hold ${holdId} that was never reserved`);

  return { figures, violations };
}

/** The account read model must equal the fold of the account's events (open holds included). */
export function auditAccountRows(
  rows: Array<{ account_id: string; quota_used: number; extra_used: number; reserved: number; open_holds: number }>,
  events: StoredEvent[],
): string[] {
  const out: string[] = [];
  for (const row of rows) {
    let quotaUsed = 0;
    let extraUsed = 0;
    const holds = new Map<string, number>();
    for (const e of events as Ev[]) {
      if (e.data.accountId !== row.account_id) continue;
      if (e.type === 'QuotaReserved') holds.set(e.data.holdId, e.data.amount);
      else if (e.type === 'ChatCharged' || e.type === 'ImageCharged') {
        quotaUsed += e.data.fromQuota;
        extraUsed += e.data.fromExtra;
        holds.delete(e.data.holdId);
      } else if (e.type === 'ReservationReleased') holds.delete(e.data.holdId);
      else if (e.type === 'SubscriptionRenewed') quotaUsed = 0;
      else if (e.type === 'ChargeAdjusted') {
        quotaUsed += e.data.quotaDelta;
        extraUsed += e.data.extraDelta;
      }
    }
    const reserved = [...holds.values()].reduce((a, b) => a + b, 0);
    const want = { quota_used: quotaUsed, extra_used: extraUsed, reserved, open_holds: holds.size };
    const got = { quota_used: Number(row.quota_used), extra_used: Number(row.extra_used), reserved: Number(row.reserved), open_holds: Number(row.open_holds) };
    if (JSON.stringify(want) !== JSON.stringify(got))
      out.push(`account ${row.account_id}: read model ${JSON.stringify(got)} but events say ${JSON.stringify(want)}`);
  }
  return out;
}

function push<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const list = m.get(k);
  if (list) list.push(v);
  else m.set(k, [v]);
}
