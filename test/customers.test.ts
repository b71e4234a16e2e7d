// Customers serve themselves through the session API of /app, over real HTTP: sign-in links sent
// through a real SMTP server on loopback (single use, in time, for their own address only), the
// session cookie and its CSRF token, members and roles (the role table stops a member at once,
// with nothing written), keys created, rotated and revoked by a member and usable through /v1,
// the operator's view of who did what, and the same answer (then the same 429) for known and
// unknown addresses. Runs on PGlite, and on PostgreSQL with DATABASE_URL.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, openAccount, type Reply, type TestAccount } from './support/http.ts';
import { startSmtpServer } from './support/customer-servers.ts';
import { customerSettingsFromEnv } from '../src/config.ts';
import { linkDecider } from '../src/customers/sign-in-decider.ts';
import { streams } from '../src/ledger/events.ts';
import { metadataFor } from '../src/ledger/ledger.ts';
import { hashKey } from '../src/keys/secrets.ts';

const ADMIN = 'customers-test-admin-token-0123456789abcdef';
let gw: TestGateway;
let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
let acme: TestAccount;
let other: TestAccount;

interface Person {
  cookie: string;
  csrf: string;
  sessionId: string;
}

test.before(async () => {
  smtp = await startSmtpServer();
  gw = await startTestGateway({
    adminToken: ADMIN,
    customers: { ...customerSettingsFromEnv({}), smtpUrl: smtp.url, signInAttemptsPerMinute: 3 },
  });
  acme = await openAccount(gw, { quota: 1_000_000 });
  other = await openAccount(gw, { quota: 1_000_000 });
});
test.after(async () => {
  await gw?.stop();
  await smtp?.close();
});

const admin = (path: string, body?: unknown, method?: string) =>
  call(gw, `/admin/v1${path}`, { body, method, headers: { authorization: `Bearer ${ADMIN}`, 'x-tollgate-actor': 'ops' } });
const as = (p: Person | null, path: string, body?: unknown, opts: { method?: string; csrf?: string | null } = {}) => {
  const headers: Record<string, string> = {};
  if (p) headers.cookie = `tollgate_session=${p.cookie}`;
  const csrf = opts.csrf === undefined ? p?.csrf : opts.csrf;
  if (csrf) headers['x-csrf-token'] = csrf;
  return call(gw, `/app/api${path}`, { body, method: opts.method, headers });
};
const revision = async (stream: string) => (await gw.ledger.events.readStream(stream)).length;

/** The link of the newest mail to this address: its address and token (from the URL fragment). */
async function linkFor(email: string, after: number) {
  const mail = await smtp.mailTo(email, after);
  const url = /https?:\/\/\S+\/app\/sign-in#\S+/.exec(mail.text)?.[0];
  assert.ok(url, `a sign-in link in: ${mail.text}`);
  const fragment = new URLSearchParams(new URL(url).hash.slice(1));
  return { email: fragment.get('email')!, token: fragment.get('token')!, mail };
}

async function signIn(email: string): Promise<Person> {
  const before = smtp.mails.length;
  const asked = await as(null, '/sign-in/email', { email });
  assert.is(asked.status, 202, asked.text);
  const link = await linkFor(email, before);
  const r = await as(null, '/sign-in/email/verify', link);
  assert.is(r.status, 200, r.text);
  const set = r.headers.get('set-cookie') ?? '';
  const session = await call(gw, '/app/api/session', { headers: { cookie: cookieOf(r) } });
  assert.is(session.status, 200, session.text);
  assert.match(set, /httponly/i);
  assert.match(set, /samesite=strict/i);
  return { cookie: cookieOf(r).split('=')[1], csrf: session.json.csrf_token, sessionId: session.json.session_id };
}
const cookieOf = (r: Reply) => /tollgate_session=[^;]+/.exec(r.headers.get('set-cookie') ?? '')?.[0] ?? '';

let owner: Person;
let ownerMemberId = '';

test('an invited owner signs in by a link mailed over SMTP; the link works once and only for its address', async () => {
  const inv = await admin(`/accounts/${acme.accountId}/members`, { email: 'Owner@Acme.test', role: 'owner' });
  assert.is(inv.status, 201, inv.text);
  ownerMemberId = inv.json.member_id;
  const before = smtp.mails.length;
  assert.is((await as(null, '/sign-in/email', { email: 'owner@acme.test' })).status, 202);
  const link = await linkFor('owner@acme.test', before);
  assert.match(link.mail.subject, /sign-in link/i);
  // A link for another address: refused, and the link is still good for its own.
  const wrong = await as(null, '/sign-in/email/verify', { email: 'mallory@acme.test', token: link.token });
  assert.is(wrong.status, 400, wrong.text);
  assert.is(cookieOf(wrong), '');
  const ok = await as(null, '/sign-in/email/verify', link);
  assert.is(ok.status, 200, ok.text);
  assert.ok(cookieOf(ok));
  const again = await as(null, '/sign-in/email/verify', link);
  assert.is(again.status, 400, 'a used link is refused');
  assert.is(again.json.error.message, wrong.json.error.message, 'one answer for every bad link');
  owner = await signIn('owner@acme.test');
  const s = await as(owner, '/session');
  assert.is(s.json.email, 'owner@acme.test');
  assert.equal(s.json.accounts, [{ account_id: acme.accountId, member_id: ownerMemberId, role: 'owner' }]);
});

