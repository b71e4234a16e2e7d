// A new key for an application: its name, a spend limit (tokens per period), the models it may
// call (empty: every model of the plan) and an expiry day; the server checks them all again.
import { useState } from 'preact/hooks';
import { Field, valueOf } from '../../shared/components/Field.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';
import type { KeyControls, SpendLimit } from '../api/types.ts';

const PERIODS: Array<[SpendLimit['period'], string]> = [
  ['monthly', 'per month'],
  ['weekly', 'per week'],
  ['daily', 'per day'],
  ['none', 'in total'],
];

/** The form's values as the API's key controls (blank fields left out). */
export function controlsOf(v: { name: string; tokens: string; period: SpendLimit['period']; models: string; expires: string }): KeyControls {
  const c: KeyControls = { name: v.name.trim() };
  if (v.tokens.trim() !== '') c.spend_limit = { tokens: Number(v.tokens), period: v.period };
  const models = v.models
    .split(/[\s,]+/)
    .map((m) => m.trim())
    .filter(Boolean);
  if (models.length) c.models = models;
  if (v.expires) c.expires_at = `${v.expires}T00:00:00Z`;
  return c;
}

export function KeyForm({ busy, onCreate }: { busy: boolean; onCreate: (c: KeyControls) => Promise<boolean> }) {
  const empty = { name: '', tokens: '', period: 'monthly' as SpendLimit['period'], models: '', expires: '' };
  const [v, setV] = useState(empty);
  const set = (k: keyof typeof empty) => (e: Event) => setV({ ...v, [k]: valueOf(e) });
  const submit = async (e: Event) => {
    e.preventDefault();
    if (await onCreate(controlsOf(v))) setV(empty);
  };
  return (
    <form class="form-grid" onSubmit={submit} aria-labelledby="create-key-heading">
      <Field id="key-name" label="Application name" help="One key per application, so one can be revoked alone.">
        <input type="text" id="key-name" required maxLength={200} value={v.name} onInput={set('name')} aria-describedby="key-name-help" />
      </Field>
      <Field id="key-limit" label="Spend limit (billed tokens)" optional>
        <input type="number" id="key-limit" min={0} step={1} inputMode="numeric" value={v.tokens} onInput={set('tokens')} />
      </Field>
      <Field id="key-period" label="Limit period">
        <select id="key-period" value={v.period} onChange={set('period')}>
          {PERIODS.map(([p, label]) => (
            <option key={p} value={p}>
              {label}
            </option>
          ))}
        </select>
      </Field>
      <Field id="key-expires" label="Expires on (UTC)" optional>
        <input type="date" id="key-expires" value={v.expires} onInput={set('expires')} />
      </Field>
      <Field id="key-models" label="Models" optional wide help="Model ids separated by commas; empty: every model of your plan.">
        <input type="text" id="key-models" value={v.models} onInput={set('models')} aria-describedby="key-models-help" />
      </Field>
      <FormActions submit={busy ? 'Creating…' : 'Create key'} busy={busy} />
    </form>
  );
}
