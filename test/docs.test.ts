// Every link and every command in README.md and docs/**/*.md is checked against the repository:
//   - a relative link names a file that exists, and its #anchor a heading of that file (GitHub's slugs);
//     an http(s) link is a well-formed URL (no network here);
//   - `npm run X` names a script of package.json, and `npm start` / `npm test` exist;
//   - `node … path/to/file.ts` runs a file that exists;
//   - `tollgate <command>` (also `npx tollgate …`, `node bin/tollgate.js …`) is a command the CLI
//     lists in its --help, run through package.json's "bin"; a fenced shell example is also run as
//     written against a gateway that is not there, and must get as far as calling it;
//   - every (method, path) of a curl example, and every `METHOD /v1/…`, `/admin/v1/…` or `/app/api/…`
//     named in the text, is served by a real gateway: it may refuse (400, 401, 403, 404 for an unknown
//     id), but not with the router's own 404 (`unknown_url`) or a 405.
// Each failure names the document and the line.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestGateway, type TestGateway } from './support/gateway.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string>; bin: Record<string, string> };

// ---- reading the documents ----------------------------------------------------------------------

interface Doc {
  /** Path from the repository's root, as failures name it. */
  name: string;
  path: string;
  lines: string[];
  /** The text outside fenced blocks, fenced lines blanked (so offsets keep their line numbers). */
  prose: string;
  fences: Fence[];
}

interface Fence {
  lang: string;
  /** Line number (1-based) of the block's first content line. */
  line: number;
  lines: string[];
}

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return markdownFiles(path);
    return path.endsWith('.md') ? [path] : [];
  });
}

function readDoc(path: string): Doc {
  const lines = readFileSync(path, 'utf8').split('\n');
  const fences: Fence[] = [];
  const prose: string[] = [];
  let open: Fence | null = null;
  lines.forEach((line, i) => {
    const marker = /^\s*(```+|~~~+)\s*([\w-]*)/.exec(line);
    if (marker && !open) {
      open = { lang: marker[2].toLowerCase(), line: i + 2, lines: [] };
      prose.push('');
    } else if (marker && open && /^\s*(```+|~~~+)\s*$/.test(line)) {
      fences.push(open);
      open = null;
      prose.push('');
    } else {
      if (open) (open as Fence).lines.push(line);
      prose.push(open ? '' : line);
    }
  });
  return { name: relative(root, path), path, lines, prose: prose.join('\n'), fences };
}

const docs = [join(root, 'README.md'), ...markdownFiles(join(root, 'docs'))].map(readDoc);
const lineAt = (text: string, offset: number) => text.slice(0, offset).split('\n').length;

/** Inline code spans of the prose (a span may run over a line break), with their line. */
function inlineCode(doc: Doc): Array<{ code: string; line: number }> {
  const spans: Array<{ code: string; line: number }> = [];
  for (const m of doc.prose.matchAll(/(`+)([^`]+?)\1/g)) spans.push({ code: m[2].replace(/\s+/g, ' ').trim(), line: lineAt(doc.prose, m.index!) });
  return spans;
}

/** The prose with its code spans blanked (links inside code are not links). */
const proseWithoutCode = (doc: Doc) => doc.prose.replace(/(`+)[^`]+?\1/g, (s) => s.replace(/[^\n]/g, ' '));

const SHELL = new Set(['sh', 'bash', 'shell', 'console', 'zsh', '']);

/** The commands of the shell-like fenced blocks: continuation lines joined, comments dropped. In a
 * console block (or one without a language) only the lines after a `$ ` prompt are commands. */
function shellCommands(doc: Doc): Array<{ command: string; line: number }> {
  const out: Array<{ command: string; line: number }> = [];
  for (const fence of doc.fences) {
    if (!SHELL.has(fence.lang)) continue;
    const prompted = fence.lang === 'console' || fence.lang === '';
    let pending = '';
    let start = 0;
    fence.lines.forEach((raw, i) => {
      let line = raw.trim();
      if (!pending) {
        start = fence.line + i;
        if (prompted) {
          if (!line.startsWith('$ ')) return;
          line = line.slice(2);
        }
        if (line.startsWith('#') || line === '') return;
      }
      if (line.endsWith('\\')) {
        pending += line.slice(0, -1) + ' ';
        return;
      }
      out.push({ command: stripComment(pending + line), line: start });
      pending = '';
    });
  }
  return out;
}

