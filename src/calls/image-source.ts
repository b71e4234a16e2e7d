// Turns the `image` field (data URI or https URL) into bytes. URLs are fetched server-side, so
// only https to public addresses is allowed. The address check runs inside the connection's own
// DNS lookup: the address checked is the address connected to (no second resolution a rebinding
// DNS server could answer differently), and every redirect hop is a new, checked connection.
// Size and time limits cover the whole fetch, body included.
import { lookup as dnsLookup } from 'node:dns';
import { request } from 'node:https';
import type { IncomingMessage } from 'node:http';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { badRequest } from '../http/errors.ts';
import { SLICE_CHARS } from '../http/sliced-pattern.ts';
import { nextTurn } from '../next-turn.ts';

export const MAX_SOURCE_BYTES = 20 * 1024 * 1024;
const FETCH_TIMEOUT_MS = 10_000;
const MAX_REDIRECTS = 3;

const notDataUri = () => badRequest("'image' must be an https URL or a data URI of the form data:image/<type>;base64,<data>.", 'image', 'invalid_image');

/**
 * The image of a data URI. Its data can be most of a 10 MB body, so it is checked and decoded a
 * slice per turn of the event loop (issue #30), with the one-piece result: whitespace is skipped
 * and decoding stops at the first '=', as Buffer.from(data without whitespace, 'base64') does.
 */
export async function decodeDataUri(uri: string): Promise<{ bytes: Buffer; mime: string }> {
  const m = /^data:(image\/[a-z0-9.+-]+);base64,/i.exec(uri);
  if (!m) throw notDataUri();
  const chunks: Buffer[] = [];
  let carry = ''; // fewer than 4 characters of a group cut by a slice
  let padded = false;
  for (let i = m[0].length; i < uri.length; i += SLICE_CHARS) {
    if (i > m[0].length) await nextTurn();
    const slice = uri.slice(i, i + SLICE_CHARS);
    if (!/^[A-Za-z0-9+/=\s]*$/.test(slice)) throw notDataUri();
    if (padded) continue; // still checked, no longer decoded
    const pad = slice.indexOf('=');
    padded = pad !== -1;
    const data = carry + (padded ? slice.slice(0, pad) : slice).replace(/\s+/g, '');
    const whole = data.length - (data.length % 4);
    chunks.push(Buffer.from(data.slice(0, whole), 'base64'));
    carry = data.slice(whole);
  }
  chunks.push(Buffer.from(carry, 'base64'));
  const bytes = Buffer.concat(chunks);
  if (bytes.length === 0) throw badRequest("'image' data URI holds no data.", 'image', 'invalid_image');
  if (bytes.length > MAX_SOURCE_BYTES) throw badRequest(`'image' is larger than ${MAX_SOURCE_BYTES / 1024 / 1024} MB.`, 'image', 'image_too_large');
  return { bytes, mime: m[1].toLowerCase() };
}

// IANA special-purpose ranges: nothing here is a public web server. IPv4-mapped IPv6 addresses
// (::ffff:a.b.c.d, in any spelling) are checked against the IPv4 rules by BlockList itself.
const NON_PUBLIC = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  NON_PUBLIC.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  // ::/96 covers ::, ::1 and the deprecated IPv4-compatible form (::7f00:1 is 127.0.0.1).
  ['::', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001::', 23],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const)
  NON_PUBLIC.addSubnet(net, prefix, 'ipv6');

/** True for loopback, private, link-local (metadata), CGNAT, multicast, reserved and unspecified addresses. */
export function isNonPublicAddress(ip: string): boolean {
  const bare = ip.replace(/^\[|\]$/g, '');
  const family = isIP(bare);
  if (family === 0) return true; // not an address at all: never "public"
  return NON_PUBLIC.check(bare, family === 6 ? 'ipv6' : 'ipv4');
}

export interface ImageFetchOptions {
  /** DNS resolution (default: the system resolver). */
  lookup?: LookupFunction;
  /** Which resolved addresses may be connected to (default: public ones only). */
  isAllowedAddress?: (ip: string) => boolean;
  /** Extra trusted CA certificates (tests); the system CAs are used otherwise. */
  ca?: string | Buffer;
  timeoutMs?: number;
  maxBytes?: number;
}

/** What resolveImageField uses; in-process tests may adjust it, production keeps these strict values. */
export const imageFetchDefaults: ImageFetchOptions = {};

const refusedAddress = () => badRequest("'image' URL points to a private, loopback or link-local address, which is not allowed.", 'image', 'invalid_image_url');
const fetchFailed = (why: string) => badRequest(`'image' URL could not be fetched: ${why}.`, 'image', 'image_fetch_failed');
const tooLarge = () => badRequest("'image' at that URL is too large.", 'image', 'image_too_large');

class BlockedAddress extends Error {
  readonly code = 'ETOLLGATE_BLOCKED_ADDRESS';
}

/** A lookup for the connection that refuses the host when any of its addresses is not allowed. */
export function guardedLookup(resolve: LookupFunction, allowed: (ip: string) => boolean): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = (Array.isArray(addresses) ? addresses : [{ address: String(addresses), family: 4 }]) as { address: string; family: number }[];
      if (list.length === 0 || list.some((a) => !allowed(a.address))) return callback(new BlockedAddress('non-public address'), '', 0);
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: typeof list) => void)(null, list);
      callback(null, list[0].address, list[0].family);
    });
  };
}

