// The real coding-assistant CLIs for test/coding-assistants.test.ts: Claude Code and Codex CLI.
// They are no dependency of Tollgate (together ~650 MB): test/assistants has its own package.json
// and committed package-lock.json, installed here on first use, and again whenever that lock file
// changes, with `npm ci --prefix test/assistants` (as bench/peer is for the benchmark). Their
// native binaries come from platform packages that npm installs as optional dependencies.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const DIR = fileURLToPath(new URL('../assistants', import.meta.url));
const MODULES = join(DIR, 'node_modules');
/** Written after a complete install: the hash of the package.json and lock file it installed. */
const STAMP = join(MODULES, '.tollgate-installed');
const INSTALL_TIMEOUT_MS = 300_000;
const INSTALL_COMMAND = 'npm ci --prefix test/assistants --no-audit --no-fund --include=optional';

export type AssistantName = 'claude' | 'codex';

export interface AssistantCli {
  name: AssistantName;
  package: string;
  version: string;
  /** Commands that run the CLI, best first; each ends with the file it runs. */
  commands: string[][];
  /** Set when the lock file has no build of the CLI for this platform: it cannot run here. */
  unsupported?: string;
}

export type AssistantClis = Record<AssistantName, AssistantCli>;

const PACKAGES: Record<AssistantName, string> = { claude: '@anthropic-ai/claude-code', codex: '@openai/codex' };

function commandsFor(name: AssistantName): string[][] {
  const dir = join(MODULES, PACKAGES[name]);
  // claude: bin/claude.exe is the native binary once the package's postinstall ran (npm 11 runs
  // it only when approved), a stub otherwise; cli-wrapper.cjs runs the platform package's binary
  // without any install script.
  return name === 'claude'
    ? [[join(dir, 'bin/claude.exe')], [process.execPath, join(dir, 'cli-wrapper.cjs')]]
    : [[process.execPath, join(dir, 'bin/codex.js')]];
}

interface LockEntry {
  version?: string;
  os?: string[];
  cpu?: string[];
  libc?: string[];
  optionalDependencies?: Record<string, string>;
}

/** npm's reading of a package's os / cpu / libc list ("!x" excludes x). */
function allows(list: string[] | undefined, value: string): boolean {
  if (!list?.length) return true;
  if (list.includes(`!${value}`)) return false;
  const wanted = list.filter((x) => !x.startsWith('!'));
  return wanted.length === 0 || wanted.includes(value);
}

function currentLibc(): string | undefined {
  if (process.platform !== 'linux') return undefined;
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return header?.glibcVersionRuntime ? 'glibc' : 'musl';
}

/** The platform packages of `name` that npm installs here (none: no build for this platform). */
function platformPackages(lock: Record<string, LockEntry>, name: AssistantName): { wanted: string[]; all: string[] } {
  const all = Object.keys(lock[`node_modules/${PACKAGES[name]}`]?.optionalDependencies ?? {});
  const libc = currentLibc();
  const wanted = all.filter((dep) => {
    const e = lock[`node_modules/${dep}`];
    return e && allows(e.os, process.platform) && allows(e.cpu, process.arch) && (libc === undefined || allows(e.libc, libc));
  });
  return { wanted, all };
}

function tail(text: string, lines: number): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

function npmCi(): Promise<void> {
  return new Promise((resolve, reject) => {
    const args = ['ci', '--prefix', DIR, '--no-audit', '--no-fund', '--include=optional'];
    const posix = process.platform !== 'win32';
    const child = spawn('npm', args, { cwd: DIR, stdio: ['ignore', 'pipe', 'pipe'], detached: posix, shell: !posix });
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
    }, INSTALL_TIMEOUT_MS);
    const fail = (why: string) =>
      reject(
        new Error(
          `installing the coding-assistant CLIs failed: \`${INSTALL_COMMAND}\` ${why}\n` +
            `--- its last output:\n${tail(output, 40) || '(none)'}\n--- run that command in the repository root to retry or see more`,
        ),
      );
    child.on('error', (err) => {
      clearTimeout(timer);
      fail(`could not start: ${err.message}`);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (timedOut) fail(`did not finish within ${INSTALL_TIMEOUT_MS / 1000} s and was killed`);
      else if (code !== 0) fail(`exited ${code ?? signal}`);
      else resolve();
    });
  });
}