/** A trailing `# comment` outside quotes removed. */
function stripComment(command: string): string {
  let quote = '';
  for (let i = 0; i < command.length; i++) {
    const c = command[i];
    if (quote) {
      if (c === quote) quote = '';
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(command[i - 1]))) return command.slice(0, i).trim();
  }
  return command.trim();
}

/** Shell words (quotes removed), and the separators `|`, `&&`, `;` as words of their own. */
function words(command: string): string[] {
  const out: string[] = [];
  let word = '';
  let started = false;
  let quote = '';
  for (let i = 0; i < command.length; i++) {
    const c = command[i];
    if (quote) {
      if (c === quote) quote = '';
      else word += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      started = true;
    } else if (/\s/.test(c)) {
      if (started) out.push(word);
      word = '';
      started = false;
    } else if (c === '|' || c === ';' || (c === '&' && command[i + 1] === '&')) {
      if (started) out.push(word);
      out.push(c === '&' ? '&&' : c);
      if (c === '&') i++;
      word = '';
      started = false;
    } else {
      word += c;
      started = true;
    }
  }
  if (started) out.push(word);
  return out;
}

/** The simple commands of a command line (split at `|`, `&&`, `;`). */
function pipeline(command: string): string[][] {
  const parts: string[][] = [[]];
  for (const w of words(command)) {
    if (w === '|' || w === '&&' || w === ';') parts.push([]);
    else parts[parts.length - 1].push(w);
  }
  return parts.filter((p) => p.length > 0);
}

// ---- links --------------------------------------------------------------------------------------

/** GitHub's anchor of a heading: its text lowercased, punctuation but - and _ dropped, spaces to -. */
function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N}\p{M} _-]/gu, '').replace(/ /g, '-');
}

const anchorCache = new Map<string, Set<string>>();
function anchorsOf(path: string): Set<string> {
  let anchors = anchorCache.get(path);
  if (anchors) return anchors;
  anchors = new Set();
  const seen = new Map<string, number>();
  const doc = readDoc(path);
  for (const line of doc.prose.split('\n')) {
    const h = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      const base = slug(h[1]);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const a of line.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(a[1]);
  }
  anchorCache.set(path, anchors);
  return anchors;
}

test('every link resolves: relative links to a file and a heading, http(s) links well formed', () => {
  const failures: string[] = [];
  let checked = 0;
  for (const doc of docs) {
    const text = proseWithoutCode(doc);
    for (const m of text.matchAll(/!?\[(?:[^\]]|\][^(])*?\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = m[1];
      const where = `${doc.name}:${lineAt(text, m.index!)}: [${target}]`;
      checked++;
      if (/^https?:\/\//.test(target)) {
        try {
          const url = new URL(target);
          if (!url.hostname.includes('.') && url.hostname !== 'localhost') failures.push(`${where}: URL without a proper host`);
        } catch {
          failures.push(`${where}: not a URL`);
        }
        continue;
      }
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
        if (!target.startsWith('mailto:')) failures.push(`${where}: scheme not checked; use a relative or http(s) link`);
        continue;
      }
      const [file, anchor] = target.split('#', 2) as [string, string | undefined];
      const path = file === '' ? doc.path : resolve(dirname(doc.path), decodeURIComponent(file));
      if (!existsSync(path)) {
        failures.push(`${where}: no file ${relative(root, path)}`);
        continue;
      }
      if (anchor === undefined) continue;
      if (!path.endsWith('.md')) failures.push(`${where}: an anchor into a file that is not markdown`);
      else if (!anchorsOf(path).has(anchor)) failures.push(`${where}: ${relative(root, path)} has no heading #${anchor}`);
    }
  }
  assert.ok(checked > 50, `only ${checked} links found: is the parser broken?`);
  assert.equal(failures, [], `broken links:\n${failures.join('\n')}`);
});

