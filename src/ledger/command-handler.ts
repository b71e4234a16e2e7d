// Runs a decider against a stream: load state (cache, else snapshot plus the events after it),
// decide, append with the expected revision and the new state as snapshot. A conflict means
// another process wrote the stream first: reload and decide again.
//
// Commands on one stream are queued in-process. While one append to a stream is in flight, the
// commands that arrive for it wait; they are then decided one after another against the state
// each one leaves (exactly as if run one at a time) and appended together, in one request with
// one expected revision. Every command still resolves only once its events are committed, so a
// busy account costs one append per round trip instead of one per command.
//
// A batch of provisional events only (a hold), from commands that allow it, may linger a moment
// before it is appended: when the call's own charge arrives meanwhile (a fast upstream), hold and
// charge go out in one append instead of two.
//
// The rule (docs/deployment.md, "One truth across processes"): no answer comes from state older than the log
// was when the command arrived. Other gateways write the same streams, so the cache is a speed-up
// only. A decision that appends is checked by its expected revision. A decision that appends
// nothing (a refusal, a no-op, a "not found") is confirmed first: the stream's events after the
// cached revision are read (one indexed read, usually empty); if there are any, the state moves on
// and the batch is decided again. A state loaded from the log during the attempt needs no check.
//
// A command whose caller has already been answered (its `gone()` says so) is withdrawn before it is
// decided or sent: what the caller was told stays true.
//
// A decision that read another stream (a subscription reads its plan) names it with the revision it
// read (`unchanged`); the append checks it in the same transaction, so a decision made on a plan
// that changed meanwhile is refused (StaleReadError) and its caller reads the plan and decides again.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Decider } from './decider.ts';
import { PROVISIONAL_EVENT_TYPES, type DomainEvent } from './events.ts';
import type { AppendRequest, AppendResult, EventMetadata, EventStore, StoredEvent, StreamRevision } from '../eventstore/port.ts';
import { AppendDeadlinePassed, StaleReadError, WrongExpectedRevisionError } from '../eventstore/errors.ts';
import { isDatabaseUnavailable } from '../eventstore/db.ts';
import { createStreamStates, SNAPSHOT_VERSION } from './stream-states.ts';

export { SNAPSHOT_VERSION };
import { earliestDeadline } from '../eventstore/append-guards.ts';
import { phaseClock, phaseSince, recordingPhases } from '../tracing/call-phases.ts';

/** The longest random wait between two attempts on a stream another writer keeps winning. */
const CONFLICT_BACKOFF_MAX_MS = 50;

/**
 * A snapshot is stored when a stream's revision crosses a multiple of this, so loading a stream
 * reads at most this many events after its snapshot while a busy stream does not write its whole
 * state (every open hold) with every append.
 */
export const SNAPSHOT_EVERY = 32;

/** A command withdrawn because its caller had already been answered (its deadline passed): nothing was appended. */
export class CommandWithdrawn extends Error {
  constructor() {
    super('the command was withdrawn: its caller had already been answered');
    this.name = 'CommandWithdrawn';
  }
}

export interface CommandResult<S> {
  events: StoredEvent[];
  state: S;
  revision: number;
  lastPosition: number;
}

export interface CommandHandlerOptions {
  store: EventStore;
  /** Appends through a group committer when given. */
  append?: (request: AppendRequest) => Promise<AppendResult>;
  cacheSize?: number;
  maxRetries?: number;
  /** Most commands appended together for one stream (default 256). */
  maxBatch?: number;
  /** Told of every event this process appended, as soon as the append commits. */
  onAppended?: (events: StoredEvent[]) => void;
  /** How long a lingering batch (see decideEarly's `linger`) waits for more commands on its stream (default 0: never). */
  lingerMs?: number;
  /**
   * Called with the events of each commit before its commands are answered; a promise it returns
   * holds the answers back until it settles (a change other gateways keep in memory is answered
   * once they have read it). The stream's next commands do not wait for it.
   */
  beforeAnswer?: (events: StoredEvent[]) => Promise<unknown> | undefined;
}

type EventIds = (e: DomainEvent, i: number) => string;

