// The real coding assistants through Tollgate to NATIVE upstreams: Claude Code (`claude -p`) to an
// Anthropic Messages double and Codex CLI (`codex exec`) to an OpenAI Responses double, routed by
// a models config (the default model ids, so the seeded prices and the demo plan apply). Both
// calls are passed through with the caller's own body: this checks that what each CLI sent is
// what the upstream got (but for the model name and the output cap), that the upstream saw the
// gateway's upstream key and never the customer's, that prompt caching works end to end and that
// the ledger billed exactly the usage the upstream reported.
//
// As in coding-assistants.test.ts the gateway runs as a user runs it, the CLIs are configured only
// by the setup script's env files (HOME isolated), and a CLI that cannot run here is a visible SKIP.
// Two small proxies (this file only) watch the wire:
//  - a tap between the CLIs and the gateway (the setup script is given its URL as the gateway's),
//    which records what the CLI itself sent;
//  - a proxy in front of each double, which records what the upstream got and answered. The one in
//    front of the Anthropic double also stands in for a beta the double does not model (see
//    startAnthropicUpstream).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { installAssistantClis, type AssistantClis } from './support/assistant-clis.ts';
import { anthropicPromptTokens, startAnthropicDouble, type AnthropicDouble } from './support/anthropic-double.ts';
import { startOpenAIDouble, type OpenAIDouble } from './support/openai-double.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI_TIMEOUT_MS = 90_000;
const ANTHROPIC_KEY = 'sk-ant-upstream-6f1d9c2e';
const OPENAI_KEY = 'sk-proj-upstream-83ab47d0';
const ANTHROPIC_REPLY = 'Native pass-through reply CRIMSON-HERON-47 from the Anthropic double.';
const OPENAI_REPLY = 'Native pass-through reply AMBER-NARWHAL-19 from the OpenAI double.';
/** Anthropic's beta for `role: "system"` messages, which Claude Code sends (the double knows no such role). */
const MID_CONVERSATION_SYSTEM_BETA = 'mid-conversation-system-2026-04-07';
/** Seeded multipliers (src/catalogue/seed-models.ts) of the two models the CLIs use. */
const MULTIPLIER: Record<string, number> = { 'alpha-sonnet-5': 1.5, 'cx/gen-6-sol': 1.5 };

/** Public model id -> the name the upstream knows (every alpha-* and cx/* model of config/models.json). */
const UPSTREAM_MODEL: Record<string, string> = {};

let gw: GatewayProcess;
let clis: AssistantClis | Error;
let anthropic: AnthropicDouble;
let openai: OpenAIDouble;
/** In front of the doubles: what each upstream received and answered. */
let anthropicWire: Proxy;
let openaiWire: Proxy;
/** Between the CLIs and the gateway: what the CLIs sent. */
let tap: Proxy;
let home: string;
let work: string;
let configDir: string;

// ---- wire recording ------------------------------------------------------------------------

type Body = Record<string, unknown>;

interface Seen {
  method: string;
  /** Path with its query, as sent. */
  url: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body (null when there was none or it was not JSON). */
  body: Body | null;
  /** Filled in once the answer is complete. */
  status?: number;
  response?: string;
}

interface Proxy {
  url: string;
  seen: Seen[];
  close(): Promise<void>;
}

type Intercept = (seen: Seen) => { answer: { status: number; body: unknown } } | { forward: Body } | undefined;

/**
 * A recording HTTP proxy to `target` (an origin): requests and answers go through unchanged (the
 * answer streamed as it comes), unless `intercept` answers a request itself or replaces its body.
 */
