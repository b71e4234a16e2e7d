// One account's payments (with what was refunded and the tokens withdrawn) and disputes, a refund
// of a payment after a confirmation, and a payment recorded by hand (a bank transfer, an invoice).
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { confirmAction } from '../../shared/components/ConfirmDialog.tsx';
import { admin, enc } from '../api/client.ts';
import { clientProblem } from '../../shared/problem.ts';
import { announce } from '../../shared/components/announce.tsx';
import { Field, InputField } from '../../shared/components/Field.tsx';
import { Loading, Pill, Result } from '../../shared/components/Page.tsx';
import { DataTable, Num } from '../../shared/components/DataTable.tsx';
import { money, toMinor, when } from '../../shared/format.ts';
import { markInvalid, useAction } from '../../shared/useAction.tsx';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { useLoaded } from '../../shared/useLoaded.ts';
import { FormActions } from '../../shared/components/FormActions.tsx';
import type { AccountSummary, Dispute, List, Payment, PriceList } from '../api/types.ts';

type Payments = List<Payment> & { disputes: Dispute[] };

const itemText = (p: Payment) => (p.item.kind === 'plan' ? `Plan ${p.item.plan_id}` : `Pack ${p.item.pack_id}`);

export function AccountPayments({ prices }: { prices: PriceList | null }) {
  const accounts = useLoaded(async () => (await admin<List<AccountSummary>>('accounts?limit=200')).data);
  const [accountId, setAccountId] = useState('');
  const [done, setDone] = useState('');
  const payments = useLoaded(async () => (accountId ? admin<Payments>(`accounts/${enc(accountId)}/payments`) : null), false);
  const currency = prices?.currency ?? 'USD';
  const [refunding, setRefunding] = useState<Payment | null>(null);
  const choose = (id: string) => {
    setAccountId(id);
    setDone('');
    setRefunding(null);
  };
  // Read once the state holds the new id (the reader sees it from then on).
  useEffect(() => void (accountId && payments.load()), [accountId]);

  const list = payments.data;
  return (
    <section class="card" aria-labelledby="account-payments-heading">
      <h2 id="account-payments-heading">Payments of an account</h2>
      <div class="form-grid">
        <Field id="pay-account" label="Account">
          <select id="pay-account" name="account_id" value={accountId} onChange={(e) => choose(e.currentTarget.value)}>
            <option value="">{accounts.data ? 'Choose an account' : 'Loading the accounts…'}</option>
            {(accounts.data ?? []).map((a) => (
              <option key={a.account_id} value={a.account_id}>{`${a.name} (${a.account_id})`}</option>
            ))}
          </select>
        </Field>
      </div>
      <ProblemRegion problem={payments.problem ?? accounts.problem} onDismiss={() => (payments.setProblem(null), accounts.setProblem(null))} />
      <Result>{done}</Result>
      {accountId && (
        <div aria-busy={payments.busy ? 'true' : 'false'}>
          {list ? (
            <>
              <DataTable
                caption={`Payments of ${accountId}`}
                tableId="payments-table"
                columns={['Payment', 'Received', 'Processor', 'Bought', '#Amount', '#Fee', '#Refunded', '#Tokens withdrawn', 'Action']}
                empty="No payments yet."
                rows={list.data.map((p) => (
                  <tr key={p.id} data-payment-id={p.id}>
                    <th scope="row">
                      <code>{p.id}</code>
                      {p.reference && p.reference !== p.id && <span class="sub">{p.reference}</span>}
                    </th>
                    <td>{when(p.received_at)}</td>
                    <td>{p.processor}</td>
                    <td>{`${itemText(p)}, ${p.item.tokens.toLocaleString('en-US')} tokens`}</td>
                    <td class="num" data-field="amount" data-value={p.amount}>
                      {money(p.amount, p.currency)}
                    </td>
                    <td class="num" data-value={p.fee ?? ''}>
                      {p.fee === null ? '—' : money(p.fee, p.currency)}
                    </td>
                    <td class="num" data-field="refunded" data-value={p.refunded}>
                      {money(p.refunded, p.currency)}
                    </td>
                    <Num value={p.tokens_withdrawn} data-field="tokens_withdrawn" />
                    <td>
                      {p.refunded < p.amount ? (
                        <button type="button" class="secondary small danger-text" aria-label={`Refund payment ${p.id}`} onClick={() => setRefunding(p)}>
                          Refund
                        </button>
                      ) : (
                        <span class="muted">Refunded</span>
                      )}
                    </td>
                  </tr>
                ))}
              />
              {list.disputes.length > 0 && (
                <DataTable
                  caption={`Disputes of ${accountId}`}
                  captionVisible
                  tableId="disputes-table"
                  columns={['Dispute', 'Payment', '#Amount', 'Keys', 'Status']}
                  rows={list.disputes.map((d) => (
                    <tr key={d.id} data-dispute-id={d.id}>
                      <th scope="row">
                        <code>{d.id}</code>
                      </th>
                      <td>
                        <code>{d.payment_id}</code>
                      </td>
                      <td class="num" data-value={d.amount}>
                        {money(d.amount, currency)}
                      </td>
                      <td>{d.suspends_keys ? 'Suspended while open' : 'Not suspended'}</td>
                      <td>
                        <Pill state={d.status === 'open' ? 'half_open' : d.status === 'won' ? 'active' : 'expired'} text={d.status} />
                      </td>
                    </tr>
                  ))}
                />
              )}
            </>
          ) : (
            <Loading text={payments.failed ? 'The payments could not be loaded.' : 'Loading the payments…'} />
          )}
          {refunding && (
            <RefundForm
              key={refunding.id}
              accountId={accountId}
              p={refunding}
              onClose={() => setRefunding(null)}
              onRefunded={async (text) => {
                setRefunding(null);
                await payments.load();
                setDone(text);
              }}
            />
          )}
          <ManualPayment
            accountId={accountId}
            prices={prices}
            onRecorded={async (text) => {
              await payments.load();
              setDone(text);
            }}
          />
        </div>
      )}
    </section>
  );
}

