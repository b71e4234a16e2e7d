// The layout check (npm run lint), as docs/architecture.md draws it: features over a shared base.
// - The base is layered: each base module imports only its own layer or those below it, and never
//   a feature or the wiring.
// - A feature (src/<feature>/ with its read models in projections/<feature>/) imports the base, its
//   own files, and another feature only through that feature's public src/<feature>/index.ts.
// - Features import each other without loops: the graph of "feature A imports feature B" has no cycle.
// - Only the wiring (src/wiring/, src/app.ts, the process and the CLI) may import anything.
// - Koa stays at the edge: outside the HTTP plumbing (src/http/) and the wiring, only a feature's
//   routes (`*-routes.ts`) and middleware (`*-middleware.ts`) import koa or a koa package, not
//   even for a type; what the rest needs of a request comes as plain values.
// The settings module (src/config.ts) reads the environment for every layer, so it may take each
// layer's defaults, and any module may import its *types*.
// Exits non-zero naming every import that breaks a rule (and each loop between features).
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout to check: this one, or another given as the first argument (the layout check's own test). */
const root = process.argv[2] ?? join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

/** The base's layers, lowest first. A path belongs to the first entry whose prefix it starts with. */
const BASE = [
  ['shared helpers', ['src/ajv.ts', 'src/secret-shapes.ts', 'src/next-turn.ts', 'src/serial-runs.ts', 'src/at-most.ts']],
  ['tracing', ['src/tracing/']],
  ['storage', ['src/eventstore/']],
  ['domain base', ['src/ledger/', 'src/money/']],
  ['upstreams', ['src/upstream/']],
  ['projection runner', ['projections/runner/']],
  ['http', ['src/http/']],
];
/** The capabilities, each in src/<name>/ and projections/<name>/. */
export const FEATURES = ['catalogue', 'accounts', 'keys', 'calls', 'books', 'audit', 'customers', 'webhooks', 'pages'];
/** What builds and runs the whole: it may import anything. */
const WIRING = [
  'src/wiring/',
  'src/app.ts',
  'src/server.ts',
  'src/projector.ts',
  'src/logger.ts',
  'src/cli/',
  'projections/read-models.ts',
  'projections/replay-worker.ts',
];
const SETTINGS = 'src/config.ts';
const HTTP_PLUMBING = 'src/http/';

/** Where a path sits: { kind: 'base', rank, name } | { kind: 'feature', name } | { kind: 'wiring' } | null. */
export function placeOf(path) {
  const rank = BASE.findIndex(([, prefixes]) => prefixes.some((p) => path === p || (p.endsWith('/') && path.startsWith(p))));
  if (rank >= 0) return { kind: 'base', rank, name: BASE[rank][0] };
  const feature = FEATURES.find((f) => path.startsWith(`src/${f}/`) || path.startsWith(`projections/${f}/`));
  if (feature) return { kind: 'feature', name: feature };
  if (WIRING.some((p) => path === p || (p.endsWith('/') && path.startsWith(p)))) return { kind: 'wiring' };
  return null;
}

function sources(dir) {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const rel = join(dir, name);
    if (statSync(join(root, rel)).isDirectory()) return sources(rel);
    return rel.endsWith('.ts') ? [rel] : [];
  });
}

const IMPORT = /^\s*(import|export)\s+(type\s+)?[^'"]*?from\s+['"](\.[^'"]+)['"]|\bimport\(\s*['"](\.[^'"]+)['"]\s*\)/gm;
/** Any way a module can name koa or a koa package: import/export … from, a bare or dynamic import, require, an augmentation. */
const KOA = /(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*|\bdeclare\s+module\s+)['"]((?:koa|koa-[^'"/]+|@koa\/[^'"/]+)(?:\/[^'"]*)?)['"]/g;
const mayKnowKoa = (file, place) => place.kind === 'wiring' || file.startsWith(HTTP_PLUMBING) || /-(routes|middleware)\.ts$/.test(basename(file));

const problems = [];
/** feature -> feature -> an import that makes the edge (for the loop report). */
const featureEdges = new Map();
for (const file of [...sources('src'), ...sources('projections')]) {
  if (file === SETTINGS) continue;
  const from = placeOf(file);
  if (!from) {
    problems.push(`${file}: in no layer or feature (add its folder to tools/lint/layers.mjs and docs/architecture.md)`);
    continue;
  }
  const text = readFileSync(join(root, file), 'utf8');
  if (!mayKnowKoa(file, from))
    for (const m of text.matchAll(KOA))
      problems.push(`${file} imports '${m[1]}': only routes (*-routes.ts), middleware (*-middleware.ts), src/http/ and the wiring know koa`);
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[3] ?? m[4];
    const target = relative(root, normalize(join(root, dirname(file), spec)));
    if (target === SETTINGS) {
      if (!m[2] && from.kind !== 'wiring') problems.push(`${file}: imports the settings module for more than its types (${spec})`);
      continue;
    }
    const to = placeOf(target);
    if (!to || from.kind === 'wiring') continue;
    if (from.kind === 'base') {
      if (to.kind !== 'base')
        problems.push(
          `${file} (base: ${from.name}) imports ${target} (${to.kind === 'feature' ? `feature ${to.name}` : 'the wiring'}): the base imports no feature`,
        );
      else if (to.rank > from.rank) problems.push(`${file} (${from.name}) imports ${target} (${to.name}), a layer above it`);
      continue;
    }
    if (to.kind === 'wiring') problems.push(`${file} (feature ${from.name}) imports ${target}, the wiring: a feature is given what it needs`);
    else if (to.kind === 'feature' && to.name !== from.name) {
      if (target !== `src/${to.name}/index.ts`)
        problems.push(`${file} (feature ${from.name}) imports ${target}: another feature is reached only through src/${to.name}/index.ts`);
      if (!featureEdges.has(from.name)) featureEdges.set(from.name, new Map());
      if (!featureEdges.get(from.name).has(to.name)) featureEdges.get(from.name).set(to.name, `${file} -> ${target}`);
    }
  }
}

// Loops between features: a depth-first search that reports each cycle it closes.
const state = new Map();
const path = [];
function visit(feature) {
  state.set(feature, 'open');
  path.push(feature);
  for (const [next, via] of featureEdges.get(feature) ?? []) {
    if (state.get(next) === 'open') {
      const loop = path.slice(path.indexOf(next));
      problems.push(`features in a loop: ${[...loop, next].join(' -> ')} (one import: ${via})`);
    } else if (!state.has(next)) visit(next);
  }
  path.pop();
  state.set(feature, 'done');
}
for (const f of FEATURES) if (!state.has(f)) visit(f);

for (const p of problems) console.log(p);
process.exit(problems.length > 0 ? 1 : 0);
