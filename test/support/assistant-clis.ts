// The real coding-assistant CLIs for test/coding-assistants.test.ts: Claude Code and Codex CLI.
// They are no dependency of Tollgate (together ~650 MB): test/assistants has its own package.json
// and committed package-lock.json, installed on first use by first-use-install.ts. Their native
// binaries come from platform packages that npm installs as optional dependencies.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { installOnFirstUse } from './first-use-install.ts';

const DIR = fileURLToPath(new URL('../assistants', import.meta.url));
const MODULES = join(DIR, 'node_modules');

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

/**
 * Installs test/assistants on first use, then returns how to run each CLI. Rejects when the
 * install fails or leaves out a package this platform needs: a test must fail then, not skip.
 */
export async function installAssistantClis(log: (line: string) => void = console.log): Promise<AssistantClis> {
  const lockText = readFileSync(join(DIR, 'package-lock.json'), 'utf8');
  const lock = (JSON.parse(lockText) as { packages: Record<string, LockEntry> }).packages;
  const names = Object.keys(PACKAGES) as AssistantName[];
  // Everything that must be on disk: each CLI's files and the platform packages npm picks here.
  const expected = names.flatMap((n) => [
    ...commandsFor(n).map((c) => c.at(-1)!),
    ...platformPackages(lock, n).wanted.map((dep) => join(MODULES, dep, 'package.json')),
  ]);

  await installOnFirstUse({ dir: DIR, label: 'the coding-assistant CLIs', expected, includeOptional: true }, log);

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
