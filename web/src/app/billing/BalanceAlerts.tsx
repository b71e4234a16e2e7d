// Balance alerts: the thresholds of tokens left at which the account's owners and billing members
// are mailed (src/accounts/balance-alerts.ts has the rule: once per crossing). The server checks
// the numbers and names a wrong one in the page's alert.
import { useEffect, useState } from 'preact/hooks';
import { fmt, when } from '../../shared/format.ts';
import type { BillingApi } from './api.ts';
import type { BalanceAlertsView } from './types.ts';

interface Props {
  api: BillingApi;
  reloads: number;
  onProblem: (err: unknown) => void;
}

/** What the owner typed, as numbers (anything else goes to the server as it is, to be refused by name). */
const thresholdsOf = (text: string): number[] =>
  text
    .split(/[\s,;]+/)
    .filter((t) => t !== '')
    .map(Number);

function mailedLine(a: BalanceAlertsView['alerts'][number]): string {
  if (!a.emailed_at) return 'being mailed';
  if (!a.recipients) return 'not mailed (no owner or billing member, or no mail server)';
  return `mailed to ${a.recipients === 1 ? '1 person' : `${fmt(a.recipients)} people`}`;
}

const setLine = (v: BalanceAlertsView) =>
  v.thresholds_tokens.length === 0 ? 'No alerts set.' : `Alerts at ${v.thresholds_tokens.map(fmt).join(', ')} tokens left.`;

export function BalanceAlerts({ api, reloads, onProblem }: Props) {
  const [view, setView] = useState<BalanceAlertsView | null>(null);
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState('');
  useEffect(() => {
    let current = true;
    api.balanceAlerts().then(
      (v) => {
        if (!current) return;
        setView(v);
        setText(v.thresholds_tokens.join(' '));
      },
      (err: unknown) => current && onProblem(err),
    );
    return () => {
      current = false;
    };
  }, [api, reloads]);
  const submit = async (ev: Event) => {
    ev.preventDefault();
    setBusy(true);
    setStatus('');
    try {
      const v = await api.setBalanceAlerts(thresholdsOf(text));
      setView(v);
      setText(v.thresholds_tokens.join(' '));
      setStatus(v.thresholds_tokens.length === 0 ? 'Alerts turned off.' : `Saved. ${setLine(v)}`);
    } catch (err) {
      onProblem(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="card" aria-labelledby="alerts-heading">
      <h2 id="alerts-heading">Balance alerts</h2>
      <p id="alerts-set" class="help">
        {view ? setLine(view) : 'Loading the alerts…'}
      </p>
      <form id="alerts-form" class="key-form" onSubmit={submit}>
        <label for="alert-thresholds">Mail us when the tokens left fall below</label>
        <div class="row">
          <input
            id="alert-thresholds"
            type="text"
            inputMode="numeric"
            autocomplete="off"
            spellcheck={false}
            placeholder="5000 1000"
            aria-describedby="alert-thresholds-help"
            disabled={!view}
            value={text}
            onInput={(e) => setText((e.target as HTMLInputElement).value)}
          />
          <button type="submit" disabled={busy || !view} aria-busy={busy ? 'true' : undefined}>
            Save alerts
          </button>
        </div>
        <p id="alert-thresholds-help" class="help">
          Up to five numbers of tokens; empty turns the alerts off. Owners and billing members get each alert once, when a call crosses it.
        </p>
      </form>
      <p id="alerts-status" class="help ok-text" role="status" aria-live="polite">
        {status}
      </p>
      {view && view.alerts.length > 0 && (
        <ul id="alerts-raised" class="plain-list">
          {view.alerts.map((a) => (
            <li key={a.id}>
              {when(a.raised_at)}: below {fmt(a.threshold_tokens)} ({fmt(a.tokens_left)} left), {mailedLine(a)}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
