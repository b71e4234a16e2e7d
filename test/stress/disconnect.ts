// Clients that leave before their reply is complete (the soak's client timeouts under overload
// are this case). docs/billing.md's rules: a non-streamed call or an image the client leaves is not
// charged (the upstream is stopped, the hold released as client_aborted); a stream the client
// leaves pays the prompt plus the tokens streamed so far (charged with aborted = true).
// Each case runs several times, leaving at two moments: while the gateway is still preparing
// the call (a long prompt to count), and while the upstream is generating.
//
//   node --import tsx test/stress/disconnect.ts      STRESS_DISCONNECT_REPEAT (5)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { runScenario, envNumber, databaseUrl, atInterrupt } from './support/scenario.ts';
import { freePort, startGatewayProcess, kill9, stopGracefully, type ManagedProcess, type GatewaySpec } from './support/processes.ts';
import { adminClient, openLoadAccount, exportEvents, verify, type AdminClient } from './support/admin.ts';
import { newRequestId } from './support/load.ts';
import { writeSlowSimulatedConfig } from './support/models.ts';
import { dropSchemas } from './support/storage.ts';
import type { StoredEvent } from '../../src/eventstore/port.ts';

interface Case {
  name: string;
  kind: 'chat' | 'stream' | 'image';
  /** Leave this long after sending, or (streams) after this many content chunks. */
  leave: { afterMs: number } | { afterChunks: number };
  longPrompt: boolean;
}

const CASES: Case[] = [
  { name: 'chat, leaves while the upstream generates', kind: 'chat', leave: { afterMs: 300 }, longPrompt: false },
  { name: 'chat, leaves while the gateway prepares the call', kind: 'chat', leave: { afterMs: 30 }, longPrompt: true },
  { name: 'stream, leaves after 3 chunks', kind: 'stream', leave: { afterChunks: 3 }, longPrompt: false },
  { name: 'stream, leaves while the gateway prepares the call', kind: 'stream', leave: { afterMs: 30 }, longPrompt: true },
  { name: 'image, leaves while the upstream draws', kind: 'image', leave: { afterMs: 300 }, longPrompt: false },
  { name: 'image, leaves while the gateway prepares the call', kind: 'image', leave: { afterMs: 30 }, longPrompt: true },
];

// About 40k tokens: counting them takes the gateway a while before it reaches the upstream call.
const LONG = Array.from({ length: 40_000 }, (_, i) => `word${i % 997}`).join(' ');

await runScenario('client-disconnect', async (ctx) => {
  const repeat = envNumber('STRESS_DISCONNECT_REPEAT', 5);
  const models = writeSlowSimulatedConfig({ tokenDelayMs: 20, imageDelayMs: 1500 });
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-disc-'));
  const spec: GatewaySpec = {
    port: await freePort(),
    schema: `dc_${randomBytes(5).toString('hex')}`,
    dataDir,
    databaseUrl: databaseUrl(),
    adminToken: `tg_admin_disc_${randomBytes(12).toString('hex')}`,
    modelsConfig: models.path,
  };
  const origin = `http://127.0.0.1:${spec.port}`;
  const admin = adminClient(origin, spec.adminToken);
  atInterrupt(async () => {
    models.remove();
    rmSync(dataDir, { recursive: true, force: true });
    if (spec.databaseUrl) await dropSchemas(spec.databaseUrl, spec.schema);
  });
  let gw: ManagedProcess | null = null;
  try {
    gw = await startGatewayProcess(spec);
    const acct = await openLoadAccount(admin, 'leaver', 1_000_000_000);
    for (const c of CASES) {
      let good = 0;
      const bad: string[] = [];
      for (let i = 0; i < repeat; i++) {
        const requestId = newRequestId('leave');
        const seen = await leaveEarly(origin, acct.key, requestId, c);
        const outcome = await terminalEvent(admin, requestId);
        const verdict = judge(c, outcome, seen);
        if (verdict === null) good++;
        else bad.push(verdict);
      }
      ctx.figure(c.name, `${good} / ${repeat} as documented${bad.length ? `; ${bad[0]}` : ''}`);
      if (bad.length) ctx.violation(`${c.name}: ${bad.length} of ${repeat} not as documented, e.g. ${bad[0]}`);
    }
    const ver = await verify(admin);
    if (!ver.ok) ctx.violation(`verify failed: ${JSON.stringify(ver).slice(0, 1500)}`);
  } finally {
    if (gw) {
      await stopGracefully(gw, 20_000);
      await kill9(gw);
    }
    models.remove();
    rmSync(dataDir, { recursive: true, force: true });
    if (process.env.STRESS_KEEP !== '1') await dropSchemas(spec.databaseUrl!, spec.schema);
  }
});

/** Sends the call and walks away as the case says; returns the content chunks it had received. */
async function leaveEarly(origin: string, key: string, requestId: string, c: Case): Promise<number> {
  const content = c.longPrompt ? LONG : 'Tell me about ledgers, holds and settlement in a few sentences.';
  const body =
    c.kind === 'image'
      ? { model: 'alpha-haiku-4.5', prompt: c.longPrompt ? LONG.slice(0, 7900) : content }
      : { model: 'cx/gen-6-luna', messages: [{ role: 'user', content }], ...(c.kind === 'stream' ? { stream: true } : {}) };
  const abort = new AbortController();
  if ('afterMs' in c.leave) setTimeout(() => abort.abort(), c.leave.afterMs);
  let chunks = 0;
  try {
    const res = await fetch(`${origin}/v1/${c.kind === 'image' ? 'images/generations' : 'chat/completions'}`, {
      method: 'POST',
      signal: abort.signal,
      body: JSON.stringify(body),
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': requestId },
    });
    const reader = res.body!.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      chunks += (new TextDecoder().decode(value).match(/"content":"[^"]/g) ?? []).length;
      if ('afterChunks' in c.leave && chunks >= c.leave.afterChunks) {
        abort.abort();
        break;
      }
    }
  } catch {
    /* the abort */
  }
  return chunks;
}

/** The charge or release that ends the call's hold (the gateway may take a while to notice). */
async function terminalEvent(admin: AdminClient, requestId: string): Promise<StoredEvent | null> {
  const end = Date.now() + 60_000;
  while (Date.now() < end) {
    const e = (await exportEvents(admin)).find(
      (x) => x.data.requestId === requestId && (x.type === 'ChatCharged' || x.type === 'ImageCharged' || x.type === 'ReservationReleased'),
    );
    if (e) return e;
    await new Promise((r) => setTimeout(r, 250));
  }
  return null;
}

/** null when the ledger shows what docs/billing.md promises, else what it shows instead. */
function judge(c: Case, e: StoredEvent | null, chunksSeen: number): string | null {
  if (!e) return 'the hold was neither settled nor released within 60 s';
  const d = e.data as Record<string, any>;
  const shown =
    e.type === 'ReservationReleased'
      ? `released (${d.reason})`
      : `${e.type} ${d.billed} tokens (completion ${d.completionTokens ?? '-'}, aborted ${d.aborted ?? '-'})`;
  if (c.kind === 'stream') {
    // Charged for the prompt and what was streamed: aborted, and not the whole reply.
    if (e.type === 'ReservationReleased' && d.reason === 'client_aborted') return null;
    if (e.type === 'ChatCharged' && d.aborted === true && d.completionTokens >= chunksSeen) return null;
    return `${shown}; the client had received ${chunksSeen} chunks`;
  }
  return e.type === 'ReservationReleased' && d.reason === 'client_aborted' ? null : shown;
}
