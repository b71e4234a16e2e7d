// Tests for the setup scripts in setup/ (see docs/guides/README.md).
// Run alone with:  node --import tsx test/setup-scripts.test.ts
//
// setup.sh is executed for real with a throw-away HOME. setup.ps1 is executed
// only when `pwsh` is on PATH; otherwise it gets static checks derived from the
// same expectation table, and the skip is printed.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SETUP_SH = path.join(ROOT, 'setup', 'setup.sh');
const SETUP_PS1 = path.join(ROOT, 'setup', 'setup.ps1');
const DIR = '.tollgate';

// ------------------------------------------------------------------ expectations

interface Ctx {
  key: string;
  base: string; // normalised, ends in /v1
  home: string;
}

type TargetName = 'claude' | 'codex' | 'openai';

interface TargetSpec {
  shFile: string;
  ps1File: string;
  /** Other files the target writes, relative to ~/.tollgate (same for sh and ps1). */
  extraFiles: string[];
  extraDirs: string[];
  vars: Record<string, (c: Ctx) => string>;
}

/** The single list both scripts are checked against. */
const TARGETS: Record<TargetName, TargetSpec> = {
  claude: {
    shFile: 'claude.env',
    ps1File: 'claude.ps1',
    extraFiles: [],
    extraDirs: [],
    vars: {
      ANTHROPIC_BASE_URL: (c) => c.base.replace(/\/v1$/, ''),
      ANTHROPIC_AUTH_TOKEN: (c) => c.key,
      ANTHROPIC_API_KEY: () => '',
      ANTHROPIC_MODEL: () => 'alpha-sonnet-5',
      ANTHROPIC_DEFAULT_OPUS_MODEL: () => 'alpha-opus-5',
      ANTHROPIC_DEFAULT_SONNET_MODEL: () => 'alpha-sonnet-5',
      ANTHROPIC_DEFAULT_HAIKU_MODEL: () => 'alpha-haiku-4.5',
      ANTHROPIC_DEFAULT_FABLE_MODEL: () => 'alpha-fable-5.1',
      ANTHROPIC_SMALL_FAST_MODEL: () => 'alpha-haiku-4.5',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: () => '1',
    },
  },
  codex: {
    shFile: 'codex.env',
    ps1File: 'codex.ps1',
    extraFiles: ['codex/config.toml'],
    extraDirs: ['codex'],
    vars: {
      CODEX_HOME: (c) => path.join(c.home, DIR, 'codex'),
      TOLLGATE_API_KEY: (c) => c.key,
    },
  },
  openai: {
    shFile: 'openai.env',
    ps1File: 'openai.ps1',
    extraFiles: [],
    extraDirs: [],
    vars: {
      OPENAI_BASE_URL: (c) => c.base,
      OPENAI_API_BASE: (c) => c.base,
      OPENAI_API_KEY: (c) => c.key,
    },
  },
};
const TARGET_NAMES = Object.keys(TARGETS) as TargetName[];

/** Expected ~/.tollgate/codex/config.toml, as table -> key -> value. */
function expectedCodexToml(c: Ctx): Record<string, Record<string, string>> {
  return {
    '': { model: 'cx/gen-6-sol', model_provider: 'tollgate' },
    'model_providers.tollgate': {
      name: 'Tollgate',
      base_url: c.base,
      env_key: 'TOLLGATE_API_KEY',
      wire_api: 'responses',
    },
  };
}

/** Every path (relative to HOME) a target leaves behind, directories with a trailing slash. */
function expectedTree(targets: TargetName[], flavour: 'sh' | 'ps1'): string[] {
  const out = new Set<string>([`${DIR}/`]);
  for (const t of targets) {
    const spec = TARGETS[t];
    out.add(`${DIR}/${flavour === 'sh' ? spec.shFile : spec.ps1File}`);
    for (const d of spec.extraDirs) out.add(`${DIR}/${d}/`);
    for (const f of spec.extraFiles) out.add(`${DIR}/${f}`);
  }
  return [...out].sort();
}

// ------------------------------------------------------------------ helpers

const tmpRoots: string[] = [];
function tmpDir(prefix: string): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `tollgate-${prefix}-`));
  tmpRoots.push(d);
  return d;
}

function onPath(cmd: string): boolean {
  return spawnSync('sh', ['-c', 'command -v "$1" >/dev/null 2>&1', 'sh', cmd]).status === 0;
}

