// Redemption codes: mint a batch for a pack or a plan at the price it was sold at elsewhere. The
// codes are in the gateway's answer only (the ledger keeps their hashes), so they are shown this
// once, with a download; the batches minted in this tab are listed without their codes.
import { useRef, useState } from 'preact/hooks';
import { saveAsFile } from '../../shared/download.ts';
import { admin } from '../api/client.ts';
import { clientProblem } from '../../shared/problem.ts';
import { announce } from '../../shared/components/announce.tsx';
import { Field, InputField } from '../../shared/components/Field.tsx';
import { DataTable } from '../../shared/components/DataTable.tsx';
import { localToIso, money, toMinor, when } from '../../shared/format.ts';
import { useAction } from '../../shared/useAction.tsx';
import { FormActions } from '../../shared/components/FormActions.tsx';
import type { CodeBatch, PriceList } from '../api/types.ts';

interface Minted {
  batch: CodeBatch;
  what: string;
  amount: number;
  count: number;
}

/** Batches minted in this tab (ids and terms only; the codes are gone once "Done" is pressed). */
const minted: Minted[] = [];

export function CodesCard({ prices }: { prices: PriceList | null }) {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const currency = prices?.currency ?? 'USD';
  const [v, setV] = useState({ count: '10', item: '', amount: '', expires: '' });
  const [shown, setShown] = useState<Minted | null>(null);
  const set = (patch: Partial<typeof v>) => setV((old) => ({ ...old, ...patch }));

  const submit = async (ev: Event) => {
    ev.preventDefault();
    const count = Number(v.count);
    const amount = toMinor(v.amount, currency);
    const res = await action.run(async () => {
      if (!Number.isSafeInteger(count) || count < 1) throw clientProblem('Enter how many codes to mint, at least 1.', 'count');
      if (!v.item) throw clientProblem('Choose what a code gives.', 'item');
      if (amount === null) throw clientProblem(`Enter the price each code was sold at, in ${currency} (0 for a gift).`, 'amount');
      const expiresAt = v.expires ? localToIso(v.expires) : null;
      if (v.expires && !expiresAt) throw clientProblem('Choose a valid time, or leave it empty.', 'expires_at');
      const [kind, id] = v.item.split(':');
      const batch = await admin<CodeBatch>('code-batches', {
        method: 'POST',
        body: { count, amount, [kind === 'plan' ? 'plan_id' : 'pack_id']: id, ...(expiresAt ? { expires_at: expiresAt } : {}) },
      });
      return { batch, what: `${kind === 'plan' ? 'Plan' : 'Pack'} ${id}`, amount, count };
    });
    if (!res) return;
    minted.unshift(res);
    setShown(res);
    announce(`${res.count} codes minted. They are shown once, below.`);
  };
  const done = () => {
    setShown(null);
    document.getElementById('mint-codes')?.focus();
  };

  return (
    <section class="card" aria-labelledby="codes-heading">
      <h2 id="codes-heading">Redemption codes</h2>
      <p class="help">
        A customer redeems a code once for what it gives. Codes cannot be listed again or withdrawn after minting (the gateway keeps only their hashes); mint
        short-lived batches, and keep the file safe.
      </p>
      <form ref={form} class="form-grid" noValidate onSubmit={submit}>
        <InputField
          id="codes-count"
          label="Number of codes"
          type="number"
          name="count"
          min={1}
          step={1}
          inputMode="numeric"
          value={v.count}
          onValue={(v) => set({ count: v })}
        />
        <Field id="codes-item" label="Each code gives">
          <select id="codes-item" name="item" value={v.item} onChange={(e) => set({ item: e.currentTarget.value })}>
            <option value="">Choose a pack or a plan</option>
            {(prices?.packs ?? []).map((p) => (
              <option key={p.pack_id} value={`pack:${p.pack_id}`}>{`Pack ${p.name} (${p.tokens.toLocaleString('en-US')} tokens)`}</option>
            ))}
            {(prices?.plans ?? []).map((p) => (
              <option key={p.plan_id} value={`plan:${p.plan_id}`}>{`Plan ${p.name}`}</option>
            ))}
          </select>
        </Field>
        <InputField
          id="codes-amount"
          label={`Sold at, each (${currency})`}
          help="What each code was sold for elsewhere: its value in the ledger."
          type="text"
          inputMode="decimal"
          name="amount"
          value={v.amount}
          onValue={(v) => set({ amount: v })}
        />
        <InputField
          id="codes-expires"
          label="Codes expire (your local time)"
          optional
          type="datetime-local"
          name="expires_at"
          step={1}
          value={v.expires}
          onValue={(v) => set({ expires: v })}
        />
        <FormActions submit="Mint codes" submitId="mint-codes" busy={action.busy} />
      </form>
      {action.region()}
      {shown && (
        <div class="secret-box" role="region" aria-labelledby="codes-shown-heading">
          <h3 id="codes-shown-heading">{`Batch ${shown.batch.batch_id}: ${shown.count} codes`}</h3>
          <p class="warn" id="codes-warning">
            Save the codes now: this is the only time they are shown.
          </p>
          <div class="field">
            <label for="codes-list">Codes, one a line</label>
            <textarea
              id="codes-list"
              class="secret"
              readOnly
              rows={Math.min(8, shown.batch.codes.length)}
              aria-describedby="codes-warning"
              value={shown.batch.codes.join('\n')}
            />
          </div>
          <div class="row">
            <button
              type="button"
              class="secondary"
              onClick={() => saveAsFile(`${shown.batch.codes.join('\n')}\n`, `codes-${shown.batch.batch_id}.txt`, 'text/plain')}
            >
              Download as a file
            </button>
            <button type="button" onClick={done}>
              Done: I have saved them
            </button>
          </div>
        </div>
      )}
      {minted.length > 0 && (
        <DataTable
          caption="Batches minted in this tab"
          captionVisible
          tableId="code-batches-table"
          columns={['Batch', 'Gives', '#Codes', '#Sold at, each', 'Expires']}
          rows={minted.map((m) => (
            <tr key={m.batch.batch_id} data-batch-id={m.batch.batch_id}>
              <th scope="row">
                <code>{m.batch.batch_id}</code>
              </th>
              <td>{m.what}</td>
              <td class="num" data-value={m.count}>
                {m.count}
              </td>
              <td class="num" data-value={m.amount}>
                {money(m.amount, m.batch.currency)}
              </td>
              <td>{when(m.batch.expires_at)}</td>
            </tr>
          ))}
        />
      )}
    </section>
  );
}
