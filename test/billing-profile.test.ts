// An account's billing profile (issue 43, item 1): the rules of its fields (countries of ISO
// 3166-1, tax ids in their country's VAT format where one is public), and the whole path a user
// takes: an owner and a billing member set it in /app, the operator reads it on another gateway
// (on PostgreSQL a second gateway on the same log), every change is an event naming its actor, a
// developer is refused, and bad input gets a 400 naming the field with nothing written.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { billingProfileDecider, checkTaxId, parseBillingProfile } from '../src/books/billing-profile.ts';
import { DomainError } from '../src/ledger/errors.ts';
import { streams } from '../src/ledger/events.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call, openAccount, type TestAccount } from './support/http.ts';
import { startSmtpServer } from './support/customer-servers.ts';
import { asPerson, signInByLink, type Person } from './support/sessions.ts';
import { customerSettingsFromEnv } from '../src/config.ts';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const business = {
  legal_name: 'Acme Rechenzentrum GmbH',
  address_lines: ['Hauptstraße 5', '3. OG'],
  city: 'Berlin',
  postal_code: '10115',
  country: 'de',
  tax_id: 'de 123.456-789',
  invoice_email: 'Invoices@Acme.test',
};

/** The param a refusal names (DomainError's facts), or what else it threw. */
function refusal(body: unknown): string {
  try {
    parseBillingProfile(body);
    return 'accepted';
  } catch (err) {
    if (err instanceof DomainError && err.code === 'invalid') return String(err.facts.param);
    throw err;
  }
}

const rules = suite('billing profile: the fields');

rules('a business: the country upper-cased, the tax id normalised and checked against its VAT format, the address trimmed', () => {
  const p = parseBillingProfile({ ...business, city: '  Berlin ' });
  assert.equal(p, {
    legalName: 'Acme Rechenzentrum GmbH',
    addressLines: ['Hauptstraße 5', '3. OG'],
    city: 'Berlin',
    postalCode: '10115',
    region: null,
    country: 'DE',
    taxId: 'DE123456789',
    taxIdChecked: true,
    invoiceEmail: 'invoices@acme.test',
  });
});

rules('a consumer has no tax id; a country whose VAT format is not public keeps its tax id unchecked; Greece checks with EL', () => {
  const consumer = parseBillingProfile({
    legal_name: 'Nguyễn Văn An',
    address_lines: ['12 Lý Thường Kiệt'],
    city: 'Hà Nội',
    country: 'VN',
    invoice_email: 'an@example.vn',
  });
  assert.is(consumer.taxId, null);
  assert.is(consumer.taxIdChecked, false);
  assert.equal(checkTaxId('0101234567', 'VN'), { taxId: '0101234567', checked: false });
  assert.equal(checkTaxId('EL 123456789', 'GR'), { taxId: 'EL123456789', checked: true });
  assert.equal(checkTaxId('GB123 4567 89', 'GB'), { taxId: 'GB123456789', checked: true });
});

rules('each wrong field is refused by its name', () => {
  assert.is(refusal({ ...business, country: 'XX' }), 'country');
  assert.is(refusal({ ...business, country: 'Germany' }), 'country');
  assert.is(refusal({ ...business, tax_id: 'DE12' }), 'tax_id');
  assert.is(refusal({ ...business, tax_id: 'FR123' }), 'tax_id');
  assert.is(refusal({ ...business, tax_id: 'DE123$56789' }), 'tax_id');
  assert.is(refusal({ ...business, legal_name: undefined }), 'legal_name');
  assert.is(refusal({ ...business, legal_name: 'Acme\nEvil' }), 'legal_name');
  assert.is(refusal({ ...business, address_lines: [] }), 'address_lines');
  assert.is(refusal({ ...business, address_lines: ['a', 'b', 'c', 'd'] }), 'address_lines');
  assert.is(refusal({ ...business, address_lines: 'Hauptstraße 5' }), 'address_lines');
  assert.is(refusal({ ...business, city: 'x'.repeat(101) }), 'city');
  assert.is(refusal({ ...business, invoice_email: 'not an address' }), 'invoice_email');
  assert.is(refusal({ ...business, vat: 'DE123456789' }), 'vat');
  assert.is(refusal({ ...business, postal_code: 10115 }), 'postal_code');
});