// Stand-ins for installers and network tools: if the script ever calls one,
// the call is recorded and the test fails.
const STUB_DIR = tmpDir('stubs');
const STUB_LOG = path.join(tmpDir('stublog'), 'calls.log');
for (const name of ['npm', 'npx', 'pnpm', 'yarn', 'curl', 'wget', 'brew', 'pip', 'pip3', 'apt-get', 'sudo', 'git']) {
  const p = path.join(STUB_DIR, name);
  fs.writeFileSync(p, `#!/bin/sh\nprintf '%s\\n' "${name} $*" >> '${STUB_LOG}'\nexit 97\n`);
  fs.chmodSync(p, 0o755);
}
const PATH_WITH_STUBS = `${STUB_DIR}${path.delimiter}${process.env.PATH ?? ''}`;

interface RunOpts {
  home: string;
  input?: string;
  shell?: string[];
  cwd?: string;
  extraEnv?: Record<string, string>;
}

function runSh(args: string[], opts: RunOpts): SpawnSyncReturns<string> {
  const shell = opts.shell ?? ['sh'];
  const r = spawnSync(shell[0], [...shell.slice(1), SETUP_SH, ...args], {
    cwd: opts.cwd ?? tmpDir('cwd'),
    env: { HOME: opts.home, PATH: PATH_WITH_STUBS, ...opts.extraEnv },
    input: opts.input ?? '',
    encoding: 'utf8',
    timeout: 30_000,
  });
  if (r.error) throw r.error;
  return r;
}

