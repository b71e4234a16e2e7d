// The real coding assistants against a gateway started as a user starts it, configured only by
// the setup script's env files: Claude Code (`claude -p`, Anthropic Messages) and Codex CLI
// (`codex exec`, OpenAI Responses). Both CLIs come from test/assistants (own package.json and
// lock file, not Tollgate's dependencies), installed on first use by support/assistant-clis.ts;
// their native binaries come from the platform packages npm installs as optional dependencies, so
// no install script is needed. A failed install fails the tests. A CLI that cannot run on this
// platform at all is reported with a visible SKIP line, never passed silently.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnGateway, type GatewayProcess } from './support/gateway.ts';
import { installAssistantClis, type AssistantClis } from './support/assistant-clis.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI_TIMEOUT_MS = 90_000;

// Every simulated reply is built from these sentences (src/upstream/simulated/text.ts).
const SIMULATED =
  /You asked about|The simulated upstream sees|depends on the context you give it|A careful look at|generated offline|Consider how|Most questions about|write down what you expect/;

let gw: GatewayProcess;
/** The installed CLIs, or why installing them failed (each test then fails with it). */
let clis: AssistantClis | Error;
let home: string;
let work: string;

interface UsageModel {
  model: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
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

test.before(async () => {
  // Before the gateway starts (the first install takes a while). A failing hook would not fail
  // the run under uvu, so the error is kept and thrown by each test.
  clis = await installAssistantClis().catch((err: Error) => {
    console.error(err.message);
    return err;
  });
  // uvu reports a failing hook badly: say what went wrong before rethrowing.
  gw = await spawnGateway().catch((err: Error) => {
    console.error(`could not start the gateway: ${err.message}`);
    throw err;
  });
  home = mkdtempSync(join(tmpdir(), 'tollgate-home-'));
  work = mkdtempSync(join(tmpdir(), 'tollgate-work-'));
  const setup = spawnSync('sh', [join(ROOT, 'setup/setup.sh'), '--target', 'all', '--key', gw.key, '--base-url', gw.baseUrl], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (setup.status !== 0) throw new Error(`setup.sh failed: ${setup.stderr}`);
});
test.after(async () => {
  await gw?.stop();
  for (const dir of [home, work]) if (dir) rmSync(dir, { recursive: true, force: true });
});

test('Claude Code (claude -p) completes through POST /v1/messages, billed on alpha-sonnet-5', async () => {
  const cli = findCli('claude');
  if ('skip' in cli) {
    console.log(`SKIP Claude Code: cannot run the CLI here: ${cli.skip}`);
    return;
  }
  const run = await runWithEnvFile(join(home, '.tollgate/claude.env'), [
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
  const out = run.stdout.trim();
  assert.is(run.code, 0, `claude exited ${run.code}\nstdout: ${out.slice(0, 2000)}\nstderr: ${run.stderr.slice(0, 2000)}`);
  const result = JSON.parse(out.split('\n').at(-1)!) as {
    type: string;
    subtype: string;
    is_error: boolean;
    result: string;
    num_turns: number;
    usage: { input_tokens: number; output_tokens: number };
    modelUsage: Record<string, { inputTokens: number; outputTokens: number }>;
  };
  assert.equal([result.type, result.subtype, result.is_error], ['result', 'success', false]);
  assert.match(result.result, SIMULATED, `the simulated reply: ${result.result}`);
  assert.equal(Object.keys(result.modelUsage), ['alpha-sonnet-5'], 'every call went to the model the env file names');

  const calls = requestsTo('/v1/messages');
  assert.ok(calls.length >= 1 && calls.every((c) => c.status === 200 && c.model === 'alpha-sonnet-5'), JSON.stringify(calls));
  const row = await usageRow('alpha-sonnet-5');
  assert.ok(row, 'a usage row for alpha-sonnet-5');
  assert.is(row!.requests, calls.length);
  // What Claude Code was told it used is what the ledger billed.
  assert.is(row!.prompt_tokens, result.modelUsage['alpha-sonnet-5'].inputTokens);
  assert.is(row!.completion_tokens, result.modelUsage['alpha-sonnet-5'].outputTokens);
  assert.ok(row!.billed_tokens >= Math.ceil((row!.prompt_tokens + row!.completion_tokens) * 1.5) && row!.billed_tokens > 0);
  console.log(
    `Claude Code ${cli.version}: ${calls.length} call(s) to /v1/messages, ${row!.prompt_tokens}+${row!.completion_tokens} tokens, ${row!.billed_tokens} billed`,
  );
});

test('Codex CLI (codex exec) completes through POST /v1/responses, billed on cx/gen-6-sol', async () => {
  const cli = findCli('codex');
  if ('skip' in cli) {
    console.log(`SKIP Codex CLI: cannot run the CLI here: ${cli.skip}`);
    return;
  }
  const run = await runWithEnvFile(join(home, '.tollgate/codex.env'), [
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
  assert.is(run.code, 0, `codex exited ${run.code}\nstdout: ${run.stdout.slice(0, 2000)}\nstderr: ${run.stderr.slice(0, 2000)}`);
  const events = run.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map(
      (l) =>
        JSON.parse(l) as { type: string; item?: { type: string; text?: string; message?: string }; usage?: { input_tokens: number; output_tokens: number } },
    );
  const failures = events.filter((e) => e.type === 'turn.failed' || e.type === 'error');
  assert.equal(failures, [], 'no failed turn');
  const reply = events.find((e) => e.type === 'item.completed' && e.item?.type === 'agent_message');
  assert.ok(reply, `an agent message in ${run.stdout.slice(0, 2000)}`);
  assert.match(reply!.item!.text!, SIMULATED, `the simulated reply: ${reply!.item!.text}`);
  const turn = events.find((e) => e.type === 'turn.completed');
  assert.ok(turn?.usage, 'turn.completed with usage');

  const calls = requestsTo('/v1/responses');
  assert.ok(calls.length >= 1 && calls.every((c) => c.status === 200 && c.model === 'cx/gen-6-sol'), JSON.stringify(calls));
  const row = await usageRow('cx/gen-6-sol');
  assert.ok(row, 'a usage row for cx/gen-6-sol');
  assert.is(row!.requests, calls.length);
  // What Codex was told it used is what the ledger billed.
  assert.is(row!.prompt_tokens, turn!.usage!.input_tokens);
  assert.is(row!.completion_tokens, turn!.usage!.output_tokens);
  assert.ok(row!.billed_tokens >= Math.ceil((row!.prompt_tokens + row!.completion_tokens) * 1.5) && row!.billed_tokens > 0);
  console.log(
    `Codex CLI ${cli.version}: ${calls.length} call(s) to /v1/responses, ${row!.prompt_tokens}+${row!.completion_tokens} tokens, ${row!.billed_tokens} billed`,
  );
});

test('Codex CLI: a function_call the model makes is run and its function_call_output sent back', async () => {
  const cli = findCli('codex');
  if ('skip' in cli) {
    console.log(`SKIP Codex CLI tool round trip: cannot run the CLI here: ${cli.skip}`);
    return;
  }
  // The simulated model calls a tool named in the prompt, with the prompt as its argument: Codex
  // runs `Please use exec_command to run ls` in its read-only sandbox (bash: command not found).
  const before = requestsTo('/v1/responses').length;
  const run = await runWithEnvFile(join(home, '.tollgate/codex.env'), [
    ...cli.command,
    'exec',
    'Please use exec_command to run ls',
    '--skip-git-repo-check',
    '--json',
    '--sandbox',
    'read-only',
    '--ephemeral',
    '--color',
    'never',
  ]);
  assert.is(run.code, 0, `codex exited ${run.code}\nstdout: ${run.stdout.slice(0, 2000)}\nstderr: ${run.stderr.slice(0, 2000)}`);
  const events = run.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { type: string; item?: { type: string; text?: string; command?: string } });
  const command = events.find((e) => e.type === 'item.completed' && e.item?.type === 'command_execution');
  assert.ok(command, `Codex ran the call: ${run.stdout.slice(0, 2000)}`);
  assert.match(command!.item!.command!, /Please use exec_command to run ls/);
  const reply = events.find((e) => e.type === 'item.completed' && e.item?.type === 'agent_message');
  assert.ok(reply?.item?.text?.startsWith('The tool finished and its result is in.'), `the reply after the tool output: ${reply?.item?.text}`);
  const calls = requestsTo('/v1/responses').slice(before);
  assert.is(calls.length, 2, 'one call that asks for the tool, one that answers after its output');
  assert.ok(
    calls.every((c) => c.status === 200 && c.model === 'cx/gen-6-sol' && (c.billed ?? 0) > 0),
    JSON.stringify(calls),
  );
});

test.run();