function ManualPayment({ accountId, prices, onRecorded }: { accountId: string; prices: PriceList | null; onRecorded: (text: string) => void }) {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const currency = prices?.currency ?? 'USD';
  const [v, setV] = useState({ reference: '', item: '', amount: '', fee: '' });
  const set = (patch: Partial<typeof v>) => setV((old) => ({ ...old, ...patch }));
  const submit = async (ev: Event) => {
    ev.preventDefault();
    const amount = toMinor(v.amount, currency);
    const fee = v.fee.trim() ? toMinor(v.fee, currency) : 0;
    const res = await action.run(async () => {
      if (!v.reference.trim()) throw clientProblem('Enter the payment’s reference (an invoice or transfer number).', 'reference');
      if (!v.item) throw clientProblem('Choose what the payment bought.', 'item');
      if (amount === null || amount < 1) throw clientProblem(`Enter the amount received in ${currency}.`, 'amount');
      if (fee === null) throw clientProblem(`Enter the fee in ${currency}, or leave it empty.`, 'fee');
      const [kind, id] = v.item.split(':');
      return admin<Payment>(`accounts/${enc(accountId)}/payments`, {
        method: 'POST',
        body: { reference: v.reference.trim(), amount, currency, fee, [kind === 'plan' ? 'plan_id' : 'pack_id']: id },
      });
    });
    if (!res) return;
    setV({ reference: '', item: '', amount: '', fee: '' });
    onRecorded(
      res.already_recorded
        ? `Payment ${res.id} was already recorded: nothing changed.`
        : `Recorded payment ${res.id}: ${money(res.amount, res.currency)} for ${itemText(res)}.`,
    );
  };
  return (
    <form ref={form} class="form-grid edit-card" noValidate onSubmit={submit} aria-labelledby="manual-heading">
      <h3 id="manual-heading" class="wide">
        Record a payment by hand
      </h3>
      <InputField
        id="mp-reference"
        label="Reference"
        help="The invoice or transfer number; recording it again changes nothing."
        type="text"
        name="reference"
        maxLength={200}
        value={v.reference}
        onValue={(v) => set({ reference: v })}
      />
      <Field id="mp-item" label="Bought">
        <select id="mp-item" name="item" value={v.item} onChange={(e) => set({ item: e.currentTarget.value })}>
          <option value="">Choose a plan or a pack</option>
          {(prices?.plans ?? []).map((p) => (
            <option key={p.plan_id} value={`plan:${p.plan_id}`}>{`Plan ${p.name} (${p.display} ${p.currency})`}</option>
          ))}
          {(prices?.packs ?? []).map((p) => (
            <option key={p.pack_id} value={`pack:${p.pack_id}`}>{`Pack ${p.name} (${p.display} ${p.currency})`}</option>
          ))}
        </select>
      </Field>
      <InputField
        id="mp-amount"
        label={`Amount received (${currency})`}
        type="text"
        inputMode="decimal"
        name="amount"
        value={v.amount}
        onValue={(v) => set({ amount: v })}
      />
      <InputField id="mp-fee" label={`Fee (${currency})`} optional type="text" inputMode="decimal" name="fee" value={v.fee} onValue={(v) => set({ fee: v })} />
      <FormActions submit="Record payment" busy={action.busy} />
      <div class="wide">{action.region()}</div>
    </form>
  );
}