function describe(r: SpawnSyncReturns<string>): string {
  return `exit ${r.status}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
}

function assertOk(r: SpawnSyncReturns<string>): void {
  assert.is(r.status, 0, describe(r));
}

/** Recursive listing of root, relative paths, directories with a trailing slash. */
function tree(root: string): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        out.push(`${r}/`);
        walk(r);
      } else {
        out.push(r);
      }
    }
  };
  walk('');
  return out.sort();
}

function mode(p: string): number {
  return fs.statSync(p).mode & 0o777;
}

/**
 * Loads an env file in a clean POSIX shell (as a user would with `. file`) and
 * returns the environment a program started afterwards would see: this checks
 * that the variables are exported, not merely set.
 */
function sourceEnvFile(file: string, inherited: Record<string, string> = {}): Record<string, string> {
  const r = spawnSync('sh', ['-c', '. "$1" || exit 3; exec "$2" -e "process.stdout.write(JSON.stringify(process.env))"', 'sh', file, process.execPath], {
    env: { PATH: process.env.PATH ?? '', ...inherited },
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.is(r.status, 0, `sourcing ${file}: ${describe(r)}`);
  return JSON.parse(r.stdout) as Record<string, string>;
}

/** Enough TOML for the file setup writes: [tables] and key = "basic string". */
function parseSimpleToml(text: string): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = { '': {} };
  let table = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const t = /^\[([A-Za-z0-9_.-]+)\]$/.exec(line);
    if (t) {
      table = t[1];
      out[table] ??= {};
      continue;
    }
    const kv = /^([A-Za-z0-9_]+) = ("(?:[^"\\]|\\.)*")$/.exec(line);
    assert.ok(kv, `unexpected TOML line: ${raw}`);
    out[table][kv![1]] = JSON.parse(kv![2]) as string;
  }
  return out;
}

function assertTargetFiles(home: string, t: TargetName, c: Ctx, inherited: Record<string, string> = {}): void {
  const spec = TARGETS[t];
  const file = path.join(home, DIR, spec.shFile);
  assert.is(mode(file), 0o600, `${spec.shFile} mode`);
  const text = fs.readFileSync(file, 'utf8');
  for (const name of Object.keys(spec.vars)) {
    assert.match(text, new RegExp(`^export ${name}=`, 'm'), `${spec.shFile} exports ${name}`);
  }
  const env = sourceEnvFile(file, inherited);
  for (const [name, value] of Object.entries(spec.vars)) {
    assert.is(env[name], value(c), `${spec.shFile}: ${name}`);
  }
  for (const d of spec.extraDirs) assert.is(mode(path.join(home, DIR, d)), 0o700, `${d}/ mode`);
  for (const f of spec.extraFiles) assert.is(mode(path.join(home, DIR, f)), 0o600, `${f} mode`);
  if (t === 'codex') {
    const toml = fs.readFileSync(path.join(home, DIR, 'codex', 'config.toml'), 'utf8');
    assert.equal(parseSimpleToml(toml), expectedCodexToml(c));
    assert.not.ok(toml.includes(c.key), 'config.toml must not contain the key');
  }
}

function assertNothingWritten(home: string, r: SpawnSyncReturns<string>): void {
  assert.equal(tree(home), [], `nothing may be written under HOME; ${describe(r)}`);
}

function assertNoStubCalls(): void {
  const calls = fs.existsSync(STUB_LOG) ? fs.readFileSync(STUB_LOG, 'utf8') : '';
  assert.is(calls, '', 'setup.sh must not call installers or network tools');
}

const KEY = 'sk_svc_TestKey0123456789abcdef';
const BASE = 'http://127.0.0.1:8787/v1';

// Shells to run setup.sh with: sh always, plus dash and bash --posix when present.
const SHELLS: string[][] = [['sh']];
if (onPath('dash')) SHELLS.push(['dash']);
if (onPath('bash')) SHELLS.push(['bash', '--posix']);

// ------------------------------------------------------------------ setup.sh: happy paths

for (const shell of SHELLS) {
  for (const t of TARGET_NAMES) {
    test(`setup.sh (${shell.join(' ')}) --target ${t}: files, modes, exported values`, () => {
      const home = tmpDir('home');
      const r = runSh(['--target', t, '--key', KEY, '--base-url', BASE], { home, shell });
      assertOk(r);
      assert.equal(tree(home), expectedTree([t], 'sh'), 'only the target files under HOME');
      assert.is(mode(path.join(home, DIR)), 0o700, '~/.tollgate mode');
      assertTargetFiles(home, t, { key: KEY, base: BASE, home });
      assert.ok(r.stdout.includes(`. ~/.tollgate/${TARGETS[t].shFile}`), `prints the load command\n${r.stdout}`);
      assert.not.ok((r.stdout + r.stderr).includes(KEY), 'the key is never printed');
    });
  }
}

test('setup.sh --target all writes every target and nothing else', () => {
  const home = tmpDir('home');
  const r = runSh(['--target', 'all', '--key', KEY, '--base-url', BASE], { home });
  assertOk(r);
  assert.equal(tree(home), expectedTree(TARGET_NAMES, 'sh'));
  for (const t of TARGET_NAMES) {
    assertTargetFiles(home, t, { key: KEY, base: BASE, home });
    assert.ok(r.stdout.includes(`. ~/.tollgate/${TARGETS[t].shFile}`), `prints the load command for ${t}`);
  }
});

test('setup.sh accepts --opt=value forms and short options', () => {
  const home = tmpDir('home');
  assertOk(runSh([`--target=openai`, `--key=${KEY}`, `--base-url=${BASE}`], { home }));
  assertTargetFiles(home, 'openai', { key: KEY, base: BASE, home });
  const home2 = tmpDir('home');
  assertOk(runSh(['-t', 'openai', '-k', KEY, '-u', BASE], { home: home2 }));
  assertTargetFiles(home2, 'openai', { key: KEY, base: BASE, home: home2 });
});

test('setup.sh normalises the base URL to end in /v1', () => {
  const cases: Array<[string, string]> = [
    ['http://127.0.0.1:8787', 'http://127.0.0.1:8787/v1'],
    ['http://127.0.0.1:8787/', 'http://127.0.0.1:8787/v1'],
    ['http://127.0.0.1:8787/v1', 'http://127.0.0.1:8787/v1'],
    ['http://127.0.0.1:8787/v1/', 'http://127.0.0.1:8787/v1'],
    ['https://gw.example.com/v1//', 'https://gw.example.com/v1'],
    ['https://gw.example.com/tollgate', 'https://gw.example.com/tollgate/v1'],
    ['http://[::1]:8787', 'http://[::1]:8787/v1'],
  ];
  for (const [input, base] of cases) {
    const home = tmpDir('home');
    assertOk(runSh(['--target', 'all', '--key', KEY, '--base-url', input], { home }));
    for (const t of TARGET_NAMES) assertTargetFiles(home, t, { key: KEY, base, home });
  }
});

test('claude.env: ANTHROPIC_BASE_URL has no /v1 and an inherited ANTHROPIC_API_KEY is blanked', () => {
  const home = tmpDir('home');
  assertOk(runSh(['--target', 'claude', '--key', KEY, '--base-url', 'https://gw.example.com/v1'], { home }));
  const inherited = { ANTHROPIC_API_KEY: 'sk-ant-from-elsewhere', ANTHROPIC_BASE_URL: 'https://api.anthropic.com' };
  assertTargetFiles(home, 'claude', { key: KEY, base: 'https://gw.example.com/v1', home }, inherited);
  const env = sourceEnvFile(path.join(home, DIR, 'claude.env'), inherited);
  assert.is(env.ANTHROPIC_BASE_URL, 'https://gw.example.com');
  assert.is(env.ANTHROPIC_API_KEY, '');
});

test('setup.sh re-run replaces files and tightens existing modes', () => {
  const home = tmpDir('home');
  fs.mkdirSync(path.join(home, DIR), { mode: 0o755 });
  fs.chmodSync(path.join(home, DIR), 0o755);
  fs.writeFileSync(path.join(home, DIR, 'openai.env'), 'export OPENAI_API_KEY=old\n', { mode: 0o644 });
  fs.chmodSync(path.join(home, DIR, 'openai.env'), 0o644);
  assertOk(runSh(['--target', 'openai', '--key', KEY, '--base-url', BASE], { home }));
  assert.is(mode(path.join(home, DIR)), 0o700);
  assertTargetFiles(home, 'openai', { key: KEY, base: BASE, home });
  assertOk(runSh(['--target', 'openai', '--key', 'sk_svc_second', '--base-url', BASE], { home }));
  assertTargetFiles(home, 'openai', { key: 'sk_svc_second', base: BASE, home });
  assert.equal(tree(home), expectedTree(['openai'], 'sh'), 'no temporary files left behind');
});

test('setup.sh installs nothing, edits no profile, writes nothing outside ~/.tollgate', () => {
  const home = tmpDir('home');
  const profiles: Record<string, string> = {
    '.profile': '# profile\n',
    '.bashrc': '# bashrc\n',
    '.zshrc': '# zshrc\n',
  };
  for (const [f, c] of Object.entries(profiles)) fs.writeFileSync(path.join(home, f), c);
  const cwd = tmpDir('cwd');
  assertOk(runSh(['--target', 'all', '--key', KEY, '--base-url', BASE], { home, cwd }));
  assert.equal(tree(home), [...Object.keys(profiles), ...expectedTree(TARGET_NAMES, 'sh')].sort());
  for (const [f, c] of Object.entries(profiles)) assert.is(fs.readFileSync(path.join(home, f), 'utf8'), c, `${f} unchanged`);
  assert.equal(tree(cwd), [], 'nothing written to the working directory');
  assertNoStubCalls();
});

test('setup.sh --help prints usage, exits 0, writes nothing', () => {
  const home = tmpDir('home');
  const r = runSh(['--help'], { home });
  assertOk(r);
  assert.match(r.stdout, /--target/);
  assertNothingWritten(home, r);
});

// ------------------------------------------------------------------ setup.sh: hostile input

test('hostile key with a command substitution and blanks is rejected clearly, nothing runs', () => {
  const marker = tmpDir('marker');
  const home = tmpDir('home');
  const hostile = `sk_svc_a'b"$(touch ${marker}/pwned)`;
  const r = runSh(['--target', 'all', '--key', hostile, '--base-url', BASE], { home });
  assert.is.not(r.status, 0, describe(r));
  assert.match(r.stderr, /API key/);
  assertNothingWritten(home, r);
  assert.equal(fs.readdirSync(marker), [], 'nothing was executed');
});