test('the README opens with the two set-up commands', () => {
  const readme = docs.find((d) => d.name === 'README.md')!;
  assert.equal(
    readme.fences[0].lines.slice(0, 2).map((l) => l.replace(/\s+#.*$/, '')),
    ['npm ci && npm start', 'npm ci && npm test'],
  );
  assert.ok(readme.lines.length <= 300, `README.md is ${readme.lines.length} lines; the front door stays within 300`);
});

// ---- npm and node commands ----------------------------------------------------------------------

test('every npm command names a script of package.json; every file a node command runs exists', () => {
  const failures: string[] = [];
  let checked = 0;
  for (const doc of docs) {
    const text = doc.lines.join('\n');
    for (const m of text.matchAll(/\bnpm (run|start|test)\b(?:\s+([\w:.-]+))?/g)) {
      const script = m[1] === 'run' ? m[2] : m[1];
      checked++;
      if (!script || !(script in pkg.scripts))
        failures.push(`${doc.name}:${lineAt(text, m.index!)}: npm ${m[1]} ${script ?? ''}: no such script in package.json`);
    }
    const commands = [...shellCommands(doc).map((c) => ({ words: pipeline(c.command), line: c.line }))];
    for (const span of inlineCode(doc)) if (/^node\s/.test(span.code)) commands.push({ words: pipeline(span.code), line: span.line });
    for (const { words: parts, line } of commands) {
      for (const argv of parts) {
        if (argv[0] !== 'node') continue;
        const file = argv.slice(1).find((a, i, all) => !a.startsWith('-') && !['--import', '-r', '--require', '-e'].includes(all[i - 1] ?? ''));
        if (!file || file.includes('<') || !/\.(m?[jt]s)$/.test(file)) continue;
        checked++;
        if (!existsSync(join(root, file))) failures.push(`${doc.name}:${line}: node runs ${file}, which does not exist`);
      }
    }
  }
  assert.ok(checked > 10, `only ${checked} commands found: is the parser broken?`);
  assert.equal(failures, [], `commands that name nothing:\n${failures.join('\n')}`);
});

// ---- the tollgate CLI ---------------------------------------------------------------------------

/** The CLI as package.json's "bin" names it (so this follows the sources wherever they move). */
const cli = join(root, pkg.bin.tollgate);

function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const env = { ...process.env };
    delete env.TOLLGATE_URL;
    delete env.TOLLGATE_ADMIN_TOKEN;
    const child = spawn(process.execPath, [cli, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', fail);
    child.on('exit', (code) => done({ code, stdout, stderr }));
  });
}

/** A CLI invocation in a document: the words after `tollgate`. */
interface CliUse {
  where: string;
  args: string[];
  /** From a fenced shell block: complete enough to run. */
  runnable: boolean;
}

function cliArgs(argv: string[]): string[] | null {
  if (argv[0] === 'tollgate') return argv.slice(1);
  if (argv[0] === 'npx' && argv[1] === 'tollgate') return argv.slice(2);
  if (argv[0] === 'node' && argv[1] === pkg.bin.tollgate) return argv.slice(2);
  return null;
}

function cliUses(): CliUse[] {
  const uses: CliUse[] = [];
  for (const doc of docs) {
    for (const c of shellCommands(doc)) {
      for (const argv of pipeline(c.command)) {
        const args = cliArgs(argv);
        if (args) uses.push({ where: `${doc.name}:${c.line}: ${c.command}`, args, runnable: true });
      }
    }
    for (const span of inlineCode(doc)) {
      // Not a shell line: `a|b` lists alternatives (`\|` in a table cell), so split at blanks only.
      const args = cliArgs(span.code.replace(/\\\|/g, '|').split(' '));
      if (args && args.length > 0) uses.push({ where: `${doc.name}:${span.line}: \`${span.code}\``, args, runnable: false });
    }
  }
  return uses;
}

/** The command words of a use: up to the first option, placeholder or optional part. */
function commandWords(args: string[]): string[] {
  const out: string[] = [];
  for (const a of args) {
    if (!/^[a-z][a-z|-]*$/.test(a)) break;
    out.push(a);
  }
  return out;
}

/** The commands `tollgate --help` lists: each line "  word [word] <arg>…" gives "word" or "word word". */
function listedCommands(help: string): Set<string> {
  const listed = new Set<string>();
  for (const line of help.split('\n')) {
    const m = /^ {2}([a-z][a-z-]*)((?: [a-z][a-z-]*)?)(?:\s|$)/.exec(line);
    if (m) listed.add((m[1] + m[2]).trim());
  }
  return listed;
}

test('every tollgate command in the documents is one the CLI has; fenced examples run as far as the gateway', async () => {
  const help = await runCli(['--help']);
  assert.is(help.code, 0, `${pkg.bin.tollgate} --help failed:\n${help.stderr}`);
  const listed = listedCommands(help.stdout);
  assert.ok(listed.has('serve') && listed.has('key issue'), `cannot read the command list of --help:\n${help.stdout}`);

  const failures: string[] = [];
  const uses = cliUses();
  assert.ok(uses.length > 30, `only ${uses.length} tollgate commands found: is the parser broken?`);
  for (const use of uses) {
    const [first, second] = commandWords(use.args);
    if (!first) continue; // options only: `tollgate --help`, or the default command (serve)
    const known = (word: string) => listed.has(first) || listed.has(`${first} ${word}`);
    const seconds = second ? second.split('|') : [''];
    for (const s of seconds) if (!known(s)) failures.push(`${use.where}: \`tollgate ${first} ${s}\` is not a command of \`tollgate --help\``);
  }

  // A fenced example runs as written (its $VARIABLES and <placeholders> filled in) against a port
  // where no gateway listens: its options parse and its command is dispatched when it gets as far
  // as "Cannot reach the gateway" (or, for --help, prints the help). serve and projector would start.
  const runnable = uses.filter((u) => u.runnable && (u.args.includes('--help') || !['serve', 'projector'].includes(commandWords(u.args)[0] ?? 'serve')));
  for (const use of runnable) {
    const args = use.args.map((a) => a.replace(/\$\{?\w+\}?|<[^>]+>|…/g, 'x'));
    const r = await runCli([...args, '--url', 'http://127.0.0.1:9', '--token', 'x'.repeat(32)]);
    const ok = (r.code === 0 && use.args.includes('--help')) || r.stderr.includes('Cannot reach the gateway');
    if (!ok) failures.push(`${use.where}: did not reach the gateway (exit ${r.code}): ${r.stderr.split('\n')[0]}`);
  }
  assert.equal(failures, [], `CLI commands that do not exist or do not run:\n${failures.join('\n')}`);
});

// ---- HTTP paths ---------------------------------------------------------------------------------

interface Call {
  where: string;
  method: string;
  /** The path with its query, from the gateway's origin. */
  path: string;
}

const ADMIN_TOKEN = 'docs-test-admin-token-0123456789abcdef';
const METRICS_TOKEN = 'docs-test-metrics-token-0123456789abcdef';

/** Where a curl example's URL starts: its variable or origin, as the documents define them. */
const ORIGINS: Array<[RegExp, string]> = [
  [/^\$\{?(BASE|OPENAI_API_BASE)\}?(?=\/|$)/, '/v1'],
  [/^\$\{?(ANTHROPIC_BASE_URL|TOLLGATE|TOLLGATE_URL)\}?(?=\/|$)/, ''],
  [/^https?:\/\/[^/]+(?=\/|$)/, ''],
];

/** Placeholders of a path (`:id`, `{id}`, `<id>`, `$ID`) filled with an id that exists nowhere. */
const fillPath = (path: string) => path.replace(/\/(:\w+|\{[^}]+\}|<[^>]+>|\$\{?\w+\}?)/g, '/x');