async function startProxy(target: string, intercept?: Intercept): Promise<Proxy> {
  const origin = new URL(target);
  const seen: Seen[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    let raw = Buffer.concat(chunks);
    let body: Body | null = null;
    try {
      const parsed: unknown = raw.length ? JSON.parse(raw.toString('utf8')) : null;
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Body;
    } catch {
      /* not JSON */
    }
    const entry: Seen = { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers, body };
    seen.push(entry);
    const action = intercept?.(entry);
    if (action && 'answer' in action) {
      const text = JSON.stringify(action.answer.body);
      entry.status = action.answer.status;
      entry.response = text;
      res.writeHead(action.answer.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    if (action && 'forward' in action) raw = Buffer.from(JSON.stringify(action.forward));
    const headers: IncomingHttpHeaders = { ...req.headers, host: origin.host, 'content-length': String(raw.length) };
    delete headers['transfer-encoding'];
    const upstream = request(new URL(entry.url, origin), { method: entry.method, headers }, (answer) => {
      entry.status = answer.statusCode;
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      let text = '';
      answer.on('data', (d: Buffer) => {
        text += d.toString('utf8');
      });
      answer.on('end', () => {
        entry.response = text;
      });
      answer.pipe(res);
    });
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end('tap: upstream unreachable');
    });
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    upstream.end(raw);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What the Anthropic upstream answers to `role: "system"` messages when that beta is off for it. */
const SYSTEM_ROLE_REFUSAL = `role system requires anthropic-beta: ${MID_CONVERSATION_SYSTEM_BETA}`;
/** Whether the Anthropic upstream has the mid-conversation-system beta off (see startAnthropicUpstream). */
let refuseSystemRole = false;

/**
 * The Anthropic upstream: the double behind a proxy that models the one thing Claude Code sends
 * and the double does not know, messages with `role: "system"` (Anthropic's beta
 * mid-conversation-system-2026-04-07). Normally the beta is on: those messages reach the double as
 * user text, which it can count and cache. With `refuseSystemRole` it is off: they are refused
 * with a 400 that names the beta, and Claude Code is expected to retry with them
 * folded into a <system-reminder> (its own fallback). Every other request reaches the double as
 * it came.
 */
function startAnthropicUpstream(double: AnthropicDouble): Promise<Proxy> {
  return startProxy(double.url, (seen) => {
    const messages = Array.isArray(seen.body?.messages) ? (seen.body.messages as Body[]) : [];
    if (!messages.some((m) => m?.role === 'system')) return undefined;
    if (refuseSystemRole) return { answer: { status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: SYSTEM_ROLE_REFUSAL } } } };
    const asUser = messages.map((m) =>
      m.role === 'system' ? { role: 'user', content: typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content } : m,
    );
    return { forward: { ...seen.body, messages: asUser } };
  });
}

/** The `data:` payloads of an SSE text, parsed. */
function sseData(text: string): Body[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .map((l) => JSON.parse(l.slice(6)) as Body);
}

interface AnthropicUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  output_tokens: number;
}

/** The usage an Anthropic answer (SSE or JSON) reported: message_start's, then message_delta's (latest wins). */
function anthropicUsageOf(response: string): AnthropicUsage {
  const events = response.trimStart().startsWith('{') ? [{ type: 'message', message: JSON.parse(response) as Body }] : sseData(response);
  let usage: Partial<AnthropicUsage> = {};
  for (const e of events) {
    const raw = (e.type === 'message_start' || e.type === 'message' ? (e.message as Body).usage : e.type === 'message_delta' ? e.usage : undefined) as
      Partial<AnthropicUsage> | undefined;
    if (raw) usage = { ...usage, ...raw };
  }
  return {
    input_tokens: usage.input_tokens ?? 0,
    cache_creation_input_tokens: usage.cache_creation_input_tokens ?? 0,
    cache_read_input_tokens: usage.cache_read_input_tokens ?? 0,
    output_tokens: usage.output_tokens ?? 0,
  };
}

interface ResponsesUsage {
  input_tokens: number;
  output_tokens: number;
  input_tokens_details?: { cached_tokens?: number };
  output_tokens_details?: { reasoning_tokens?: number };
}

/** The usage of a Responses stream's response.completed event. */
function responsesUsageOf(response: string): ResponsesUsage {
  const done = sseData(response).find((e) => e.type === 'response.completed');
  assert.ok(done, `a response.completed event in ${response.slice(0, 500)}`);
  return (done!.response as Body).usage as ResponsesUsage;
}