test('hostile key without blanks round-trips byte for byte and executes nothing', () => {
  const marker = tmpDir('marker');
  const home = tmpDir('home');
  const hostile = `sk_svc_a'b"c$(touch\${IFS}${marker}/p1)\`touch\${IFS}${marker}/p2\`;` + `touch\${IFS}${marker}/p3;$HOME\\n%s*?[x]~#&|<>{}!'\\''`;
  const r = runSh(['--target', 'all', '--key', hostile, '--base-url', BASE], { home });
  assertOk(r);
  for (const t of TARGET_NAMES) assertTargetFiles(home, t, { key: hostile, base: BASE, home });
  assert.equal(fs.readdirSync(marker), [], 'nothing was executed while writing or sourcing');
});

test('hostile but URL-legal base URL round-trips into env files and config.toml', () => {
  const marker = tmpDir('marker');
  const home = tmpDir('home');
  const url = `http://gw.example.com/p'q$(touch$IFS${marker}/u1);touch$IFS${marker}/u2`;
  const r = runSh(['--target', 'all', '--key', KEY, '--base-url', url], { home });
  assertOk(r);
  for (const t of TARGET_NAMES) assertTargetFiles(home, t, { key: KEY, base: `${url}/v1`, home });
  assert.equal(fs.readdirSync(marker), [], 'nothing was executed');
});

