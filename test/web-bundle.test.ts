// The pages' bundle (src/pages/web-bundle.ts): a gateway that starts with a bundle older than its
// sources rebuilds it before serving it, so `npm start` and `npm test` need no build step, and the
// served script is what the TypeScript sources say today.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readdirSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { BUNDLE_DIR, ENTRIES, buildBundle } from '../src/pages/web-bundle.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';

const SOURCES = new URL('../web/src/', import.meta.url).pathname;
let gw: TestGateway | undefined;

function newestSource(dir: string): number {
  return Math.max(
    ...readdirSync(dir, { withFileTypes: true }).map((e) => (e.isDirectory() ? newestSource(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs)),
  );
}

test.after(async () => {
  await gw?.stop();
});

test('a stale bundle is rebuilt when the gateway starts and served with the CSP', async () => {
  await buildBundle();
  const longAgo = new Date('2000-01-01T00:00:00Z');
  for (const name of Object.keys(ENTRIES)) utimesSync(join(BUNDLE_DIR, name), longAgo, longAgo);
  gw = await startTestGateway();
  for (const name of Object.keys(ENTRIES)) {
    // The console's bundle is served under /admin, the customers' pages' under /app.
    const served = name.startsWith('admin/') ? `/admin/assets/${name.slice('admin/'.length)}` : `/app/assets/${name}`;
    const res = await fetch(gw.url + served);
    assert.is(res.status, 200, name);
    assert.match(res.headers.get('content-type') ?? '', /javascript/);
    assert.match(res.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    const body = await res.text();
    assert.ok(body.length > 1000, `${name} is a real bundle`);
    assert.not.match(body, /from ?["']preact/, 'preact is bundled in, not imported at run time');
    assert.ok(statSync(join(BUNDLE_DIR, name)).mtimeMs >= newestSource(SOURCES), `${name} was rebuilt`);
  }
  assert.match(await (await fetch(`${gw.url}/app/assets/usage.js`)).text(), /Download CSV/);
});

test.run();
