// Multipart uploads are written by formidable to temporary files; nothing else removes them.
// `trackUpload` (formidable's onFileBegin) notes each file under its request as it starts, and
// `removeUploads`, mounted before the body parser, deletes them all once the request is
// answered, whatever the outcome (a success, 400, 401, 413, 429, a replay, a body that broke
// off mid-file), so uploads cannot fill the disk.
import { unlink } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import type { Context, Next } from 'koa';

interface Upload {
  filepath?: string;
}

const started = new WeakMap<IncomingMessage, string[]>();

interface Form {
  req?: IncomingMessage | null;
  error?: unknown;
}

/** formidable's onFileBegin; `this` is the form, which holds the request while it parses. */
export function trackUpload(this: unknown, _field: string, file: Upload & { destroy?: () => void }): void {
  const form = this as Form | undefined;
  const req = form?.req;
  if (!req || form.error || answered.has(req)) {
    // The form already failed or the request was answered: formidable still opens files for
    // parts that keep arriving, and no one would ever read or remove them. Drop this one once it
    // is open, and remove what it wrote.
    discard(file);
    return;
  }
  if (typeof file?.filepath !== 'string') return;
  const list = started.get(req) ?? [];
  list.push(file.filepath);
  started.set(req, list);
}

/** Requests already answered: a file that starts after this belongs to no one. */
const answered = new WeakSet<IncomingMessage>();

function discard(file: Upload & { destroy?: () => void }): void {
  setImmediate(() => {
    file.destroy?.();
    if (typeof file.filepath === 'string') void removeFiles([file.filepath]);
  });
}

/**
 * Deletes the files now, and once more a moment later: a file formidable abandoned mid-write may
 * still be opening when it is first removed.
 */
async function removeFiles(paths: string[]): Promise<void> {
  const remove = () => Promise.all(paths.map((p) => unlink(p).catch(() => undefined)));
  await remove();
  setTimeout(() => void remove(), 200).unref();
}

function uploadedPaths(files: unknown): string[] {
  if (!files || typeof files !== 'object') return [];
  return Object.values(files as Record<string, Upload | Upload[]>)
    .flatMap((f) => ([] as Upload[]).concat(f))
    .map((f) => f?.filepath)
    .filter((p): p is string => typeof p === 'string');
}

export async function removeUploads(ctx: Context, next: Next): Promise<void> {
  try {
    await next();
  } finally {
    const paths = new Set([...(started.get(ctx.req) ?? []), ...uploadedPaths((ctx.request as unknown as { files?: unknown }).files)]);
    started.delete(ctx.req);
    answered.add(ctx.req);
    if (paths.size) await removeFiles([...paths]);
  }
}