// ------------------------------------------------------------------ setup.sh: validation

const BAD_KEYS: Array<[string, string]> = [
  ['sk_live_abc', 'wrong prefix'],
  ['SK_SVC_abc', 'prefix is case-sensitive'],
  ['abc', 'no prefix'],
  ['sk_svc_', 'prefix only'],
  ['', 'empty'],
  [' sk_svc_abc', 'leading blank'],
  ['sk_svc_ab\ncd', 'newline'],
  ['sk_svc_ab\tcd', 'tab'],
  ['sk_svc_abcé', 'non-ASCII'],
];
for (const [key, why] of BAD_KEYS) {
  test(`setup.sh rejects a bad key (${why}) and writes nothing`, () => {
    const home = tmpDir('home');
    const r = runSh(['--target', 'all', '--key', key, '--base-url', BASE], { home });
    assert.is.not(r.status, 0, describe(r));
    assert.match(r.stderr, /API key/, describe(r));
    assertNothingWritten(home, r);
  });
}

const BAD_URLS: Array<[string, string]> = [
  ['ftp://gw.example.com/v1', 'not http(s)'],
  ['gw.example.com/v1', 'no scheme'],
  ['http://', 'no host'],
  ['http:///v1', 'empty host'],
  ['javascript:alert(1)', 'other scheme'],
  ['http://gw.example.com/v1?x=1', 'query'],
  ['http://gw.example.com/v1#frag', 'fragment'],
  ['http://gw.example.com/a b', 'space'],
  ['http://gw.example.com/a"b', 'double quote'],
  ['http://gw.example.com/`id`', 'backtick'],
  ['http://gw.example.com/a\\b', 'backslash'],
  ['http://gw.example.com/v1\nexport X=1', 'newline'],
  ['', 'empty'],
];
for (const [url, why] of BAD_URLS) {
  test(`setup.sh rejects a bad base URL (${why}) and writes nothing`, () => {
    const home = tmpDir('home');
    const r = runSh(['--target', 'all', '--key', KEY, '--base-url', url], { home });
    assert.is.not(r.status, 0, describe(r));
    assert.match(r.stderr, /base URL/, describe(r));
    assertNothingWritten(home, r);
  });
}

test('setup.sh rejects an unknown target, unknown options and a missing option value', () => {
  for (const args of [
    ['--target', 'vim', '--key', KEY, '--base-url', BASE],
    ['--target', 'claude', '--key', KEY, '--base-url', BASE, '--frobnicate'],
    ['--target', 'claude', '--key', KEY, '--base-url', BASE, 'extra'],
    ['--target', 'claude', '--key', KEY, '--base-url'],
  ]) {
    const home = tmpDir('home');
    const r = runSh(args, { home });
    assert.is.not(r.status, 0, `${args.join(' ')}\n${describe(r)}`);
    assert.match(r.stderr, /error/);
    assertNothingWritten(home, r);
  }
});

test('setup.sh refuses a ~/.tollgate that is a symbolic link', () => {
  const home = tmpDir('home');
  const elsewhere = tmpDir('elsewhere');
  fs.symlinkSync(elsewhere, path.join(home, DIR));
  const r = runSh(['--target', 'openai', '--key', KEY, '--base-url', BASE], { home });
  assert.is.not(r.status, 0, describe(r));
  assert.match(r.stderr, /symbolic link/);
  assert.equal(tree(elsewhere), []);
});

// ------------------------------------------------------------------ setup.sh: interactive

test('interactive: all answers piped on stdin', () => {
  const home = tmpDir('home');
  const r = runSh([], { home, input: `claude\n${KEY}\n  https://gw.example.com/  \n` });
  assertOk(r);
  assert.match(r.stderr, /Target/);
  assert.match(r.stderr, /API key/);
  assert.match(r.stderr, /base URL/);
  assert.not.ok((r.stdout + r.stderr).includes(KEY), 'the key is never printed');
  assert.equal(tree(home), expectedTree(['claude'], 'sh'));
  assertTargetFiles(home, 'claude', { key: KEY, base: 'https://gw.example.com/v1', home });
});

