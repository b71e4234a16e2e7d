// Event id uniqueness on KurrentDB. PostgreSQL refuses a repeated event id through a UNIQUE
// index; KurrentDB only deduplicates a retried write to the same stream at the same revision, and
// happily stores the same id again anywhere else. So before an append, each event id is claimed
// in a stream of its own (`tollgate.event-id-<uuid>`, created with expected state "no stream"),
// naming the stream and revision the event is about to take.
//
// A claim that already exists is checked: if its event really is at the stream and revision it
// names, the id is a duplicate. If not, the append that made the claim failed or never happened
// (a conflict, a crash): the claim is taken over, again under optimistic concurrency, and the new
// append goes ahead. Claiming first means a crash can leave a claim without an event (harmless,
// taken over later) but never an event without a claim (which would let a duplicate through).
//
// What this does not cover: two appends carrying the same id *at the same moment* into
// *different* streams, when the first has claimed but not yet appended. The second sees a claim
// whose event is not there yet, takes it over, and both may succeed. Appends of one id into one
// stream stay exclusive through that stream's expected revision. Tollgate's deterministic ids
// (corrections' adjustments) always target one account stream.
import { randomUUID } from 'node:crypto';
import { BACKWARDS, END, NO_STREAM, type AppendStreamState } from '@kurrent/kurrentdb-client';
import type { KurrentClient } from './kurrentdb-client.ts';
import { CLAIM_EVENT_TYPE, claimStream, isStreamNotFound, isWrongExpectedVersion } from './kurrentdb-mapping.ts';

export interface Claim {
  /** The KurrentDB id of the event (see kurrentEventId). */
  kurrentId: string;
  stream: string;
  revision: number;
}

interface ClaimData {
  stream: string;
  revision: number;
}

const MAX_TAKEOVERS = 5;

/**
 * Claims every id, in parallel. `duplicate` is the index of an id already stored (-1: none);
 * `tookOver` says an earlier claim was taken over, i.e. another append of the id may be in flight.
 */
export async function claimEventIds(client: KurrentClient, claims: Claim[]): Promise<{ duplicate: number; tookOver: boolean }> {
  const outcomes = await Promise.all(claims.map((c) => claimOne(client, c)));
  return { duplicate: outcomes.indexOf('duplicate'), tookOver: outcomes.includes('taken over') };
}

async function claimOne(client: KurrentClient, claim: Claim): Promise<'claimed' | 'taken over' | 'duplicate'> {
  const name = claimStream(claim.kurrentId);
  let state: AppendStreamState = NO_STREAM;
  for (let attempt = 0; attempt <= MAX_TAKEOVERS; attempt++) {
    try {
      // The claim's own KurrentDB id is random: reusing the event's id would let KurrentDB's
      // idempotent-write rule report a second claimant's write as a success.
      await client.appendToStream(
        name,
        [
          {
            id: randomUUID(),
            contentType: 'application/json',
            type: CLAIM_EVENT_TYPE,
            data: { stream: claim.stream, revision: claim.revision } satisfies ClaimData,
            metadata: undefined,
          },
        ],
        { streamState: state },
      );
      return state === NO_STREAM ? 'claimed' : 'taken over';
    } catch (err) {
      if (!isWrongExpectedVersion(err)) throw err;
    }
    const current = await lastClaim(client, name);
    if (!current) {
      state = NO_STREAM;
      continue;
    }
    if (await eventIsAt(client, current.data.stream, current.data.revision, claim.kurrentId)) return 'duplicate';
    state = current.revision;
  }
  throw new Error(`event id ${claim.kurrentId}: its claim kept changing hands; try again`);
}

async function lastClaim(client: KurrentClient, name: string): Promise<{ revision: bigint; data: ClaimData } | null> {
  try {
    for await (const r of client.readStream(name, { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) {
      if (r.event) return { revision: r.event.revision, data: r.event.data as unknown as ClaimData };
    }
    return null;
  } catch (err) {
    if (isStreamNotFound(err)) return null;
    throw err;
  }
}

/** Whether the event with this KurrentDB id sits at `revision` of `stream`. */
export async function eventIsAt(client: KurrentClient, stream: string, revision: number, kurrentId: string): Promise<boolean> {
  if (typeof stream !== 'string' || !Number.isSafeInteger(revision) || revision < 0) return false;
  try {
    for await (const r of client.readStream(stream, { fromRevision: BigInt(revision), maxCount: 1 })) {
      return r.event?.revision === BigInt(revision) && r.event.id.toLowerCase() === kurrentId;
    }
    return false;
  } catch (err) {
    if (isStreamNotFound(err)) return false;
    throw err;
  }
}
