// The price list: each plan's price per period and the packs of extra tokens on offer, a form that
// prices a plan, one that offers (or changes) a pack, and a button that withdraws a pack.
import { useRef, useState } from 'preact/hooks';
import { confirmAction } from '../../shared/components/ConfirmDialog.tsx';
import { admin, enc } from '../api/client.ts';
import { clientProblem } from '../../shared/problem.ts';
import { announce } from '../../shared/components/announce.tsx';
import { Field, InputField } from '../../shared/components/Field.tsx';
import { Loading, Result } from '../../shared/components/Page.tsx';
import { DataTable, Num } from '../../shared/components/DataTable.tsx';
import { toMinor } from '../../shared/format.ts';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { useAction } from '../../shared/useAction.tsx';
import { useLoaded } from '../../shared/useLoaded.ts';
import { FormActions } from '../../shared/components/FormActions.tsx';
import type { List, Plan, PriceList } from '../api/types.ts';

export function PricesCard({ onChanged }: { onChanged: (prices: PriceList) => void }) {
  const prices = useLoaded(async () => {
    const p = await admin<PriceList>('prices');
    onChanged(p);
    return p;
  });
  const plans = useLoaded(async () => (await admin<List<Plan>>('plans')).data);
  const [done, setDone] = useState('');
  const currency = prices.data?.currency ?? 'USD';
  const after = async (text: string) => {
    await prices.load();
    setDone(text);
  };
  const withdraw = async (pack: PriceList['packs'][number]) => {
    const answer = await confirmAction({
      title: `Withdraw pack ${pack.pack_id}?`,
      body: [`Customers can no longer buy “${pack.name}”. Purchases already made keep their tokens and price.`],
      confirmLabel: 'Withdraw pack',
      danger: true,
    });
    if (!answer.confirmed) return announce('The pack was not withdrawn.');
    try {
      await admin(`packs/${enc(pack.pack_id)}`, { method: 'PUT', body: { name: pack.name, tokens: pack.tokens, amount: pack.amount, active: false } });
      await after(`Pack ${pack.pack_id} withdrawn.`);
    } catch (err) {
      prices.setProblem(err);
    }
  };
  const p = prices.data;
  return (
    <section class="card" aria-labelledby="prices-heading">
      <h2 id="prices-heading">Prices</h2>
      <p class="help">In {currency}. A price applies from now on; a payment keeps the price it paid.</p>
      <div aria-busy={prices.busy ? 'true' : 'false'}>
        {p ? (
          <div class="price-tables">
            <DataTable
              caption="Plan prices"
              captionVisible
              tableId="plan-prices-table"
              columns={['Plan', '#Price per period']}
              empty="No plan is priced yet."
              rows={p.plans.map((x) => (
                <tr key={x.plan_id} data-plan-id={x.plan_id}>
                  <th scope="row">
                    {x.name}
                    <span class="sub">{x.plan_id}</span>
                  </th>
                  <td class="num" data-value={x.amount}>{`${x.display} ${x.currency}`}</td>
                </tr>
              ))}
            />
            <DataTable
              caption="Packs of extra tokens"
              captionVisible
              tableId="packs-table"
              columns={['Pack', '#Tokens', '#Price', 'Action']}
              empty="No pack is on offer."
              rows={p.packs.map((x) => (
                <tr key={x.pack_id} data-pack-id={x.pack_id}>
                  <th scope="row">
                    {x.name}
                    <span class="sub">{x.pack_id}</span>
                  </th>
                  <Num value={x.tokens} />
                  <td class="num" data-value={x.amount}>{`${x.display} ${x.currency}`}</td>
                  <td>
                    <button type="button" class="secondary small danger-text" aria-label={`Withdraw pack ${x.pack_id}`} onClick={() => withdraw(x)}>
                      Withdraw
                    </button>
                  </td>
                </tr>
              ))}
            />
          </div>
        ) : (
          <Loading text={prices.failed ? 'The prices could not be loaded.' : 'Loading the prices…'} />
        )}
      </div>
      <ProblemRegion problem={prices.problem ?? plans.problem} onDismiss={() => (prices.setProblem(null), plans.setProblem(null))} />
      <Result>{done}</Result>
      <div class="account-grid">
        <PlanPriceForm plans={plans.data ?? []} currency={currency} onSaved={after} />
        <PackForm currency={currency} onSaved={after} />
      </div>
    </section>
  );
}

