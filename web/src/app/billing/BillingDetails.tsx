// Who the account's invoices are made out to: the billing profile's form. The server checks every
// field (an ISO country code, a tax id in its country's VAT format) and a refusal names the field,
// which the page's alert shows; a saved profile says when it changed and who changed it.
import { useEffect, useState } from 'preact/hooks';
import { InputField } from '../../shared/components/Field.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';
import type { BillingApi } from './api.ts';
import type { BillingProfile } from './types.ts';

interface Props {
  api: BillingApi;
  onProblem: (err: unknown) => void;
}

const EMPTY = { legal_name: '', line1: '', line2: '', city: '', postal_code: '', region: '', country: '', tax_id: '', invoice_email: '' };
type Form = typeof EMPTY;

function formOf(p: BillingProfile['profile']): Form {
  if (!p) return EMPTY;
  return {
    legal_name: p.legal_name,
    line1: p.address_lines[0] ?? '',
    line2: p.address_lines.slice(1).join(', '),
    city: p.city,
    postal_code: p.postal_code ?? '',
    region: p.region ?? '',
    country: p.country,
    tax_id: p.tax_id ?? '',
    invoice_email: p.invoice_email,
  };
}

/** The request body: empty optional fields are left out. */
const bodyOf = (f: Form) => ({
  legal_name: f.legal_name,
  address_lines: [f.line1, f.line2].filter((l) => l.trim() !== ''),
  city: f.city,
  country: f.country,
  invoice_email: f.invoice_email,
  ...(f.postal_code.trim() ? { postal_code: f.postal_code } : {}),
  ...(f.region.trim() ? { region: f.region } : {}),
  ...(f.tax_id.trim() ? { tax_id: f.tax_id } : {}),
});

type Load = 'loading' | 'failed' | 'done';

function savedLine(load: Load, p: BillingProfile | null): string {
  if (load === 'loading') return 'Loading the billing details…';
  if (load === 'failed') return 'The billing details could not be loaded; reload the page to try again.';
  if (!p?.profile || !p.updated_at) return 'No billing details yet: invoices need them.';
  const kind = p.profile.business ? `a business (tax id ${p.profile.tax_id}${p.profile.tax_id_checked ? ', format checked' : ''})` : 'a consumer';
  return `Invoices are made out to ${p.profile.legal_name}, ${kind}. Last changed ${new Date(p.updated_at).toLocaleString()}.`;
}

export function BillingDetails({ api, onProblem }: Props) {
  const [form, setForm] = useState<Form>(EMPTY);
  const [saved, setSaved] = useState<BillingProfile | null>(null);
  // The form stays disabled until the saved details are in: what the owner typed before would be
  // overwritten by them.
  const [load, setLoad] = useState<Load>('loading');
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState('');
  useEffect(() => {
    let current = true;
    api.profile().then(
      (p) => {
        if (!current) return;
        setSaved(p);
        setForm(formOf(p.profile));
        setLoad('done');
      },
      (err: unknown) => {
        if (!current) return;
        setLoad('failed');
        onProblem(err);
      },
    );
    return () => {
      current = false;
    };
  }, [api]);
  const field = (name: keyof Form) => ({ disabled: load !== 'done', value: form[name], onValue: (v: string) => setForm((f) => ({ ...f, [name]: v })) });
  const submit = async (ev: Event) => {
    ev.preventDefault();
    setBusy(true);
    setStatus('');
    try {
      const p = await api.saveProfile(bodyOf(form));
      setSaved(p);
      setForm(formOf(p.profile));
      setStatus('Billing details saved.');
    } catch (err) {
      onProblem(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="card" aria-labelledby="details-heading">
      <h2 id="details-heading">Billing details</h2>
      <p id="details-saved" class="help">
        {savedLine(load, saved)}
      </p>
      <form id="details-form" class="form-grid" onSubmit={submit}>
        <InputField id="legal-name" type="text" label="Legal name" wide required maxLength={200} {...field('legal_name')} />
        <InputField id="address-1" type="text" label="Address" wide required maxLength={200} {...field('line1')} />
        <InputField id="address-2" type="text" label="Address, second line" optional wide maxLength={200} {...field('line2')} />
        <InputField id="city" type="text" label="City" required maxLength={100} {...field('city')} />
        <InputField id="postal-code" type="text" label="Postal code" optional maxLength={20} {...field('postal_code')} />
        <InputField id="region" type="text" label="Region" optional maxLength={100} {...field('region')} />
        <InputField id="country" type="text" label="Country" help="Two letters (ISO 3166-1): DE, VN, US…" required maxLength={2} {...field('country')} />
        <InputField
          id="tax-id"
          type="text"
          label="Tax id"
          optional
          wide
          help="Your VAT number when you buy as a business; leave empty as a consumer."
          maxLength={40}
          {...field('tax_id')}
        />
        <InputField id="invoice-email" label="Invoice email" type="email" wide required maxLength={254} {...field('invoice_email')} />
        <FormActions submit="Save billing details" submitId="details-save" busy={busy || load !== 'done'} />
      </form>
      <p id="details-status" class="help ok-text" role="status" aria-live="polite">
        {status}
      </p>
    </section>
  );
}
