// A table with a caption (for screen readers, or shown), column heads, body rows and an optional
// footer, inside a focusable scrolling region named by a heading or the caption (so a wide table
// scrolls sideways by keyboard on a phone); its number cells, and the small pieces beside tables.
import type { ComponentChildren } from 'preact';
import { fmt } from '../format.ts';

export interface Column {
  label: string;
  class?: string;
}

export interface DataTableProps {
  caption: string;
  /** Column heads: a Column, or its label (a leading '#' marks a number column). */
  columns: Array<Column | string>;
  /** Rows as <tr> elements; `empty`, if given, is shown in one row when there are none. */
  rows: ComponentChildren[];
  empty?: string;
  foot?: ComponentChildren;
  /** The scrolling region's id. */
  id?: string;
  /** The table's id. */
  tableId?: string;
  /** The heading that names the region; without it the caption names it. */
  labelledBy?: string;
  captionVisible?: boolean;
}

const head = (c: Column | string): Column => (typeof c !== 'string' ? c : c.startsWith('#') ? { label: c.slice(1), class: 'num' } : { label: c });

export function DataTable({ caption, columns, rows, empty, foot, id, tableId, labelledBy, captionVisible }: DataTableProps) {
  return (
    <div class="table-wrap" id={id} tabIndex={0} role="region" aria-labelledby={labelledBy} aria-label={labelledBy ? undefined : caption}>
      <table id={tableId}>
        <caption class={captionVisible ? undefined : 'visually-hidden'}>{caption}</caption>
        <thead>
          <tr>
            {columns.map(head).map((c) => (
              <th key={c.label} scope="col" class={c.class}>
                {c.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{rows.length ? rows : empty ? <EmptyRow cols={columns.length} text={empty} /> : null}</tbody>
        {foot && <tfoot>{foot}</tfoot>}
      </table>
    </div>
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

/** A number cell: formatted, right-aligned, its raw value in data-value (what the tests read). */
export function Num({ value, ...rest }: { value: number | null | undefined } & Record<string, unknown>) {
  return (
    <td class="num" data-value={value ?? ''} {...rest}>
      {typeof value === 'number' ? fmt(value) : '—'}
    </td>
  );
}

/** The empty scrolling region a table sits in before there is data. */
export function TableSlot({ id, labelledBy }: { id: string; labelledBy: string }) {
  return <div class="table-wrap" id={id} tabIndex={0} role="region" aria-labelledby={labelledBy} />;
}

export function Swatch({ color }: { color: string }) {
  return (
    <svg width={12} height={12} viewBox="0 0 12 12" aria-hidden="true">
      <rect width={12} height={12} rx={3} fill={color} />
    </svg>
  );
}

export function Stat({ label, value, id, sub }: { label: string; value: string; id?: string; sub?: string | null }) {
  return (
    <div class="stat">
      <p class="label">{label}</p>
      <p class="value" id={id}>
        {value}
      </p>
      {sub && <p class="sub">{sub}</p>}
    </div>
  );
}