/** Where a Messages body carries cache_control, e.g. "system[2]", "messages[0].content[1]", and the marks. */
function cacheControls(body: Body): Record<string, unknown> {
  const found: Record<string, unknown> = {};
  const visit = (value: unknown, path: string) => {
    if (Array.isArray(value)) value.forEach((v, i) => visit(v, `${path}[${i}]`));
    else if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        if (k === 'cache_control') found[path] = v;
        else visit(v, path ? `${path}.${k}` : k);
      }
    }
  };
  for (const field of ['tools', 'system', 'messages']) visit(body[field], field);
  return found;
}

// ---- running the CLIs ----------------------------------------------------------------------

interface UsageModel {
  model: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  cache_write_tokens: number;
  reasoning_tokens: number;
  billed_tokens: number;
}
async function usageRow(model: string): Promise<UsageModel | undefined> {
  const r = await fetch(`${gw.baseUrl}/usage`, { headers: { authorization: `Bearer ${gw.key}` } });
  return ((await r.json()) as { models: UsageModel[] }).models.find((m) => m.model === model);
}

/** Access-log lines of the gateway for one route. */
function requestsTo(route: string): { status: number; model?: string; billed?: number }[] {
  return gw
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l))
    .filter((e) => e.route === route);
}

interface Cli {
  command: string[];
  version: string;
}

/** The command that runs a CLI here, or why it cannot run on this platform. */
function findCli(name: 'claude' | 'codex'): Cli | { skip: string } {
  if (clis instanceof Error) throw clis;
  const cli = clis[name];
  if (cli.unsupported) return { skip: cli.unsupported };
  const reasons: string[] = [];
  for (const command of cli.commands) {
    const file = command.at(-1)!;
    if (!existsSync(file)) {
      reasons.push(`${file} is missing`);
      continue;
    }
    const r = spawnSync(command[0], [...command.slice(1), '--version'], { encoding: 'utf8', timeout: 30_000 });
    if (r.status === 0) return { command, version: r.stdout.trim() };
    reasons.push(`${command.join(' ')} --version: ${(r.error?.message ?? r.stderr ?? '').trim().slice(0, 300) || `exit ${r.status}`}`);
  }
  return { skip: reasons.join('; ') };
}

