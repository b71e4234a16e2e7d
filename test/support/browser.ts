// Debian's chromium driven by playwright-core for the /app tests: one persistent context per
// test file (a browser profile with its own cookies), Content-Security-Policy refusals and page
// errors collected, screenshots at desktop and phone size into a folder.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Locator, Page } from 'playwright-core';

/** Debian's chromium; CHROMIUM_PATH points elsewhere. */
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
export const DESKTOP = { width: 1280, height: 860 };
export const PHONE = { width: 390, height: 844 };
/** Where the /app tests put their screenshots (APP_SHOTS overrides). */
export const SHOTS = process.env.APP_SHOTS || new URL('../../artifacts/app/', import.meta.url).pathname;

export const chromiumMissing = (): string | null =>
  existsSync(CHROMIUM) ? null : `chromium is not installed at ${CHROMIUM} (apt-get install -y chromium); the browser test did not run`;

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** CSP refusals and uncaught page errors seen so far (a test asserts there are none). */
  problems: string[];
  /** A desktop and a phone screenshot of the page as it is now (`<name>-desktop.png`, `<name>-phone.png`). */
  shots(p: Page, name: string): Promise<void>;
  close(): Promise<void>;
}

/** Chromium on a profile of its own in `profile`, with the flags this machine needs (root: no sandbox; a closed network: no background connections). */
export async function launchChromium(profile: string): Promise<BrowserContext> {
  const { chromium } = await import('playwright-core');
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: DESKTOP,
    acceptDownloads: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  context.setDefaultTimeout(30_000);
  return context;
}

export async function openBrowser(): Promise<Browser> {
  mkdirSync(SHOTS, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), 'tollgate-app-'));
  const context = await launchChromium(profile);
  const problems: string[] = [];
  context.on('console', (msg) => {
    if (msg.type() === 'error' && /Content Security Policy|Refused to/i.test(msg.text())) problems.push(msg.text());
  });
  context.on('weberror', (e) => problems.push(String(e.error())));
  const page = context.pages()[0] ?? (await context.newPage());
  return {
    context,
    page,
    problems,
    async shots(p, name) {
      await p.screenshot({ path: join(SHOTS, `${name}-desktop.png`), fullPage: true });
      await p.setViewportSize(PHONE);
      await p.screenshot({ path: join(SHOTS, `${name}-phone.png`), fullPage: true });
      await p.setViewportSize(DESKTOP);
    },
    async close() {
      await context.close().catch(() => undefined);
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Signs `email` in as a person does: the sign-in page, the mailed link (read from `mailTo`), opened in this page. */
export async function signInByMail(
  page: Page,
  base: string,
  mailTo: (address: string, after?: number) => Promise<{ text: string }>,
  mailCount: () => number,
  email: string,
): Promise<void> {
  await page.goto(`${base}/app/sign-in`);
  const before = mailCount();
  await page.locator('#sign-in-email').fill(email);
  await page.getByRole('button', { name: 'Email me a sign-in link' }).click();
  await page.locator('#sign-in-sent', { hasText: 'a link is on its way' }).waitFor();
  const link = /https?:\/\/\S+\/app\/sign-in#\S+/.exec((await mailTo(email, before)).text)?.[0];
  if (!link) throw new Error(`no sign-in link mailed to ${email}`);
  await page.goto(link);
  await page.waitForURL((u) => !u.pathname.endsWith('/sign-in'));
}

/** Whether `l` shows within `ms`: pages render after their fetches, so a check made at once can run before them. */
export async function becomesVisible(l: Locator, ms = 10_000): Promise<boolean> {
  try {
    await l.waitFor({ state: 'visible', timeout: ms });
    return true;
  } catch {
    return false;
  }
}
