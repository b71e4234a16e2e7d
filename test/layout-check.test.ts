// The layout check (tools/lint/layers.mjs, run by npm run lint) against small trees made to break
// each of its rules, and against this checkout: it must pass here and fail, naming the import, there.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CHECK = fileURLToPath(new URL('../tools/lint/layers.mjs', import.meta.url));

function check(root?: string): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [CHECK, ...(root ? [root] : [])], { encoding: 'utf8' });
  return { status: r.status, out: r.stdout + r.stderr };
}

/** A tree of a few modules (path -> source), with the folders the check reads. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'tollgate-layout-'));
  for (const dir of ['src', 'projections']) mkdirSync(join(root, dir), { recursive: true });
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

/** A clean base and two features, the later one using the earlier through its index. */
const CLEAN = {
  'src/ledger/decider.ts': 'export interface Decider {}\n',
  'src/http/errors.ts': "import type { Decider } from '../ledger/decider.ts';\nexport type E = Decider;\n",
  'src/accounts/balance.ts': "import type { Decider } from '../ledger/decider.ts';\nexport const balance = 1; export type D = Decider;\n",
  'src/accounts/index.ts': "export { balance } from './balance.ts';\n",
  'src/calls/metering.ts': "import { balance } from '../accounts/index.ts';\nexport const metering = balance;\n",
  'src/calls/chat-routes.ts': "import type { Context } from 'koa';\nexport type C = Context;\n",
  'projections/calls/usage.ts': "import { metering } from '../../src/calls/metering.ts';\nexport const usage = metering;\n",
  'src/wiring/deps.ts': "import { metering } from '../calls/metering.ts';\nexport const deps = metering;\n",
};

function expectRefused(files: Record<string, string>, ...said: string[]): void {
  const root = tree({ ...CLEAN, ...files });
  try {
    const r = check(root);
    assert.is(r.status, 1, `the check passed a tree that breaks a rule:\n${r.out}`);
    for (const s of said) assert.ok(r.out.includes(s), `expected "${s}" in:\n${r.out}`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

test('this checkout keeps the layout', () => {
  const r = check();
  assert.is(r.status, 0, r.out);
});

test('a clean tree of a base and two features passes', () => {
  const root = tree(CLEAN);
  try {
    const r = check(root);
    assert.is(r.status, 0, r.out);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('the base importing a feature is refused', () => {
  expectRefused(
    { 'src/ledger/ledger.ts': "import { balance } from '../accounts/balance.ts';\nexport const l = balance;\n" },
    'src/ledger/ledger.ts',
    'the base imports no feature',
  );
});

test('a base layer importing one above it is refused', () => {
  expectRefused({ 'src/ledger/oops.ts': "import type { E } from '../http/errors.ts';\nexport type O = E;\n" }, 'src/ledger/oops.ts', 'a layer above it');
});

test("a feature reaching past another feature's index is refused", () => {
  expectRefused(
    { 'src/calls/charge.ts': "import { balance } from '../accounts/balance.ts';\nexport const c = balance;\n" },
    'src/calls/charge.ts',
    'only through src/accounts/index.ts',
  );
});

test('two features importing each other are refused as a loop', () => {
  expectRefused(
    {
      'src/calls/index.ts': "export { metering } from './metering.ts';\n",
      'src/accounts/holds.ts': "import { metering } from '../calls/index.ts';\nexport const h = metering;\n",
    },
    'features in a loop',
  );
});

test('a feature importing the wiring is refused', () => {
  expectRefused(
    { 'src/accounts/uses-deps.ts': "import { deps } from '../wiring/deps.ts';\nexport const u = deps;\n" },
    'the wiring: a feature is given what it needs',
  );
});

test('koa outside routes, middleware, the HTTP plumbing and the wiring is refused', () => {
  expectRefused({ 'src/calls/metering-koa.ts': "import type { Context } from 'koa';\nexport type K = Context;\n" }, "src/calls/metering-koa.ts imports 'koa'");
});

test('a module in no layer or feature is named', () => {
  expectRefused({ 'src/stray/thing.ts': 'export const x = 1;\n' }, 'src/stray/thing.ts: in no layer or feature');
});

test.run();