interface Pending {
  decider: Decider<unknown, unknown>;
  command: unknown;
  metadata: EventMetadata;
  eventIds?: EventIds;
  resolve(result: CommandResult<unknown>): void;
  reject(error: unknown): void;
  /** Told of the first decision, before its events are appended (see decideEarly). */
  onDecided?(decision: { events: DomainEvent[]; state: unknown } | { error: unknown }): void;
  /** A refusal already reported by onDecided: final, even if a conflict makes the batch decide again. */
  refused?: { error: unknown };
  /** Its provisional events may wait up to lingerMs for the next command on the stream. */
  linger?: boolean;
  /** Operator work: appended in the background lane (AppendRequest.background) when its batch holds nothing else. */
  background?: boolean;
  /** True once the caller has been answered without this command (its deadline passed): withdrawn if not yet sent. */
  gone?: () => boolean;
  /** Epoch ms when the caller is answered without it: withdrawn from then on, and its append may not commit later (AppendRequest.notAfter). */
  notAfter?: number;
  /** Other streams its decision read, at the revisions it read (AppendRequest.unchanged): a StaleReadError if one moved. */
  unchanged?: StreamRevision[];
}

/** What a caller may add to a command: see Pending. */
export interface CommandOptions {
  background?: boolean;
  gone?: () => boolean;
  notAfter?: number;
  unchanged?: StreamRevision[];
}

/** One command's part of a batch: its events, or why it was refused. */
interface Decided {
  p: Pending;
  events: DomainEvent[];
  ids: string[];
  state: unknown;
  error?: unknown;
}

interface Lane {
  queue: Pending[];
  running: boolean;
  /** Set while a batch lingers: a command queued on the lane ends the wait. */
  wake?: () => void;
}

/** The earliest deadline among the commands of an append, as AppendRequest.notAfter. */
function earliestNotAfter(decided: Array<{ p: Pending }>): { notAfter?: number } {
  const earliest = earliestDeadline(decided.map((d) => d.p));
  return Number.isFinite(earliest) ? { notAfter: earliest } : {};
}

/** The other streams the commands of an append read, as AppendRequest.unchanged. */
function readsOf(decided: Array<{ p: Pending }>): { unchanged?: StreamRevision[] } {
  const reads = decided.flatMap((d) => d.p.unchanged ?? []);
  return reads.length > 0 ? { unchanged: reads } : {};
}

/** Whether an append of `appended` events to a stream at `revision` crosses a snapshot mark (stores a snapshot). */
export function snapshotDue(revision: number, appended: number): boolean {
  return Math.floor((revision + appended) / SNAPSHOT_EVERY) > Math.floor(revision / SNAPSHOT_EVERY);
}

