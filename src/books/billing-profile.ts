// An account's billing profile (issue 43): who its invoices are made out to. Set by the account's
// owners and billing members in /app and by the operator; every change is an event with its actor
// on the account's billing-profile stream, so an invoice can name the buyer as they were when it
// was issued. Checked here, before anything is decided: texts within bounds and free of control
// characters, a country of ISO 3166-1, an address for the invoice, and a tax id in the public
// format of the country's VAT numbers where one is known (validator's tables).
import validator from 'validator';
import type { Decider } from '../ledger/decider.ts';
import type { StreamEvents } from '../ledger/events.ts';
import { invalid } from '../ledger/errors.ts';

export interface BillingProfile {
  legalName: string;
  /** The street address, one to three lines. */
  addressLines: string[];
  city: string;
  postalCode: string | null;
  region: string | null;
  /** ISO 3166-1 alpha-2, upper case. */
  country: string;
  /** A business's tax id (VAT number), normalised: upper case letters and digits only. Null for a consumer. */
  taxId: string | null;
  /** Whether the tax id matched its country's public VAT number format (false: no format is known for the country). */
  taxIdChecked: boolean;
  invoiceEmail: string;
}

/** The profile's fields as the API names them, in the order they are listed. */
export const PROFILE_FIELDS = {
  legalName: 'legal_name',
  addressLines: 'address_lines',
  city: 'city',
  postalCode: 'postal_code',
  region: 'region',
  country: 'country',
  taxId: 'tax_id',
  invoiceEmail: 'invoice_email',
} as const;

export type ProfileField = keyof typeof PROFILE_FIELDS;

// Greece's VAT numbers carry the prefix EL, not its ISO code GR.
const VAT_PREFIX: Record<string, string> = { GR: 'EL' };

/** Whether `taxId` has the format of the country's VAT numbers; null where validator knows no format for it (isVAT throws then). */
function vatFormatMatches(taxId: string, country: string): boolean | null {
  try {
    return validator.isVAT(taxId, (VAT_PREFIX[country] ?? country) as validator.VATCountryCode);
  } catch {
    return null;
  }
}

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

function text(body: Record<string, unknown>, field: ProfileField, max: number, required: true): string;
function text(body: Record<string, unknown>, field: ProfileField, max: number, required: false): string | null;
function text(body: Record<string, unknown>, field: ProfileField, max: number, required: boolean): string | null {
  const name = PROFILE_FIELDS[field];
  const v = body[name];
  if (v === undefined || v === null || (typeof v === 'string' && v.trim() === '')) {
    if (required) throw invalid(`'${name}' is required.`, { param: name });
    return null;
  }
  if (typeof v !== 'string') throw invalid(`'${name}' must be a string.`, { param: name });
  const t = v.trim();
  if (t.length > max) throw invalid(`'${name}' is longer than ${max} characters.`, { param: name });
  if (CONTROL.test(t)) throw invalid(`'${name}' may not contain control characters (line breaks included).`, { param: name });
  return t;
}

function addressLines(body: Record<string, unknown>): string[] {
  const name = PROFILE_FIELDS.addressLines;
  const v = body[name];
  if (!Array.isArray(v) || v.length < 1 || v.length > 3) throw invalid(`'${name}' must be a list of one to three lines.`, { param: name });
  return v.map((line, i) => {
    if (typeof line !== 'string' || line.trim() === '') throw invalid(`'${name}' line ${i + 1} must be a non-empty string.`, { param: name });
    const t = line.trim();
    if (t.length > 200) throw invalid(`'${name}' line ${i + 1} is longer than 200 characters.`, { param: name });
    if (CONTROL.test(t)) throw invalid(`'${name}' line ${i + 1} may not contain control characters.`, { param: name });
    return t;
  });
}

/** A tax id normalised (spaces, dots and dashes dropped, upper case), checked against the country's VAT format where one is known. */
export function checkTaxId(raw: string, country: string): { taxId: string; checked: boolean } {
  const name = PROFILE_FIELDS.taxId;
  const taxId = raw.replace(/[\s.-]/g, '').toUpperCase();
  if (!/^[A-Z0-9]{2,32}$/.test(taxId)) throw invalid(`'${name}' must be 2 to 32 letters and digits (spaces, dots and dashes are ignored).`, { param: name });
  // Some of validator's formats are written with spaces (GB): the number as given may match where its normalised form does not.
  const given = raw.trim().toUpperCase();
  const matches = vatFormatMatches(taxId, country) || vatFormatMatches(given, country);
  if (matches === false) throw invalid(`'${name}' ${taxId} does not have the format of a VAT number of ${country}.`, { param: name });
  return { taxId, checked: matches === true };
}

/** The profile a request body describes (every field, as the API names them), or a 400 naming the first wrong field. */
export function parseBillingProfile(body: unknown): BillingProfile {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw invalid('The billing profile must be a JSON object.');
  const b = body as Record<string, unknown>;
  const known = new Set<string>(Object.values(PROFILE_FIELDS));
  const unknown = Object.keys(b).find((k) => !known.has(k));
  if (unknown !== undefined)
    throw invalid(`Unknown field '${unknown.slice(0, 60)}': a billing profile has ${[...known].join(', ')}.`, { param: unknown.slice(0, 60) });
  const legalName = text(b, 'legalName', 200, true);
  const lines = addressLines(b);
  const city = text(b, 'city', 100, true);
  const postalCode = text(b, 'postalCode', 20, false);
  const region = text(b, 'region', 100, false);
  const countryRaw = text(b, 'country', 2, true).toUpperCase();
  if (!validator.isISO31661Alpha2(countryRaw))
    throw invalid(`'country' must be an ISO 3166-1 alpha-2 code (DE, VN, US…), not ${countryRaw}.`, { param: 'country' });
  const rawTaxId = text(b, 'taxId', 40, false);
  const tax = rawTaxId === null ? { taxId: null, checked: false } : checkTaxId(rawTaxId, countryRaw);
  const invoiceEmail = text(b, 'invoiceEmail', 254, true);
  if (!validator.isEmail(invoiceEmail)) throw invalid(`'invoice_email' must be an email address.`, { param: 'invoice_email' });
  return {
    legalName,
    addressLines: lines,
    city,
    postalCode,
    region,
    country: countryRaw,
    taxId: tax.taxId,
    taxIdChecked: tax.checked,
    invoiceEmail: invoiceEmail.toLowerCase(),
  };
}

/** The fields in which two profiles differ. */
export function changedFields(before: BillingProfile | null, after: BillingProfile): ProfileField[] {
  const keys = Object.keys(PROFILE_FIELDS) as ProfileField[];
  if (!before) return keys;
  return keys.filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
}

export interface BillingProfileState {
  profile: BillingProfile | null;
}

export type BillingProfileCommand = { type: 'Set'; accountId: string; profile: BillingProfile };

export const billingProfileDecider: Decider<BillingProfileState, BillingProfileCommand, StreamEvents['billingProfile']> = {
  initialState: () => ({ profile: null }),
  decide(c, s) {
    const changed = changedFields(s.profile, c.profile);
    // The same profile again changes nothing: no event.
    if (changed.length === 0) return [];
    return [{ type: 'BillingProfileSet', data: { accountId: c.accountId, ...c.profile, changed } }];
  },
  evolve(s, e) {
    const { accountId: _accountId, changed: _changed, ...profile } = e.data;
    return { profile };
  },
};
