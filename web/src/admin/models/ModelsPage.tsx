// Models and prices: each priced model's multiplier, status, alias and cache weights, and the form
// that changes one (only what changed is sent; a price applies from now on).
import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import { admin, pathOf } from '../api/client.ts';
import { clientProblem } from '../../shared/problem.ts';
import { Field, InputField } from '../../shared/components/Field.tsx';
import { Heading, Loading, Pill, Result } from '../../shared/components/Page.tsx';
import { DataTable } from '../../shared/components/DataTable.tsx';
import { milli, when } from '../../shared/format.ts';
import { useLoaded } from '../../shared/useLoaded.ts';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { useAction } from '../../shared/useAction.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';
import type { List, Model } from '../api/types.ts';

const Weight = ({ v }: { v: number | null }) => (v === null ? <span class="muted">plain</span> : <>{String(milli(v))}</>);

export function ModelsPage() {
  const loaded = useLoaded(async () => (await admin<List<Model>>('models')).data);
  const { data: models, busy, failed, problem, setProblem, load } = loaded;
  const [editing, setEditing] = useState<Model | null>(null);
  const [done, setDone] = useState('');
  const list = useRef<HTMLDivElement>(null);

  const focusRow = (id: string) => setTimeout(() => list.current?.querySelector<HTMLElement>(`tr[data-model-id="${CSS.escape(id)}"] button`)?.focus(), 0);

  return (
    <>
      <Heading text="Models and prices" intro="Prices apply from the moment they are set; to fix what was already billed, use a correction." />
      <ProblemRegion problem={problem} onDismiss={() => setProblem(null)} />
      <Result>{done}</Result>
      {editing && (
        <PriceForm
          key={editing.model_id}
          m={editing}
          onClose={() => {
            setEditing(null);
            focusRow(editing.model_id);
          }}
          onSaved={async (text) => {
            setEditing(null);
            // The table is reloaded before the message, so what the message announces is already shown.
            await load();
            setDone(text);
            focusRow(editing.model_id);
          }}
        />
      )}
      <section class="card" aria-labelledby="models-list-heading">
        <h2 id="models-list-heading">Priced models</h2>
        <div ref={list} aria-busy={busy ? 'true' : 'false'}>
          {models ? (
            <DataTable
              caption="Model prices"
              tableId="models-table"
              columns={['Model', 'Alias', '#Multiplier', 'Status', '#Cache read weight', '#Cache write weight', 'Priced', 'Action']}
              empty="No model is priced."
              rows={models.map((m) => (
                <tr key={m.model_id} data-model-id={m.model_id}>
                  <th scope="row">{m.model_id}</th>
                  <td>{m.alias ?? '—'}</td>
                  <td class="num" data-value={milli(m.multiplier_milli) ?? ''}>
                    ×{milli(m.multiplier_milli)}
                  </td>
                  <td>
                    <Pill state={m.status === 'ACTIVE' ? 'active' : 'inactive'} text={m.status === 'ACTIVE' ? 'Active' : 'Inactive'} />
                  </td>
                  <td class="num">
                    <Weight v={m.cache_read_milli} />
                  </td>
                  <td class="num">
                    <Weight v={m.cache_write_milli} />
                  </td>
                  <td>{when(m.updated_at)}</td>
                  <td>
                    <button type="button" class="secondary small" aria-label={`Edit the price of ${m.model_id}`} onClick={() => setEditing(m)}>
                      Edit
                    </button>
                  </td>
                </tr>
              ))}
            />
          ) : (
            <Loading text={failed ? 'The models could not be loaded.' : 'Loading the models…'} />
          )}
        </div>
      </section>
    </>
  );
}

function PriceForm({ m, onClose, onSaved }: { m: Model; onClose: () => void; onSaved: (text: string) => void }) {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const [multiplier, setMultiplier] = useState(String(milli(m.multiplier_milli)));
  const [status, setStatus] = useState(m.status);
  const [alias, setAlias] = useState(m.alias ?? '');
  const [read, setRead] = useState(m.cache_read_milli === null ? '' : String(milli(m.cache_read_milli)));
  const [write, setWrite] = useState(m.cache_write_milli === null ? '' : String(milli(m.cache_write_milli)));
  useLayoutEffect(() => document.getElementById('price-multiplier')?.focus(), []);

  const submit = async (ev: Event) => {
    ev.preventDefault();
    const res = await action.run(async () => {
      const body: Record<string, unknown> = {};
      const mult = Number(multiplier);
      if (!(mult > 0)) throw clientProblem('The multiplier must be a number above 0.', 'multiplier');
      if (Math.round(mult * 1000) !== m.multiplier_milli) body.multiplier = mult;
      if (status !== m.status) body.status = status;
      const a = alias.trim() || null;
      if (a !== (m.alias ?? null)) body.alias = a;
      for (const [text, key, before] of [
        [read, 'cache_read_weight', m.cache_read_milli],
        [write, 'cache_write_weight', m.cache_write_milli],
      ] as const) {
        const v = text.trim() === '' ? null : Number(text);
        if (v !== null && !(v >= 0 && v <= 1000)) throw clientProblem('A weight is a number from 0 to 1000, or empty.', key);
        if ((v === null ? null : Math.round(v * 1000)) !== (before ?? null)) body[key] = v;
      }
      if (Object.keys(body).length === 0) throw clientProblem('Nothing changed.');
      return admin<{ multiplierMilli: number; status: string; alias: string | null }>(`models/${pathOf(m.model_id)}`, { method: 'PATCH', body });
    });
    if (res)
      onSaved(
        `${m.model_id} priced: ×${milli(res.multiplierMilli)}, ${res.status === 'ACTIVE' ? 'active' : 'inactive'}${res.alias ? `, alias ${res.alias}` : ''}.`,
      );
  };
  const weight = (id: string, name: string, label: string, help: string, value: string, onValue: (v: string) => void) => (
    <InputField
      id={id}
      label={label}
      optional
      help={help}
      type="number"
      name={name}
      min={0}
      max={1000}
      step={0.001}
      inputMode="decimal"
      value={value}
      onValue={onValue}
    />
  );
  return (
    <section class="card edit-card" aria-labelledby="model-edit-heading">
      <h2 id="model-edit-heading">Price of {m.model_id}</h2>
      <form ref={form} class="form-grid" noValidate onSubmit={submit}>
        <InputField
          id="price-multiplier"
          label="Multiplier"
          help="Billed tokens = tokens × multiplier, from now on."
          type="number"
          name="multiplier"
          min={0.001}
          step={0.001}
          inputMode="decimal"
          value={multiplier}
          onValue={(v) => setMultiplier(v)}
        />
        <Field id="price-status" label="Status">
          <select id="price-status" name="status" value={status} onChange={(e) => setStatus(e.currentTarget.value as Model['status'])}>
            <option value="ACTIVE">Active</option>
            <option value="INACTIVE">Inactive</option>
          </select>
        </Field>
        <InputField
          id="price-alias"
          label="Alias"
          optional
          help="Another id callers may use; empty for none."
          type="text"
          name="alias"
          maxLength={100}
          value={alias}
          onValue={(v) => setAlias(v)}
        />
        {weight(
          'price-read',
          'cache_read_weight',
          'Cache read weight',
          'Price of a cached prompt token (1 = a plain one); empty: a plain token.',
          read,
          setRead,
        )}
        {weight('price-write', 'cache_write_weight', 'Cache write weight', 'Price of a cache-written prompt token; empty: a plain token.', write, setWrite)}
        <FormActions submit="Save price" busy={action.busy} onCancel={onClose} />
      </form>
      {action.region()}
    </section>
  );
}
