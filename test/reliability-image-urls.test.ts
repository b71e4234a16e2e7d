// Server-side fetch of `image` URLs (images/edits and generations): https only, never to a
// loopback, private, link-local (cloud metadata), CGNAT, IPv6 loopback/ULA/link-local or
// IPv4-mapped address, whether given literally, behind a hostname, or behind a redirect; the
// address checked is the one connected to (one resolution per connection); size and time limits.
// Every refusal is a clear 400 naming `image`, and nothing is held or charged.
// A local https server with a self-signed certificate plays the "public" image host: the test
// trusts its CA and lets its loopback address through via image-source's injection point;
// everything else keeps the production rules.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpsServer, type Server } from 'node:https';
import { createServer as createTcpServer, type AddressInfo, type LookupFunction, type Server as TcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, ledgerView, openAccount, type TestAccount } from './support/http.ts';
import { fetchImageUrl, imageFetchDefaults, isNonPublicAddress, MAX_SOURCE_BYTES } from '../src/calls/image-source.ts';

let gw: TestGateway;
let host: Server;
let hostPort = 0;
let ca: Buffer;
let tcpTrap: TcpServer;
let trapConnections = 0;
let png: Buffer;
const certDir = mkdtempSync(join(tmpdir(), 'tollgate-tls-'));
const hostRequests: string[] = [];

/** Fake DNS for the .test names; other names go nowhere (ENOTFOUND). */
const DNS: Record<string, string[]> = {
  'img.test': ['127.0.0.1'],
  'private.test': ['10.0.0.7'],
  'metadata.test': ['169.254.169.254'],
  'ula.test': ['fd12:3456::1'],
  'mapped.test': ['::ffff:192.168.1.20'],
  'mixed.test': ['127.0.0.1', '10.0.0.8'],
};
let lookups: string[] = [];
const fakeLookup: LookupFunction = (hostname, _options, callback) => {
  lookups.push(hostname);
  const list = DNS[hostname];
  const cb = callback as unknown as (err: NodeJS.ErrnoException | null, addresses?: { address: string; family: number }[]) => void;
  if (!list) return cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }));
  cb(
    null,
    list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
  );
};
/** The test host on loopback counts as public; every other address follows the production rule. */
const testAllowed = (ip: string) => ip === '127.0.0.1' || !isNonPublicAddress(ip);

test.before(async () => {
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-keyout',
      join(certDir, 'key.pem'),
      '-out',
      join(certDir, 'cert.pem'),
      '-subj',
      '/CN=img.test',
      '-addext',
      'subjectAltName=DNS:img.test,DNS:mixed.test,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  ca = readFileSync(join(certDir, 'cert.pem'));
  png = await sharp({ create: { width: 48, height: 48, channels: 3, background: { r: 10, g: 160, b: 90 } } })
    .png()
    .toBuffer();
  host = createHttpsServer({ key: readFileSync(join(certDir, 'key.pem')), cert: ca }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://img.test');
    hostRequests.push(url.pathname);
    if (url.pathname === '/ok.png') return res.writeHead(200, { 'content-type': 'image/png', 'content-length': png.length }).end(png);
    if (url.pathname === '/redirect') return res.writeHead(302, { location: url.searchParams.get('to')! }).end();
    if (url.pathname === '/loop') return res.writeHead(301, { location: '/loop' }).end();
    if (url.pathname === '/declared-huge') {
      // Declares more than the limit; the fetch must stop before reading it.
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': MAX_SOURCE_BYTES + 1 });
      res.write(png);
      return; // left open: the client hangs up
    }
    if (url.pathname === '/chunked-huge') {
      res.writeHead(200, { 'content-type': 'image/png' });
      const block = Buffer.alloc(1024 * 1024, 7);
      let sent = 0;
      const pump = () => {
        while (sent <= MAX_SOURCE_BYTES + block.length && !res.destroyed) {
          sent += block.length;
          if (!res.write(block)) return void res.once('drain', pump);
        }
        res.end();
      };
      return pump();
    }
    if (url.pathname === '/stall-body') {
      res.writeHead(200, { 'content-type': 'image/png' });
      res.write(png.subarray(0, 10));
      return;
    }
    if (url.pathname === '/stall-headers') return; // never answers
    res.writeHead(404).end('nope');
  });
  await new Promise<void>((r) => host.listen(0, '127.0.0.1', r));
  hostPort = (host.address() as AddressInfo).port;
  // A plain TCP listener on loopback: any connection to it means a refused URL was fetched anyway.
  tcpTrap = createTcpServer((s) => {
    trapConnections++;
    s.destroy();
  });
  await new Promise<void>((r) => tcpTrap.listen(0, '127.0.0.1', r));
  gw = await startTestGateway();
});

