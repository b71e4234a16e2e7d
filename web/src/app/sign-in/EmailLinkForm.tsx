// An address and a button that asks for a sign-in link; the answer is the same for every address.
import { useState } from 'preact/hooks';
import { signInApi } from '../api/session.ts';

export function EmailLinkForm({ id, button, onProblem }: { id: string; button: string; onProblem: (err: unknown) => void }) {
  const [email, setEmail] = useState('');
  const [busy, setBusy] = useState(false);
  const [sent, setSent] = useState('');
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setSent('');
    onProblem(null);
    try {
      await signInApi.requestLink(email.trim());
      setSent(`If ${email.trim()} may sign in here, a link is on its way to it. Open it in this browser; it works once, within 15 minutes.`);
    } catch (err) {
      onProblem(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="stack" onSubmit={submit}>
      <div class="field">
        <label for={`${id}-email`}>Email address</label>
        <input
          type="email"
          id={`${id}-email`}
          name="email"
          autoComplete="email"
          required
          maxLength={254}
          value={email}
          onInput={(e) => setEmail((e.target as HTMLInputElement).value)}
        />
      </div>
      <button type="submit" disabled={busy}>
        {busy ? 'Sending…' : button}
      </button>
      <p class="help" role="status" aria-live="polite" id={`${id}-sent`}>
        {sent}
      </p>
    </form>
  );
}