test('interactive: only the missing values are asked for, CRLF answers accepted', () => {
  const home = tmpDir('home');
  const r = runSh(['--target', 'codex'], { home, input: `${KEY}\r\nhttp://127.0.0.1:8787\r\n` });
  assertOk(r);
  assert.not.match(r.stderr, /Target/);
  assertTargetFiles(home, 'codex', { key: KEY, base: BASE, home });
});

test('interactive: a bad piped answer or end of input fails and writes nothing', () => {
  for (const input of [`claude\nnot-a-key\n${BASE}\n`, `claude\n${KEY}\nftp://x\n`, `claude\n${KEY}\n`, '']) {
    const home = tmpDir('home');
    const r = runSh([], { home, input });
    assert.is.not(r.status, 0, describe(r));
    assert.match(r.stderr, /error/);
    assertNothingWritten(home, r);
  }
});

test('curl | sh -s -- ... style: script on stdin with all options', () => {
  const home = tmpDir('home');
  const r = spawnSync('sh', ['-s', '--', '--target', 'openai', '--key', KEY, '--base-url', BASE], {
    cwd: tmpDir('cwd'),
    env: { HOME: home, PATH: PATH_WITH_STUBS },
    input: fs.readFileSync(SETUP_SH, 'utf8'),
    encoding: 'utf8',
    timeout: 30_000,
  });
  assertOk(r);
  assertTargetFiles(home, 'openai', { key: KEY, base: BASE, home });
});

const HAVE_PYTHON = onPath('python3');
test('interactive on a real terminal: the key is not echoed (pty via python3)', () => {
  if (!HAVE_PYTHON) {
    console.log('  SKIP: python3 not installed; terminal no-echo check not run');
    return;
  }
  const home = tmpDir('home');
  const secret = 'sk_svc_NotEchoed0123456789';
  const py = String.raw`
import os, pty, select, sys, time
script, home, secret = sys.argv[1], sys.argv[2], sys.argv[3]
pid, fd = pty.fork()
if pid == 0:
    os.environ.clear()
    os.environ.update({'HOME': home, 'PATH': '/usr/bin:/bin'})
    os.execvp('sh', ['sh', script])
out = b''
def pump(t):
    global out
    end = time.time() + t
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                out += os.read(fd, 4096)
            except OSError:
                return
for answer in ['openai', secret, 'http://127.0.0.1:8787']:
    pump(0.4)
    os.write(fd, answer.encode() + b'\r')
pump(1.0)
_, status = os.waitpid(pid, 0)
sys.stdout.write(str(os.waitstatus_to_exitcode(status)) + '\n' + out.decode(errors='replace'))
`;
  const r = spawnSync('python3', ['-c', py, SETUP_SH, home, secret], { encoding: 'utf8', timeout: 30_000 });
  assert.is(r.status, 0, describe(r));
  const [exit, ...rest] = r.stdout.split('\n');
  const transcript = rest.join('\n');
  assert.is(exit, '0', transcript);
  assert.match(transcript, /openai/, 'ordinary answers are echoed');
  assert.not.ok(transcript.includes(secret), `the key must not be echoed:\n${transcript}`);
  assertTargetFiles(home, 'openai', { key: secret, base: BASE, home });
});

// ------------------------------------------------------------------ static analysis

test('shellcheck -s sh setup/setup.sh', () => {
  if (!onPath('shellcheck')) {
    console.log('  SKIP: shellcheck not installed; run `apt-get install shellcheck` to lint setup.sh');
    return;
  }
  const r = spawnSync('shellcheck', ['-s', 'sh', SETUP_SH], { encoding: 'utf8' });
  assert.is(r.status, 0, describe(r));
});

test('both scripts are plain ASCII (Windows PowerShell 5.1 reads BOM-less files as ANSI)', () => {
  for (const f of [SETUP_SH, SETUP_PS1]) {
    const bytes = fs.readFileSync(f);
    const bad = bytes.findIndex((b) => b > 0x7e || (b < 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09));
    assert.is(bad, -1, `${path.basename(f)} has a non-ASCII byte at offset ${bad}`);
  }
});

const ENV_NAME_RE = /\b(?:ANTHROPIC|OPENAI|CODEX|TOLLGATE|CLAUDE_CODE)_[A-Z_]+\b/g;
const MODEL_ID_RE = /\b(?:cx\/gen-6-[a-z]+|alpha-[a-z]+-[0-9.]+)\b/g;

