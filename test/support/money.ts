// Helpers for the payment tests: reads that wait out a loaded machine (a 503 is a read model still
// behind, to retry), and spending a plan's tokens through real calls.
import * as assert from 'uvu/assert';
import { call, chat, eventually, userMessage, type Reply } from './http.ts';
import type { EventReader } from '../../src/eventstore/port.ts';
import type { StripeDouble } from './stripe-double.ts';

/** The admin API with its token: GET without a body, POST with one, or the method given. */
export const adminApi =
  (gw: { url: string }, token: string) =>
  (path: string, body?: unknown, method?: string): Promise<Reply> =>
    call(gw, `/admin/v1${path}`, { key: token, body, method: method ?? (body === undefined ? 'GET' : 'POST') });

/** A Stripe notice signed with the webhook secret, delivered to the gateway; its outcome (a 200 is asserted). */
export async function deliverStripe(gw: { url: string }, stripe: StripeDouble, type: string, object: Record<string, unknown>): Promise<string> {
  const { body, signature } = stripe.signed(stripe.event(type, object));
  const r = await call(gw, '/webhooks/stripe', { raw: body, headers: { 'content-type': 'application/json', 'stripe-signature': signature } });
  assert.is(r.status, 200, r.text);
  return r.json.outcome;
}

/**
 * Spends exactly `tokens` (at least 10) through chat calls: a one-word prompt with max_tokens 1
 * bills 10 tokens (9 of prompt, 1 of completion) and each further word one more, as each reply's
 * usage confirms.
 */
export async function spendExactly(gw: { url: string }, key: string, tokens: number): Promise<void> {
  for (let left = tokens; left > 0;) {
    const part = left <= 300 ? left : left - 300 >= 10 ? 300 : left - 10;
    const content = ['toll', ...Array(part - 10).fill(' toll')].join('');
    const r = await call(gw, '/v1/chat/completions', { key, body: { model: 'cx/gen-6-luna', messages: [{ role: 'user', content }], max_tokens: 1 } });
    assert.is(r.status, 200, r.text);
    assert.is(r.json.usage.billed_tokens, part, `the call billed ${r.json.usage.billed_tokens}, not ${part}`);
    left -= part;
  }
}

/** A GET with a key, retried while the gateway answers 503 (read models behind under load). */
export const readWhenReady = (gw: { url: string }, path: string, key: string): Promise<Reply> =>
  eventually(
    () => call(gw, path, { key }),
    (r) => r.status !== 503,
    30_000,
  );

/** The account's /v1/subscription body. */
export async function subscriptionOf(gw: { url: string }, key: string) {
  const r = await readWhenReady(gw, '/v1/subscription', key);
  assert.is(r.status, 200, r.text);
  return r.json;
}

/** Makes real chat calls until the main plan has used at least `tokens`; returns what it used. */
export async function useMainPlanUntil(gw: { url: string }, key: string, tokens: number): Promise<number> {
  let used = 0;
  while (used < tokens) {
    const r = await chat(gw, key, { model: 'cx/gen-6-luna', messages: userMessage('Tell me about toll roads.'), max_tokens: 80 });
    assert.is(r.status, 200, r.text);
    used = (await subscriptionOf(gw, key)).quota.used;
  }
  return used;
}

/** Events in these streams (read per stream: no wait for the whole log to be readable). */
export async function eventsIn(events: EventReader, streamNames: string[]): Promise<number> {
  let n = 0;
  for (const s of streamNames) n += (await events.readStream(s)).length;
  return n;
}
