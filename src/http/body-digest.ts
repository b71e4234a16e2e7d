// The SHA-256 of a request body's canonical JSON (what an Idempotency-Key is bound to), fed to the
// hash piece by piece instead of as one string: a 10 MB string (an inline image) is escaped and
// hashed a slice per turn of the event loop (issue #30). The digest is the one of the joined
// text, sha256(prefix + canonicalJson(value) + suffix), so records stored before still match.
import { createHash, type Hash } from 'node:crypto';
import { LONG_STRING_CHARS, escapedSlices } from '../upstream/json-slices.ts';

/** Text is handed to the hash in chunks of about this many characters. */
const FLUSH_CHARS = 65_536;

class Feed {
  private text = '';
  constructor(private readonly hash: Hash) {}

  push(s: string): void {
    this.text += s;
    if (this.text.length >= FLUSH_CHARS) this.flush();
  }

  flush(): void {
    if (this.text) this.hash.update(this.text, 'utf8');
    this.text = '';
  }

  /** JSON.stringify(s), a slice per turn. */
  async longString(s: string): Promise<void> {
    this.push('"');
    this.flush();
    for await (const slice of escapedSlices(s)) this.hash.update(slice, 'utf8');
    this.push('"');
  }
}

/**
 * canonicalJson(value) into the feed: keys sorted at every depth, undefined members left out. A
 * promise only where a long string is inside, so a body of many small values takes one turn.
 */
function write(feed: Feed, value: unknown): Promise<void> | undefined {
  if (typeof value === 'string' && value.length > LONG_STRING_CHARS) return feed.longString(value);
  if (value === null || typeof value !== 'object') {
    feed.push(JSON.stringify(value) ?? '');
    return undefined;
  }
  const array = Array.isArray(value);
  const record = value as Record<string, unknown>;
  const keys = array ? null : Object.keys(record).sort();
  const count = keys ? keys.length : (value as unknown[]).length;
  feed.push(array ? '[' : '{');
  let first = true;
  const from = (i: number): Promise<void> | undefined => {
    for (; i < count; i++) {
      const v = keys ? record[keys[i]] : (value as unknown[])[i];
      if (keys && v === undefined) continue;
      feed.push((first ? '' : ',') + (keys ? JSON.stringify(keys[i]) + ':' : ''));
      first = false;
      const pending = write(feed, v);
      if (pending) return pending.then(() => from(i + 1));
    }
    feed.push(array ? ']' : '}');
    return undefined;
  };
  return from(0);
}

/** Hex sha256(prefix + canonicalJson(value) + suffix), long strings hashed a slice per turn. */
export async function canonicalDigest(prefix: string, value: unknown, suffix: string): Promise<string> {
  const hash = createHash('sha256');
  const feed = new Feed(hash);
  feed.push(prefix);
  await write(feed, value);
  feed.push(suffix);
  feed.flush();
  return hash.digest('hex');
}
