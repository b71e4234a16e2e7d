// An account's invoices and credit notes through the admin API, once `count` are issued (the issuer
// runs after the payment's append, or at the next sweep): what the invoice and tax tests read.
import * as assert from 'uvu/assert';
import { call } from './http.ts';

export async function documentsOf<D>(g: { url: string }, adminToken: string, accountId: string, count: number): Promise<D[]> {
  for (const until = Date.now() + 20_000; ;) {
    const r = await call(g, `/admin/v1/invoices?account_id=${accountId}&limit=1000`, { key: adminToken });
    assert.is(r.status, 200, r.text);
    const data = (r.json as { data: D[] }).data;
    if (data.length >= count || Date.now() > until) return data;
    await new Promise((res) => setTimeout(res, 100));
  }
}