function RefundForm({ accountId, p, onClose, onRefunded }: { accountId: string; p: Payment; onClose: () => void; onRefunded: (text: string) => void }) {
  const form = useRef<HTMLFormElement>(null);
  const action = useAction(form);
  const left = p.amount - p.refunded;
  const [amount, setAmount] = useState('');
  useLayoutEffect(() => document.getElementById('refund-amount')?.focus(), []);
  const submit = async (ev: Event) => {
    ev.preventDefault();
    const minor = toMinor(amount, p.currency);
    if (minor === null || minor < 1 || minor > left) {
      action.setProblem(clientProblem(`Enter an amount from 0.01 to ${money(left, p.currency)}.`, 'amount'));
      markInvalid(form.current, 'amount');
      return;
    }
    const answer = await confirmAction({
      title: `Refund ${money(minor, p.currency)} of payment ${p.id}?`,
      body: ['The tokens the refunded money bought are withdrawn as far as they are unused; tokens already used stay used. This cannot be undone.'],
      confirmLabel: 'Refund',
      danger: true,
    });
    if (!answer.confirmed) return announce('Nothing was refunded.');
    const res = await action.run(() =>
      admin<{ tokensWithdrawn?: number }>(`accounts/${enc(accountId)}/payments/${enc(p.id)}/refunds`, { method: 'POST', body: { amount: minor } }),
    );
    if (res)
      onRefunded(
        `Refunded ${money(minor, p.currency)} of payment ${p.id}${typeof res.tokensWithdrawn === 'number' ? `: ${res.tokensWithdrawn} tokens withdrawn` : ''}.`,
      );
  };
  return (
    <form ref={form} class="form-grid edit-card" noValidate onSubmit={submit} aria-labelledby="refund-heading">
      <h3 id="refund-heading" class="wide">{`Refund payment ${p.id}`}</h3>
      <InputField
        id="refund-amount"
        label={`Amount to refund (${p.currency})`}
        help={`At most ${money(left, p.currency)} is left to refund.`}
        type="text"
        inputMode="decimal"
        name="amount"
        value={amount}
        onValue={(v) => setAmount(v)}
      />
      <FormActions submit="Refund payment" busy={action.busy} onCancel={onClose} />
      <div class="wide">{action.region()}</div>
    </form>
  );
}