function PlanPriceForm({ plans, currency, onSaved }: { plans: Plan[]; currency: string; onSaved: (text: string) => void }) {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const [plan, setPlan] = useState('');
  const [amount, setAmount] = useState('');
  const submit = async (ev: Event) => {
    ev.preventDefault();
    const minor = toMinor(amount, currency);
    const res = await action.run(async () => {
      if (!plan) throw clientProblem('Choose the plan.', 'plan_id');
      if (minor === null) throw clientProblem(`Enter the price in ${currency}, e.g. 20.00.`, 'amount');
      return admin(`plans/${enc(plan)}/price`, { method: 'PUT', body: { amount: minor } });
    });
    if (!res) return;
    setAmount('');
    onSaved(`Plan ${plan} priced at ${amount} ${currency} a period.`);
  };
  return (
    <form ref={form} class="form-grid edit-card" noValidate onSubmit={submit} aria-labelledby="plan-price-heading">
      <h3 id="plan-price-heading" class="wide">
        Price a plan
      </h3>
      <Field id="pp-plan" label="Plan to price">
        <select id="pp-plan" name="plan_id" value={plan} onChange={(e) => setPlan(e.currentTarget.value)}>
          <option value="">Choose a plan</option>
          {plans.map((x) => (
            <option key={x.plan_id} value={x.plan_id}>{`${x.name} (${x.plan_id})`}</option>
          ))}
        </select>
      </Field>
      <InputField
        id="pp-amount"
        label={`Price per period (${currency})`}
        type="text"
        inputMode="decimal"
        name="amount"
        value={amount}
        onValue={(v) => setAmount(v)}
      />
      <FormActions submit="Set plan price" busy={action.busy} />
      <div class="wide">{action.region()}</div>
    </form>
  );
}

function PackForm({ currency, onSaved }: { currency: string; onSaved: (text: string) => void }) {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const [pack, setPack] = useState({ id: '', name: '', tokens: '', amount: '' });
  const set = (patch: Partial<typeof pack>) => setPack((p) => ({ ...p, ...patch }));
  const submit = async (ev: Event) => {
    ev.preventDefault();
    const minor = toMinor(pack.amount, currency);
    const tokens = Number(pack.tokens);
    const res = await action.run(async () => {
      if (!pack.id.trim()) throw clientProblem('Give the pack an id.', 'pack_id');
      if (!pack.name.trim()) throw clientProblem('Give the pack a name.', 'name');
      if (!Number.isSafeInteger(tokens) || tokens < 1) throw clientProblem('Enter a whole number of tokens, at least 1.', 'tokens');
      if (minor === null) throw clientProblem(`Enter the price in ${currency}, e.g. 5.00.`, 'amount');
      return admin(`packs/${enc(pack.id.trim())}`, { method: 'PUT', body: { name: pack.name.trim(), tokens, amount: minor } });
    });
    if (!res) return;
    onSaved(`Pack ${pack.id.trim()} offered: ${pack.tokens} tokens for ${pack.amount} ${currency}.`);
    setPack({ id: '', name: '', tokens: '', amount: '' });
  };
  const text = (key: keyof typeof pack, name: string, label: string, mode: 'text' | 'numeric' | 'decimal' = 'text') => (
    <InputField id={`pack-${key}`} label={label} type="text" inputMode={mode} name={name} value={pack[key]} onValue={(v) => set({ [key]: v })} />
  );
  return (
    <form ref={form} class="form-grid edit-card" noValidate onSubmit={submit} aria-labelledby="pack-heading">
      <h3 id="pack-heading" class="wide">
        Offer a pack of extra tokens
      </h3>
      {text('id', 'pack_id', 'Pack id')}
      {text('name', 'name', 'Pack name')}
      {text('tokens', 'tokens', 'Tokens in the pack', 'numeric')}
      {text('amount', 'amount', `Pack price (${currency})`, 'decimal')}
      <FormActions submit="Offer pack" busy={action.busy} />
      <div class="wide">{action.region()}</div>
    </form>
  );
}
