// The runtime's packages are dependencies (npm run lint): a package that src/, projections/ or
// bin/ imports for more than its types must be in package.json's "dependencies". The production
// install (the Dockerfile's `npm ci --omit=dev`) has nothing else: `openai`, then a devDependency,
// stopped the built gateway at its start with ERR_MODULE_NOT_FOUND.
// Exits non-zero naming each such import.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout to check: this one, or another given as the first argument (the check's own test). */
const root = process.argv[2] ?? join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const RUNTIME = ['src', 'projections', 'bin'];

function sources(dir) {
  let names;
  try {
    names = readdirSync(join(root, dir));
  } catch {
    return [];
  }
  return names.flatMap((name) => {
    const rel = join(dir, name);
    if (statSync(join(root, rel)).isDirectory()) return sources(rel);
    return /\.(ts|js|mjs)$/.test(rel) ? [rel] : [];
  });
}

// `import … from 'x'` and `export … from 'x'` (not `import type`/`export type`), a bare `import 'x'`, and `import('x')`.
const STATIC = /^\s*(?:import|export)\s+(type\s+)?(?:[^'"]*?\sfrom\s*)?['"]([^'"./][^'"]*)['"]/gm;
const DYNAMIC = /\bimport\(\s*['"]([^'"./][^'"]*)['"]\s*\)/g;
const packageOf = (spec) => (spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);
const builtin = (name) => name.startsWith('node:') || builtinModules.includes(name);

const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const dependencies = new Set(Object.keys(manifest.dependencies ?? {}));
const problems = [];
for (const file of RUNTIME.flatMap(sources)) {
  const text = readFileSync(join(root, file), 'utf8');
  const specs = [...[...text.matchAll(STATIC)].filter((m) => !m[1]).map((m) => m[2]), ...[...text.matchAll(DYNAMIC)].map((m) => m[1])];
  for (const spec of specs) {
    const name = packageOf(spec);
    if (builtin(name) || dependencies.has(name)) continue;
    const where = name in (manifest.devDependencies ?? {}) ? 'a devDependency' : 'not in package.json';
    problems.push(`${file} imports '${spec}', ${where}: the production install (npm ci --omit=dev) lacks it; move it to "dependencies"`);
  }
}
for (const p of problems) console.log(p);
process.exit(problems.length > 0 ? 1 : 0);
