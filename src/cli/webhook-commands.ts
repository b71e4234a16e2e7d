// `tollgate webhook …`: the webhook admin API (src/webhooks/admin-webhooks-routes.ts) from the command line.
import { CliError, requiredArg as arg, type AdminClient, type CliArgs as Args, type CliOut as Out } from './admin-client.ts';

const list = (v: string | boolean | undefined) =>
  typeof v === 'string'
    ? v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : undefined;

function wholeNumbers(v: string | boolean | undefined, name: string): number[] | undefined {
  const items = list(v);
  if (!items) return undefined;
  if (!items.every((s) => /^\d+$/.test(s))) throw new CliError(`--${name} must be whole numbers separated by commas, e.g. 80,90,100.`, 2);
  return items.map(Number);
}

type Delivery = {
  delivery_id: string;
  type: string;
  status: string;
  attempts: number;
  created_at: string;
  response_status: number | null;
  last_error: string | null;
  notification_id: string;
};

const deliveryLine = (d: Delivery) =>
  `${d.delivery_id}\t${d.type}\t${d.status}\tattempts=${d.attempts}\tcreated=${d.created_at}\tresponse=${d.response_status ?? '-'}${d.last_error ? `\terror=${d.last_error}` : ''}`;

export async function runWebhookCommand(sub: string, p: Args, c: AdminClient, out: Out): Promise<void> {
  const v = p.values;
  const account = (i: number) => encodeURIComponent(arg(p.positionals, i, 'account'));
  switch (sub) {
    case 'add': {
      const body: Record<string, unknown> = { url: arg(p.positionals, 3, 'url') };
      if (v.events !== undefined) body.events = list(v.events);
      if (v.thresholds !== undefined) body.thresholds = wholeNumbers(v.thresholds, 'thresholds');
      if (v['expiring-days'] !== undefined) {
        const days = String(v['expiring-days']);
        if (!/^\d+$/.test(days)) throw new CliError('--expiring-days must be a whole number.', 2);
        body.expiring_days = Number(days);
      }
      const r = await c.json<Record<string, unknown>>('POST', `/accounts/${account(2)}/webhooks`, body);
      return out(
        `webhook ${r.webhook_id} registered for ${r.account_id}: ${(r.events as string[]).join(', ')}\nSigning secret (shown once, store it now):\n${r.secret}`,
        r,
      );
    }
    case 'list': {
      const r = await c.json<{ data: Array<Record<string, unknown>> }>('GET', `/accounts/${account(2)}/webhooks`);
      return out(
        r.data
          .map(
            (w) =>
              `${w.webhook_id}\t${w.url}\tevents=${(w.events as string[]).join(',')}\tthresholds=${(w.thresholds as number[]).join(',')}\texpiring_days=${w.expiring_days}`,
          )
          .join('\n') || '(no webhooks)',
        r,
      );
    }
    case 'remove': {
      const id = arg(p.positionals, 3, 'webhook-id');
      const reason = typeof v.reason === 'string' ? `?${new URLSearchParams({ reason: v.reason })}` : '';
      const r = await c.json('DELETE', `/accounts/${account(2)}/webhooks/${encodeURIComponent(id)}${reason}`);
      return out(`webhook ${id} removed; its queued deliveries are cancelled`, r);
    }
    case 'deliveries': {
      const q = new URLSearchParams();
      if (v.status !== undefined) q.set('status', String(v.status));
      if (v.limit !== undefined) q.set('limit', String(v.limit));
      const r = await c.json<{ data: Delivery[] }>(
        'GET',
        `/webhooks/${encodeURIComponent(arg(p.positionals, 2, 'webhook-id'))}/deliveries${q.toString() ? `?${q}` : ''}`,
      );
      return out(r.data.map(deliveryLine).join('\n') || '(no deliveries)', r);
    }
    case 'replay': {
      const id = arg(p.positionals, 2, 'webhook-id');
      const d = await c.json<Delivery>(
        'POST',
        `/webhooks/${encodeURIComponent(id)}/deliveries/${encodeURIComponent(arg(p.positionals, 3, 'delivery-id'))}/replay`,
      );
      return out(`delivery ${d.delivery_id} queued again (notification ${d.notification_id})`, d);
    }
    default:
      throw new CliError(`Unknown webhook command '${sub}'.`, 2);
  }
}