rules('the decider: the same profile again decides nothing; a change names the fields it changed', () => {
  const p = parseBillingProfile(business);
  const [first] = billingProfileDecider.decide({ type: 'Set', accountId: 'acme', profile: p }, billingProfileDecider.initialState());
  assert.is(first.type, 'BillingProfileSet');
  assert.equal(first.data.changed, ['legalName', 'addressLines', 'city', 'postalCode', 'region', 'country', 'taxId', 'invoiceEmail']);
  const s = billingProfileDecider.evolve(billingProfileDecider.initialState(), first);
  assert.equal(billingProfileDecider.decide({ type: 'Set', accountId: 'acme', profile: p }, s), []);
  const [moved] = billingProfileDecider.decide({ type: 'Set', accountId: 'acme', profile: { ...p, city: 'Hamburg', postalCode: '20095' } }, s);
  assert.equal(moved.data.changed, ['city', 'postalCode']);
});

rules.run();

const ADMIN = 'billing-profile-admin-token-0123456789abcdef';
const served = suite(`billing profile through /app and the admin API (${process.env.DATABASE_URL ? 'postgres, two gateways' : 'pglite'})`);
let gw: TestGateway;
let other: TestGateway;
let smtp: Awaited<ReturnType<typeof startSmtpServer>>;
let acme: TestAccount;
let owner: Person;
let biller: Person;
let developer: Person;

const admin = (g: TestGateway, path: string, body?: unknown, method?: string) =>
  call(g, `/admin/v1${path}`, { body, method, headers: { authorization: `Bearer ${ADMIN}`, 'x-tollgate-actor': 'ops-anna' } });
const profileEvents = async (accountId: string) => (await gw.ledger.events.readStream(streams.billingProfile(accountId))).length;

served.before(async () => {
  smtp = await startSmtpServer();
  gw = await startTestGateway({ adminToken: ADMIN, customers: { ...customerSettingsFromEnv({}), smtpUrl: smtp.url } });
  other = process.env.DATABASE_URL ? await startTestGateway({ adminToken: ADMIN, bootstrap: false, schema: gw.ledger.schema }) : gw;
  acme = await openAccount(gw, { quota: 1_000_000 });
  for (const [email, role] of [
    ['owner@acme.test', 'owner'],
    ['books@acme.test', 'billing'],
    ['dev@acme.test', 'developer'],
  ]) {
    const r = await admin(gw, `/accounts/${acme.accountId}/members`, { email, role });
    assert.is(r.status, 201, r.text);
  }
  owner = await signInByLink(gw, smtp, 'owner@acme.test');
  biller = await signInByLink(gw, smtp, 'books@acme.test');
  developer = await signInByLink(gw, smtp, 'dev@acme.test');
});
served.after(async () => {
  if (other && other !== gw) await other.close();
  await gw?.stop();
  await smtp?.close();
});

served('the owner sets it in /app; the operator reads it on the other gateway, with who set it', async () => {
  const path = `/accounts/${acme.accountId}/billing-profile`;
  const empty = await asPerson(gw, owner, path);
  assert.is(empty.status, 200, empty.text);
  assert.is(empty.json.profile, null);
  assert.equal(empty.json.history, []);

  const set = await asPerson(gw, owner, path, business, 'PUT');
  assert.is(set.status, 200, set.text);
  assert.is(set.json.profile.tax_id, 'DE123456789');
  assert.is(set.json.profile.tax_id_checked, true);
  assert.is(set.json.profile.business, true);
  assert.is(set.json.profile.country, 'DE');

  const seen = await admin(other, path);
  assert.is(seen.status, 200, seen.text);
  assert.equal(seen.json.profile, set.json.profile);
  assert.is(seen.json.history.length, 1);
  assert.ok(seen.json.history[0].by.startsWith('member:') && seen.json.history[0].by.endsWith(':owner@acme.test'), seen.json.history[0].by);
  assert.is(seen.json.updated_by, seen.json.history[0].by);
});

