// The console's Finance page on a big log, as an operator opens it: Debian's chromium (playwright-
// core, as the browser tests drive it) signs in with the admin token and opens Finance, which
// reads its default window (the last 30 days) at once. Each run reloads the page and is timed from
// the reload to the day table on screen: the bundle (cached), the page's two reads (report and
// reconciliation), their parsing and the render. Then the same for a window asked for with Show
// once the page is idle (the window's first day in the table).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromiumMissing, launchChromium } from '../test/support/browser.ts';

export interface PageFigure {
  window: string;
  /** Milliseconds from a reload to the default window's day table, per run (the first included). */
  opens: number[];
  /** Milliseconds from Show (on an idle page) to `window`'s first day in the table, per run. */
  runs: number[];
  /** Rows in the day table. */
  rows: number;
}

/** The figure, or why it could not be taken (chromium not installed). */
export async function timeFinancePage(site: string, adminToken: string, from: string, to: string, runs = 5): Promise<PageFigure | string> {
  const missing = chromiumMissing();
  if (missing) return missing;
  const profile = mkdtempSync(join(tmpdir(), 'tollgate-bench-chromium-'));
  const context = await launchChromium(profile);
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`${site}/admin#/finance`);
    await page.getByLabel('Admin token').fill(adminToken);
    await page.getByLabel(/Your name/).fill('bench');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Finance' }).waitFor();
    const anyDay = page.locator('#finance-days-table tr[data-day]').first();
    await anyDay.waitFor({ timeout: 120_000 });
    const opens: number[] = [];
    const times: number[] = [];
    const firstRow = page.locator(`#finance-days-table tr[data-day="${from}"]`);
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      await page.reload();
      await anyDay.waitFor({ timeout: 120_000 });
      opens.push(performance.now() - t0);
      // The default window is on screen: nothing is loading when Show is pressed.
      await page.getByLabel('From (UTC day)').fill(from);
      await page.getByLabel('To (UTC day, included)').fill(to);
      const t1 = performance.now();
      await page.getByRole('button', { name: 'Show' }).click();
      await firstRow.waitFor({ timeout: 120_000 });
      times.push(performance.now() - t1);
    }
    return { window: `${from}..${to}`, opens, runs: times, rows: await page.locator('#finance-days-table tr[data-day]').count() };
  } finally {
    await context.close().catch(() => undefined);
    rmSync(profile, { recursive: true, force: true });
  }
}
