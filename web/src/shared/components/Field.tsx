// Labelled form fields: the label tied to its control by id, an optional help line (id
// `${id}-help`, for the control's aria-describedby), and the text input the console uses everywhere.
import type { ComponentChildren } from 'preact';

export interface FieldProps {
  id: string;
  label: ComponentChildren;
  help?: ComponentChildren;
  optional?: boolean;
  /** Spans the whole row of a form grid. */
  wide?: boolean;
  children: ComponentChildren;
}

/** A label, a control (given `id`, and `aria-describedby` of `${id}-help` when there is help) and its help line. */
export function Field({ id, label, help, optional, wide, children }: FieldProps) {
  return (
    <div class={wide ? 'field wide' : 'field'}>
      <label for={id}>
        {label}
        {optional && <span class="optional"> (optional)</span>}
      </label>
      {children}
      {help && (
        <p class="help" id={`${id}-help`}>
          {help}
        </p>
      )}
    </div>
  );
}

/** The value of the input an event came from. */
export const valueOf = (e: Event): string => (e.target as HTMLInputElement | HTMLSelectElement).value;

/** Attributes of a text-like input that should never be autofilled or spell-checked. */
export const plain = { autocomplete: 'off', spellcheck: false } as const;

type InputFieldProps = Omit<FieldProps, 'children'> & {
  value: string;
  onValue: (value: string) => void;
} & Record<string, unknown>;

/** A labelled text-like input (described by its help line), never autofilled or spell-checked. */
export function InputField({ id, label, help, optional, wide, value, onValue, ...input }: InputFieldProps) {
  return (
    <Field id={id} label={label} help={help} optional={optional} wide={wide}>
      <input id={id} {...plain} aria-describedby={help ? `${id}-help` : undefined} {...input} value={value} onInput={(e) => onValue(valueOf(e))} />
    </Field>
  );
}
