// Tools that only a test or the benchmark needs are no dependency of Tollgate: each lives in a
// folder of its own with a package.json and a committed package-lock.json, installed there on
// first use, and again whenever either file changes (`npm ci --prefix <folder>`). This keeps the
// project's own `npm ci` light. Test files run side by side, so one installs while the others
// wait for it: a second npm ci into the same folder would delete what the first is installing.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DEFAULT_TIMEOUT_MS = 300_000;

export interface FirstUseFolder {
  /** The folder holding package.json and package-lock.json. */
  dir: string;
  /** What it holds, for the log and errors ("the coding-assistant CLIs"). */
  label: string;
  /** Files that must exist after the install (besides each dependency's package.json). */
  expected?: string[];
  /** Install optional dependencies (platform binaries). */
  includeOptional?: boolean;
  /** Run no install scripts (the packages need none). */
  ignoreScripts?: boolean;
  timeoutMs?: number;
}

function tail(text: string, lines: number): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

function commandOf(folder: FirstUseFolder): string {
  return `npm ci --prefix ${relative(ROOT, folder.dir)} --no-audit --no-fund${folder.includeOptional ? ' --include=optional' : ''}${folder.ignoreScripts ? ' --ignore-scripts' : ''}`;
}

function npmCi(folder: FirstUseFolder): Promise<void> {
  const timeoutMs = folder.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  return new Promise((resolve, reject) => {
    const args = [
      'ci',
      '--prefix',
      folder.dir,
      '--no-audit',
      '--no-fund',
      ...(folder.includeOptional ? ['--include=optional'] : []),
      ...(folder.ignoreScripts ? ['--ignore-scripts'] : []),
    ];
    const posix = process.platform !== 'win32';
    const child = spawn('npm', args, { cwd: folder.dir, stdio: ['ignore', 'pipe', 'pipe'], detached: posix, shell: !posix });
    let output = '';
    const keep = (d: Buffer) => {
      output = (output + d).slice(-64_000);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      // The whole process group: npm and whatever it started.
      try {
        if (posix && child.pid) process.kill(-child.pid, 'SIGKILL');
        else child.kill('SIGKILL');
      } catch {
        /* gone */
      }
    }, timeoutMs);
    const fail = (why: string) =>
      reject(
        new Error(
          `installing ${folder.label} failed: \`${commandOf(folder)}\` ${why}\n` +
            `--- its last output:\n${tail(output, 40) || '(none)'}\n--- run that command in the repository root to retry or see more`,
        ),
      );
    child.on('error', (err) => {
      clearTimeout(timer);
      fail(`could not start: ${err.message}`);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (timedOut) fail(`did not finish within ${timeoutMs / 1000} s and was killed`);
      else if (code !== 0) fail(`exited ${code ?? signal}`);
      else resolve();
    });
  });
}

/** Whether process `pid` exists (one of another user's, which may not be signalled, does). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A lock left without a pid for this long was left by a holder that died before writing it. */
const PIDLESS_LOCK_MS = 30_000;

/**
 * An exclusive lock on the folder's install, across processes: a directory created atomically,
 * holding the holder's pid. A lock whose holder is gone is taken over: it is first renamed to a
 * name of this process's own, which only one of several waiters can do, then removed. Waiting is
 * bounded.
 */
async function installLock(folder: FirstUseFolder): Promise<() => void> {
  const dir = join(folder.dir, '.install-lock');
  const until = Date.now() + 2 * (folder.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(join(dir, 'pid'), String(process.pid));
      return () => rmSync(dir, { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (isAbandoned(dir)) {
        const mine = `${dir}.stale-${process.pid}-${Date.now()}`;
        try {
          renameSync(dir, mine);
          rmSync(mine, { recursive: true, force: true });
        } catch {
          /* another waiter took it over first */
        }
        continue;
      }
      if (Date.now() > until) throw new Error(`waited too long for another process's install of ${folder.label} (${dir})`, { cause: err });
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/** A lock whose holder is no longer running, or that never got a pid written. */
function isAbandoned(dir: string): boolean {
  let holder = NaN;
  try {
    holder = Number(readFileSync(join(dir, 'pid'), 'utf8'));
  } catch {
    /* not written (yet, or ever) */
  }
  if (Number.isInteger(holder) && holder > 0) return !isAlive(holder);
  try {
    return Date.now() - statSync(dir).mtimeMs > PIDLESS_LOCK_MS;
  } catch {
    return false; // gone meanwhile: the next mkdir tells
  }
}

/**
 * Installs the folder from its lock file when it is not installed yet or its package.json or lock
 * file changed. Rejects (with npm's output) when the install fails or leaves out an expected
 * file: a test must fail then, not skip.
 */
export async function installOnFirstUse(folder: FirstUseFolder, log: (line: string) => void = console.log): Promise<void> {
  const modules = join(folder.dir, 'node_modules');
  // Written after a complete install: the hash of the package.json and lock file it installed.
  const stamp = join(modules, '.tollgate-installed');
  const manifest = readFileSync(join(folder.dir, 'package.json'));
  const hash = createHash('sha256')
    .update(manifest)
    .update(readFileSync(join(folder.dir, 'package-lock.json')))
    .digest('hex');
  const dependencies = Object.keys((JSON.parse(String(manifest)) as { dependencies?: Record<string, string> }).dependencies ?? {});
  const expected = [...dependencies.map((d) => join(modules, d, 'package.json')), ...(folder.expected ?? [])];
  const isInstalled = () => existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === hash && expected.every((f) => existsSync(f));
  if (isInstalled()) return;
  const release = await installLock(folder);
  try {
    if (isInstalled()) return;
    const command = commandOf(folder);
    log(`installing ${folder.label} (first use, or ${relative(ROOT, folder.dir)}/package-lock.json changed): ${command}`);
    const started = Date.now();
    await npmCi(folder);
    const missing = expected.filter((f) => !existsSync(f));
    if (missing.length) {
      throw new Error(
        `\`${command}\` succeeded but did not install ${missing.join(', ')} (are optional dependencies omitted by an npm setting such as omit=optional?)`,
      );
    }
    writeFileSync(stamp, hash + '\n');
    log(`installed ${folder.label} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    release();
  }
}

/** Installs the folder on first use, then loads one of its packages (as require() sees it). */
export async function loadFromFolder<T>(folder: FirstUseFolder, specifier: string, log?: (line: string) => void): Promise<T> {
  await installOnFirstUse(folder, log);
  return createRequire(join(folder.dir, 'package.json'))(specifier) as T;
}
