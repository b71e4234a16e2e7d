// Turns the `image` field (data URI or https URL) or an uploaded file into bytes. URLs are
// fetched server-side, so only public https addresses are allowed, checked again after DNS
// resolution and on every redirect, with size and time limits.
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { badRequest } from '../http/errors.ts';

export const MAX_SOURCE_BYTES = 20 * 1024 * 1024;
const FETCH_TIMEOUT_MS = 10_000;
const MAX_REDIRECTS = 3;

export function decodeDataUri(uri: string): { bytes: Buffer; mime: string } {
  const m = /^data:(image\/[a-z0-9.+-]+);base64,([A-Za-z0-9+/=\s]*)$/i.exec(uri);
  if (!m) throw badRequest("'image' must be an https URL or a data URI of the form data:image/<type>;base64,<data>.", 'image', 'invalid_image');
  const bytes = Buffer.from(m[2].replace(/\s+/g, ''), 'base64');
  if (bytes.length === 0) throw badRequest("'image' data URI holds no data.", 'image', 'invalid_image');
  if (bytes.length > MAX_SOURCE_BYTES) throw badRequest(`'image' is larger than ${MAX_SOURCE_BYTES / 1024 / 1024} MB.`, 'image', 'image_too_large');
  return { bytes, mime: m[1].toLowerCase() };
}

/** True for loopback, private, link-local, CGNAT, multicast, unspecified and metadata addresses. */
export function isNonPublicAddress(ip: string): boolean {
  if (isIP(ip) === 6) {
    const v = ip.toLowerCase();
    if (v === '::' || v === '::1') return true;
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(v);
    if (mapped) return isNonPublicAddress(mapped[1]);
    return /^(fc|fd|fe8|fe9|fea|feb|ff)/.test(v) || v.startsWith('64:ff9b:') || v.startsWith('2001:db8');
  }
  const [a, b] = ip.split('.').map(Number);
  return a === 0 || a === 10 || a === 127 || (a === 169 && b === 254) || (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127) || a >= 224 || (a === 192 && b === 0) || (a === 198 && (b === 18 || b === 19));
}

async function assertPublicHost(url: URL): Promise<void> {
  if (url.protocol !== 'https:') throw badRequest("'image' URLs must use https.", 'image', 'invalid_image_url');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const addresses = isIP(host) ? [host] : (await lookup(host, { all: true }).catch(() => { throw badRequest(`'image' URL host ${host} could not be resolved.`, 'image', 'invalid_image_url'); })).map((a) => a.address);
  if (addresses.length === 0 || addresses.some(isNonPublicAddress)) throw badRequest("'image' URL points to a private, loopback or link-local address, which is not allowed.", 'image', 'invalid_image_url');
}

export async function fetchImageUrl(raw: string, fetchImpl: typeof fetch = fetch): Promise<{ bytes: Buffer; mime: string }> {
  let url: URL;
  try { url = new URL(raw); } catch { throw badRequest("'image' is not a valid URL or data URI.", 'image', 'invalid_image_url'); }
  const deadline = AbortSignal.timeout(FETCH_TIMEOUT_MS);
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    await assertPublicHost(url);
    const res = await fetchImpl(url, { redirect: 'manual', signal: deadline }).catch(() => { throw badRequest("'image' URL could not be fetched in time.", 'image', 'image_fetch_failed'); });
    if (res.status >= 300 && res.status < 400 && res.headers.get('location')) {
      url = new URL(res.headers.get('location')!, url);
      continue;
    }
    if (!res.ok || !res.body) throw badRequest(`'image' URL answered ${res.status}.`, 'image', 'image_fetch_failed');
    const declared = Number(res.headers.get('content-length') ?? 0);
    if (declared > MAX_SOURCE_BYTES) throw badRequest("'image' at that URL is too large.", 'image', 'image_too_large');
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      size += chunk.length;
      if (size > MAX_SOURCE_BYTES) throw badRequest("'image' at that URL is too large.", 'image', 'image_too_large');
      chunks.push(Buffer.from(chunk));
    }
    return { bytes: Buffer.concat(chunks), mime: res.headers.get('content-type') ?? 'application/octet-stream' };
  }
  throw badRequest("'image' URL redirected too many times.", 'image', 'image_fetch_failed');
}

export async function resolveImageField(value: string): Promise<{ bytes: Buffer; mime: string }> {
  return value.startsWith('data:') ? decodeDataUri(value) : fetchImageUrl(value);
}
