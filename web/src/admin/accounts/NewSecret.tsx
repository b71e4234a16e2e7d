// A new key's secret, shown this once, selected, with a Copy button; "Done" removes it from the page.
import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import { announce } from '../../shared/components/announce.tsx';

export interface IssuedKey {
  key: string;
  masked: string;
  name: string;
}

export function NewSecret({ issued, onDone }: { issued: IssuedKey; onDone: () => void }) {
  const box = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState('');
  useLayoutEffect(() => {
    box.current?.focus();
    box.current?.select();
    announce('Key issued. The secret key is shown once, selected in the Secret key box.');
  }, [issued]);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(issued.key);
      setCopied('Copied to the clipboard.');
    } catch {
      box.current?.focus();
      box.current?.select();
      setCopied('Selected: press Ctrl+C (⌘C) to copy.');
    }
  };
  return (
    <div class="secret-box" role="region" aria-labelledby="new-key-heading">
      <h3 id="new-key-heading">New key “{issued.name}”</h3>
      <p id="new-key-warning" class="warn">
        Copy the key now: this is the only time it is shown. Only its hash is stored.
      </p>
      <div class="field">
        <label for="new-key-secret">Secret key</label>
        <input
          ref={box}
          type="text"
          readOnly
          value={issued.key}
          id="new-key-secret"
          class="secret"
          aria-describedby="new-key-warning"
          autocomplete="off"
          spellcheck={false}
        />
      </div>
      <div class="row">
        <button type="button" class="secondary" onClick={copy}>
          Copy
        </button>
        <button type="button" onClick={onDone}>
          Done: I have saved it
        </button>
        <span class="muted" role="status" aria-live="polite">
          {copied}
        </span>
      </div>
    </div>
  );
}