function curlCall(argv: string[], where: string): Call | string | null {
  if (argv[0] !== 'curl') return null;
  const takesValue = new Set([
    '-X',
    '--request',
    '-H',
    '--header',
    '-d',
    '--data',
    '--data-raw',
    '--data-binary',
    '-F',
    '--form',
    '--json',
    '-o',
    '--output',
    '-w',
    '--write-out',
    '-u',
    '--user',
    '-A',
    '-e',
    '--url',
  ]);
  let method = '';
  let sends = false;
  let url = '';
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i];
    if (takesValue.has(a)) {
      const v = argv[++i] ?? '';
      if (a === '-X' || a === '--request') method = v.toUpperCase();
      if (/^(-d|--data|--data-raw|--data-binary|-F|--form|--json)$/.test(a)) sends = true;
      if (a === '--url') url = v;
    } else if (!a.startsWith('-') && !url) url = a;
  }
  if (!url) return `${where}: no URL in this curl`;
  for (const [origin, prefix] of ORIGINS) {
    const m = origin.exec(url);
    if (!m) continue;
    const path = prefix + url.slice(m[0].length);
    return { where, method: method || (sends ? 'POST' : 'GET'), path: fillPath(path.split(/[?[]/)[0]) || '/' };
  }
  return `${where}: the URL ${url} starts with nothing this test knows (add its variable to ORIGINS)`;
}

