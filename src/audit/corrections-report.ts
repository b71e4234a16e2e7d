// The reconciliation report: per charge, per account and in total, as billed originally, billed
// now and corrected; its detail as CSV. Pure: it is given the charges, page after page.
import type { CorrectionWindow } from '../catalogue/index.ts';
import type { CorrectionComponent } from '../ledger/events.ts';
import { csvCell } from './statements.ts';

/** An adjustment already applied to a charge. */
export interface PriorAdjustment {
  correctionId: string;
  delta: number;
}

export interface AffectedCharge {
  eventId: string;
  requestId: string;
  at: string;
  kind: 'chat' | 'image';
  /** The charge as it was billed. */
  billedOriginally: number;
  /** Billed now: the charge plus every adjustment already applied to it. */
  billedNow: number;
  /** Re-priced with every correction covering it, this one included. */
  corrected: number;
  /** corrected - billedNow: what applying the correction adjusts. */
  difference: number;
  /** The same as billedNow (kept for clients of the first report). */
  billed: number;
  /** The multiplier the charge was billed at, and the one it is corrected to. */
  multiplierMilli: number;
  correctedMultiplierMilli: number;
  /** The correction that decides the corrected figure (the latest covering the charge). */
  correctedBy: string;
  /** The corrections already applied to the charge, in order. */
  adjustments: PriorAdjustment[];
  fromQuota: number;
}

export interface Figures {
  charges: number;
  billedOriginally: number;
  billedNow: number;
  billed: number;
  corrected: number;
  difference: number;
}

export interface AccountReconciliation extends Figures {
  accountId: string;
  items: AffectedCharge[];
}

export interface ReconciliationReport {
  correctionId: string;
  modelId: string;
  from: string;
  to: string;
  component: CorrectionComponent;
  value: number;
  /** The corrected multiplier for a 'multiplier' correction, else null. */
  multiplierMilli: number | null;
  alsoFromNow: boolean;
  /** Its revision in the model's stream (the order of corrections); for a dry run, the one it would get. */
  revision: number;
  accounts: AccountReconciliation[];
  totals: Figures;
  /** Whether `items` list every charge (false: more than REPORT_ITEMS_MAX; page or stream the detail). */
  itemsComplete: boolean;
}

const zeroFigures = (): Figures => ({ charges: 0, billedOriginally: 0, billedNow: 0, billed: 0, corrected: 0, difference: 0 });
function addTo(f: Figures, i: AffectedCharge): void {
  f.charges++;
  f.billedOriginally += i.billedOriginally;
  f.billedNow += i.billedNow;
  f.billed += i.billed;
  f.corrected += i.corrected;
  f.difference += i.difference;
}

/** Most charges listed in a report's `items` (beyond them the report has the figures, and the detail is paged or streamed). */
export const REPORT_ITEMS_MAX = 1_000;

/** Per-account and total figures over a whole window, with the items while there are few enough. */
export class ReportBuilder {
  private readonly byAccount = new Map<string, AccountReconciliation>();
  readonly totals = zeroFigures();
  itemsComplete = true;
  add(plans: ReadonlyArray<{ accountId: string; item: AffectedCharge }>): void {
    for (const p of plans) {
      let a = this.byAccount.get(p.accountId);
      if (!a) this.byAccount.set(p.accountId, (a = { accountId: p.accountId, ...zeroFigures(), items: [] }));
      addTo(a, p.item);
      addTo(this.totals, p.item);
      if (this.itemsComplete) a.items.push(p.item);
    }
    if (this.itemsComplete && this.totals.charges > REPORT_ITEMS_MAX) {
      this.itemsComplete = false;
      for (const a of this.byAccount.values()) a.items = [];
    }
  }
  accounts(): AccountReconciliation[] {
    return [...this.byAccount.values()].sort((x, y) => (x.accountId < y.accountId ? -1 : x.accountId > y.accountId ? 1 : 0));
  }
}

export function reportOf(self: CorrectionWindow, modelId: string, r: ReportBuilder): ReconciliationReport {
  return {
    correctionId: self.correctionId,
    modelId,
    from: self.from,
    to: self.to,
    component: self.component,
    value: self.value,
    multiplierMilli: self.component === 'multiplier' ? self.value : null,
    alsoFromNow: self.alsoFromNow,
    revision: self.revision,
    accounts: r.accounts(),
    totals: r.totals,
    itemsComplete: r.itemsComplete,
  };
}

/** A charge of the detail: which account it is on, and its figures. */
export type ChargeDetail = AffectedCharge & { accountId: string };

const DETAIL_COLUMNS = [
  'account_id',
  'event_id',
  'request_id',
  'at',
  'kind',
  'billed_originally',
  'billed_now',
  'corrected',
  'difference',
  'multiplier',
  'corrected_multiplier',
  'corrected_by',
  'from_quota',
  'adjusted_by',
] as const;
const FIGURE_COLUMNS = ['charges', 'billed_originally', 'billed_now', 'corrected', 'difference'] as const;

/** The dry run's detail as CSV: its header line, then one line per charge. */
export const detailCsvHeader = (): string => DETAIL_COLUMNS.join(',') + '\n';
export function detailCsvLine(c: ChargeDetail): string {
  return (
    [
      c.accountId,
      c.eventId,
      c.requestId,
      c.at,
      c.kind,
      c.billedOriginally,
      c.billedNow,
      c.corrected,
      c.difference,
      c.multiplierMilli / 1000,
      c.correctedMultiplierMilli / 1000,
      c.correctedBy,
      c.fromQuota,
      c.adjustments.map((a) => `${a.correctionId}:${a.delta}`).join(' '),
    ]
      .map(csvCell)
      .join(',') + '\n'
  );
}
/** The CSV's end: after a blank line, one line per account and the total. */
export function detailCsvFooter(r: ReconciliationReport): string {
  const figures = (f: Figures) => [f.charges, f.billedOriginally, f.billedNow, f.corrected, f.difference].join(',');
  return [
    '',
    ['account_id', ...FIGURE_COLUMNS].join(','),
    ...r.accounts.map((a) => `${csvCell(a.accountId)},${figures(a)}`),
    `total,${figures(r.totals)}`,
    '',
  ].join('\n');
}