function get(
  url: URL,
  opts: Required<Pick<ImageFetchOptions, 'lookup' | 'isAllowedAddress'>> & ImageFetchOptions,
  signal: AbortSignal,
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'GET',
        signal,
        agent: false,
        ca: opts.ca,
        lookup: guardedLookup(opts.lookup, opts.isAllowedAddress),
        headers: { accept: 'image/*', 'user-agent': 'tollgate-image-fetch/1' },
      },
      resolve,
    );
    req.on('error', reject);
    req.end();
  });
}

async function readLimited(res: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      res.destroy();
      throw tooLarge();
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

export async function fetchImageUrl(raw: string, options: ImageFetchOptions = imageFetchDefaults): Promise<{ bytes: Buffer; mime: string }> {
  const opts = {
    ...options,
    lookup: options.lookup ?? (dnsLookup as unknown as LookupFunction),
    isAllowedAddress: options.isAllowedAddress ?? ((ip: string) => !isNonPublicAddress(ip)),
  };
  const maxBytes = opts.maxBytes ?? MAX_SOURCE_BYTES;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest("'image' is not a valid URL or data URI.", 'image', 'invalid_image_url');
  }
  const deadline = AbortSignal.timeout(opts.timeoutMs ?? FETCH_TIMEOUT_MS);
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    if (url.protocol !== 'https:') throw badRequest("'image' URLs must use https.", 'image', 'invalid_image_url');
    // A literal address is connected to without a lookup: check it here.
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) && !opts.isAllowedAddress(host)) throw refusedAddress();
    let res: IncomingMessage;
    try {
      res = await get(url, opts, deadline);
    } catch (err) {
      if (err instanceof BlockedAddress || (err as { cause?: unknown }).cause instanceof BlockedAddress) throw refusedAddress();
      if (deadline.aborted) throw fetchFailed('it did not answer in time');
      const code = (err as { code?: string }).code;
      if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') throw badRequest(`'image' URL host ${host} could not be resolved.`, 'image', 'invalid_image_url');
      throw fetchFailed(code ? `connection failed (${code})` : 'connection failed');
    }
    const status = res.statusCode ?? 0;
    if (status >= 300 && status < 400 && res.headers.location) {
      res.resume();
      try {
        url = new URL(res.headers.location, url);
      } catch {
        throw fetchFailed('it redirected to an invalid URL');
      }
      continue;
    }
    if (status < 200 || status >= 300) {
      res.resume();
      throw badRequest(`'image' URL answered ${status}.`, 'image', 'image_fetch_failed');
    }
    if (Number(res.headers['content-length'] ?? 0) > maxBytes) {
      res.destroy();
      throw tooLarge();
    }
    try {
      return { bytes: await readLimited(res, maxBytes), mime: String(res.headers['content-type'] ?? 'application/octet-stream') };
    } catch (err) {
      if ((err as { status?: number }).status === 400) throw err;
      throw fetchFailed(deadline.aborted ? 'it did not finish in time' : 'the transfer broke off');
    }
  }
  throw fetchFailed('it redirected too many times');
}

export async function resolveImageField(value: string): Promise<{ bytes: Buffer; mime: string }> {
  return value.startsWith('data:') ? decodeDataUri(value) : fetchImageUrl(value, imageFetchDefaults);
}