/** Runs `command` in a shell that has loaded `envFile` first, as the guides tell users to. */
function runWithEnvFile(envFile: string, command: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('sh', ['-c', '. "$1" && shift && exec "$@"', 'sh', envFile, ...command], {
      cwd: work,
      // Nothing from the developer's environment (API keys, base URLs) reaches the CLI.
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, LANG: 'C.UTF-8', TERM: 'dumb' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      stderr += `\n[killed after ${CLI_TIMEOUT_MS} ms]`;
      child.kill('SIGKILL');
    }, CLI_TIMEOUT_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The calls a CLI made to `path` (query ignored), as it sent them, in order. */
function sentTo(proxy: Proxy, path: string): Seen[] {
  return proxy.seen.filter((s) => s.method === 'POST' && s.url.split('?')[0] === path);
}

/** No header the upstream saw carries the customer's key. */
function assertNoCustomerKey(seen: Seen[], where: string): void {
  for (const s of seen) {
    const text = JSON.stringify(s.headers);
    assert.not.ok(text.includes(gw.key) || text.includes('sk_svc_'), `${where}: the customer's key reached the upstream: ${text}`);
  }
}

// ---- setup ---------------------------------------------------------------------------------

test.before(async () => {
  // A failing hook would not fail the run under uvu: the error is kept and thrown by each test.
  clis = await installAssistantClis().catch((err: Error) => {
    console.error(err.message);
    return err;
  });
  anthropic = await startAnthropicDouble({ apiKey: ANTHROPIC_KEY, reply: ANTHROPIC_REPLY });
  openai = await startOpenAIDouble({ apiKey: OPENAI_KEY, reply: OPENAI_REPLY });
  anthropicWire = await startAnthropicUpstream(anthropic);
  openaiWire = await startProxy(openai.url);

  // The default models config, with the alpha-* models on the Anthropic upstream and the cx/*
  // models on the OpenAI one: same ids, so the ledger's seeded prices and the demo plan apply.
  const config = JSON.parse(readFileSync(join(ROOT, 'config/models.json'), 'utf8')) as {
    $schema?: string;
    providers: Record<string, unknown>;
    models: Record<string, unknown>;
  };
  delete config.$schema;
  config.providers['anthropic-native'] = { type: 'anthropic', baseURL: anthropicWire.url, apiKeyEnv: 'ANTHROPIC_UPSTREAM_KEY' };
  config.providers['openai-native'] = { type: 'openai', baseURL: `${openaiWire.url}/v1`, apiKeyEnv: 'OPENAI_UPSTREAM_KEY' };
  for (const id of Object.keys(config.models)) {
    const provider = id.startsWith('alpha-') ? 'anthropic-native' : id.startsWith('cx/') ? 'openai-native' : null;
    if (!provider) continue;
    UPSTREAM_MODEL[id] = `upstream-${id.replace(/^cx\//, '')}`;
    config.models[id] = { provider, upstreamModel: UPSTREAM_MODEL[id] };
  }
  configDir = mkdtempSync(join(tmpdir(), 'tollgate-native-models-'));
  writeFileSync(join(configDir, 'models.json'), JSON.stringify(config, null, 2));

  gw = await spawnGateway({
    TOLLGATE_MODELS_CONFIG: join(configDir, 'models.json'),
    ANTHROPIC_UPSTREAM_KEY: ANTHROPIC_KEY,
    OPENAI_UPSTREAM_KEY: OPENAI_KEY,
  }).catch((err: Error) => {
    console.error(`could not start the gateway: ${err.message}`);
    throw err;
  });
  tap = await startProxy(new URL(gw.baseUrl).origin);
  home = mkdtempSync(join(tmpdir(), 'tollgate-home-'));
  work = mkdtempSync(join(tmpdir(), 'tollgate-work-'));
  const setup = spawnSync('sh', [join(ROOT, 'setup/setup.sh'), '--target', 'all', '--key', gw.key, '--base-url', `${tap.url}/v1`], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (setup.status !== 0) throw new Error(`setup.sh failed: ${setup.stderr}`);
});

test.after(async () => {
  await gw?.stop();
  await Promise.all([tap, anthropicWire, openaiWire, anthropic, openai].map((s) => s?.close()));
  for (const dir of [home, work, configDir]) if (dir) rmSync(dir, { recursive: true, force: true });
});

// ---- Claude Code ---------------------------------------------------------------------------

interface ClaudeResult {
  type: string;
  subtype: string;
  is_error: boolean;
  result: string;
  usage: AnthropicUsage;
  modelUsage: Record<string, { inputTokens: number; outputTokens: number; cacheReadInputTokens: number; cacheCreationInputTokens: number }>;
}
/** Claude Code's runs, for the header test below (empty when Claude Code was skipped). */
const claudeRuns: ClaudeResult[] = [];

/** One `claude -p` run as the setup script's env file configures it; its JSON result. */
async function runClaude(cli: Cli): Promise<ClaudeResult> {
  const r = await runWithEnvFile(join(home, '.tollgate/claude.env'), [
    ...cli.command,
    '-p',
    'Say hello',
    '--output-format',
    'json',
    '--max-turns',
    '1',
    '--permission-mode',
    'dontAsk',
    '--no-session-persistence',
  ]);
  const out = r.stdout.trim();
  // Claude Code exits 1 after an API error, still printing its JSON result: that is returned.
  const last = out.split('\n').at(-1) ?? '';
  assert.ok(last.startsWith('{'), `claude exited ${r.code} without a result\nstdout: ${out.slice(0, 2000)}\nstderr: ${r.stderr.slice(0, 2000)}`);
  const result = JSON.parse(last) as ClaudeResult;
  if (!result.is_error) assert.is(r.code, 0, `claude exited ${r.code}\nstderr: ${r.stderr.slice(0, 2000)}`);
  return result;
}

test('Claude Code (claude -p) through /v1/messages to a native Anthropic upstream: its own body, cache_control included; the upstream key; cache reads billed as reported', async () => {
  const cli = findCli('claude');
  if ('skip' in cli) {
    console.log(`SKIP Claude Code: cannot run the CLI here: ${cli.skip}`);
    return;
  }
  // Twice: the second run sends the same system prompt and tools, which the upstream has cached.
  for (let run = 0; run < 2; run++) {
    const result = await runClaude(cli);
    assert.equal([result.type, result.subtype, result.is_error], ['result', 'success', false], JSON.stringify(result).slice(0, 2000));
    assert.ok(result.result.includes(ANTHROPIC_REPLY), `Claude Code printed the upstream's reply: ${result.result}`);
    assert.equal(Object.keys(result.modelUsage), ['alpha-sonnet-5'], 'every call went to the model the env file names');
    claudeRuns.push(result);
  }

  // What Claude Code sent, and what the upstream got, call for call.
  const sent = sentTo(tap, '/v1/messages');
  const got = sentTo(anthropicWire, '/v1/messages');
  assert.is(got.length, sent.length, 'every /v1/messages call went upstream once');
  assert.ok(sent.length >= 2, `calls: ${sent.length}`);
  for (const [i, s] of sent.entries()) {
    const u = got[i]!;
    const model = String(s.body!.model);
    assert.ok(UPSTREAM_MODEL[model]?.startsWith('upstream-alpha-'), `Claude Code asked for an alpha-* model: ${model}`);
    // The customer's key went to Tollgate; the upstream saw the upstream key only.
    assert.is(s.headers.authorization, `Bearer ${gw.key}`);
    assert.is(u.headers['x-api-key'], ANTHROPIC_KEY);
    assert.is(u.headers.authorization, undefined);
    // The caller's body, but for the model name and the output cap (and stream, which stays on).
    const cap = u.body!.max_tokens as number;
    assert.ok(Number.isInteger(cap) && cap >= 1 && cap <= (s.body!.max_tokens as number), `max_tokens ${cap} within the caller's ${s.body!.max_tokens}`);
    assert.equal(u.body, { ...s.body, model: UPSTREAM_MODEL[model], max_tokens: cap }, `call ${i}: the upstream got Claude Code's own body`);
    const marks = cacheControls(s.body!);
    assert.ok(Object.keys(marks).length > 0, 'Claude Code marks cache breakpoints');
    assert.equal(cacheControls(u.body!), marks, `call ${i}: every cache_control where Claude Code put it`);
  }
  assertNoCustomerKey(anthropicWire.seen, 'anthropic upstream');

  // The calls the upstream answered, with the usage it reported.
  const answered = got.filter((u) => u.status === 200);
  assert.is(answered.length, claudeRuns.length, 'one answered call per run');
  assert.is(anthropic.requests.length, answered.length, 'the double answered each of them');
  const reported = answered.map((u) => anthropicUsageOf(u.response!));
  for (const [i, usage] of reported.entries()) {
    // Anthropic's rule (and the double's): input + cache creation + cache read is the whole prompt.
    assert.is(usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens, anthropicPromptTokens(anthropic.requests[i]!.body));
    // Claude Code got the usage the upstream reported, untouched.
    const told = claudeRuns[i]!.usage;
    assert.equal(
      [told.input_tokens, told.cache_creation_input_tokens, told.cache_read_input_tokens, told.output_tokens],
      [usage.input_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens, usage.output_tokens],
      `run ${i}: the usage Claude Code saw`,
    );
  }
  assert.ok(reported[0]!.cache_creation_input_tokens > 0, 'the first run wrote the cache');
  assert.ok(reported[1]!.cache_read_input_tokens > 0, 'the second run read the cached prefix');

  // Each call billed ceil((input + cache creation + cache read + output) × multiplier).
  const logged = requestsTo('/v1/messages').filter((c) => c.status === 200);
  assert.is(logged.length, answered.length);
  const expected = reported.map((u) =>
    Math.ceil((u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens + u.output_tokens) * MULTIPLIER['alpha-sonnet-5']),
  );
  assert.equal(
    logged.map((c) => c.billed),
    expected,
    'billed per call',
  );
  assert.ok(logged.every((c) => c.model === 'alpha-sonnet-5'));

  const sum = (f: (u: AnthropicUsage) => number) => reported.reduce((n, u) => n + f(u), 0);
  const row = await usageRow('alpha-sonnet-5');
  assert.ok(row, 'a usage row for alpha-sonnet-5');
  assert.equal(
    {
      requests: row!.requests,
      prompt_tokens: row!.prompt_tokens,
      completion_tokens: row!.completion_tokens,
      cached_tokens: row!.cached_tokens,
      cache_write_tokens: row!.cache_write_tokens,
      billed_tokens: row!.billed_tokens,
    },
    {
      requests: answered.length,
      prompt_tokens: sum((u) => u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens),
      completion_tokens: sum((u) => u.output_tokens),
      cached_tokens: sum((u) => u.cache_read_input_tokens),
      cache_write_tokens: sum((u) => u.cache_creation_input_tokens),
      billed_tokens: expected.reduce((a, b) => a + b, 0),
    },
    '/v1/usage is what the upstream reported and the ledger charged',
  );
  assert.ok(row!.cached_tokens > 0);

  console.log(
    `Claude Code ${cli.version}: ${sent.length} call(s) to /v1/messages (${answered.length} answered) with fields ${Object.keys(sent[0]!.body!).join(', ')}, cache_control at ${Object.keys(cacheControls(sent[0]!.body!)).join(', ')}; ` +
      `upstream usage per answered call ${reported.map((u) => `in ${u.input_tokens} + write ${u.cache_creation_input_tokens} + read ${u.cache_read_input_tokens}, out ${u.output_tokens}`).join(' | ')}; ` +
      `/v1/usage: ${row!.prompt_tokens}+${row!.completion_tokens} tokens, ${row!.cached_tokens} cached, ${row!.cache_write_tokens} cache-written, ${row!.billed_tokens} billed`,
  );
});

test('Claude Code: the anthropic-beta header it sends with beta body fields reaches the Anthropic upstream', () => {
  if (claudeRuns.length === 0) {
    console.log('SKIP Claude Code beta header: Claude Code did not run');
    return;
  }
  const sent = sentTo(tap, '/v1/messages');
  const got = sentTo(anthropicWire, '/v1/messages');
  for (const [i, s] of sent.entries()) {
    const betas = s.headers['anthropic-beta'];
    if (!betas) continue;
    // The body is passed through with fields that exist only under these betas (context_management,
    // output_config.effort, role "system" messages, ...): without the header Anthropic refuses them.
    const betaFields = ['context_management', 'output_config'].filter((f) => f in s.body!);
    assert.is(
      got[i]!.headers['anthropic-beta'],
      betas,
      `call ${i}: Claude Code sent anthropic-beta: ${betas} with body fields ${betaFields.join(', ') || '(none)'}; the upstream got ${JSON.stringify(got[i]!.headers['anthropic-beta'])}`,
    );
  }
});

test('Claude Code recovers when the Anthropic upstream refuses its role "system" messages (the upstream\'s 400 reaches it readable)', async () => {
  const cli = findCli('claude');
  if ('skip' in cli) {
    console.log(`SKIP Claude Code recovery: cannot run the CLI here: ${cli.skip}`);
    return;
  }
  // An upstream with the mid-conversation-system beta off answers 400 naming the beta. Claude
  // Code recognises that error by its text (the beta's name next to "anthropic-beta") and retries
  // once with those messages folded into a <system-reminder>, which works against the upstream
  // directly. Through Tollgate it can only do so if the upstream's message reaches it as written.
  const before = sentTo(anthropicWire, '/v1/messages').length;
  refuseSystemRole = true;
  let result: ClaudeResult;
  try {
    result = await runClaude(cli);
  } finally {
    refuseSystemRole = false;
  }
  const got = sentTo(anthropicWire, '/v1/messages').slice(before);
  assert.ok(
    got.length >= 1 && got[0]!.status === 400 && (got[0]!.body!.messages as Body[]).some((m) => m.role === 'system'),
    'the upstream refused the first call',
  );
  assert.is(result.is_error, false, `Claude Code could not recover: the upstream said "${SYSTEM_ROLE_REFUSAL}", Claude Code was told "${result.result}"`);
  assert.ok(result.result.includes(ANTHROPIC_REPLY), result.result);
  assert.ok(
    got.length === 2 && got[1]!.status === 200 && !(got[1]!.body!.messages as Body[]).some((m) => m.role === 'system'),
    'one retry, without role "system"',
  );
});

// ---- Codex CLI -----------------------------------------------------------------------------

test('Codex CLI (codex exec) through /v1/responses to a native OpenAI upstream: its own fields intact, the upstream key, cached tokens billed as reported', async () => {
  const cli = findCli('codex');
  if ('skip' in cli) {
    console.log(`SKIP Codex CLI: cannot run the CLI here: ${cli.skip}`);
    return;
  }
  interface Turn {
    input_tokens: number;
    cached_input_tokens: number;
    output_tokens: number;
    reasoning_output_tokens?: number;
  }
  const turns: Turn[] = [];
  // Twice: the second run repeats the tools array, which the upstream has cached (Codex gives every
  // input item a fresh id, so the cached prefix ends there).
  for (let run = 0; run < 2; run++) {
    const r = await runWithEnvFile(join(home, '.tollgate/codex.env'), [
      ...cli.command,
      'exec',
      'Say hello',
      '--skip-git-repo-check',
      '--json',
      '--sandbox',
      'read-only',
      '--ephemeral',
      '--color',
      'never',
    ]);
    assert.is(r.code, 0, `codex exited ${r.code}\nstdout: ${r.stdout.slice(0, 2000)}\nstderr: ${r.stderr.slice(0, 2000)}`);
    const events = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { type: string; item?: { type: string; text?: string }; usage?: Turn });
    assert.equal(
      events.filter((e) => e.type === 'turn.failed' || e.type === 'error'),
      [],
      'no failed turn',
    );
    const reply = events.find((e) => e.type === 'item.completed' && e.item?.type === 'agent_message');
    assert.ok(reply?.item?.text?.includes(OPENAI_REPLY), `Codex printed the upstream's reply: ${r.stdout.slice(0, 2000)}`);
    const turn = events.find((e) => e.type === 'turn.completed');
    assert.ok(turn?.usage, 'turn.completed with usage');
    turns.push(turn!.usage!);
  }

  const sent = sentTo(tap, '/v1/responses');
  const got = sentTo(openaiWire, '/v1/responses');
  assert.is(got.length, sent.length, 'every /v1/responses call went upstream once');
  assert.is(sent.length, turns.length, 'one call per run');
  for (const [i, s] of sent.entries()) {
    const u = got[i]!;
    const body = s.body!;
    assert.is(body.model, 'cx/gen-6-sol', 'the model the setup script configured');
    assert.is(s.headers.authorization, `Bearer ${gw.key}`);
    assert.is(u.headers.authorization, `Bearer ${OPENAI_KEY}`);
    // Codex's own Responses fields, as it sends them.
    // Codex sends its base instructions as a developer message rather than `instructions`.
    for (const role of ['developer', 'user'])
      assert.ok(Array.isArray(body.input) && (body.input as Body[]).some((item) => item.type === 'message' && item.role === role), `a ${role} input item`);
    assert.ok(Array.isArray(body.tools) && (body.tools as Body[]).some((t) => t.name === 'exec_command'), 'tools');
    assert.is(body.store, false);
    assert.is(body.stream, true);
    assert.ok(body.reasoning && typeof body.reasoning === 'object', 'reasoning');
    assert.ok(Array.isArray(body.include) && body.include.includes('reasoning.encrypted_content'), 'include');
    assert.type(body.prompt_cache_key, 'string');
    // The caller's body, but for the model name and the output cap.
    const cap = u.body!.max_output_tokens as number;
    assert.ok(
      Number.isInteger(cap) && cap >= 16 && (body.max_output_tokens === undefined || cap <= (body.max_output_tokens as number)),
      `max_output_tokens ${cap}`,
    );
    assert.equal(u.body, { ...body, model: UPSTREAM_MODEL['cx/gen-6-sol'], max_output_tokens: cap }, `call ${i}: the upstream got Codex's own body`);
  }
  assertNoCustomerKey(openaiWire.seen, 'openai upstream');

  const reported = got.map((u) => {
    assert.is(u.status, 200);
    return responsesUsageOf(u.response!);
  });
  const cachedOf = (u: ResponsesUsage) => u.input_tokens_details?.cached_tokens ?? 0;
  for (const [i, usage] of reported.entries()) {
    assert.equal(
      [turns[i]!.input_tokens, turns[i]!.cached_input_tokens, turns[i]!.output_tokens],
      [usage.input_tokens, cachedOf(usage), usage.output_tokens],
      `run ${i}: the usage Codex saw`,
    );
  }
  assert.ok(cachedOf(reported[1]!) > 0, 'the second run read a cached prefix');

  // OpenAI's input_tokens already include the cached ones: billed = ceil((input + output) × multiplier).
  const logged = requestsTo('/v1/responses');
  assert.ok(
    logged.every((c) => c.status === 200 && c.model === 'cx/gen-6-sol'),
    JSON.stringify(logged),
  );
  const expected = reported.map((u) => Math.ceil((u.input_tokens + u.output_tokens) * MULTIPLIER['cx/gen-6-sol']));
  assert.equal(
    logged.map((c) => c.billed),
    expected,
    'billed per call',
  );

  const sum = (f: (u: ResponsesUsage) => number) => reported.reduce((n, u) => n + f(u), 0);
  const row = await usageRow('cx/gen-6-sol');
  assert.ok(row, 'a usage row for cx/gen-6-sol');
  assert.equal(
    {
      requests: row!.requests,
      prompt_tokens: row!.prompt_tokens,
      completion_tokens: row!.completion_tokens,
      cached_tokens: row!.cached_tokens,
      reasoning_tokens: row!.reasoning_tokens,
      billed_tokens: row!.billed_tokens,
    },
    {
      requests: reported.length,
      prompt_tokens: sum((u) => u.input_tokens),
      completion_tokens: sum((u) => u.output_tokens),
      cached_tokens: sum(cachedOf),
      reasoning_tokens: sum((u) => u.output_tokens_details?.reasoning_tokens ?? 0),
      billed_tokens: expected.reduce((a, b) => a + b, 0),
    },
    '/v1/usage is what the upstream reported and the ledger charged',
  );
  assert.ok(row!.cached_tokens > 0);

  const first = sent[0]!.body!;
  console.log(
    `Codex CLI ${cli.version}: ${sent.length} call(s) to /v1/responses with fields ${Object.keys(first).join(', ')}; ` +
      `upstream usage ${reported.map((u) => `in ${u.input_tokens} (cached ${cachedOf(u)}), out ${u.output_tokens}`).join(' | ')}; ` +
      `/v1/usage: ${row!.prompt_tokens}+${row!.completion_tokens} tokens, ${row!.cached_tokens} cached, ${row!.billed_tokens} billed`,
  );
});

test.run();
