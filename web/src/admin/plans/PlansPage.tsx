// Plans: the list, and one form that defines a plan or updates the one being edited (its quota,
// validity, call rate and models).
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { admin, enc } from '../api/client.ts';
import { clientProblem } from '../../shared/problem.ts';
import { InputField } from '../../shared/components/Field.tsx';
import { Heading, Loading, Result } from '../../shared/components/Page.tsx';
import { DataTable, Num } from '../../shared/components/DataTable.tsx';
import { when } from '../../shared/format.ts';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { useAction } from '../../shared/useAction.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';
import type { List, Model, Plan } from '../api/types.ts';

interface Terms {
  plan_id: string;
  name: string;
  quota: string;
  validity_days: string;
  requests_per_minute: string;
  all: boolean;
  models: string[];
}
const EMPTY: Terms = { plan_id: '', name: '', quota: '', validity_days: '30', requests_per_minute: '60', all: true, models: [] };

export function PlansPage() {
  const [plans, setPlans] = useState<Plan[] | null>(null);
  const [modelIds, setModelIds] = useState<string[]>([]);
  const [busy, setBusy] = useState(true);
  const [failed, setFailed] = useState(false);
  const [problem, setProblem] = useState<unknown>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const [terms, setTerms] = useState<Terms>(EMPTY);
  const [done, setDone] = useState('');
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const set = (patch: Partial<Terms>) => setTerms((t) => ({ ...t, ...patch }));

  const load = async () => {
    setBusy(true);
    try {
      const [p, m] = await Promise.all([admin<List<Plan>>('plans'), admin<List<Model>>('models')]);
      setPlans(p.data);
      setModelIds(m.data.map((x) => x.model_id));
      setFailed(false);
    } catch (err) {
      setFailed(true);
      setProblem(err);
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => void load(), []);

  const edit = (p: Plan) => {
    setEditing(p.plan_id);
    setTerms({
      plan_id: p.plan_id,
      name: p.name,
      quota: String(p.quota),
      validity_days: String(p.validity_days),
      requests_per_minute: String(p.requests_per_minute),
      all: p.models.includes('*'),
      models: p.models,
    });
    setDone('');
  };
  // The form takes the focus as an edit begins, in the turn that renders it: a deferred focus could
  // land after the operator had already clicked into another field, and steal what they type.
  useLayoutEffect(() => {
    if (editing) document.getElementById('plan-name')?.focus();
  }, [editing]);
  const stopEditing = () => {
    setEditing(null);
    setTerms(EMPTY);
  };

  const submit = async (ev: Event) => {
    ev.preventDefault();
    const update = editing;
    const res = await action.run(async () => {
      const ints = { quota: Number(terms.quota), validity_days: Number(terms.validity_days), requests_per_minute: Number(terms.requests_per_minute) };
      if (!terms.plan_id.trim()) throw clientProblem('Give the plan an id.', 'plan_id');
      if (!terms.name.trim()) throw clientProblem('Give the plan a name.', 'name');
      for (const [k, v] of Object.entries(ints))
        if (!Number.isSafeInteger(v) || v < (k === 'quota' ? 0 : 1)) throw clientProblem('Enter a whole number here.', k);
      const models = terms.all ? ['*'] : modelIds.filter((m) => terms.models.includes(m));
      if (models.length === 0) throw clientProblem('Choose at least one model, or all models.', 'models');
      const body = { name: terms.name.trim(), ...ints, models };
      return update
        ? admin<{ planId: string }>(`plans/${enc(update)}`, { method: 'PUT', body })
        : admin<{ planId: string }>('plans', { method: 'POST', body: { plan_id: terms.plan_id.trim(), ...body } });
    });
    if (!res) return;
    stopEditing();
    await load();
    setDone(update ? `Plan ${res.planId} updated: subscriptions started or renewed from now get the new terms.` : `Plan ${res.planId} defined.`);
  };

  const number = (id: keyof Terms, label: string, min: number, max?: number) => (
    <InputField
      id={`plan-${id}`}
      label={label}
      type="number"
      name={id}
      min={min}
      max={max}
      step={1}
      inputMode="numeric"
      required
      value={terms[id] as string}
      onValue={(v) => set({ [id]: v })}
    />
  );

  return (
    <>
      <Heading text="Plans" intro="What a subscription gives: a quota of tokens for a number of days, a call rate and the models it may use." />
      <ProblemRegion problem={problem} onDismiss={() => setProblem(null)} />
      <section class="card" aria-labelledby="plans-list-heading">
        <h2 id="plans-list-heading">All plans</h2>
        <div aria-busy={busy ? 'true' : 'false'}>
          {plans ? (
            <DataTable
              caption="Plans"
              tableId="plans-table"
              columns={['Plan', '#Quota', '#Days', '#Requests/min', 'Models', 'Changed', 'Action']}
              empty="No plans yet: define one below."
              rows={plans.map((p) => (
                <tr key={p.plan_id} data-plan-id={p.plan_id}>
                  <th scope="row">
                    {p.name}
                    <span class="sub">{p.plan_id}</span>
                  </th>
                  <Num value={p.quota} />
                  <Num value={p.validity_days} />
                  <Num value={p.requests_per_minute} />
                  <td class="models">{p.models.includes('*') ? 'All models' : p.models.join(', ')}</td>
                  <td>{when(p.updated_at)}</td>
                  <td>
                    <button type="button" class="secondary small" aria-label={`Edit plan ${p.plan_id}`} onClick={() => edit(p)}>
                      Edit
                    </button>
                  </td>
                </tr>
              ))}
            />
          ) : (
            <Loading text={failed ? 'The plans could not be loaded.' : 'Loading the plans…'} />
          )}
        </div>
      </section>
      <section class="card" aria-labelledby="plan-form-heading">
        <h2 id="plan-form-heading">{editing ? `Update plan ${editing}` : 'Define a plan'}</h2>
        <form ref={form} class="form-grid" noValidate onSubmit={submit}>
          <InputField
            id="plan-id"
            label="Plan id"
            help="Letters, digits, _ . : -"
            type="text"
            name="plan_id"
            required
            maxLength={64}
            readOnly={!!editing}
            value={terms.plan_id}
            onValue={(v) => set({ plan_id: v })}
          />
          <InputField id="plan-name" label="Name" type="text" name="name" required maxLength={200} value={terms.name} onValue={(v) => set({ name: v })} />
          {number('quota', 'Quota (tokens)', 0)}
          {number('validity_days', 'Validity (days)', 1, 3650)}
          {number('requests_per_minute', 'Requests per minute', 1)}
          <fieldset class="field models-field">
            <legend>Models</legend>
            <label class="check" for="plan-all">
              <input type="checkbox" id="plan-all" name="models" checked={terms.all} onChange={(e) => set({ all: e.currentTarget.checked })} /> All models (*),
              also those priced later
            </label>
            <div class="checks">
              {modelIds.map((m) => (
                <label key={m} class="check" for={`plan-m-${m}`}>
                  <input
                    type="checkbox"
                    id={`plan-m-${m}`}
                    value={m}
                    disabled={terms.all}
                    checked={terms.models.includes(m)}
                    onChange={(e) => set({ models: e.currentTarget.checked ? [...terms.models, m] : terms.models.filter((x) => x !== m) })}
                  />{' '}
                  {m}
                </label>
              ))}
            </div>
          </fieldset>
          <FormActions
            submit={editing ? 'Update plan' : 'Define plan'}
            busy={action.busy}
            cancel="Cancel editing"
            onCancel={
              editing
                ? () => {
                    stopEditing();
                    document.getElementById('plan-id')?.focus();
                  }
                : undefined
            }
          />
        </form>
        {action.region()}
        <Result>{done}</Result>
      </section>
    </>
  );
}
