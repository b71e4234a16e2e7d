// A form's buttons: the submit button (disabled while the form's call runs) and, when the form can
// be left, a secondary button that leaves it. Each page's stylesheet lays out `.form-actions`.
import type { ComponentChildren } from 'preact';

export interface FormActionsProps {
  /** The submit button's text. */
  submit: ComponentChildren;
  busy?: boolean;
  submitId?: string;
  /** Shows the leaving button, which runs this. */
  onCancel?: () => void;
  cancel?: string;
}

export function FormActions({ submit, busy, submitId, onCancel, cancel = 'Cancel' }: FormActionsProps) {
  return (
    <div class="form-actions">
      <button type="submit" id={submitId} disabled={busy}>
        {submit}
      </button>
      {onCancel && (
        <button type="button" class="secondary" onClick={onCancel}>
          {cancel}
        </button>
      )}
    </div>
  );
}
