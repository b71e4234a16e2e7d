// Redeeming a code bought elsewhere: the form, and a polite status line saying what it added.
import { useRef, useState } from 'preact/hooks';
import { fmt } from '../../shared/format.ts';
import type { BillingApi } from './api.ts';

interface Props {
  api: BillingApi;
  onRedeemed: () => void;
  onProblem: (err: unknown) => void;
}

export function RedeemCode({ api, onRedeemed, onProblem }: Props) {
  const input = useRef<HTMLInputElement>(null);
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState('');
  const submit = async (ev: Event) => {
    ev.preventDefault();
    const code = input.current?.value.trim() ?? '';
    if (!code) return input.current?.focus();
    setBusy(true);
    setStatus('');
    try {
      const payment = await api.redeem(code);
      if (input.current) input.current.value = '';
      setStatus(`Code redeemed: ${fmt(payment.item.tokens)} tokens added.`);
      onRedeemed();
    } catch (err) {
      onProblem(err);
      input.current?.focus();
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="card" aria-labelledby="redeem-heading">
      <h2 id="redeem-heading">Redeem a code</h2>
      <form id="redeem-form" class="key-form" onSubmit={submit}>
        <label for="code">Code</label>
        <div class="row">
          <input
            ref={input}
            id="code"
            name="code"
            type="text"
            autocomplete="off"
            spellcheck={false}
            autocapitalize="off"
            placeholder="tgc_…"
            aria-describedby="code-help"
            required
          />
          <button type="submit" disabled={busy} aria-busy={busy ? 'true' : undefined}>
            Redeem
          </button>
        </div>
        <p id="code-help" class="help">
          A code from a reseller or the operator. Each code works once.
        </p>
      </form>
      <p id="redeem-status" class="help ok-text" role="status" aria-live="polite">
        {status}
      </p>
    </section>
  );
}