served('a billing member changes the city; the history names them and the fields; the same profile again writes nothing', async () => {
  const path = `/accounts/${acme.accountId}/billing-profile`;
  const moved = await asPerson(gw, biller, path, { ...business, city: 'Hamburg', postal_code: '20095' }, 'PUT');
  assert.is(moved.status, 200, moved.text);
  assert.is(moved.json.history.length, 2);
  assert.equal(moved.json.history[0].changed, ['city', 'postal_code']);
  assert.ok(moved.json.history[0].by.endsWith(':books@acme.test'));
  const before = await profileEvents(acme.accountId);
  const again = await admin(other, path, { ...business, city: 'Hamburg', postal_code: '20095' }, 'PUT');
  assert.is(again.status, 200, again.text);
  assert.is(await profileEvents(acme.accountId), before, 'nothing appended');
});

served('a developer is refused (403) and bad input gets a 400 naming the field: nothing is written', async () => {
  const path = `/accounts/${acme.accountId}/billing-profile`;
  const before = await profileEvents(acme.accountId);
  const refused = await asPerson(gw, developer, path, { ...business, city: 'Köln' }, 'PUT');
  assert.is(refused.status, 403, refused.text);
  const read = await asPerson(gw, developer, path);
  assert.is(read.status, 403, read.text);
  for (const [body, param] of [
    [{ ...business, country: 'XX' }, 'country'],
    [{ ...business, tax_id: 'DE12' }, 'tax_id'],
    [{ ...business, invoice_email: 'nobody' }, 'invoice_email'],
    [{ ...business, address_lines: [] }, 'address_lines'],
  ] as const) {
    for (const [who, r] of [
      ['operator', await admin(other, path, body, 'PUT')],
      ['owner', await asPerson(gw, owner, path, body, 'PUT')],
    ] as const) {
      assert.is(r.status, 400, `${who}: ${r.text}`);
      assert.is(r.json.error.param, param, `${who}: ${r.text}`);
      assert.ok(r.json.error.message.includes(param), r.json.error.message);
    }
  }
  assert.is(await profileEvents(acme.accountId), before, 'nothing appended');
});

served('the operator sets a consumer profile through the admin API; an unknown account is a 404', async () => {
  const shop = await openAccount(gw, { quota: 1000 });
  const path = `/accounts/${shop.accountId}/billing-profile`;
  const set = await admin(
    other,
    path,
    { legal_name: 'Trần Thị Bình', address_lines: ['45 Nguyễn Huệ'], city: 'TP Hồ Chí Minh', country: 'VN', invoice_email: 'binh@example.vn' },
    'PUT',
  );
  assert.is(set.status, 200, set.text);
  assert.is(set.json.profile.business, false);
  assert.is(set.json.profile.tax_id, null);
  assert.is(set.json.history[0].by, 'admin:ops-anna');
  const missing = await admin(gw, '/accounts/no_such_account/billing-profile', business, 'PUT');
  assert.is(missing.status, 404, missing.text);
  assert.is(await profileEvents('no_such_account'), 0);
});

served('the CLI sets the profile from a JSON file and shows it', async () => {
  const shop = await openAccount(gw, { quota: 1000 });
  const file = join(mkdtempSync(join(tmpdir(), 'billing-profile-')), 'profile.json');
  writeFileSync(
    file,
    JSON.stringify({ ...business, legal_name: 'Acme Cloud SARL', country: 'FR', tax_id: 'FR 40 303265045', city: 'Lyon', postal_code: '69001' }),
  );
  const cli = (...args: string[]) =>
    promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'billing-profile', ...args, '--url', other.url, '--token', ADMIN, '--actor', 'cli-ops'],
      {
        cwd: fileURLToPath(new URL('..', import.meta.url)),
      },
    );
  const set = await cli('set', shop.accountId, file);
  assert.match(
    set.stdout.trim(),
    new RegExp(`^${shop.accountId}\tAcme Cloud SARL\tFR\tbusiness FR40303265045\tinvoices@acme.test\tchanged \\S+ by admin:cli-ops$`),
  );
  const shown = await cli('show', shop.accountId);
  assert.is(shown.stdout, set.stdout);
  const bad = await cli('set', shop.accountId, join(file, 'missing')).then(
    () => null,
    (err: { code: number; stderr: string }) => err,
  );
  assert.ok(bad && bad.code !== 0 && /not a readable JSON file/.test(bad.stderr), bad?.stderr);
});

served.run();
