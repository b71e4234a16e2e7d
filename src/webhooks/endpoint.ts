// Where a webhook may point: the image-URL rules (src/calls/image-source.ts) — https only, and
// only hosts whose every address is public, checked at registration (DNS) and again inside each
// delivery's own connection (the address checked is the address connected to, so a rebinding DNS
// server cannot turn a checked name into a private address later). Private deployments name the
// hosts or addresses they trust in TOLLGATE_WEBHOOK_ALLOW_HOSTS; those may be private and may use
// plain http.
import { lookup as dnsLookup } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { guardedLookup, isNonPublicAddress } from '../calls/index.ts';
import { invalid } from '../ledger/errors.ts';

export const MAX_URL_LENGTH = 2000;

export interface EndpointPolicy {
  /** Host names and addresses allowed although private, and over http (lower case). */
  allowHosts: readonly string[];
  /** DNS resolution (default: the system resolver). */
  lookup?: LookupFunction;
}

const bare = (host: string) => host.replace(/^\[|\]$/g, '').toLowerCase();

function isAllowListed(host: string, policy: EndpointPolicy): boolean {
  const h = bare(host);
  return policy.allowHosts.some((a) => bare(a) === h);
}

/** Which addresses a connection to `host` may use: any, for an allow-listed host; else public ones and allow-listed addresses. */
export function addressRule(host: string, policy: EndpointPolicy): (ip: string) => boolean {
  if (isAllowListed(host, policy)) return () => true;
  return (ip) => !isNonPublicAddress(ip) || isAllowListed(ip, policy);
}

const refused = (message: string) => invalid(message, { param: 'url' });

/** The URL's form and scheme (no DNS): returns it normalised, or throws a DomainError ('invalid', param url). */
export function parseEndpoint(raw: unknown, policy: EndpointPolicy): URL {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > MAX_URL_LENGTH)
    throw refused(`'url' must be an https URL of at most ${MAX_URL_LENGTH} characters.`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refused(`'url' is not a valid URL.`);
  }
  const trusted = isAllowListed(url.hostname, policy);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && trusted)) {
    throw refused(`'url' must use https${url.protocol === 'http:' ? ' (http only for hosts in TOLLGATE_WEBHOOK_ALLOW_HOSTS)' : ''}.`);
  }
  if (url.username || url.password) throw refused(`'url' must not carry a user name or password.`);
  if (!url.hostname) throw refused(`'url' has no host.`);
  const host = bare(url.hostname);
  if (isIP(host) && !addressRule(host, policy)(host)) throw privateAddress();
  url.hash = '';
  return url;
}

const privateAddress = () =>
  refused(`'url' points to a private, loopback or link-local address, which is not allowed (unless the host is in TOLLGATE_WEBHOOK_ALLOW_HOSTS).`);

/** parseEndpoint, then the host's addresses as DNS gives them now: every one must be allowed. */
export async function checkEndpoint(raw: unknown, policy: EndpointPolicy): Promise<URL> {
  const url = parseEndpoint(raw, policy);
  const host = bare(url.hostname);
  if (isIP(host)) return url;
  const resolve = policy.lookup ?? (dnsLookup as unknown as LookupFunction);
  const addresses = await new Promise<Array<{ address: string }>>((ok, fail) => {
    resolve(host, { all: true }, (err, list) => (err ? fail(err) : ok(Array.isArray(list) ? list : [{ address: String(list) }])));
  }).catch((err: { code?: string }) => {
    throw refused(`'url' host ${host} could not be resolved${err.code ? ` (${err.code})` : ''}.`);
  });
  const allowed = addressRule(host, policy);
  if (addresses.length === 0 || addresses.some((a) => !allowed(a.address))) throw privateAddress();
  return url;
}

/** The lookup a delivery connects with: the same rule, applied to the addresses it connects to. */
export function connectLookup(url: URL, policy: EndpointPolicy): LookupFunction {
  return guardedLookup(policy.lookup ?? (dnsLookup as unknown as LookupFunction), addressRule(url.hostname, policy));
}

/** A refusal by connectLookup (the host now resolves to an address that is not allowed). */
export const isBlockedAddressError = (err: unknown): boolean =>
  (err as { code?: string })?.code === 'ETOLLGATE_BLOCKED_ADDRESS' || (err as { cause?: { code?: string } })?.cause?.code === 'ETOLLGATE_BLOCKED_ADDRESS';
