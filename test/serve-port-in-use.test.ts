// A gateway that cannot have its port (another process holds it) stops at once with a message
// naming the address and the setting to change, not with an unhandled 'error' event.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

async function holdAPort(): Promise<Server> {
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  return holder;
}

/** Runs `tollgate serve` until it exits; one that is still running after 120 s (it got a port after all) is killed and fails the test. */
async function serveOn(env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-port-'));
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve'], {
    env: { ...process.env, HOST: '127.0.0.1', TOLLGATE_DATA_DIR: dataDir, DATABASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const killer = setTimeout(() => {
    out += '\n(still running after 120 s: killed)';
    child.kill('SIGKILL');
  }, 120_000);
  try {
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    return { code, out };
  } finally {
    clearTimeout(killer);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

test('the API port in use: exit 1 with the address, the cause and PORT named', async () => {
  const holder = await holdAPort();
  try {
    const port = (holder.address() as AddressInfo).port;
    const { code, out } = await serveOn({ PORT: String(port) });
    assert.is(code, 1, out);
    assert.match(out, `cannot listen on 127.0.0.1:${port}: the address is in use by another process (set PORT to another port)`);
    assert.not.match(out, /Unhandled 'error' event/);
    assert.not.match(out, /base URL/, 'it never said it was serving');
  } finally {
    holder.close();
  }
});

test('the metrics port in use: the same, naming TOLLGATE_METRICS_PORT', async () => {
  const holder = await holdAPort();
  try {
    const port = (holder.address() as AddressInfo).port;
    const { code, out } = await serveOn({ PORT: '0', TOLLGATE_METRICS_PORT: String(port) });
    assert.is(code, 1, out);
    assert.match(out, `cannot listen on 127.0.0.1:${port}: the address is in use by another process (set TOLLGATE_METRICS_PORT to another port)`);
    assert.not.match(out, /Unhandled 'error' event/);
  } finally {
    holder.close();
  }
});

test.run();
