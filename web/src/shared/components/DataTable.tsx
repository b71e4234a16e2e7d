// A table with a caption for screen readers, column headers, body rows and an optional footer,
// inside a focusable scrolling region (so a wide table scrolls sideways by keyboard on a phone).
import type { ComponentChildren } from 'preact';

export interface Column {
  label: string;
  class?: string;
}

export interface DataTableProps {
  id: string;
  labelledBy: string;
  caption: string;
  columns: Column[];
  /** Rows as <tr> elements; `empty` is shown in one row when there are none. */
  rows: ComponentChildren[];
  empty: string;
  foot?: ComponentChildren;
}

export function DataTable({ id, labelledBy, caption, columns, rows, empty, foot }: DataTableProps) {
  return (
    <div class="table-wrap" id={id} tabIndex={0} role="region" aria-labelledby={labelledBy}>
      <table>
        <caption class="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c.label} scope="col" class={c.class}>
                {c.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.length ? (
            rows
          ) : (
            <tr>
              <td colSpan={columns.length}>{empty}</td>
            </tr>
          )}
        </tbody>
        {foot && <tfoot>{foot}</tfoot>}
      </table>
    </div>
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
