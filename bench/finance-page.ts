// The console's Finance page on a big log, as an operator opens it: Debian's chromium (playwright-
// core, as the browser tests drive it) signs in with the admin token, opens Finance, asks for a
// window and waits until the day table shows its first day (outside the 30 days the page opens
// on). Timed from the click on Show to that row on screen: the page's two reads (report and
// reconciliation), their parsing and the render.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromiumMissing, launchChromium } from '../test/support/browser.ts';

export interface PageFigure {
  window: string;
  /** Milliseconds from Show to the window's first day in the table, per run (the first included). */
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
    await page.getByLabel('From (UTC day)').fill(from);
    await page.getByLabel('To (UTC day, included)').fill(to);
    const times: number[] = [];
    const firstRow = page.locator(`#finance-days-table tr[data-day="${from}"]`);
    for (let i = 0; i < runs; i++) {
      // Each run starts from a reloaded page, on its default window, so the row appearing is this run's.
      if (i > 0) {
        await page.reload();
        await page.getByRole('heading', { level: 1, name: 'Finance' }).waitFor();
        await page.getByLabel('From (UTC day)').fill(from);
        await page.getByLabel('To (UTC day, included)').fill(to);
      }
      const t0 = performance.now();
      await page.getByRole('button', { name: 'Show' }).click();
      await firstRow.waitFor({ timeout: 120_000 });
      times.push(performance.now() - t0);
    }
    return { window: `${from}..${to}`, runs: times, rows: await page.locator('#finance-days-table tr[data-day]').count() };
  } finally {
    await context.close().catch(() => undefined);
    rmSync(profile, { recursive: true, force: true });
  }
}
