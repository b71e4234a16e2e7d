// A modal confirmation for an action that changes something: a title, what will happen, an
// optional (or required) reason, Cancel and a confirm button. Mount <ConfirmActionDialog /> once
// per page and ask with confirmAction() (Dialog.tsx's ConfirmDialog is the one a page renders in
// place instead). The focus goes to the reason box, or else to Cancel (the safe choice), and comes
// back to what had it; Escape cancels.
import type { ComponentChildren } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';

export interface ConfirmOptions {
  title: string;
  body: ComponentChildren[];
  confirmLabel?: string;
  danger?: boolean;
  reason?: { label: string; required: boolean } | null;
}

export interface ConfirmAnswer {
  confirmed: boolean;
  reason: string;
}

type Ask = ConfirmOptions & { resolve: (a: ConfirmAnswer) => void; opener: Element | null };
let show: ((ask: Ask) => void) | null = null;

export function confirmAction(options: ConfirmOptions): Promise<ConfirmAnswer> {
  return new Promise((resolve) => {
    if (!show) throw new Error('no <ConfirmActionDialog /> is mounted');
    show({ ...options, resolve, opener: document.activeElement });
  });
}

export function ConfirmActionDialog() {
  const dialog = useRef<HTMLDialogElement>(null);
  const reasonBox = useRef<HTMLTextAreaElement>(null);
  const cancel = useRef<HTMLButtonElement>(null);
  const [ask, setAsk] = useState<Ask | null>(null);
  const [reason, setReason] = useState('');
  const [missing, setMissing] = useState(false);
  const done = useRef<((confirmed: boolean) => void) | null>(null);

  useEffect(() => {
    show = (a) => {
      setReason('');
      setMissing(false);
      setAsk(a);
    };
    return () => {
      show = null;
    };
  }, []);

  // Opened and focused as soon as it is drawn (before the next key press reaches the page).
  useLayoutEffect(() => {
    const d = dialog.current;
    if (!ask || !d) return;
    done.current = (confirmed) => {
      done.current = null;
      const text = reasonBox.current?.value.trim() ?? '';
      if (d.open) d.close();
      if (ask.opener instanceof HTMLElement && ask.opener.isConnected) ask.opener.focus();
      setAsk(null);
      ask.resolve({ confirmed, reason: text });
    };
    if (!d.open) d.showModal();
    (ask.reason ? reasonBox.current : cancel.current)?.focus();
  }, [ask]);

  // Escape settles the ask at once (cancel fires before the dialog closes). The close event comes
  // later, as a task of its own: if the dialog was opened again meanwhile (Escape, then Enter on the
  // same button), that event belongs to the earlier ask and must not cancel the new one.
  const closed = () => {
    if (!dialog.current?.open) done.current?.(false);
  };

  const submit = (ev: Event) => {
    ev.preventDefault();
    if (ask?.reason?.required && !reason.trim()) {
      setMissing(true);
      reasonBox.current?.focus();
      return;
    }
    done.current?.(true);
  };

  return (
    <dialog
      ref={dialog}
      id="dialog"
      class="console-dialog"
      aria-labelledby="dialog-title"
      aria-describedby="dialog-body"
      onCancel={() => done.current?.(false)}
      onClose={closed}
    >
      <form class="stack" noValidate onSubmit={submit}>
        <h2 id="dialog-title">{ask?.title ?? 'Are you sure?'}</h2>
        <div id="dialog-body">{ask?.body.map((b, i) => (typeof b === 'string' ? <p key={i}>{b}</p> : b))}</div>
        <div class="field" hidden={!ask?.reason}>
          <label for="dialog-reason">
            {ask?.reason?.label ?? 'Reason'}
            {ask?.reason && !ask.reason.required && <span class="optional"> (optional)</span>}
          </label>
          <textarea
            ref={reasonBox}
            id="dialog-reason"
            rows={2}
            maxLength={500}
            required={!!ask?.reason?.required}
            value={reason}
            aria-invalid={missing ? 'true' : undefined}
            aria-describedby={missing ? 'dialog-reason-error' : undefined}
            onInput={(e) => setReason((e.target as HTMLTextAreaElement).value)}
          />
          <p class="help field-error" id="dialog-reason-error" hidden={!missing}>
            Give a reason: it is recorded with the change.
          </p>
        </div>
        <div class="row dialog-actions">
          <button type="button" ref={cancel} id="dialog-cancel" class="secondary" onClick={() => done.current?.(false)}>
            Cancel
          </button>
          <button type="submit" id="dialog-confirm" class={ask?.danger ? 'danger' : undefined}>
            {ask?.confirmLabel ?? 'Confirm'}
          </button>
        </div>
      </form>
    </dialog>
  );
}