export function createCommandHandler(opts: CommandHandlerOptions) {
  const { store } = opts;
  const append = opts.append ?? ((r: AppendRequest) => store.append(r));
  const states = createStreamStates(store, opts.cacheSize ?? 50_000);
  const { load, confirm, remember } = states;
  const lanes = new Map<string, Lane>();
  const maxRetries = opts.maxRetries ?? 20;
  const maxBatch = opts.maxBatch ?? 256;
  const lingerMs = opts.lingerMs ?? 0;
  /** Commands withdrawn because their callers had gone (a metric). */
  let withdrawn = 0;

  /** Waits up to lingerMs for a command on the lane; true if one is queued. */
  function moreCommands(lane: Lane): Promise<boolean> {
    if (lane.queue.length > 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        lane.wake = undefined;
        resolve(false);
      }, lingerMs);
      lane.wake = () => {
        clearTimeout(timer);
        lane.wake = undefined;
        resolve(true);
      };
    });
  }

  /** Decides every command in order against the state the previous ones leave. */
  function decideAll(batch: Pending[], start: unknown): Decided[] {
    let state = start;
    return batch.map((p) => {
      if (p.refused) return { p, events: [], ids: [], state, error: p.refused.error };
      try {
        const events = p.decider.decide(p.command, state);
        state = events.reduce(p.decider.evolve, state);
        return { p, events, ids: events.map((e, i) => p.eventIds?.(e, i) ?? randomUUID()), state };
      } catch (error) {
        return { p, events: [], ids: [], state, error };
      }
    });
  }

  /**
   * Reports each command's first decision to a caller waiting for it (once). A refusal is told only
   * from confirmed state (`confirmed`); else it waits for the append (or its confirmation) like
   * the rest of the command, and is decided again if the stream moved.
   */
  function tellDecisions(decided: Decided[], confirmed: boolean): void {
    for (const d of decided) {
      const tell = d.p.onDecided;
      if (!tell || (d.error !== undefined && !confirmed)) continue;
      d.p.onDecided = undefined;
      if (d.error !== undefined) {
        d.p.refused = { error: d.error };
        tell({ error: d.error });
      } else tell({ events: d.events, state: d.state });
    }
  }

  const isGone = (p: Pending) => p.gone?.() === true || (p.notAfter !== undefined && Date.now() >= p.notAfter);

  /** Takes out of `batch` (in place) the commands whose callers have been answered, rejecting each. */
  function withdrawGone(batch: Pending[]): void {
    for (let i = batch.length - 1; i >= 0; i--) {
      const p = batch[i];
      if (!isGone(p)) continue;
      batch.splice(i, 1);
      withdrawn++;
      p.reject(new CommandWithdrawn());
    }
  }

  /**
   * Appends the commands of one batch (all on `stream`, one decider) as one request. Resolves or
   * rejects each of them; throws only what the caller should retry one by one.
   */
  async function runBatch(stream: string, batch: Pending[], lane?: Lane): Promise<void> {
    const decider = batch[0].decider;
    let lingered = false;
    for (let attempt = 0; ; attempt++) {
      withdrawGone(batch);
      if (batch.length === 0) return;
      const decideStarted = phaseClock();
      let current = await load(decider, stream);
      let decided = decideAll(batch, current.state);
      phaseSince('ledger_decide', decideStarted);
      // Nothing to append, so no expected revision checks it: confirm the cached state first.
      if (!current.confirmed && decided.every((d) => d.events.length === 0)) {
        const confirmed = await confirm(decider, stream, current);
        current = { ...confirmed, confirmed: true };
        if (confirmed.moved) {
          withdrawGone(batch);
          if (batch.length === 0) return;
          decided = decideAll(batch, current.state);
        }
      }
      tellDecisions(decided, current.confirmed);
      const withEvents = decided.filter((d) => d.events.length > 0);
      const finalState = decided[decided.length - 1].state;
      const durable = !withEvents.every((d) => d.events.every((e) => PROVISIONAL_EVENT_TYPES.has(e.type)));
      // Holds only, all willing to wait: give the next commands on this stream (their charges) a
      // moment to join, then decide the batch again with them (the same decisions, plus theirs).
      if (!lingered && lane && lingerMs > 0 && !durable && withEvents.length > 0 && withEvents.every((d) => d.p.linger) && batch.length < maxBatch) {
        lingered = true;
        const lingerStarted = phaseClock();
        const more = await moreCommands(lane);
        phaseSince('ledger_linger', lingerStarted);
        if (more) {
          let n = 0;
          while (n < lane.queue.length && batch.length + n < maxBatch && lane.queue[n].decider === decider) n++;
          batch.push(...lane.queue.splice(0, n));
          attempt--;
          continue;
        }
      }
      if (withEvents.length === 0) {
        tellDecisions(decided, true);
        for (const d of decided) {
          if (d.error !== undefined) d.p.reject(d.error);
          else d.p.resolve({ events: [], state: d.state, revision: current.revision, lastPosition: 0 });
        }
        return;
      }
      // The caller may have been answered while the batch waited (a stalled append before it, a
      // linger): withdrawn now, the batch is decided again without it.
      if (batch.some(isGone)) {
        attempt--;
        continue;
      }
      let result: AppendResult;
      const appendStarted = phaseClock();
      try {
        result = await append({
          stream,
          expectedRevision: current.revision,
          events: withEvents.flatMap((d) =>
            d.events.map((e, i) => ({ id: d.ids[i], type: e.type, data: e.data as unknown as Record<string, unknown>, metadata: d.p.metadata })),
          ),
          snapshot: snapshotDue(
            current.revision,
            withEvents.reduce((n, d) => n + d.events.length, 0),
          )
            ? { v: SNAPSHOT_VERSION, s: finalState }
            : undefined,
          durable,
          ...(batch.every((p) => p.background) ? { background: true } : {}),
          ...earliestNotAfter(withEvents),
          ...readsOf(withEvents),
        });
      } catch (err) {
        states.forget(stream);
        // A stream some decisions read had moved: those commands fail (their callers read it again
        // and decide again); the rest of the batch is decided again without them.
        if (err instanceof StaleReadError) {
          const stale = batch.filter((p) => p.unchanged?.some((r) => r.stream === err.stream));
          if (stale.length === 0) throw err;
          for (const p of stale) {
            p.reject(err);
            batch.splice(batch.indexOf(p), 1);
          }
          if (batch.length === 0) return;
          attempt--;
          continue;
        }
        // It reached the database after the earliest caller's deadline and wrote nothing: that
        // caller has its answer; the others are decided again without it.
        if (err instanceof AppendDeadlinePassed) {
          const late = batch.filter((p) => p.notAfter !== undefined && p.notAfter <= err.notAfter);
          if (late.length === 0) throw err;
          for (const p of late) p.gone = () => true;
          attempt--;
          continue;
        }
        if (err instanceof WrongExpectedRevisionError && attempt < maxRetries) {
          // Another writer (a second gateway) keeps winning the stream: a random wait that grows with
          // the conflicts lets one of the two go first instead of both deciding again in lockstep.
          if (attempt >= 2) await sleep(Math.random() * Math.min(CONFLICT_BACKOFF_MAX_MS, 2 ** attempt));
          continue;
        }
        throw err;
      }
      phaseSince('ledger_append', appendStarted);
      remember(stream, { revision: result.revision, state: finalState });
      // The stored time, so this process's caches say what every other reader of the log says.
      const timestamp = result.timestamp ?? new Date().toISOString();
      const all: StoredEvent[] = [];
      const outcomes: Array<() => void> = [];
      for (const d of decided) {
        if (d.error !== undefined) {
          outcomes.push(() => d.p.reject(d.error));
          continue;
        }
        const offset = all.length;
        const stored = d.events.map((e, i) => ({
          id: d.ids[i],
          type: e.type,
          stream,
          revision: current.revision + 1 + offset + i,
          position: result.firstPosition + offset + i,
          timestamp,
          data: e.data as never,
          metadata: d.p.metadata,
          prevHash: '',
          hash: '',
        }));
        all.push(...stored);
        const r = {
          events: stored,
          state: d.state,
          revision: current.revision + all.length,
          lastPosition: stored.length ? stored[stored.length - 1].position : 0,
        };
        outcomes.push(() => d.p.resolve(r));
      }
      // Caches hear of the events before any caller resumes. Committed: nothing here may throw
      // into drain(), which would run the commands again.
      try {
        opts.onAppended?.(all);
      } catch {
        /* a listener's failure does not undo a commit */
      }
      const answer = () => {
        for (const settle of outcomes) settle();
      };
      const held = opts.beforeAnswer?.(all);
      if (held) {
        const heldSince = phaseClock();
        const answered = held.then(answer, answer);
        // Timed only while phases are recorded: no extra promise per held answer otherwise.
        if (recordingPhases()) void answered.then(() => phaseSince('ledger_answer_held', heldSince));
      } else answer();
      return;
    }
  }

  async function drain(stream: string, lane: Lane): Promise<void> {
    lane.running = true;
    try {
      while (lane.queue.length > 0) {
        // A stream is only ever driven by one decider, but a batch never mixes two.
        let n = 1;
        while (n < lane.queue.length && n < maxBatch && lane.queue[n].decider === lane.queue[0].decider) n++;
        const batch = lane.queue.splice(0, n);
        try {
          await runBatch(stream, batch, lane);
        } catch (err) {
          // The database out of reach fails them all at once: one at a time, each would wait out
          // its own timeout (a stalled link held calls for the whole stall).
          if (batch.length === 1 || isDatabaseUnavailable(err)) for (const p of batch) p.reject(err);
          else {
            // One command's events may be what the store refused (an invalid or duplicate event):
            // run them one at a time so only that command fails.
            for (const p of batch) await runBatch(stream, [p]).catch((e) => p.reject(e));
          }
        }
      }
    } finally {
      lane.running = false;
      if (lanes.get(stream) === lane && lane.queue.length === 0) lanes.delete(stream);
    }
  }

  function enqueue<S>(stream: string, p: Omit<Pending, 'resolve' | 'reject'>): Promise<CommandResult<S>> {
    return new Promise<CommandResult<S>>((resolve, reject) => {
      let lane = lanes.get(stream);
      if (!lane) {
        lane = { queue: [], running: false };
        lanes.set(stream, lane);
      }
      lane.queue.push({ ...p, resolve: resolve as Pending['resolve'], reject });
      lane.wake?.();
      if (!lane.running) void drain(stream, lane);
    });
  }

  return {
    /**
     * Decides and appends one command; commands on the same stream are decided one at a time.
     * `background`: operator work, appended where live calls' appends do not wait behind it.
     */
    handle<S, C>(
      decider: Decider<S, C>,
      stream: string,
      command: C,
      metadata: EventMetadata,
      eventIds?: EventIds,
      options: CommandOptions = {},
    ): Promise<CommandResult<S>> {
      return enqueue<S>(stream, {
        decider: decider as Decider<unknown, unknown>,
        command,
        metadata,
        eventIds,
        ...options,
      });
    },
    /**
     * The same, but answers twice: `decided` as soon as the command is decided (its events, not yet
     * durable), `committed` once they are appended. A caller may start work that the decision
     * allows while the append is in flight, as long as it waits for `committed` before anything
     * that must not happen without it. A refusal rejects both and is final; a decision that a
     * concurrent writer overturns (the stream moved, the command decided again) rejects `committed`.
     * `linger`: provisional events may wait (lingerMs) for the next command on the stream, so a
     * caller that follows up at once (a fast call's charge) shares one append with them.
     */
    decideEarly<S, C>(
      decider: Decider<S, C>,
      stream: string,
      command: C,
      metadata: EventMetadata,
      options: { linger?: boolean; gone?: () => boolean } = {},
    ): { decided: Promise<{ events: DomainEvent[]; state: S }>; committed: Promise<CommandResult<S>> } {
      let onDecided!: Pending['onDecided'];
      const decided = new Promise<{ events: DomainEvent[]; state: S }>((resolve, reject) => {
        onDecided = (d) => ('error' in d ? reject(d.error) : resolve(d as { events: DomainEvent[]; state: S }));
      });
      const committed = enqueue<S>(stream, {
        decider: decider as Decider<unknown, unknown>,
        command,
        metadata,
        onDecided,
        linger: options.linger,
        gone: options.gone,
      });
      // A failure before any decision (the stream could not be loaded) is the decision's too.
      // Neither promise counts as unhandled while its caller is busy awaiting the other.
      committed.catch((err) => onDecided?.({ error: err }));
      decided.catch(() => undefined);
      return { decided, committed };
    },
    /**
     * The stream's state as the log has it now (the cache brought up to the log: one indexed
     * read). `cached`: the cache's copy, unconfirmed, for a decision an append will check anyway
     * (or that is confirmed before it refuses): see confirmed.
     */
    async state<S, C>(decider: Decider<S, C>, stream: string, options: { cached?: boolean } = {}): Promise<{ state: S; revision: number; confirmed: boolean }> {
      const d = decider as Decider<unknown, unknown>;
      let c = await load(d, stream);
      if (!c.confirmed && !options.cached) c = { ...(await confirm(d, stream, c)), confirmed: true };
      return { state: c.state as S, revision: c.revision, confirmed: c.confirmed };
    },
    forget(stream: string) {
      states.forget(stream);
    },
    /** How many commands were withdrawn because their callers had gone. */
    withdrawnCount: () => withdrawn,
    /** How many cached states were confirmed against the log, and how many of them had moved (another process wrote the stream). */
    confirmationCounts: () => states.confirmationCounts(),
  };
}

export type CommandHandler = ReturnType<typeof createCommandHandler>;
