// The layer check (npm run lint): each module imports only its own layer or the layers below it,
// as docs/architecture.md draws them. Exits non-zero and names every import that points upward.
// Two exceptions, both deliberate: the settings module (src/config.ts) reads the environment for
// every layer, so it may take each layer's defaults and any layer may import its *types*.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

/** Lowest first. A path belongs to the first entry whose prefix it starts with. */
const LAYERS = [
  ['shared helpers', ['src/ajv.ts', 'src/secret-shapes.ts', 'src/next-turn.ts']],
  ['storage', ['src/eventstore/']],
  ['domain', ['src/ledger/', 'src/money/']],
  ['upstreams', ['src/upstream/']],
  ['read side', ['projections/']],
  ['payments', ['src/payments/']],
  ['http', ['src/http/']],
  ['gateway', ['src/gateway/']],
  ['dialects', ['src/dialects/']],
  ['operator features', ['src/admin/', 'src/webhooks/', 'src/customers/']],
  ['routes', ['src/routes/']],
  ['app', ['src/app.ts']],
  ['process', ['src/server.ts', 'src/projector.ts', 'src/logger.ts']],
  ['entry', ['src/cli/']],
];
const SETTINGS = 'src/config.ts';

function rankOf(path) {
  const i = LAYERS.findIndex(([, prefixes]) => prefixes.some((p) => path === p || (p.endsWith('/') && path.startsWith(p))));
  return i;
}

function sources(dir) {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const rel = join(dir, name);
    if (statSync(join(root, rel)).isDirectory()) return sources(rel);
    return rel.endsWith('.ts') ? [rel] : [];
  });
}

const IMPORT = /^\s*(import|export)\s+(type\s+)?[^'"]*?from\s+['"](\.[^'"]+)['"]/gm;
const problems = [];
for (const file of [...sources('src'), ...sources('projections')]) {
  if (file === SETTINGS) continue;
  const from = rankOf(file);
  if (from < 0) {
    problems.push(`${file}: in no layer (add its folder to tools/lint/layers.mjs and docs/architecture.md)`);
    continue;
  }
  for (const m of readFileSync(join(root, file), 'utf8').matchAll(IMPORT)) {
    const target = relative(root, normalize(join(root, dirname(file), m[3])));
    if (target === SETTINGS) {
      if (!m[2] && from < rankOf('src/app.ts')) problems.push(`${file}: imports the settings module for more than its types (${m[3]})`);
      continue;
    }
    const to = rankOf(target);
    if (to > from) problems.push(`${file} (${LAYERS[from][0]}) imports ${target} (${LAYERS[to][0]}), a layer above it`);
  }
}
for (const p of problems) console.log(p);
process.exit(problems.length > 0 ? 1 : 0);
