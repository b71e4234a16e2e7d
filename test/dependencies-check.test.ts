// The dependencies check (tools/lint/dependencies.mjs, run by npm run lint): a package the runtime
// imports for more than its types is in "dependencies", or the production install (npm ci
// --omit=dev) cannot start the gateway. It passes on this checkout and fails, naming the import,
// on small trees that break it.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CHECK = fileURLToPath(new URL('../tools/lint/dependencies.mjs', import.meta.url));
const MANIFEST = { dependencies: { koa: '^3' }, devDependencies: { openai: '^6', uvu: '^0.5' } };

function check(root?: string): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [CHECK, ...(root ? [root] : [])], { encoding: 'utf8' });
  return { status: r.status, out: r.stdout + r.stderr };
}

function inTree(files: Record<string, string>, fn: (root: string) => void): void {
  const root = mkdtempSync(join(tmpdir(), 'tollgate-deps-'));
  try {
    writeFileSync(join(root, 'package.json'), JSON.stringify(MANIFEST));
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    }
    fn(root);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

test('this checkout: every package the runtime imports is a dependency', () => {
  const r = check();
  assert.is(r.status, 0, r.out);
});

test('types from a devDependency, node built-ins, relative modules and tests pass', () => {
  inTree(
    {
      'src/a.ts':
        "import type { AzureOpenAI } from 'openai';\nimport { readFileSync } from 'node:fs';\nimport os from 'os';\nimport Koa from 'koa';\nimport { b } from './b.ts';\nexport type A = AzureOpenAI;\n",
      'src/b.ts': "export type { ChatCompletion } from 'openai/resources';\nexport const b = 1;\n",
      'test/a.test.ts': "import { test } from 'uvu';\nimport OpenAI from 'openai';\n",
    },
    (root) => {
      const r = check(root);
      assert.is(r.status, 0, r.out);
    },
  );
});

test('a value from a devDependency, a package not in package.json, and a dynamic import fail, each named', () => {
  inTree(
    {
      'src/upstream/azure.ts': "import {\n  AzureOpenAI,\n  APIError,\n} from 'openai';\nexport const c = AzureOpenAI;\n",
      'projections/x.ts': "export { thing } from '@scope/missing/sub';\n",
      'bin/cli.js': "const m = await import('uvu');\n",
    },
    (root) => {
      const r = check(root);
      assert.is(r.status, 1, r.out);
      assert.match(r.out, /src\/upstream\/azure\.ts imports 'openai', a devDependency/);
      assert.match(r.out, /projections\/x\.ts imports '@scope\/missing\/sub', not in package\.json/);
      assert.match(r.out, /bin\/cli\.js imports 'uvu', a devDependency/);
    },
  );
});

test.run();