/** Paths of other services' APIs that the documents name: the providers' cost reports (finance.md). */
const OTHER_SERVICES = /^\/v1\/organizations?\//;

const SERVED_PREFIXES = /^\/(v1|admin\/v1|app\/api)\/|^\/(healthz|readyz|metrics)$|^\/setup\//;

function httpCalls(): { calls: Call[]; problems: string[] } {
  const calls: Call[] = [];
  const problems: string[] = [];
  for (const doc of docs) {
    for (const c of shellCommands(doc)) {
      for (const argv of pipeline(c.command)) {
        const call = curlCall(argv, `${doc.name}:${c.line}: ${c.command}`);
        if (typeof call === 'string') problems.push(call);
        else if (call) calls.push(call);
      }
    }
    for (const span of inlineCode(doc)) {
      const m = /^((?:GET|POST|PUT|PATCH|DELETE)(?:\|(?:GET|POST|PUT|PATCH|DELETE))*) (\/[^\s`]*)/.exec(span.code);
      if (!m || m[2].includes('…')) continue;
      const path = fillPath(m[2].split(/[?[]/)[0]);
      if (OTHER_SERVICES.test(path)) continue;
      if (!SERVED_PREFIXES.test(path)) continue;
      for (const method of m[1].split('|')) calls.push({ where: `${doc.name}:${span.line}: \`${span.code}\``, method, path });
    }
  }
  return { calls, problems };
}

// A real gateway (real HTTP, the app's own router) with the admin API and /metrics behind tokens.
// Started now, so that its first start (seeding a new ledger) overlaps the checks above.
const gatewayStarting: Promise<TestGateway> = startTestGateway({ adminToken: ADMIN_TOKEN, metricsToken: METRICS_TOKEN });
gatewayStarting.catch(() => undefined); // a failed start is reported by the test that awaits it

test.after(async () => {
  await (await gatewayStarting.catch(() => undefined))?.stop();
});

test('every HTTP path of a curl example, and every /v1, /admin/v1 and /app/api path named, is served', async () => {
  const { calls, problems } = httpCalls();
  assert.ok(calls.filter((c) => !c.where.includes('`')).length > 15, `only ${calls.length} curl calls found: is the parser broken?`);
  const gateway = await gatewayStarting;
  const origin = new URL(gateway.baseUrl).origin;
  const apiKey = gateway.demo?.keySecret;
  assert.ok(apiKey, 'the gateway made no demo key');
  const credentials = (path: string): Record<string, string> => {
    if (path.startsWith('/admin/v1/')) return { authorization: `Bearer ${ADMIN_TOKEN}` };
    if (path === '/metrics') return { authorization: `Bearer ${METRICS_TOKEN}` };
    if (path.startsWith('/v1/')) return { authorization: `Bearer ${apiKey}` };
    return {};
  };
  const failures = [...problems];
  const seen = new Map<string, string>();
  for (const call of calls) {
    const key = `${call.method} ${call.path}`;
    if (seen.has(key)) {
      if (seen.get(key)) failures.push(`${call.where}: ${seen.get(key)}`);
      continue;
    }
    const write = call.method !== 'GET' && call.method !== 'DELETE';
    const res = await fetch(origin + call.path, {
      method: call.method,
      headers: { ...credentials(call.path), ...(write ? { 'content-type': 'application/json' } : {}), accept: 'application/json' },
      body: write ? '{}' : undefined,
      redirect: 'manual',
    });
    const text = await res.text();
    let code = '';
    try {
      code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? '';
    } catch {
      /* not JSON: a page, a script, metrics */
    }
    const wrong =
      res.status === 405
        ? `${key} answers 405: the path exists, not for ${call.method}`
        : res.status === 404 && code === 'unknown_url'
          ? `${key} is not a route (404 unknown_url)`
          : '';
    seen.set(key, wrong);
    if (wrong) failures.push(`${call.where}: ${wrong}`);
  }
  assert.equal(failures, [], `paths the gateway does not serve:\n${failures.join('\n')}`);
});

test.run();
