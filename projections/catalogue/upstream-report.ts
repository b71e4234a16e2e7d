// Upstream reconciliation: what Tollgate sent to each upstream channel per UTC day and upstream
// model, to hold against the provider's own usage export. One row per (day, channel, upstream
// model). Every attempt on a channel counts: the one that answered a charge, and each failed one
// the charge or release lists in `failovers`. Token counts are as the upstream reported them;
// `billed` is what customers were charged for the calls that channel answered.
import type { Queryable } from '../../src/eventstore/db.ts';
import type { ProjectedEvent } from '../../src/eventstore/port.ts';
import type { EventDataByType, FailedChannel } from '../../src/ledger/events.ts';
import { q } from '../runner/sql.ts';
import { dayOf, defineProjection, type Row } from '../runner/row-projection.ts';

/** The channel (or upstream model) of a charge from before charges recorded it. */
export const UNRECORDED = '(unrecorded)';

export interface UpstreamDailyRow extends Row {
  day: string;
  channel: string;
  upstream_model: string;
  /** Attempts on the channel: answered (charged) plus failed. */
  calls: number;
  /** Attempts that failed (the call then went to the next channel, or ended if none was left). */
  failures: number;
  /** Failed attempts after which the call went on to another channel. */
  failovers: number;
  /** All prompt tokens (cached and cache-written included), as the upstream reported them. */
  prompt_tokens: number;
  cached_tokens: number;
  cache_write_tokens: number;
  /** All completion tokens (reasoning included). */
  completion_tokens: number;
  reasoning_tokens: number;
  images: number;
  /** Tokens billed to customers for the calls this channel answered (before later corrections). */
  billed: number;
}

/** The numeric columns, in report order. */
export const UPSTREAM_COUNTS = [
  'calls',
  'failures',
  'failovers',
  'prompt_tokens',
  'cached_tokens',
  'cache_write_tokens',
  'completion_tokens',
  'reasoning_tokens',
  'images',
  'billed',
] as const;
export type UpstreamCount = (typeof UPSTREAM_COUNTS)[number];

/** One attempt of one call, as an event records it. */
interface Attempt {
  key: string;
  day: string;
  channel: string;
  upstreamModel: string;
  /** The charge, when this attempt answered the call. */
  charge: Partial<EventDataByType['ChatCharged'] & EventDataByType['ImageCharged']> | null;
  failover: boolean;
}

// JSON keeps the key unambiguous: channel ids and model names may hold any character.
const keyOf = (day: string, channel: string, upstreamModel: string) => JSON.stringify([day, channel, upstreamModel]);

function attempt(day: string, channel: string | undefined, upstreamModel: string | undefined, charge: Attempt['charge'], failover: boolean): Attempt {
  const c = channel || UNRECORDED;
  const m = upstreamModel || UNRECORDED;
  return { key: keyOf(day, c, m), day, channel: c, upstreamModel: m, charge, failover };
}

function attemptsOf(e: ProjectedEvent): Attempt[] {
  const day = dayOf(e.timestamp);
  const failed = (e.data.failovers as FailedChannel[] | undefined) ?? [];
  if (e.type === 'ReservationReleased') {
    // Every channel failed: the last failure ended the call, the ones before moved it on. A call
    // ended otherwise (the client left, a later channel refused the request itself) had moved on
    // after each failure it lists; the attempt that ended it is not among them.
    const ended = (e.data as unknown as EventDataByType['ReservationReleased']).reason === 'upstream_error';
    return failed.map((f, i) => attempt(day, f.channel, f.upstreamModel, null, !(ended && i === failed.length - 1)));
  }
  const d = e.data as Attempt['charge'] & object;
  return [...failed.map((f) => attempt(day, f.channel, f.upstreamModel, null, true)), attempt(day, d.channel, d.upstreamModel, d, false)];
}

export const upstreamDaily = defineProjection<UpstreamDailyRow>({
  name: 'upstream_daily',
  table: 'upstream_daily',
  columns: `day text NOT NULL, channel text NOT NULL, upstream_model text NOT NULL, calls bigint NOT NULL,
    failures bigint NOT NULL, failovers bigint NOT NULL, prompt_tokens bigint NOT NULL, cached_tokens bigint NOT NULL,
    cache_write_tokens bigint NOT NULL, completion_tokens bigint NOT NULL, reasoning_tokens bigint NOT NULL,
    images bigint NOT NULL, billed bigint NOT NULL`,
  indexes: ['day'],
  handles: new Set(['ChatCharged', 'ImageCharged', 'ReservationReleased']),
  keysOf(e) {
    // Each key once: evolve() adds everything the event brings to a key in one go.
    return [...new Set(attemptsOf(e).map((a) => a.key))];
  },
  evolve(row, e, key) {
    let r = row;
    for (const a of attemptsOf(e)) {
      if (a.key !== key) continue;
      r ??= {
        day: a.day,
        channel: a.channel,
        upstream_model: a.upstreamModel,
        calls: 0,
        failures: 0,
        failovers: 0,
        prompt_tokens: 0,
        cached_tokens: 0,
        cache_write_tokens: 0,
        completion_tokens: 0,
        reasoning_tokens: 0,
        images: 0,
        billed: 0,
      };
      const c = a.charge;
      r = c
        ? {
            day: r.day,
            channel: r.channel,
            upstream_model: r.upstream_model,
            calls: r.calls + 1,
            failures: r.failures,
            failovers: r.failovers,
            prompt_tokens: r.prompt_tokens + (c.promptTokens ?? 0),
            cached_tokens: r.cached_tokens + (c.cachedTokens ?? 0),
            cache_write_tokens: r.cache_write_tokens + (c.cacheWriteTokens ?? 0),
            completion_tokens: r.completion_tokens + (c.completionTokens ?? 0),
            reasoning_tokens: r.reasoning_tokens + (c.reasoningTokens ?? 0),
            images: r.images + (c.images ?? 0),
            billed: r.billed + (c.billed ?? 0),
          }
        : { ...r, calls: r.calls + 1, failures: r.failures + 1, failovers: r.failovers + (a.failover ? 1 : 0) };
    }
    // keysOf() only names keys some attempt has, so a row is always made.
    return r ?? null;
  },
});

/**
 * The rows of the UTC days `from` to `to` (YYYY-MM-DD, both included), ordered by day, channel
 * and upstream model (byte order, the same on every server).
 */
export async function upstreamReport(db: Queryable, schema: string, range: { from: string; to: string }): Promise<UpstreamDailyRow[]> {
  const rows = await db.query<Record<string, unknown>>(
    `SELECT day, channel, upstream_model, ${UPSTREAM_COUNTS.join(', ')} FROM ${q(schema, 'upstream_daily')}
     WHERE day >= $1 AND day <= $2 ORDER BY day COLLATE "C", channel COLLATE "C", upstream_model COLLATE "C"`,
    [range.from, range.to],
  );
  return rows.map((r) => {
    const out: UpstreamDailyRow = { day: String(r.day), channel: String(r.channel), upstream_model: String(r.upstream_model) } as UpstreamDailyRow;
    for (const c of UPSTREAM_COUNTS) out[c] = Number(r[c]);
    return out;
  });
}
