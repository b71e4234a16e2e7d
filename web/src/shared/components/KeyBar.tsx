// The API-key box of the /app pages: a form while no key is saved, a one-line summary once it is.
// The key stays in this browser (localStorage) and is sent only to this gateway's /v1 API.
import { useRef, useState } from 'preact/hooks';
import { keyHint } from '../format.ts';
import { saveKey, useKey } from '../key.ts';

export interface KeyBarControl {
  /** Opens the form and puts the cursor in it (the "Enter a key" button of an error). */
  open(): void;
}

export function KeyBar({ control }: { control?: { current: KeyBarControl | null } }) {
  const key = useKey();
  const [editing, setEditing] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const change = useRef<HTMLButtonElement>(null);
  const showForm = !key || editing;
  const open = () => {
    setEditing(true);
    queueMicrotask(() => input.current?.focus());
  };
  if (control) control.current = { open };
  const done = (focus: 'change' | 'input') => {
    setEditing(false);
    if (input.current) input.current.value = '';
    setTimeout(() => (focus === 'change' ? change.current : input.current)?.focus());
  };

  return (
    <section class="card keybar" aria-labelledby="key-heading">
      <h2 id="key-heading">API key</h2>
      <form
        id="key-form"
        class="key-form"
        hidden={!showForm}
        onSubmit={(ev) => {
          ev.preventDefault();
          const value = input.current?.value.trim() ?? '';
          if (!value) return input.current?.focus();
          saveKey(value);
          done('change');
        }}
      >
        <label for="api-key">Your API key</label>
        <div class="row">
          <input
            ref={input}
            id="api-key"
            name="api-key"
            type="password"
            autocomplete="off"
            spellcheck={false}
            autocapitalize="off"
            placeholder="sk_svc_…"
            aria-describedby="key-help"
            required
          />
          <button type="submit">Save</button>
        </div>
        <p id="key-help" class="help">
          Kept only in this browser and sent only to this gateway’s <code>/v1</code> API.
        </p>
        <button type="button" id="key-cancel" class="link" hidden={!key} onClick={() => done('change')}>
          Keep the saved key
        </button>
      </form>
      <div id="key-saved" class="key-saved" hidden={showForm}>
        <p>
          Key <code id="key-hint">{keyHint(key)}</code> is saved in this browser.
        </p>
        <div class="row">
          <button type="button" id="key-change" ref={change} class="secondary small" onClick={open}>
            Change key
          </button>
          <button
            type="button"
            id="key-forget"
            class="secondary small"
            onClick={() => {
              saveKey('');
              done('input');
            }}
          >
            Forget key
          </button>
        </div>
      </div>
    </section>
  );
}
