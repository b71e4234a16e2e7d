// Small pieces every console section uses: labelled fields, result regions, pills, tables with a
// caption, section headings.
import type { ComponentChildren } from 'preact';
import { fmt } from './format.ts';

/** A label, a control (given `id`, and `aria-describedby` of `${id}-help` when there is help) and its help line. */
export function Field(props: {
  id: string;
  label: ComponentChildren;
  help?: ComponentChildren;
  optional?: boolean;
  wide?: boolean;
  children: ComponentChildren;
}) {
  return (
    <div class={props.wide ? 'field wide' : 'field'}>
      <label for={props.id}>
        {props.label}
        {props.optional && <span class="optional"> (optional)</span>}
      </label>
      {props.children}
      {props.help && (
        <p class="help" id={`${props.id}-help`}>
          {props.help}
        </p>
      )}
    </div>
  );
}

/** Attributes of a text-like input the console never wants autofilled or spell-checked. */
export const plain = { autocomplete: 'off', spellcheck: false } as const;

/** A polite live region for the result of an action; empty until there is one. */
export function Result({ children, id }: { children?: ComponentChildren; id?: string }) {
  const has = children !== undefined && children !== null && children !== false && children !== '';
  return (
    <div class="result" id={id} role="status" aria-live="polite">
      {has && <div class="result-box">{children}</div>}
    </div>
  );
}

export function Pill({ state, text }: { state: string; text?: string }) {
  return <span class={`pill pill-${state.replace(/[^a-z_]/gi, '')}`}>{text ?? state}</span>;
}

export function Heading({ text, intro }: { text: ComponentChildren; intro?: string }) {
  return (
    <>
      <h1 tabIndex={-1} id="view-heading">
        {text}
      </h1>
      {intro && <p class="muted intro">{intro}</p>}
    </>
  );
}

/** A number cell: formatted, right-aligned, its raw value in data-value (what the tests read). */
export function Num({ value, ...rest }: { value: number | null | undefined } & Record<string, unknown>) {
  return (
    <td class="num" data-value={value ?? ''} {...rest}>
      {typeof value === 'number' ? fmt(value) : '—'}
    </td>
  );
}

export function EmptyRow({ cols, text }: { cols: number; text: string }) {
  return (
    <tr>
      <td colSpan={cols} class="empty-cell">
        {text}
      </td>
    </tr>
  );
}

export interface TableProps {
  caption: string;
  /** Column heads; a leading '#' marks a number column. */
  head: string[];
  rows: ComponentChildren[];
  empty?: string;
  foot?: ComponentChildren;
  id?: string;
  captionVisible?: boolean;
}

/** A table in a focusable scrolling region named by its caption (a wide table scrolls by keyboard). */
export function Table({ caption, head, rows, empty, foot, id, captionVisible }: TableProps) {
  return (
    <div class="table-wrap" role="region" tabIndex={0} aria-label={caption}>
      <table id={id}>
        <caption class={captionVisible ? undefined : 'visually-hidden'}>{caption}</caption>
        <thead>
          <tr>
            {head.map((h) => (
              <th key={h} scope="col" class={h.startsWith('#') ? 'num' : undefined}>
                {h.replace(/^#/, '')}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{rows.length ? rows : empty ? <EmptyRow cols={head.length} text={empty} /> : null}</tbody>
        {foot && <tfoot>{foot}</tfoot>}
      </table>
    </div>
  );
}

/** A list's body while it loads, once loaded, or when it failed. */
export function Loading({ text }: { text: string }) {
  return <p class="loading">{text}</p>;
}

type InputFieldProps = {
  id: string;
  label: ComponentChildren;
  help?: ComponentChildren;
  optional?: boolean;
  wide?: boolean;
  value: string;
  onValue: (value: string) => void;
} & Record<string, unknown>;

/** A labelled text-like input (described by its help line), never autofilled or spell-checked. */
export function InputField({ id, label, help, optional, wide, value, onValue, ...input }: InputFieldProps) {
  return (
    <Field id={id} label={label} help={help} optional={optional} wide={wide}>
      <input
        id={id}
        {...plain}
        aria-describedby={help ? `${id}-help` : undefined}
        {...input}
        value={value}
        onInput={(e) => onValue((e.target as HTMLInputElement).value)}
      />
    </Field>
  );
}