test('setup.sh and setup.ps1 set the same variable names and model ids as the expectation table', () => {
  const sh = fs.readFileSync(SETUP_SH, 'utf8');
  const ps1 = fs.readFileSync(SETUP_PS1, 'utf8');
  const expectedNames = TARGET_NAMES.flatMap((t) => Object.keys(TARGETS[t].vars)).sort();
  // Names written into files: env_line NAME in sh, Format-EnvLine 'NAME' in ps1
  // (the Codex key variable goes through CODEX_KEY_VAR / $CodexKeyVar).
  const shNames = [...sh.matchAll(/env_line ([A-Z_]+) /g)].map((m) => m[1]);
  const psNames = [...ps1.matchAll(/Format-EnvLine '([A-Z_]+)'/g)].map((m) => m[1]);
  assert.match(sh, /^CODEX_KEY_VAR=TOLLGATE_API_KEY$/m);
  assert.match(ps1, /^\$CodexKeyVar\s*=\s*'TOLLGATE_API_KEY'$/m);
  assert.match(sh, /env_line "\$CODEX_KEY_VAR" "\$key"/);
  assert.match(ps1, /Format-EnvLine \$CodexKeyVar \$Key/);
  assert.equal([...shNames, 'TOLLGATE_API_KEY'].sort(), expectedNames, 'setup.sh variable names');
  assert.equal([...psNames, 'TOLLGATE_API_KEY'].sort(), expectedNames, 'setup.ps1 variable names');
  // No other tool variables mentioned anywhere in either script.
  // setup.sh's own constants (CODEX_MODEL=...) are not tool variables.
  const shInternal = new Set([...sh.matchAll(/^([A-Z_]+)=/gm)].map((m) => m[1]));
  const mentioned = (s: string) => [...new Set(s.match(ENV_NAME_RE) ?? [])].filter((n) => !shInternal.has(n)).sort();
  assert.equal(mentioned(ps1), mentioned(sh), 'both scripts mention the same variable names');
  const models = (s: string) => [...new Set(s.match(MODEL_ID_RE) ?? [])].sort();
  assert.equal(models(ps1), models(sh), 'both scripts use the same model ids');
  assert.equal(models(sh), ['alpha-fable-5.1', 'alpha-haiku-4.5', 'alpha-opus-5', 'alpha-sonnet-5', 'cx/gen-6-sol']);
});

