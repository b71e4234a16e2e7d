// An account's plan (subscribe, or renew the current one) and its extra tokens (grant with a reason,
// and optionally terms: an expiry day, a priority, a scope of models; only the filled ones are sent).
import { useRef, useState } from 'preact/hooks';
import { admin, enc } from '../api/client.ts';
import { clientProblem } from '../../shared/problem.ts';
import { Field, InputField } from '../../shared/components/Field.tsx';
import { Result } from '../../shared/components/Page.tsx';
import { dayUtc, fmt, when } from '../../shared/format.ts';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { useAction } from '../../shared/useAction.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';
import type { AccountSummary, ExtraTokensGrant, Plan } from '../api/types.ts';

interface PlanCardProps {
  accountId: string;
  current: AccountSummary | null;
  plans: Plan[] | null;
  plansProblem: unknown;
  onChanged: () => Promise<AccountSummary | null>;
}

export function PlanCard({ accountId, current, plans, plansProblem, onChanged }: PlanCardProps) {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const [picked, setPicked] = useState<string | null>(null);
  const [done, setDone] = useState('');
  const list = plans ?? [];
  const wanted = picked ?? current?.plan?.id ?? '';
  const chosen = list.some((p) => p.plan_id === wanted) ? wanted : '';
  const renew = !!current?.plan && chosen === current.plan.id;

  const submit = async (ev: Event) => {
    ev.preventDefault();
    setDone('');
    const res = await action.run(async () => {
      if (!chosen) throw clientProblem('Choose a plan.', 'plan_id');
      return admin<{ planName?: string; planId?: string; expiresAt: string }>(`accounts/${enc(accountId)}/subscription`, {
        method: 'POST',
        body: { plan_id: chosen },
      });
    });
    if (!res) return;
    await onChanged();
    setDone(`${renew ? 'Renewed' : 'Subscribed to'} ${res.planName ?? res.planId ?? chosen}: expires ${when(res.expiresAt)}.`);
  };
  return (
    <section class="card" aria-labelledby="plan-card-heading">
      <h2 id="plan-card-heading">Plan: subscribe or renew</h2>
      <form ref={form} class="form-grid" noValidate onSubmit={submit}>
        <Field id="plan-choice" label="Plan" wide help="Renewing resets the quota and moves the expiry; a different plan replaces the current one.">
          <select id="plan-choice" name="plan_id" aria-describedby="plan-choice-help" value={chosen} onChange={(e) => setPicked(e.currentTarget.value)}>
            <option value="">{plans === null ? 'Loading the plans…' : list.length ? 'Choose a plan' : 'No plans defined yet'}</option>
            {list.map((p) => (
              <option key={p.plan_id} value={p.plan_id}>
                {`${p.name} (${p.plan_id}): ${fmt(p.quota)} tokens, ${p.validity_days} days`}
              </option>
            ))}
          </select>
        </Field>
        <FormActions submit={renew ? 'Renew' : 'Subscribe'} busy={action.busy} />
      </form>
      <ProblemRegion problem={action.problem ?? plansProblem} onDismiss={() => action.setProblem(null)} />
      <Result>{done}</Result>
    </section>
  );
}

export function ExtraTokensCard({ accountId, onChanged }: { accountId: string; onChanged: () => Promise<AccountSummary | null> }) {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const [amount, setAmount] = useState('');
  const [reason, setReason] = useState('');
  const [expiresOn, setExpiresOn] = useState('');
  const [priority, setPriority] = useState('');
  const [models, setModels] = useState('');
  const [done, setDone] = useState('');
  const submit = async (ev: Event) => {
    ev.preventDefault();
    setDone('');
    const n = Number(amount);
    const res = await action.run(async () => {
      if (!Number.isSafeInteger(n) || n < 1) throw clientProblem('Enter a whole number of tokens, at least 1.', 'amount');
      const body: Record<string, unknown> = { amount: n, reason: reason.trim() };
      // The chosen day's end in UTC; the gateway refuses a day already over.
      if (expiresOn) {
        if (!/^\d{4}-\d{2}-\d{2}$/.test(expiresOn)) throw clientProblem('Choose a day, or leave it empty.', 'expires_at');
        body.expires_at = `${expiresOn}T23:59:59Z`;
      }
      if (priority.trim()) {
        const p = Number(priority);
        if (!Number.isFinite(p)) throw clientProblem('Enter a whole number from 1 to 100, or leave it empty.', 'priority');
        body.priority = p;
      }
      const list = models.split(/[\s,]+/).filter(Boolean);
      if (list.length) body.models = list;
      return admin<ExtraTokensGrant>(`accounts/${enc(accountId)}/extra-tokens`, { method: 'POST', body });
    });
    if (!res) return;
    const a = await onChanged();
    const terms: string[] = [];
    if (res.expires_at) terms.push(`expiring ${when(res.expires_at)}`);
    if (res.models?.length) terms.push(`for ${res.models.join(', ')}`);
    if (priority.trim()) terms.push(`priority ${res.priority}`);
    setDone(
      `Granted ${fmt(res.granted)} extra tokens${terms.length ? `, ${terms.join(', ')}` : ''}.${a ? ` Extra tokens left: ${fmt(a.extra_tokens.remaining)}; remaining tokens: ${fmt(a.remaining_tokens)}.` : ''}`,
    );
    setAmount('');
    setReason('');
    setExpiresOn('');
    setPriority('');
    setModels('');
  };
  return (
    <section class="card" aria-labelledby="extra-heading">
      <h2 id="extra-heading">Extra tokens</h2>
      <form ref={form} class="form-grid" noValidate onSubmit={submit}>
        <InputField
          id="grant-amount"
          label="Tokens to grant"
          help="Spent after the main plan; they do not change the call rate."
          type="number"
          name="amount"
          min={1}
          step={1}
          inputMode="numeric"
          required
          value={amount}
          onValue={(v) => setAmount(v)}
        />
        <InputField
          id="grant-reason"
          label="Reason for the grant"
          optional
          type="text"
          name="reason"
          maxLength={500}
          value={reason}
          onValue={(v) => setReason(v)}
        />
        <InputField
          id="grant-expires"
          label="Expires on"
          optional
          help="The unused tokens expire at the end of that day (23:59:59 UTC). Empty: they never expire."
          type="date"
          name="expires_at"
          min={dayUtc()}
          value={expiresOn}
          onValue={(v) => setExpiresOn(v)}
        />
        <InputField
          id="grant-priority"
          label="Priority"
          optional
          help="1 to 100: lower numbers are drawn first. Empty: 50."
          type="number"
          name="priority"
          min={1}
          max={100}
          step={1}
          inputMode="numeric"
          value={priority}
          onValue={(v) => setPriority(v)}
        />
        <InputField
          id="grant-models"
          label="Models"
          optional
          help="Model ids, separated by commas, that these tokens may pay for. Empty: every model."
          type="text"
          name="models"
          value={models}
          onValue={(v) => setModels(v)}
        />
        <FormActions submit="Grant extra tokens" busy={action.busy} />
      </form>
      {action.region()}
      <Result>{done}</Result>
    </section>
  );
}