test.after(async () => {
  for (const k of Object.keys(imageFetchDefaults) as (keyof typeof imageFetchDefaults)[]) delete imageFetchDefaults[k];
  await gw?.stop();
  host?.closeAllConnections();
  await new Promise((r) => host?.close(r));
  await new Promise((r) => tcpTrap?.close(r));
  rmSync(certDir, { recursive: true, force: true });
});

const EDIT = { model: 'alpha-haiku-4.5', prompt: 'make it warmer' };

async function expectRefused(acct: TestAccount, image: string, code: string, message: RegExp, endpoint = 'edits'): Promise<void> {
  const r = await call(gw, `/v1/images/${endpoint}`, { key: acct.key, body: { ...EDIT, image } });
  assert.is(r.status, 400, `${image}: ${r.status} ${r.text.slice(0, 300)}`);
  assert.equal(Object.keys(r.json.error).sort(), ['code', 'message', 'param', 'type'], image);
  assert.is(r.json.error.type, 'invalid_request_error', image);
  assert.is(r.json.error.param, 'image', image);
  assert.is(r.json.error.code, code, `${image}: ${r.json.error.message}`);
  assert.match(r.json.error.message, message, image);
}

async function assertNothingHeld(acct: TestAccount): Promise<void> {
  const view = await ledgerView(gw, acct.accountId);
  assert.is(view.reservations.length, 0, 'refused before any hold');
  assert.is(view.billed, 0);
  assert.is(view.row.quota_used, 0);
}

test('the address rule: every non-public range is refused, public addresses pass', () => {
  const refused = [
    '127.0.0.1',
    '127.255.255.254',
    '10.0.0.1',
    '10.255.255.255',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.0.1',
    '192.168.255.255',
    '100.64.0.1',
    '100.127.255.255',
    '169.254.169.254',
    '169.254.0.1',
    '0.0.0.0',
    '0.1.2.3',
    '224.0.0.1',
    '255.255.255.255',
    '240.0.0.1',
    '192.0.2.10',
    '198.18.0.1',
    '198.51.100.2',
    '203.0.113.3',
    '::',
    '::1',
    '[::1]',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    'febf::1',
    'fec0::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:a9fe:a9fe',
    '::ffff:10.0.0.1',
    '0:0:0:0:0:ffff:c0a8:101',
    '::7f00:1',
    '::127.0.0.1',
    '64:ff9b::a9fe:a9fe',
    '2002:7f00:1::1',
    '2001:db8::1',
    '2001:0:4136:e378:8000:63bf:3fff:fdd2',
    'localhost',
    'not-an-ip',
    '',
  ];
  for (const ip of refused) assert.ok(isNonPublicAddress(ip), `${ip} must be refused`);
  const allowed = [
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '172.15.255.255',
    '172.32.0.1',
    '100.63.255.255',
    '100.128.0.1',
    '169.253.0.1',
    '2606:4700:4700::1111',
    '2a00:1450:4001:80b::200e',
    '::ffff:8.8.8.8',
  ];
  for (const ip of allowed) assert.not.ok(isNonPublicAddress(ip), `${ip} is public`);
});

test('through the API: literal non-public addresses, non-https schemes and loopback names are refused before any connection', async () => {
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const trap = (tcpTrap.address() as AddressInfo).port;
  const privateUrls = [
    `https://127.0.0.1:${trap}/x.png`,
    `https://localhost:${trap}/x.png`,
    `https://127.1:${trap}/x.png`,
    `https://2130706433:${trap}/x.png`,
    `https://0x7f.0.0.1:${trap}/x.png`,
    `https://[::1]:${trap}/x.png`,
    `https://[::ffff:127.0.0.1]:${trap}/x.png`,
    `https://[::ffff:7f00:1]:${trap}/x.png`,
    `https://[0:0:0:0:0:ffff:7f00:1]:${trap}/x.png`,
    `https://[::127.0.0.1]:${trap}/x.png`,
    'https://10.0.0.1/x.png',
    'https://172.16.5.4/x.png',
    'https://172.31.0.1/x.png',
    'https://192.168.1.1/x.png',
    'https://100.64.0.1/x.png',
    'https://169.254.169.254/latest/meta-data/iam/security-credentials/',
    'https://[::ffff:169.254.169.254]/latest/meta-data/',
    'https://[fd00::1]/x.png',
    'https://[fe80::1]/x.png',
    'https://[::]/x.png',
    'https://0.0.0.0/x.png',
    'https://0/x.png',
  ];
  for (const url of privateUrls) await expectRefused(acct, url, 'invalid_image_url', /private, loopback or link-local/);
  // Also as image-to-image on /images/generations.
  await expectRefused(acct, 'https://169.254.169.254/latest/meta-data/', 'invalid_image_url', /private/, 'generations');
  for (const url of [
    `http://127.0.0.1:${trap}/x.png`,
    'http://example.com/x.png',
    'ftp://example.com/x.png',
    'file:///etc/passwd',
    'gopher://127.0.0.1:6379/_INFO',
  ]) {
    await expectRefused(acct, url, 'invalid_image_url', /https/);
  }
  await expectRefused(acct, 'https://', 'invalid_image_url', /valid URL/);
  assert.is(trapConnections, 0, 'no connection was made to a refused address');
  await assertNothingHeld(acct);
});

