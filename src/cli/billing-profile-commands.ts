// `tollgate billing-profile show|set`: an account's billing details (src/books/billing-profile-routes.ts)
// from the command line; `set` sends the whole profile as JSON from a file, or from standard input (-).
import { readFileSync } from 'node:fs';
import { CliError, requiredArg as arg, type AdminClient, type CliArgs as Args, type CliOut as Out } from './admin-client.ts';

interface ProfileBody {
  account_id: string;
  profile: { legal_name: string; country: string; tax_id: string | null; business: boolean; invoice_email: string } | null;
  updated_at: string | null;
  updated_by: string | null;
}

const summary = (r: ProfileBody): string =>
  r.profile
    ? `${r.account_id}\t${r.profile.legal_name}\t${r.profile.country}\t${r.profile.business ? `business ${r.profile.tax_id}` : 'consumer'}\t${r.profile.invoice_email}\tchanged ${r.updated_at} by ${r.updated_by}`
    : `${r.account_id}\tno billing profile yet`;

export async function runBillingProfileCommand(sub: string, p: Args, c: AdminClient, out: Out): Promise<void> {
  const account = arg(p.positionals, 2, 'account');
  const path = `/accounts/${encodeURIComponent(account)}/billing-profile`;
  if (sub === 'show') {
    const r = await c.json<ProfileBody>('GET', path);
    return out(summary(r), r);
  }
  const file = arg(p.positionals, 3, 'file');
  let body: unknown;
  try {
    body = JSON.parse(readFileSync(file === '-' ? 0 : file, 'utf8'));
  } catch (err) {
    throw new CliError(`${file === '-' ? 'standard input' : file} is not a readable JSON file: ${(err as Error).message}`, 2);
  }
  const r = await c.json<ProfileBody>('PUT', path, body);
  return out(summary(r), r);
}
