// npm run lint: installs the lint tools on first use (npm ci into tools/lint, from its committed
// lockfile, again whenever that lockfile changes), then runs ESLint over the repository, the
// formatter's check (Prettier, .prettierrc.json), the layer check, the runtime's dependencies check
// and the import-cycle check over the application's sources. Exits non-zero if any finds anything.
// `npm run format` (this script with --write) formats the sources in place.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

const here = fileURLToPath(new URL('.', import.meta.url));
const root = join(here, '..', '..');
const stamp = join(here, 'node_modules', '.installed-from');
const lockHash = createHash('sha256')
  .update(readFileSync(join(here, 'package-lock.json')))
  .digest('hex');

function run(command, args, opts = {}) {
  const r = spawnSync(command, args, { cwd: root, stdio: 'inherit', ...opts });
  if (r.error) throw r.error;
  return r.status ?? 1;
}

if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== lockHash) {
  console.log('lint: installing the lint tools into tools/lint (first use)');
  if (run('npm', ['ci', '--prefix', here, '--no-audit', '--no-fund']) !== 0) process.exit(1);
  writeFileSync(stamp, lockHash);
}

const bin = (name) => join(here, 'node_modules', '.bin', name);
const SOURCES = ['src', 'projections', 'test', 'bench', 'tools/lint/*.mjs', 'tools/schemas', 'bin', 'web/src'];
if (process.argv.includes('--write')) process.exit(run(bin('prettier'), ['--write', '--log-level', 'warn', ...SOURCES]));
console.log('lint: eslint');
const eslint = run(bin('eslint'), ['--config', join(here, 'eslint.config.mjs'), '--max-warnings', '0', '.']);
// Type-only imports count too: a cycle of types is still two modules that cannot be read apart.
console.log('lint: import cycles');
const cycles = run(bin('dpdm'), ['--no-warning', '--no-tree', '--exit-code', 'circular:1', 'src/**/*.ts', 'projections/**/*.ts', 'bin/*.js']);
console.log('lint: layers (each module imports only its own layer or those below, tools/lint/layers.mjs)');
const layers = run(process.execPath, [join(here, 'layers.mjs')]);
console.log('lint: dependencies (what the runtime imports is in "dependencies": the production install has nothing else)');
const dependencies = run(process.execPath, [join(here, 'dependencies.mjs')]);
console.log('lint: formatting (prettier --check; npm run format fixes it)');
const format = run(bin('prettier'), ['--check', '--log-level', 'warn', ...SOURCES]);
process.exit(eslint || cycles || layers || dependencies || format ? 1 : 0);