test('through the API: names that resolve to private addresses, redirects to them, and rebinding are refused', async () => {
  Object.assign(imageFetchDefaults, { lookup: fakeLookup, isAllowedAddress: testAllowed, ca });
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const base = `https://img.test:${hostPort}`;
  const viaRedirect = (to: string) => `${base}/redirect?to=${encodeURIComponent(to)}`;

  // Control: the test host itself works, so each refusal below is the rule at work, not a broken setup.
  const control = await openAccount(gw, { quota: 10_000_000 });
  const ok = await call(gw, '/v1/images/edits', { key: control.key, body: { ...EDIT, image: `${base}/ok.png` } });
  assert.is(ok.status, 200, ok.text.slice(0, 300));
  const redirected = await call(gw, '/v1/images/edits', { key: control.key, body: { ...EDIT, image: viaRedirect(`${base}/ok.png`) } });
  assert.is(redirected.status, 200, 'a redirect to a public https URL is followed');

  for (const name of ['private.test', 'metadata.test', 'ula.test', 'mapped.test', 'mixed.test']) {
    await expectRefused(acct, `https://${name}:${hostPort}/ok.png`, 'invalid_image_url', /private, loopback or link-local/);
  }
  const before = hostRequests.length;
  for (const to of [
    'https://10.0.0.1/x.png',
    'https://169.254.169.254/latest/meta-data/',
    'https://[::1]/x.png',
    'https://[::ffff:10.0.0.1]/x.png',
    `https://private.test:${hostPort}/ok.png`,
    `https://metadata.test/`,
  ]) {
    await expectRefused(acct, viaRedirect(to), 'invalid_image_url', /private, loopback or link-local/);
  }
  await expectRefused(acct, viaRedirect(`http://img.test:${hostPort}/ok.png`), 'invalid_image_url', /https/);
  assert.is(hostRequests.length - before, 7, 'each redirect was served once and its private target never reached');
  await expectRefused(acct, `${base}/loop`, 'image_fetch_failed', /redirected too many times/);
  await expectRefused(acct, `https://nowhere.test/x.png`, 'invalid_image_url', /could not be resolved/);
  await expectRefused(acct, `${base}/missing.png`, 'image_fetch_failed', /answered 404/);

  // One resolution per connection: the address checked is the address used (no second lookup a
  // rebinding DNS server could answer with a private address).
  lookups = [];
  const once = await call(gw, '/v1/images/edits', { key: control.key, body: { ...EDIT, image: `${base}/ok.png` } });
  assert.is(once.status, 200);
  assert.equal(lookups, ['img.test']);
  await assertNothingHeld(acct);
});

test('through the API: size and time limits, and an untrusted certificate', async () => {
  Object.assign(imageFetchDefaults, { lookup: fakeLookup, isAllowedAddress: testAllowed, ca });
  const acct = await openAccount(gw, { quota: 10_000_000 });
  const base = `https://img.test:${hostPort}`;
  await expectRefused(acct, `${base}/declared-huge`, 'image_too_large', /too large/);
  await expectRefused(acct, `${base}/chunked-huge`, 'image_too_large', /too large/);
  imageFetchDefaults.timeoutMs = 1000;
  for (const path of ['/stall-headers', '/stall-body']) {
    const started = Date.now();
    await expectRefused(acct, `${base}${path}`, 'image_fetch_failed', /in time/);
    assert.ok(Date.now() - started < 15_000, `${path} took ${Date.now() - started} ms`);
  }
  delete imageFetchDefaults.timeoutMs;
  // The production default trusts only the system CAs: a self-signed host is refused.
  delete imageFetchDefaults.ca;
  await expectRefused(acct, `${base}/ok.png`, 'image_fetch_failed', /could not be fetched/);
  await assertNothingHeld(acct);
});

test('the production defaults are strict: no injected resolver, no extra CA, public addresses only', async () => {
  for (const k of Object.keys(imageFetchDefaults) as (keyof typeof imageFetchDefaults)[]) delete imageFetchDefaults[k];
  const err = await fetchImageUrl(`https://localhost:${hostPort}/ok.png`).then(
    () => null,
    (e: unknown) => e as { status: number; code: string },
  );
  assert.is(err?.status, 400);
  assert.is(err?.code, 'invalid_image_url');
  const viaLoopbackIp = await fetchImageUrl(`https://127.0.0.1:${hostPort}/ok.png`, { ca }).then(
    () => null,
    (e: unknown) => e as { code: string },
  );
  assert.is(viaLoopbackIp?.code, 'invalid_image_url', 'a CA alone does not open loopback');
});

test.run();
