// A labelled form field: the label tied to its control by id, an optional hint read with it.
import type { ComponentChildren } from 'preact';

export function Field({
  id,
  label,
  hint,
  optional,
  class: cls,
  children,
}: {
  id: string;
  label: string;
  hint?: string;
  optional?: boolean;
  class?: string;
  children: ComponentChildren;
}) {
  return (
    <div class={cls ? `field ${cls}` : 'field'}>
      <label for={id}>
        {label} {optional && <span class="optional">(optional)</span>}
      </label>
      {children}
      {hint && (
        <p class="help" id={`${id}-hint`}>
          {hint}
        </p>
      )}
    </div>
  );
}

/** The value of the input an event came from. */
export const valueOf = (e: Event): string => (e.target as HTMLInputElement | HTMLSelectElement).value;