test('setup.ps1 static checks: targets, files, prompts, validation, no installs or profile edits', () => {
  const ps1 = fs.readFileSync(SETUP_PS1, 'utf8');
  assert.match(ps1, /\[string\]\$Target/);
  assert.match(ps1, /\[string\]\$Key/);
  assert.match(ps1, /\[string\]\$BaseUrl/);
  assert.match(ps1, /Read-Host -Prompt \$Prompt -AsSecureString/, 'key read without echo');
  assert.match(ps1, /@\('claude', 'codex', 'openai', 'all'\)/);
  assert.match(ps1, /'sk_svc_'/);
  assert.match(ps1, /\^https\?:\/\//);
  assert.match(ps1, /Join-Path \$homeDir '\.tollgate'/);
  for (const t of TARGET_NAMES) {
    assert.match(ps1, new RegExp(`Join-Path \\$dir '${TARGETS[t].ps1File.replace('.', '\\.')}'`), `writes ${TARGETS[t].ps1File}`);
  }
  assert.match(ps1, /Join-Path \$codexDir 'config\.toml'/);
  assert.match(ps1, /'wire_api = "responses"'/);
  assert.match(ps1, /\[model_providers\.\$CodexProvider\]/);
  assert.match(ps1, /\$CodexProvider\s*=\s*'tollgate'/);
  assert.match(ps1, /Set-UnixMode \$Path '700'/);
  assert.match(ps1, /Set-UnixMode \$tmp '600'/);
  assert.match(ps1, /\.Replace\("'", "''"\)/, 'single quotes doubled in PowerShell literals');
  // Nothing that installs software, edits profiles or touches the network.
  const code = ps1.replace(/<#[\s\S]*?#>/, '').replace(/^\s*#.*$/gm, '');
  for (const bad of [
    /\$PROFILE/i,
    /\bnpm\b/,
    /Install-(Module|Package)/i,
    /\bwinget\b/i,
    /\bchoco\b/i,
    /Invoke-WebRequest/i,
    /Add-Content/i,
    /\[Environment\]::SetEnvironmentVariable/i,
    /\bsetx\b/i,
  ]) {
    assert.not.match(code, bad, `setup.ps1 must not contain ${bad}`);
  }
  // Errors are thrown, never `exit` (which would close a session running it as a script block).
  assert.not.match(code, /^\s*exit\b/m);
});

test('setup.sh static checks: no installs, no profile edits, curl only in printed hints', () => {
  const lines = fs
    .readFileSync(SETUP_SH, 'utf8')
    .split('\n')
    .filter((l) => !/^\s*#/.test(l));
  for (const bad of [/\bnpm\b/, /\bwget\b/, /\bbrew\b/, /\bpip3?\b/, /\.bashrc|\.zshrc|\.profile|\.bash_profile/]) {
    const hit = lines.find((l) => bad.test(l));
    assert.is(hit, undefined, `setup.sh must not contain ${bad}`);
  }
  for (const l of lines.filter((x) => /\bcurl\b/.test(x))) {
    assert.match(l, /^\s*['"] {2}curl -s /, `curl may only appear in a printed hint: ${l}`);
  }
});

// ------------------------------------------------------------------ setup.ps1 with pwsh, when available

const HAVE_PWSH = onPath('pwsh');
if (!HAVE_PWSH) {
  test('setup.ps1 execution', () => {
    console.log('  SKIP: pwsh not installed; setup.ps1 was only checked statically');
  });
} else {
  const runPs1 = (args: string[], home: string) =>
    spawnSync('pwsh', ['-NoProfile', '-NonInteractive', '-File', SETUP_PS1, ...args], {
      env: { HOME: home, PATH: PATH_WITH_STUBS },
      encoding: 'utf8',
      timeout: 60_000,
    });
  const sourcePs1 = (file: string): Record<string, string> => {
    const cmd = `. '${file.replace(/'/g, "''")}'; $h = @{}; ` + `Get-ChildItem env: | ForEach-Object { $h[$_.Name] = $_.Value }; $h | ConvertTo-Json -Compress`;
    const r = spawnSync('pwsh', ['-NoProfile', '-NonInteractive', '-Command', cmd], {
      env: { PATH: process.env.PATH ?? '', ANTHROPIC_API_KEY: 'sk-ant-from-elsewhere' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.is(r.status, 0, describe(r));
    return JSON.parse(r.stdout) as Record<string, string>;
  };
  for (const t of TARGET_NAMES) {
    test(`setup.ps1 (pwsh) -Target ${t}`, () => {
      const home = tmpDir('home');
      const hostile = `sk_svc_a'b"c$(whoami)\`$HOME;'';`;
      const r = runPs1(['-Target', t, '-Key', hostile, '-BaseUrl', 'http://127.0.0.1:8787'], home);
      assert.is(r.status, 0, describe(r));
      assert.equal(tree(home), expectedTree([t], 'ps1'));
      const spec = TARGETS[t];
      const file = path.join(home, DIR, spec.ps1File);
      if (process.platform !== 'win32') {
        assert.is(mode(path.join(home, DIR)), 0o700);
        assert.is(mode(file), 0o600);
      }
      const env = sourcePs1(file);
      const c = { key: hostile, base: BASE, home };
      for (const [name, value] of Object.entries(spec.vars)) {
        // PowerShell removes a variable set to '', so empty means absent there.
        assert.is(env[name] ?? '', value(c), `${spec.ps1File}: ${name}`);
      }
      if (t === 'codex') {
        const toml = fs.readFileSync(path.join(home, DIR, 'codex', 'config.toml'), 'utf8');
        assert.equal(parseSimpleToml(toml), expectedCodexToml(c));
      }
    });
  }
  test('setup.ps1 (pwsh) rejects a bad key and a bad URL, writing nothing', () => {
    for (const args of [
      ['-Target', 'all', '-Key', 'sk_live_x', '-BaseUrl', BASE],
      ['-Target', 'all', '-Key', KEY, '-BaseUrl', 'ftp://x/v1'],
    ]) {
      const home = tmpDir('home');
      const r = runPs1(args, home);
      assert.is.not(r.status, 0, describe(r));
      assert.equal(tree(home), []);
    }
  });
}

test.after(() => {
  for (const d of tmpRoots) fs.rmSync(d, { recursive: true, force: true });
});

test.run();
