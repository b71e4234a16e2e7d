// Reads that would hold the event loop for long (a year of the finance report: tens of thousands
// of rows read, summed and written out as megabytes of JSON) run on a worker thread with a pool
// of its own, so the thread that serves calls only sends the finished text. Only on a PostgreSQL
// server: the embedded database lives in this thread, and its reads run here.
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Worker } from 'node:worker_threads';
import type { PgTimeouts, Queryable } from './db.ts';
import { startWorker } from './start-worker.ts';

/**
 * Named reads: each takes the database and its arguments (structured-cloneable) and returns a
 * result that is. A result's top-level Uint8Array fields are moved to the caller, not copied: a
 * report of megabytes reaches the calling thread as bytes to send, never as a string to keep.
 */
export type ReadTasks = Record<string, (db: Queryable, args: never) => Promise<unknown>>;

export interface ReadRunner {
  run<T>(task: string, args: unknown): Promise<T>;
  /** Starts the thread now, so the first read does not wait for its modules and connections (resolves when it is ready). */
  warm(): Promise<void>;
  close(): Promise<void>;
}

/** What the worker is started with. */
export interface ReadThreadJob {
  url: string;
  timeouts?: PgTimeouts;
  poolSize: number;
  /** The module whose `readTasks` export holds the tasks (by URL: this module names no feature). */
  tasks: string;
}

export type ReadThreadRequest = { id: number; task: string; args: unknown };
/** Id 0 is the thread saying it is ready (its tasks loaded, a connection open). */
export type ReadThreadReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: { name: string; message: string; code?: string } };

/** The buffers a result moves to the calling thread (see ReadTasks); each owned by its array alone. */
export function movedBuffers(value: unknown): ArrayBuffer[] {
  if (!value || typeof value !== 'object') return [];
  const out: ArrayBuffer[] = [];
  for (const v of Object.values(value))
    if (v instanceof Uint8Array && v.buffer instanceof ArrayBuffer && v.byteOffset === 0 && v.byteLength === v.buffer.byteLength) out.push(v.buffer);
  return out;
}

/** Runs one named task (on whichever thread calls it). */
export async function runTask(tasks: ReadTasks, db: Queryable, task: string, args: unknown): Promise<unknown> {
  const f = tasks[task];
  if (!f) throw new Error(`no read task '${task}'`);
  return f(db, args as never);
}

/** The reads on this thread, on `db`. */
export function readsHere(db: Queryable, tasks: ReadTasks): ReadRunner {
  return {
    run: async <T>(task: string, args: unknown) => (await runTask(tasks, db, task, args)) as T,
    warm: async () => undefined,
    close: async () => undefined,
  };
}

/**
 * The reads on one worker thread, started at the first and started again after it dies (its
 * pending reads then fail). An error keeps its name, message and code, so a database out of
 * reach is still told apart (isDatabaseUnavailable) and answered 503.
 */
export function readsOnThread(job: ReadThreadJob): ReadRunner {
  const entry = new URL(`./read-thread-worker${extname(fileURLToPath(import.meta.url))}`, import.meta.url);
  let worker: Worker | null = null;
  let ready: Promise<void> = Promise.resolve();
  let nextId = 0;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  const failAll = (err: Error) => {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  const started = (): Worker => {
    if (worker) return worker;
    const w = startWorker(entry, { workerData: job });
    ready = new Promise<void>((resolve) => {
      const onReady = (m: ReadThreadReply) => {
        if (m.id !== 0) return;
        w.off('message', onReady);
        resolve();
      };
      w.on('message', onReady);
      // A thread that stops before it is ready has nothing to warm.
      w.once('exit', () => resolve());
    });
    w.on('message', (m: ReadThreadReply) => {
      const p = pending.get(m.id);
      if (!p) return;
      pending.delete(m.id);
      if (pending.size === 0) w.unref();
      if (m.ok) p.resolve(m.value);
      else p.reject(Object.assign(new Error(m.error.message), { name: m.error.name, code: m.error.code }));
    });
    w.on('error', (err) => failAll(err));
    w.on('exit', (code) => {
      if (worker === w) worker = null;
      failAll(new Error(`the read thread stopped (exit code ${code})`));
    });
    worker = w;
    return w;
  };
  return {
    run<T>(task: string, args: unknown): Promise<T> {
      const id = ++nextId;
      const w = started();
      // Kept alive while it owes an answer; idle, it does not keep the process alive.
      w.ref();
      return new Promise<T>((resolve, reject) => {
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
        w.postMessage({ id, task, args } satisfies ReadThreadRequest);
      });
    },
    async warm() {
      const w = started();
      w.ref();
      await ready;
      if (pending.size === 0) w.unref();
    },
    async close() {
      const w = worker;
      worker = null;
      if (w) await w.terminate();
    },
  };
}