test('an expired link is refused (issued 16 minutes ago through the decider)', async () => {
  const linkId = 'lnk_' + 'e'.repeat(24);
  const secret = 'x'.repeat(43);
  await gw.ledger.command(
    linkDecider,
    streams.signInLink(linkId),
    { type: 'IssueLink', linkId, email: 'owner@acme.test', hash: hashKey(secret), now: new Date(Date.now() - 16 * 60_000), minutes: 15 },
    metadataFor('test'),
  );
  const r = await as(null, '/sign-in/email/verify', { email: 'owner@acme.test', token: `${linkId}.${secret}` });
  assert.is(r.status, 400, r.text);
  assert.is(cookieOf(r), '');
});

test('a session cookie never authenticates /v1', async () => {
  const r = await call(gw, '/v1/models', { headers: { cookie: `tollgate_session=${owner.cookie}` } });
  assert.is(r.status, 401, r.text);
  assert.ok(r.json.error);
});

test('a missing or forged CSRF token is refused with nothing written', async () => {
  const stream = streams.members(acme.accountId);
  const before = await revision(stream);
  const missing = await as(owner, `/accounts/${acme.accountId}/members`, { email: 'dev@acme.test', role: 'developer' }, { csrf: null });
  assert.is(missing.status, 403, missing.text);
  assert.is(missing.json.error.code, 'csrf_failed');
  const forged = await as(owner, `/accounts/${acme.accountId}/members`, { email: 'dev@acme.test', role: 'developer' }, { csrf: 'A'.repeat(43) });
  assert.is(forged.status, 403);
  assert.is(await revision(stream), before);
});

let dev: Person;
let devMemberId = '';
let devKey = '';
let devKeyId = '';

test('the owner invites a developer, who joins at sign-in and creates, rotates and revokes keys usable at once on /v1', async () => {
  const inv = await as(owner, `/accounts/${acme.accountId}/members`, { email: 'dev@acme.test', role: 'developer' });
  assert.is(inv.status, 201, inv.text);
  devMemberId = inv.json.member_id;
  dev = await signIn('dev@acme.test');
  const created = await as(dev, `/accounts/${acme.accountId}/keys`, { name: 'ci bot', spend_limit: { tokens: 5000, period: 'daily' } });
  assert.is(created.status, 201, created.text);
  assert.match(created.json.key, /^sk_svc_/);
  devKey = created.json.key;
  devKeyId = created.json.key_id;
  assert.is((await call(gw, '/v1/models', { key: devKey })).status, 200);
  const listed = await as(dev, `/accounts/${acme.accountId}/keys`);
  const mine = listed.json.data.find((k: { key_id: string }) => k.key_id === devKeyId);
  assert.equal(mine.spend_limit, { tokens: 5000, period: 'daily' });
  assert.is(mine.spend.remaining, 5000);
  assert.not.ok(JSON.stringify(listed.json).includes(devKey), 'the secret is shown once');

  const rotated = await as(dev, `/accounts/${acme.accountId}/keys/${devKeyId}/rotate`, { grace_seconds: 0 });
  assert.is(rotated.status, 201, rotated.text);
  assert.is((await call(gw, '/v1/models', { key: devKey })).status, 401, 'the old key stops at once');
  assert.is((await call(gw, '/v1/models', { key: rotated.json.key })).status, 200);
  const revoked = await as(dev, `/accounts/${acme.accountId}/keys/${rotated.json.key_id}/revoke`, {});
  assert.is(revoked.status, 200, revoked.text);
  assert.is((await call(gw, '/v1/models', { key: rotated.json.key })).status, 401);
  // Every change names the member as its actor.
  const keyEvents = await gw.ledger.events.readStream(streams.key(devKeyId));
  const byMember = keyEvents.filter((e) => e.type === 'KeyIssued' || e.type === 'KeyRotated');
  assert.is(byMember.length, 2);
  assert.ok(byMember.every((e) => e.metadata.actor === `member:${devMemberId}:dev@acme.test`));
});

test('a developer trying billing gets a 403 with nothing written', async () => {
  const stream = streams.account(acme.accountId);
  const before = await revision(stream);
  for (const [path, body] of [
    ['/payments', undefined],
    ['/prices', undefined],
    ['/redemptions', { code: 'TG-NOPE-NOPE' }],
    ['/checkout', { pack_id: 'p1' }],
    ['/statement', undefined],
  ] as const) {
    const r = await as(dev, `/accounts/${acme.accountId}${path}`, body);
    assert.is(r.status, 403, `${path}: ${r.text}`);
  }
  assert.is(await revision(stream), before);
  assert.is((await as(owner, `/accounts/${acme.accountId}/payments`)).status, 200, 'the owner may');
});

