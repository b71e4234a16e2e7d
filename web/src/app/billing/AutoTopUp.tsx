// Auto top-up: a card saved through Stripe Checkout in setup mode, and a pack bought with it when a
// call takes the tokens left below a threshold (src/accounts/auto-top-up.ts has the rule: once per
// crossing; a failed charge is not tried again until it is set again). Coming back from saving the
// card (?card=saved or ?card=cancelled) is read out here.
import { useEffect, useState } from 'preact/hooks';
import { Field } from '../../shared/components/Field.tsx';
import { fmt, when } from '../../shared/format.ts';
import type { BillingApi } from './api.ts';
import { takeFromUrl } from './CheckoutReturn.tsx';
import type { AutoTopUpView, PackPrice } from './types.ts';

interface Props {
  api: BillingApi;
  packs: PackPrice[] | null;
  reloads: number;
  onProblem: (err: unknown) => void;
}

/** ?card=saved|cancelled, taken out of the URL (a reload does not announce it again). */
function cardOutcome(): 'saved' | 'cancelled' | null {
  const value = takeFromUrl('card');
  return value === 'saved' ? 'saved' : value === 'cancelled' ? 'cancelled' : null;
}

function stateLine(v: AutoTopUpView, packs: PackPrice[] | null): string {
  const pack = packs?.find((p) => p.pack_id === v.pack_id);
  const buys = pack ? `${pack.name} (${pack.display} ${pack.currency})` : `pack ${v.pack_id}`;
  if (v.pending_top_up) return `A top-up (${buys}) is being charged to the card.`;
  if (v.failed_reason) return `Off: the last top-up failed (${v.failed_reason}). Set it again to turn it back on.`;
  if (v.enabled) return `On: when the tokens left fall below ${fmt(v.threshold_tokens)}, ${buys} is bought with the card.`;
  return 'Off.';
}

export function AutoTopUp({ api, packs, reloads, onProblem }: Props) {
  const [view, setView] = useState<AutoTopUpView | null>(null);
  const [threshold, setThreshold] = useState('');
  const [packId, setPackId] = useState('');
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState('');
  const [outcome] = useState(cardOutcome);
  const shown = (v: AutoTopUpView) => {
    setView(v);
    setThreshold(v.threshold_tokens === null ? '' : String(v.threshold_tokens));
    setPackId(v.pack_id ?? '');
  };
  useEffect(() => {
    let current = true;
    api.autoTopUp().then(
      (v) => current && shown(v),
      (err: unknown) => current && onProblem(err),
    );
    return () => {
      current = false;
    };
  }, [api, reloads]);
  const act = async (what: () => Promise<void>) => {
    setBusy(true);
    setStatus('');
    try {
      await what();
    } catch (err) {
      onProblem(err);
    } finally {
      setBusy(false);
    }
  };
  const saveCard = () =>
    act(async () => {
      location.assign((await api.saveCard()).url);
    });
  const submit = (ev: Event) => {
    ev.preventDefault();
    void act(async () => {
      const v = await api.setAutoTopUp({ threshold_tokens: Number(threshold), pack_id: packId || (packs?.[0]?.pack_id ?? '') });
      shown(v);
      setStatus(`Saved. ${stateLine(v, packs)}`);
    });
  };
  const turnOff = () =>
    act(async () => {
      shown(await api.autoTopUpOff());
      setStatus('Auto top-up turned off.');
    });
  const card = view?.card ?? null;
  const cardText = card ? `${(card.brand ?? 'Card').toUpperCase()} •••• ${card.last4 ?? '????'}` : 'No card saved.';
  const cardNews =
    outcome === 'cancelled'
      ? 'Saving the card was cancelled: nothing changed.'
      : outcome === 'saved'
        ? card
          ? 'Card saved.'
          : 'The card is being saved: it shows here once Stripe confirms it (Refresh).'
        : '';
  return (
    <section class="card" aria-labelledby="top-up-heading">
      <h2 id="top-up-heading">Auto top-up</h2>
      <div class="card-line">
        <span id="top-up-card">{view ? cardText : 'Loading…'}</span>
        <button type="button" class="secondary small" disabled={busy || !view} onClick={saveCard}>
          {card ? 'Replace the card' : 'Save a card'}
        </button>
      </div>
      <p id="top-up-card-status" class="help" role="status" aria-live="polite">
        {cardNews}
      </p>
      <p id="top-up-state" class="help">
        {view ? stateLine(view, packs) : ''}
      </p>
      <form id="top-up-form" class="form-grid" onSubmit={submit}>
        <Field id="top-up-threshold" label="Top up when the tokens left fall below">
          <input
            id="top-up-threshold"
            type="number"
            min={1}
            step={1}
            required
            disabled={!card}
            value={threshold}
            onInput={(e) => setThreshold((e.target as HTMLInputElement).value)}
          />
        </Field>
        <Field id="top-up-pack" label="Pack to buy">
          <select
            id="top-up-pack"
            required
            disabled={!card || !packs?.length}
            value={packId}
            onChange={(e) => setPackId((e.target as HTMLSelectElement).value)}
          >
            {(packs ?? []).map((p) => (
              <option key={p.pack_id} value={p.pack_id}>
                {p.name} ({p.display} {p.currency})
              </option>
            ))}
          </select>
        </Field>
        <div class="form-actions">
          <button type="submit" disabled={busy || !card}>
            Save auto top-up
          </button>
          {view && (view.enabled || view.failed_reason) && (
            <button type="button" class="secondary" disabled={busy || view.pending_top_up !== null} onClick={turnOff}>
              Turn off
            </button>
          )}
        </div>
      </form>
      <p id="top-up-status" class="help ok-text" role="status" aria-live="polite">
        {status}
      </p>
      {view && view.top_ups.length > 0 && (
        <ul id="top-ups" class="plain-list">
          {view.top_ups.map((t) => (
            <li key={t.id}>
              {when(t.started_at)}: {t.pack_id}, {t.status}
              {t.reason ? ` (${t.reason})` : ''}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
