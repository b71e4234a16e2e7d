// Starting a worker thread from either the compiled build or the sources.
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * The compiled build runs a worker's .js as it is; its source (.ts) needs tsx's
 * loader, which a worker thread does not inherit from the process's --import on Node 20.
 */
export function startWorker(entry: URL, options: WorkerOptions): Worker {
  if (entry.pathname.endsWith('.js')) return new Worker(entry, options);
  const tsx = import.meta.resolve('tsx/esm/api');
  const boot = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(boot, { ...options, eval: true });
}
