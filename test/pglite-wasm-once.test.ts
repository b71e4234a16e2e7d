// An embedded PGlite opened after the first compiles no WebAssembly (src/eventstore/wasm-once.ts,
// issue 44): every open used to compile 15 modules of its own that were freed after close, the
// create/free churn under which Node 24's V8 aborted test processes (jit_page.has_value()).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openPglite } from '../src/eventstore/db.ts';

const t = suite('embedded PGlite compiles its WebAssembly once per process');

t('a second and a third open compile no module; each still has its own database', async () => {
  let compiled = 0;
  const Compile = WebAssembly.Module;
  // Counts what reaches V8's compiler: installed before the first open, so it sits under the cache.
  Object.defineProperty(WebAssembly, 'Module', {
    value: new Proxy(Compile, {
      construct(target, args: unknown[], newTarget) {
        compiled++;
        return Reflect.construct(target, args, newTarget) as object;
      },
    }),
    writable: true,
    configurable: true,
  });
  const first = await openPglite();
  await first.exec('CREATE TABLE only_here (n int)');
  await first.close();
  assert.ok(compiled > 0, 'the first open compiles PGlite’s libraries and thunks');
  for (const n of [2, 3]) {
    const before = compiled;
    const db = await openPglite();
    const rows = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'only_here'");
    await db.close();
    assert.is(compiled - before, 0, `open ${n} compiled ${compiled - before} module(s)`);
    assert.is(rows[0].n, 0, 'a table of an earlier database is not in a new one');
  }
});

t.run();
