// A new key's secret, shown once: Copy puts it on the clipboard, Done forgets it (it is nowhere
// else: the gateway keeps only its hash).
import { useState } from 'preact/hooks';
import { Dialog } from '../../shared/components/Dialog.tsx';
import type { NewKey } from '../api/types.ts';

export function SecretDialog({ created, onDone }: { created: NewKey | null; onDone: () => void }) {
  const [copied, setCopied] = useState('');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(created!.key);
      setCopied('Copied to the clipboard.');
    } catch {
      // No clipboard permission: select it for the person to copy.
      const range = document.createRange();
      range.selectNodeContents(document.getElementById('new-key-secret')!);
      getSelection()?.removeAllRanges();
      getSelection()?.addRange(range);
      setCopied('Selected: press Ctrl+C (or ⌘C) to copy it.');
    }
  };
  const done = () => {
    setCopied('');
    onDone();
  };
  return (
    <Dialog
      id="new-key"
      open={!!created}
      title={created?.replaces ? 'The new key of this application' : 'Your new key'}
      onClose={done}
      actions={
        <>
          <button type="button" class="secondary" onClick={copy}>
            Copy
          </button>
          <button type="button" onClick={done}>
            Done
          </button>
        </>
      }
    >
      <p>This is the only time the key is shown. Copy it now and keep it somewhere safe.</p>
      <code class="secret" id="new-key-secret" aria-label="The new key">
        {created?.key}
      </code>
      {created?.replaces && (
        <p class="help">
          {created.replaces.revoke_at
            ? `The old key works until ${new Date(created.replaces.revoke_at).toLocaleString('en-US')}.`
            : 'The old key stopped working.'}
        </p>
      )}
      <p class="help" role="status" aria-live="polite">
        {copied}
      </p>
    </Dialog>
  );
}
