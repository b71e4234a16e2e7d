// The operator's side of a stress run, through the real admin API (/admin/v1): accounts to load,
// the event export to audit, verify (hash chains + read models against a fresh rebuild).
import type { StoredEvent } from '../../../src/eventstore/port.ts';

export interface AdminClient {
  origin: string;
  token: string;
  request<T = Record<string, any>>(method: string, path: string, body?: unknown): Promise<T>;
}

export function adminClient(origin: string, token: string): AdminClient {
  return {
    origin,
    token,
    async request(method, path, body) {
      const res = await fetch(`${origin}/admin/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-tollgate-actor': 'stress' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`admin ${method} ${path}: ${res.status} ${text.slice(0, 500)}`);
      return (text ? JSON.parse(text) : null) as never;
    },
  };
}

export interface LoadAccount {
  accountId: string;
  key: string;
  quota: number;
}

/** A plan with the given quota, an account on it and a key; a high call rate unless given. */
export async function openLoadAccount(admin: AdminClient, id: string, quota: number, rpm = 1_000_000): Promise<LoadAccount> {
  await admin.request('POST', '/plans', { plan_id: `plan-${id}`, name: `Stress ${id}`, quota, validity_days: 30, requests_per_minute: rpm, models: ['*'] });
  await admin.request('POST', '/accounts', { account_id: id, name: `stress ${id}` });
  await admin.request('POST', `/accounts/${id}/subscription`, { plan_id: `plan-${id}` });
  const key = await admin.request('POST', `/accounts/${id}/keys`, { name: 'stress' });
  return { accountId: id, key: key.key as string, quota };
}

/** Every event (after a position), through the auditor's NDJSON export. */
export async function exportEvents(admin: AdminClient, after = 0): Promise<StoredEvent[]> {
  const res = await fetch(`${admin.origin}/admin/v1/events?after=${after}`, { headers: { authorization: `Bearer ${admin.token}` } });
  const text = await res.text();
  if (!res.ok) throw new Error(`admin GET /events: ${res.status} ${text.slice(0, 500)}`);
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as StoredEvent);
}

export interface Verification {
  ok: boolean;
  events: number;
  streams: number;
  chainProblems: unknown[];
  readModelDifferences: Array<{ table: string; key: string; live: unknown; rebuilt: unknown }>;
}

/** Verify; a 503 (the read models have not caught up with the log yet) is asked again, for up to a minute. */
export async function verify(admin: AdminClient): Promise<Verification> {
  for (const deadline = Date.now() + 60_000; ;) {
    try {
      return await admin.request<Verification>('POST', '/verify');
    } catch (err) {
      if (!/: 503 /.test(String(err)) || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }
}

export interface AccountRow {
  account_id: string;
  quota_total: number;
  quota_used: number;
  reserved: number;
  open_holds: number;
  extra_granted: number;
  extra_used: number;
}

export const accountRow = (admin: AdminClient, id: string) => admin.request<AccountRow>('GET', `/accounts/${id}`);

/** Waits until no event has been appended for `quietMs` (calls the clients gave up on may still run). */
export async function waitForQuiet(admin: AdminClient, quietMs = 3000, timeoutMs = 180_000): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  let head = (await exportEvents(admin)).at(-1)?.position ?? 0;
  let quietSince = Date.now();
  while (Date.now() < end) {
    await new Promise((r) => setTimeout(r, 500));
    const fresh = await exportEvents(admin, head);
    if (fresh.length) {
      head = fresh[fresh.length - 1].position;
      quietSince = Date.now();
    } else if (Date.now() - quietSince >= quietMs) return true;
  }
  return false;
}