/**
 * Installs test/assistants from its lock file when it is not installed yet or the lock file
 * changed, then returns how to run each CLI. Rejects (with npm's output) when the install fails
 * or leaves out a package this platform needs: a test must fail then, not skip.
 */
/**
 * An exclusive lock on the install, across processes: a directory created atomically, holding the
 * holder's pid. A lock whose holder is gone is taken over; waiting is bounded by the install's own
 * time limit.
 */
async function installLock(): Promise<() => void> {
  const dir = join(DIR, '.install-lock');
  const until = Date.now() + 10 * 60_000;
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(join(dir, 'pid'), String(process.pid));
      return () => rmSync(dir, { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let holder = NaN;
      try {
        holder = Number(readFileSync(join(dir, 'pid'), 'utf8'));
      } catch {
        /* being written */
      }
      const alive =
        Number.isInteger(holder) &&
        holder > 0 &&
        (() => {
          try {
            process.kill(holder, 0);
            return true;
          } catch {
            return false;
          }
        })();
      if (!alive && Number.isInteger(holder) && holder > 0) {
        rmSync(dir, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > until) throw new Error(`waited 10 minutes for another test's install of the coding-assistant CLIs (${dir})`, { cause: err });
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

export async function installAssistantClis(log: (line: string) => void = console.log): Promise<AssistantClis> {
  const lockText = readFileSync(join(DIR, 'package-lock.json'), 'utf8');
  const hash = createHash('sha256')
    .update(readFileSync(join(DIR, 'package.json')))
    .update(lockText)
    .digest('hex');
  const lock = (JSON.parse(lockText) as { packages: Record<string, LockEntry> }).packages;
  const names = Object.keys(PACKAGES) as AssistantName[];
  // Everything that must be on disk: each CLI's files and the platform packages npm picks here.
  const expected = names.flatMap((n) => [
    ...commandsFor(n).map((c) => c.at(-1)!),
    ...platformPackages(lock, n).wanted.map((dep) => join(MODULES, dep, 'package.json')),
  ]);

  const isInstalled = () => existsSync(STAMP) && readFileSync(STAMP, 'utf8').trim() === hash && expected.every((f) => existsSync(f));
  // Test files run side by side: one installs while the others wait for it (a second npm ci
  // into the same folder would delete what the first one is installing).
  const release = isInstalled() ? null : await installLock();
  try {
    if (!isInstalled()) await install();
  } finally {
    release?.();
  }

  async function install(): Promise<void> {
    log(`installing the coding-assistant CLIs (first use, or test/assistants/package-lock.json changed): ${INSTALL_COMMAND}`);
    const started = Date.now();
    await npmCi();
    const missing = expected.filter((f) => !existsSync(f));
    if (missing.length) {
      throw new Error(
        `\`${INSTALL_COMMAND}\` succeeded but did not install ${missing.join(', ')} ` +
          '(are optional dependencies omitted by an npm setting such as omit=optional?)',
      );
    }
    writeFileSync(STAMP, hash + '\n');
    log(`installed the coding-assistant CLIs in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }

  const describe = (name: AssistantName): AssistantCli => {
    const { wanted, all } = platformPackages(lock, name);
    const libc = currentLibc();
    return {
      name,
      package: PACKAGES[name],
      version: lock[`node_modules/${PACKAGES[name]}`]?.version ?? 'unknown',
      commands: commandsFor(name),
      unsupported:
        wanted.length === 0
          ? `${PACKAGES[name]} has no build for ${process.platform}-${process.arch}${libc ? ` (${libc})` : ''}; its platform packages: ${all.join(', ') || 'none'}`
          : undefined,
    };
  };
  return { claude: describe('claude'), codex: describe('codex') };
}
