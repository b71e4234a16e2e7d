// One account: its balance by the money rule (with its grants of extra tokens that carry terms),
// its plan (subscribe or renew), extra tokens, keys and statements. The balance is read again after
// every change that moves it.
import { useEffect, useState } from 'preact/hooks';
import { admin, enc } from '../api/client.ts';
import type { AccountBalance, List, Plan } from '../api/types.ts';
import { CreditsTable } from '../../shared/components/CreditsTable.tsx';
import { Loading } from '../../shared/components/Page.tsx';
import { fmt, when } from '../../shared/format.ts';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { useLoaded } from '../../shared/useLoaded.ts';
import { StatusPill } from './AccountsList.tsx';
import { ExtraTokensCard, PlanCard } from './PlanCards.tsx';
import { KeysCard } from './KeysCard.tsx';
import { StatementCard } from './StatementCard.tsx';

export function AccountPage({ accountId }: { accountId: string }) {
  const {
    data: account,
    busy,
    failed,
    problem,
    setProblem,
    load: loadBalance,
  } = useLoaded(async () => {
    const a = await admin<AccountBalance>(`accounts/${enc(accountId)}/balance`);
    document.title = `${a.name} · Operator console · Tollgate`;
    return a;
  });
  const [plans, setPlans] = useState<Plan[] | null>(null);
  const [plansProblem, setPlansProblem] = useState<unknown>(null);
  useEffect(() => {
    admin<List<Plan>>('plans').then((p) => setPlans(p.data), setPlansProblem);
  }, []);

  return (
    <>
      <a href="#/accounts" class="back">
        ← All accounts
      </a>
      <h1 tabIndex={-1} id="view-heading">
        {account ? (
          <>
            {account.name}
            <span class="sub"> {account.account_id}</span>
          </>
        ) : (
          `Account ${accountId}`
        )}
      </h1>
      <ProblemRegion problem={problem} onDismiss={() => setProblem(null)} />
      <div class="account-grid">
        <section class="card balance-card" aria-labelledby="balance-heading">
          <div class="card-head">
            <h2 id="balance-heading">Balance</h2>
            <button type="button" class="secondary small" onClick={() => loadBalance()}>
              Refresh
            </button>
          </div>
          <div id="balance" aria-busy={busy ? 'true' : 'false'}>
            {account ? <BalanceFacts a={account} /> : <Loading text={failed ? 'The balance could not be loaded.' : 'Loading the balance…'} />}
          </div>
        </section>
        <div class="stack">
          <PlanCard accountId={accountId} current={account} plans={plans} plansProblem={plansProblem} onChanged={loadBalance} />
          <ExtraTokensCard accountId={accountId} onChanged={loadBalance} />
        </div>
      </div>
      <KeysCard accountId={accountId} />
      <StatementCard accountId={accountId} />
    </>
  );
}

function Fact({ label, field, value, text }: { label: string; field: string; value: number | string | null; text?: string }) {
  return (
    <>
      <dt>{label}</dt>
      <dd data-field={field} data-value={value ?? ''}>
        {text ?? (typeof value === 'number' ? fmt(value) : (value ?? '—'))}
      </dd>
    </>
  );
}

function BalanceFacts({ a }: { a: AccountBalance }) {
  const total = a.quota.total;
  const pct = total > 0 ? Math.max(0, Math.min(100, Math.round((a.quota.remaining / total) * 100))) : 0;
  const rpm = a.rate_limit.requests_per_minute;
  return (
    <>
      <p class="big-label muted">Remaining tokens (what a new call may use)</p>
      <p class="big" data-field="remaining_tokens" data-value={a.remaining_tokens}>
        {fmt(a.remaining_tokens)}
      </p>
      <progress max={100} value={pct} class="quota-bar" aria-label={`Main quota left: ${pct}%`} />
      <dl class="facts">
        <dt>Plan</dt>
        <dd data-field="plan">
          {a.plan ? `${a.plan.name} (${a.plan.id})` : 'None'} <StatusPill status={a.status} />
        </dd>
        <Fact label="Quota total" field="quota_total" value={a.quota.total} />
        <Fact label="Quota used" field="quota_used" value={a.quota.used} />
        <Fact label="Held by calls in flight" field="quota_reserved" value={a.quota.reserved} />
        <Fact label="Quota remaining" field="quota_remaining" value={a.quota.remaining} />
        <Fact label="Extra tokens granted" field="extra_granted" value={a.extra_tokens.granted} />
        <Fact label="Extra tokens used" field="extra_used" value={a.extra_tokens.used} />
        <Fact label="Extra tokens left" field="extra_remaining" value={a.extra_tokens.remaining} />
        <Fact label="Plan started" field="starts_at" value={a.starts_at} text={when(a.starts_at)} />
        <Fact label="Plan expires" field="expires_at" value={a.expires_at} text={when(a.expires_at)} />
        <Fact label="Call rate" field="rpm" value={rpm} text={rpm ? `${fmt(rpm)} requests/min` : '—'} />
      </dl>
      {a.credits?.length ? <CreditsTable credits={a.credits} tableId="balance-credits" /> : null}
    </>
  );
}
