// The form for one key's controls (spend limit and its period, models, expiry), under the keys
// table; only what changed is sent.
import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import { admin, enc } from '../api/client.ts';
import { clientProblem } from '../../shared/problem.ts';
import { Field, InputField } from '../../shared/components/Field.tsx';
import { isoToLocal, localToIso } from '../../shared/format.ts';
import { useAction } from '../../shared/useAction.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';
import type { KeyRow } from '../api/types.ts';

const PERIODS: Record<string, string> = { none: 'In total', daily: 'Per day (UTC)', weekly: 'Per week (from Monday, UTC)', monthly: 'Per month (UTC)' };

export function KeyLimitsForm({ accountId, k, onClose, onSaved }: { accountId: string; k: KeyRow; onClose: () => void; onSaved: () => void }) {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const [tokens, setTokens] = useState(k.spend_limit ? String(k.spend_limit.tokens) : '');
  const [period, setPeriod] = useState(k.spend_limit?.period ?? 'monthly');
  const [models, setModels] = useState((k.models ?? []).join(', '));
  const [expires, setExpires] = useState(k.expires_at ? isoToLocal(new Date(k.expires_at)) : '');
  useLayoutEffect(() => document.getElementById('limit-tokens')?.focus(), []);

  const submit = async (ev: Event) => {
    ev.preventDefault();
    const res = await action.run(async () => {
      const body: Record<string, unknown> = {};
      const t = tokens.trim() === '' ? null : Number(tokens);
      if (t !== null && !(Number.isSafeInteger(t) && t >= 0))
        throw clientProblem('Enter a whole number of tokens, or leave it empty for no limit.', 'spend_limit.tokens');
      const limit = t === null ? null : { tokens: t, period };
      if (JSON.stringify(limit) !== JSON.stringify(k.spend_limit ? { tokens: k.spend_limit.tokens, period: k.spend_limit.period } : null))
        body.spend_limit = limit;
      const list = models.split(/[\s,]+/).filter(Boolean);
      const m = list.length ? list : null;
      if (JSON.stringify(m) !== JSON.stringify(k.models ?? null)) body.models = m;
      const e = expires ? localToIso(expires) : null;
      if (expires && !e) throw clientProblem('Choose a valid time, or leave it empty.', 'expires_at');
      if (e !== (k.expires_at ? new Date(k.expires_at).toISOString() : null)) body.expires_at = e;
      if (Object.keys(body).length === 0) throw clientProblem('Nothing changed.');
      return admin(`accounts/${enc(accountId)}/keys/${enc(k.key_id)}`, { method: 'PATCH', body });
    });
    if (res) onSaved();
  };
  return (
    <section class="edit-card limits-card" aria-labelledby="limits-heading">
      <h3 id="limits-heading">
        Limits of key {k.name} ({k.masked})
      </h3>
      <form ref={form} class="form-grid" noValidate onSubmit={submit}>
        <InputField
          id="limit-tokens"
          label="Spend limit (billed tokens)"
          optional
          help="Empty: no limit of its own (the account’s balance still applies)."
          type="number"
          name="spend_limit.tokens"
          min={0}
          step={1}
          inputMode="numeric"
          value={tokens}
          onValue={(v) => setTokens(v)}
        />
        <Field id="limit-period" label="Limit period">
          <select id="limit-period" name="spend_limit.period" value={period} onChange={(e) => setPeriod(e.currentTarget.value)}>
            {Object.entries(PERIODS).map(([v, t]) => (
              <option key={v} value={v}>
                {t}
              </option>
            ))}
          </select>
        </Field>
        <InputField
          id="limit-models"
          label="Models"
          optional
          help="Model ids, separated by commas; empty: every model of the plan."
          type="text"
          name="models"
          value={models}
          onValue={(v) => setModels(v)}
        />
        <InputField
          id="limit-expires"
          label="Key expires (your local time)"
          optional
          help="Empty: the key does not expire."
          type="datetime-local"
          name="expires_at"
          step={1}
          value={expires}
          onValue={(v) => setExpires(v)}
        />
        <FormActions submit="Save limits" busy={action.busy} onCancel={onClose} />
      </form>
      {action.region()}
    </section>
  );
}