test('a role change stops the member at once; only an owner touches the owner role; the last owner stays', async () => {
  const changed = await as(owner, `/accounts/${acme.accountId}/members/${devMemberId}`, { role: 'billing' }, { method: 'PATCH' });
  assert.is(changed.status, 200, changed.text);
  const stopped = await as(dev, `/accounts/${acme.accountId}/keys`, { name: 'nope' });
  assert.is(stopped.status, 403, stopped.text);
  assert.is((await as(dev, `/accounts/${acme.accountId}/payments`)).status, 200, 'billing may see payments now');
  const last = await as(owner, `/accounts/${acme.accountId}/members/${ownerMemberId}`, { role: 'admin' }, { method: 'PATCH' });
  assert.is(last.status, 409, last.text);
  const gone = await as(owner, `/accounts/${acme.accountId}/members/${ownerMemberId}`, undefined, { method: 'DELETE' });
  assert.is(gone.status, 409);
  await as(owner, `/accounts/${acme.accountId}/members/${devMemberId}`, { role: 'admin' }, { method: 'PATCH' });
  const promote = await as(dev, `/accounts/${acme.accountId}/members/${devMemberId}`, { role: 'owner' }, { method: 'PATCH' });
  assert.is(promote.status, 403, 'an admin cannot make an owner');
});

test('a member of another account gets a 403 on everything, with nothing written', async () => {
  await admin(`/accounts/${other.accountId}/members`, { email: 'eve@other.test', role: 'owner' });
  const eve = await signIn('eve@other.test');
  const streamsBefore = [await revision(streams.members(acme.accountId)), await revision(streams.account(acme.accountId))];
  for (const [method, path, body] of [
    ['GET', '/members', undefined],
    ['POST', '/members', { email: 'eve2@other.test', role: 'owner' }],
    ['GET', '/keys', undefined],
    ['POST', '/keys', { name: 'stolen' }],
    ['POST', `/keys/${devKeyId}/revoke`, {}],
    ['GET', '/payments', undefined],
    ['POST', '/redemptions', { code: 'TG-AAAA-BBBB' }],
  ] as const) {
    const r = await as(eve, `/accounts/${acme.accountId}${path}`, body, { method });
    assert.is(r.status, 403, `${method} ${path}: ${r.text}`);
  }
  assert.equal([await revision(streams.members(acme.accountId)), await revision(streams.account(acme.accountId))], streamsBefore);
});

test('sessions: a member sees their others and ends one; sign-out ends this one on the server', async () => {
  const second = await signIn('owner@acme.test');
  const list = await as(second, '/sessions');
  assert.ok(list.json.data.length >= 2);
  assert.ok(list.json.data.some((s: { session_id: string; current: boolean }) => s.session_id === second.sessionId && s.current));
  const ended = await as(second, `/sessions/${owner.sessionId}`, undefined, { method: 'DELETE' });
  assert.is(ended.status, 200, ended.text);
  assert.is((await as(owner, '/session')).status, 401, 'the ended session no longer opens anything');
  assert.is((await as(second, '/sign-out', {})).status, 200);
  assert.is((await as(second, '/session')).status, 401);
});

test('the operator sees the members and who did what', async () => {
  const r = await admin(`/accounts/${acme.accountId}/members`);
  assert.is(r.status, 200, r.text);
  const actors = r.json.events.map((e: { type: string; actor: string }) => `${e.type} ${e.actor}`);
  assert.ok(actors.includes('MemberInvited admin:ops'), actors.join('\n'));
  assert.ok(actors.some((a: string) => /^MemberInvited member:mem_\w+:owner@acme\.test$/.test(a)));
  assert.ok(actors.some((a: string) => /^MemberRoleChanged member:mem_\w+:owner@acme\.test$/.test(a)));
  assert.ok(actors.some((a: string) => /^MemberJoined member:mem_\w+:dev@acme\.test$/.test(a)));
});

test('sign-in requests: the same answer for known and unknown addresses, then the same 429', async () => {
  const sent = smtp.mails.length;
  const answers: string[] = [];
  for (const email of ['flood-known@acme.test', 'nobody@nowhere.test']) {
    if (email.startsWith('flood')) await admin(`/accounts/${acme.accountId}/members`, { email, role: 'developer' });
    for (let i = 0; i < 3; i++) {
      const r = await as(null, '/sign-in/email', { email });
      assert.is(r.status, 202);
      answers.push(r.text);
    }
    const limited = await as(null, '/sign-in/email', { email });
    assert.is(limited.status, 429);
    answers.push(String(limited.status) + limited.json.error.code);
  }
  assert.equal(answers.slice(0, 4), answers.slice(4));
  await smtp.mailTo('flood-known@acme.test', sent);
  assert.not.ok(
    smtp.mails.slice(sent).some((m) => m.to.includes('nobody@nowhere.test')),
    'no mail to an unknown address',
  );
});

test.run();
