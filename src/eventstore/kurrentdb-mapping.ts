// Pure mapping between the event store port and KurrentDB: event ids, $all positions, the
// metadata envelope that carries our id, metadata and hash chain, the streams the adapter keeps
// for itself, and the client's errors.
import { createHash } from 'node:crypto';
import {
  START,
  excludeSystemEvents,
  StreamNotFoundError,
  WrongExpectedVersionError,
  type CurrentStreamState,
  type Position,
  type ReadPosition,
  type RecordedEvent,
  type RegexFilter,
} from '@kurrent/kurrentdb-client';
import { WrongExpectedRevisionError } from './errors.ts';
import type { EventMetadata, StoredEvent } from './port.ts';

// ---- event ids --------------------------------------------------------------------------------

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

/**
 * KurrentDB event ids must be UUIDs. Our ids are UUIDs in practice (random v4, or the name-based
 * v5-style ids of corrections), and pass through in lower case. Anything else maps to a
 * name-based UUID (SHA-256 of the id, version 5 and RFC 4122 variant bits set), so the same id
 * always gets the same KurrentDB id and duplicates stay detectable; the original id travels in
 * the metadata envelope and is what readers get back.
 */
export function kurrentEventId(id: string): string {
  if (UUID.test(id) && id !== NIL_UUID) return id.toLowerCase();
  const h = createHash('sha256').update(`tollgate-event-id\u0000${id}`, 'utf8').digest('hex');
  const variant = ((parseInt(h[16], 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

// ---- positions --------------------------------------------------------------------------------

/**
 * Our global `position` is the event's $all commit position. Since KurrentDB 20 every append is
 * an implicit transaction and each event's commit position is its own record's byte offset in the
 * transaction log: unique, increasing in $all order, and never contiguous. A Number holds it
 * exactly up to 2^53 bytes (8 PiB of log), far beyond any real log, so the conversion is checked
 * rather than widened to bigint everywhere. Servers older than 22.6 give no $all position on stream
 * reads (18446744073709551615 or nothing); that is refused loudly instead of being guessed.
 */
export function positionNumber(position: Position | undefined): number {
  if (!position) throw new Error('KurrentDB returned an event without its $all position (KurrentDB 22.6 or later is required)');
  const commit = position.commit;
  if (commit >= 2n ** 63n) throw new Error('KurrentDB returned no $all position for an event (KurrentDB 22.6 or later is required)');
  if (commit > BigInt(Number.MAX_SAFE_INTEGER) || commit < 0n) throw new Error(`KurrentDB commit position ${commit} is outside the exact range of a Number`);
  return Number(commit);
}

/**
 * Where a read "after `position`" starts. Reads from a position include the event at that
 * position (commit = prepare for implicit transactions), so callers drop it; 0 is the start.
 */
export function readFrom(afterPosition: number): ReadPosition {
  if (afterPosition <= 0) return START;
  const p = BigInt(afterPosition);
  return { commit: p, prepare: p };
}

// ---- streams and events the adapter keeps for itself ------------------------------------------

/** Streams the adapter writes for itself; application streams may not use this prefix. */
export const INTERNAL_STREAM_PREFIX = 'tollgate.';
export const snapshotStream = (stream: string) => `${INTERNAL_STREAM_PREFIX}snapshot-${stream}`;
export const claimStream = (kurrentId: string) => `${INTERNAL_STREAM_PREFIX}event-id-${kurrentId}`;
// '$'-prefixed types are system events to KurrentDB's own filter, so one server-side filter
// ("exclude system events") keeps both KurrentDB's events and the adapter's bookkeeping out of
// $all reads and the live subscription.
export const SNAPSHOT_EVENT_TYPE = '$tollgate-snapshot';
export const CLAIM_EVENT_TYPE = '$tollgate-event-id';

export function userEventsFilter(): RegexFilter {
  return excludeSystemEvents();
}

/** The application's events in $all: no system type, no system or adapter stream. */
export function isUserEvent(e: { type: string; streamId: string }): boolean {
  return !e.type.startsWith('$') && !e.streamId.startsWith('$') && !e.streamId.startsWith(INTERNAL_STREAM_PREFIX);
}

// ---- the metadata envelope --------------------------------------------------------------------

export interface Envelope {
  v: 1;
  /** Our event id, as the caller gave it. */
  id: string;
  /** The append time that is hashed (millisecond ISO text, as the PostgreSQL adapter stores it). */
  timestamp: string;
  metadata: EventMetadata;
  prevHash: string;
  hash: string;
}

/**
 * KurrentDB event metadata: our envelope under `tollgate`, plus KurrentDB's conventional
 * correlation and causation keys so its own tooling can follow them.
 */
export function encodeMetadata(envelope: Envelope): Record<string, unknown> {
  const out: Record<string, unknown> = { $correlationId: envelope.metadata.correlationId, tollgate: envelope };
  if (envelope.metadata.causationId) out.$causationId = envelope.metadata.causationId;
  return out;
}

function envelopeOf(metadata: unknown): Envelope | null {
  const env = (metadata as { tollgate?: Partial<Envelope> } | null | undefined)?.tollgate;
  if (
    !env ||
    env.v !== 1 ||
    typeof env.id !== 'string' ||
    typeof env.timestamp !== 'string' ||
    typeof env.prevHash !== 'string' ||
    typeof env.hash !== 'string' ||
    typeof env.metadata !== 'object' ||
    env.metadata === null
  )
    return null;
  return env as Envelope;
}

/** A recorded KurrentDB event as our StoredEvent; null for anything this adapter did not write. */
export function toStoredEvent(e: RecordedEvent, position: number): StoredEvent | null {
  if (!e.isJson || !isUserEvent(e)) return null;
  const env = envelopeOf(e.metadata);
  if (!env || typeof e.data !== 'object' || e.data === null || Array.isArray(e.data)) return null;
  return {
    id: env.id,
    type: e.type,
    stream: e.streamId,
    revision: Number(e.revision),
    position,
    timestamp: env.timestamp,
    data: e.data as Record<string, unknown>,
    metadata: env.metadata,
    prevHash: env.prevHash,
    hash: env.hash,
  };
}

/** The hash of a recorded event of ours (the next event's prevHash). */
export function hashOf(e: RecordedEvent): string | null {
  return envelopeOf(e.metadata)?.hash ?? null;
}

// ---- errors -----------------------------------------------------------------------------------

/** The stream's actual revision as a conflict reports it: -1 when it does not exist. */
export function actualRevision(state: CurrentStreamState): number {
  return typeof state === 'bigint' && state >= 0n ? Number(state) : -1;
}

export function isWrongExpectedVersion(err: unknown): err is WrongExpectedVersionError {
  return err instanceof WrongExpectedVersionError || (err as { type?: unknown } | null)?.type === 'wrong-expected-version';
}

export function isStreamNotFound(err: unknown): boolean {
  return err instanceof StreamNotFoundError || (err as { type?: unknown } | null)?.type === 'stream-not-found';
}

/** A failed append as our typed error: a stale revision becomes WrongExpectedRevisionError. */
export function mapAppendError(err: unknown, stream: string, expected: number): Error {
  if (isWrongExpectedVersion(err)) return new WrongExpectedRevisionError(stream, expected, actualRevision(err.actualState));
  return err instanceof Error ? err : new Error(String(err));
}
