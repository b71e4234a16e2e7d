// Reading and setting an account's billing profile (billing-profile.ts has its rules), for the
// operator's routes and the account's owners and billing members in /app alike. The stream holds
// a few events an account: it is read whole from the log, so an answer is as current as the log.
import type { Ledger } from '../ledger/ledger.ts';
import { metadataFor } from '../ledger/ledger.ts';
import { streams } from '../ledger/events.ts';
import { DomainError } from '../ledger/errors.ts';
import { accountState } from '../accounts/index.ts';
import { billingProfileDecider, parseBillingProfile, PROFILE_FIELDS, type BillingProfile, type ProfileField } from './billing-profile.ts';

/** The profile as the API shows it (null until one is set), with who set what and when. */
export interface BillingProfileView {
  object: 'billing_profile';
  account_id: string;
  profile: {
    legal_name: string;
    address_lines: string[];
    city: string;
    postal_code: string | null;
    region: string | null;
    country: string;
    tax_id: string | null;
    tax_id_checked: boolean;
    /** A tax id makes the buyer a business (its invoices may be reverse-charged); none, a consumer. */
    business: boolean;
    invoice_email: string;
  } | null;
  updated_at: string | null;
  updated_by: string | null;
  history: Array<{ at: string; by: string; changed: string[]; event_id: string }>;
}

const profileBody = (p: BillingProfile): NonNullable<BillingProfileView['profile']> => ({
  legal_name: p.legalName,
  address_lines: p.addressLines,
  city: p.city,
  postal_code: p.postalCode,
  region: p.region,
  country: p.country,
  tax_id: p.taxId,
  tax_id_checked: p.taxIdChecked,
  business: p.taxId !== null,
  invoice_email: p.invoiceEmail,
});

async function requireAccount(ledger: Ledger, accountId: string): Promise<void> {
  if (!(await accountState(ledger, accountId)).opened)
    throw new DomainError('not_found', `account ${accountId.slice(0, 100)} not found`, { param: 'account_id' });
}

/** The account's billing profile now, and its history. */
export async function billingProfileOf(ledger: Ledger, accountId: string): Promise<BillingProfileView> {
  await requireAccount(ledger, accountId);
  return profileView(ledger, accountId);
}

/** The profile and its history as the log has them (the account known to exist). */
async function profileView(ledger: Ledger, accountId: string): Promise<BillingProfileView> {
  let state = billingProfileDecider.initialState();
  const history: BillingProfileView['history'] = [];
  for (const e of await ledger.events.readStream(streams.billingProfile(accountId))) {
    if (e.type !== 'BillingProfileSet') continue;
    state = billingProfileDecider.evolve(state, { type: 'BillingProfileSet', data: e.data as never });
    const changed = (e.data as { changed: ProfileField[] }).changed.map((f) => PROFILE_FIELDS[f]);
    history.push({ at: e.timestamp, by: e.metadata.actor, changed, event_id: e.id });
  }
  const last = history.at(-1);
  return {
    object: 'billing_profile',
    account_id: accountId,
    profile: state.profile && profileBody(state.profile),
    updated_at: last?.at ?? null,
    updated_by: last?.by ?? null,
    history: history.reverse(),
  };
}

/** Sets the whole profile from a request body (a 400 naming the first wrong field, and nothing written); the same profile again writes nothing. */
export async function setBillingProfile(ledger: Ledger, accountId: string, body: unknown, actor: string): Promise<BillingProfileView> {
  const profile = parseBillingProfile(body);
  await requireAccount(ledger, accountId);
  await ledger.command(billingProfileDecider, streams.billingProfile(accountId), { type: 'Set', accountId, profile }, metadataFor(actor));
  return profileView(ledger, accountId);
}
