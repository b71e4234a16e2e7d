// A modal dialog on the native <dialog> element: the browser keeps focus inside it, Escape closes
// it, the page behind is inert. Open while `open` is true; `onClose` runs however it is closed.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';

export interface DialogProps {
  id: string;
  open: boolean;
  title: string;
  onClose: () => void;
  children: ComponentChildren;
  /** The buttons at the bottom (the first focusable element of the body gets focus first). */
  actions: ComponentChildren;
}

export function Dialog({ id, open, title, onClose, children, actions }: DialogProps) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return (
    <dialog ref={ref} id={id} class="dialog" aria-labelledby={`${id}-title`} onClose={onClose}>
      <h2 id={`${id}-title`}>{title}</h2>
      {open && children}
      <div class="dialog-actions">{open && actions}</div>
    </dialog>
  );
}

/** A question with a confirming and a cancelling button (e.g. "Revoke this key?"). */
export function ConfirmDialog(props: {
  id: string;
  open: boolean;
  title: string;
  confirm: string;
  danger?: boolean;
  busy?: boolean;
  onConfirm: () => void;
  onClose: () => void;
  children: ComponentChildren;
}) {
  const { confirm, danger, busy, onConfirm, onClose, ...rest } = props;
  return (
    <Dialog
      {...rest}
      onClose={onClose}
      actions={
        <>
          <button type="button" class="secondary" onClick={onClose}>
            Cancel
          </button>
          <button type="button" class={danger ? 'danger' : undefined} disabled={busy} onClick={onConfirm}>
            {confirm}
          </button>
        </>
      }
    />
  );
}
