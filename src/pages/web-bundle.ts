// The pages' scripts are TypeScript components under web/src/ (Preact), bundled by esbuild into
// web/.bundle/, one file per page. The server builds the bundle on first use when it is missing
// or older than any source (so `npm start` and `npm test` need no extra step); `npm run build`
// builds it ahead for the Docker image. Each output is written to a temporary name and renamed,
// so several gateways starting at once (the tests) never serve a half-written file.
import { mkdir, readdir, rename, stat, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const WEB = fileURLToPath(new URL('../../web/', import.meta.url));
const SOURCES = join(WEB, 'src');
export const BUNDLE_DIR = join(WEB, '.bundle');

/** One bundle per page: the served file name and its entry module under web/src/. */
export const ENTRIES: Readonly<Record<string, string>> = {
  'usage.js': 'app/usage/main.tsx',
  'admin/console.js': 'admin/main.tsx',
  'app.js': 'app/shell/main.tsx',
  'chat.js': 'app/chat/main.tsx',
};

async function newestSource(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    const t = entry.isDirectory() ? await newestSource(path) : (await stat(path)).mtimeMs;
    if (t > newest) newest = t;
  }
  return newest;
}

async function oldestOutput(): Promise<number> {
  let oldest = Infinity;
  for (const name of Object.keys(ENTRIES)) {
    try {
      oldest = Math.min(oldest, (await stat(join(BUNDLE_DIR, name))).mtimeMs);
    } catch {
      return 0;
    }
  }
  return oldest;
}

/** Bundles every page (minified, no source maps: the CSP needs nothing inline, and none is). */
export async function buildBundle(): Promise<void> {
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([out, src]) => [out.replace(/\.js$/, ''), join(SOURCES, src)])),
    outdir: BUNDLE_DIR,
    bundle: true,
    format: 'esm',
    target: 'es2022',
    minify: true,
    jsx: 'automatic',
    jsxImportSource: 'preact',
    legalComments: 'none',
    write: false,
    logLevel: 'silent',
  });
  for (const file of result.outputFiles) {
    await mkdir(dirname(file.path), { recursive: true });
    const tmp = `${file.path}.${process.pid}.tmp`;
    await writeFile(tmp, file.contents);
    await rename(tmp, file.path);
  }
}

let ready: Promise<void> | null = null;

/** Resolves once the bundle is current; builds it at most once per process. */
export function ensureBundle(): Promise<void> {
  ready ??= (async () => {
    if ((await oldestOutput()) > (await newestSource(SOURCES))) return;
    await buildBundle();
  })().catch((err) => {
    ready = null; // a later request tries again (e.g. after a fixed source file)
    throw err;
  });
  return ready;
}
