// The guards an append may carry (AppendRequest.notAfter and .unchanged), as PostgreSQL checks
// them: one SQL condition in front of the append function, so a chunk whose guard fails writes
// nothing; then which of its requests the failure concerns.
import { AppendDeadlinePassed, StaleReadError } from './errors.ts';
import type { StreamRevision } from './port.ts';

export interface Guarded {
  notAfter?: number;
  unchanged?: StreamRevision[];
}

/** The earliest notAfter among requests (Infinity: none has one). */
export function earliestDeadline(requests: Guarded[]): number {
  let earliest = Infinity;
  for (const r of requests) if (r.notAfter !== undefined && r.notAfter < earliest) earliest = r.notAfter;
  return earliest;
}

/**
 * The guards of a chunk as one SQL condition (parameters numbered from $first, `streamsTable` the
 * schema's streams table), with a statement-name suffix per shape; an empty condition: no guard.
 */
export function guardSql(chunk: Guarded[], first: number, streamsTable: string): { condition: string; params: unknown[]; suffix: string } {
  const conditions: string[] = [];
  const params: unknown[] = [];
  let suffix = '';
  const fence = earliestDeadline(chunk);
  if (Number.isFinite(fence)) {
    params.push(fence);
    // Compared on the database's clock when the statement arrives: one held up on the way commits nothing.
    conditions.push(`clock_timestamp() < to_timestamp($${first + params.length - 1}::float8 / 1000)`);
    suffix += '_f';
  }
  const read = chunk.flatMap((p) => p.unchanged ?? []);
  if (read.length > 0) {
    params.push(
      read.map((r) => r.stream),
      read.map((r) => r.revision),
    );
    const [names, revisions] = [first + params.length - 2, first + params.length - 1];
    conditions.push(
      `NOT EXISTS (SELECT 1 FROM unnest($${names}::text[], $${revisions}::integer[]) AS r(stream, revision) ` +
        `WHERE coalesce((SELECT h.revision FROM ${streamsTable} h WHERE h.stream = r.stream), -1) <> r.revision)`,
    );
    suffix += '_u';
  }
  return { condition: conditions.join(' AND '), params, suffix };
}

/** The streams whose revisions a chunk's failed guard must be read again for (none: it was the deadline). */
export const streamsRead = (chunk: Guarded[]): string[] => [...new Set(chunk.flatMap((p) => (p.unchanged ?? []).map((r) => r.stream)))];

/**
 * After a guarded chunk wrote nothing, given the read streams' revisions now: the requests whose
 * reads moved fail with StaleReadError; if none did, those of the earliest deadline fail.
 */
export function refusalsOf<R extends Guarded>(chunk: R[], now: Map<string, number>): Map<R, Error> {
  const refused = new Map<R, Error>();
  for (const p of chunk) {
    const moved = p.unchanged?.find((r) => (now.get(r.stream) ?? -1) !== r.revision);
    if (moved) refused.set(p, new StaleReadError(moved.stream, moved.revision, now.get(moved.stream) ?? -1));
  }
  if (refused.size > 0) return refused;
  const fence = earliestDeadline(chunk);
  for (const p of chunk) if (p.notAfter !== undefined && p.notAfter <= fence) refused.set(p, new AppendDeadlinePassed(p.notAfter));
  return refused;
}
