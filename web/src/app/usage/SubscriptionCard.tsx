// The usage page's subscription card: remaining tokens with a bar, the plan and its dates, the
// extra tokens granted with terms (an expiry, a scope of models), and what to do when the plan
// expired or the quota is used up.
import { CreditsTable } from '../../shared/components/CreditsTable.tsx';
import { dateOf, fmt, relativeDays } from '../../shared/format.ts';
import type { Subscription } from '../../shared/v1.ts';

export function SubscriptionCard({ sub, message, busy }: { sub: Subscription | null; message: string; busy: boolean }) {
  return (
    <section class="card subscription" id="subscription" aria-labelledby="sub-heading" aria-busy={busy ? 'true' : 'false'}>
      <h2 id="sub-heading">Subscription</h2>
      {sub ? (
        <SubscriptionBody sub={sub} />
      ) : (
        <p class="loading" id="sub-body">
          {message}
        </p>
      )}
    </section>
  );
}

function SubscriptionBody({ sub }: { sub: Subscription }) {
  const active = sub.status === 'active';
  const total = Number(sub.quota?.total ?? 0);
  const left = Number(sub.quota?.remaining ?? 0);
  const pct = total > 0 ? Math.max(0, Math.min(100, (left / total) * 100)) : 0;
  const rows: Array<[string, preact.ComponentChildren]> = [
    [
      'Plan',
      <span>
        {sub.plan ? sub.plan.name : 'No plan'} <span class={`status-pill ${active ? 'active' : 'expired'}`}>{active ? 'Active' : 'Expired'}</span>
      </span>,
    ],
    ['Main quota left', `${fmt(left)} of ${fmt(total)}`],
    ['Main quota used', fmt(sub.quota?.used)],
  ];
  if (Number(sub.quota?.reserved) > 0) rows.push(['Held by calls in progress', fmt(sub.quota.reserved)]);
  if (Number(sub.extra_tokens?.granted) > 0) rows.push(['Extra tokens left', `${fmt(sub.extra_tokens.remaining)} of ${fmt(sub.extra_tokens.granted)}`]);
  if (sub.starts_at) rows.push(['Started', dateOf(sub.starts_at)]);
  rows.push(['Expires', sub.expires_at ? `${dateOf(sub.expires_at)} (${relativeDays(sub.expires_at)})` : '—']);
  if (sub.rate_limit?.requests_per_minute) rows.push(['Call rate', `${fmt(sub.rate_limit.requests_per_minute)} requests/min`]);
  return (
    <div id="sub-body">
      <p class="muted">Remaining tokens</p>
      <p class="big" id="sub-remaining">
        {fmt(sub.remaining_tokens)}
      </p>
      <div class="bar" aria-hidden="true">
        <svg preserveAspectRatio="none">
          <rect x={0} y={0} height="100%" width={`${pct}%`} fill={pct < 10 ? '#e15759' : '#4e79a7'} />
        </svg>
      </div>
      <dl>
        {rows.map(([k, v]) => (
          <>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </>
        ))}
      </dl>
      {sub.extra_tokens?.credits?.length ? <CreditsTable credits={sub.extra_tokens.credits} tableId="sub-credits" /> : null}
      {!active ? (
        <p class="help warn">The main plan has expired: only extra tokens can be used. Renew the plan to continue.</p>
      ) : sub.remaining_tokens <= 0 ? (
        <p class="help warn">The quota is used up: renew or upgrade the plan, or add extra tokens.</p>
      ) : null}
    </div>
  );
}
