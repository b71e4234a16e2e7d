// `tollgate cost …`: upstream cost rates, bill import and the bills reconciliation (src/catalogue/admin-cost-routes.ts).
import { readFileSync } from 'node:fs';
import { CliError, requiredArg as arg, type AdminClient, type CliArgs as Args, type CliOut as Out } from './admin-client.ts';

const PRICE_OPTIONS = {
  input: 'input',
  output: 'output',
  'cache-read': 'cache_read',
  'cache-write-5m': 'cache_write_5m',
  'cache-write-1h': 'cache_write_1h',
  image: 'image',
};

export async function runCostCommand(sub: string, p: Args, c: AdminClient, out: Out): Promise<void> {
  const v = p.values;
  switch (sub) {
    case 'cost rate': {
      const body: Record<string, unknown> = { channel: arg(p.positionals, 2, 'channel') };
      for (const [opt, field] of Object.entries(PRICE_OPTIONS)) if (typeof v[opt] === 'string') body[field] = v[opt];
      if (typeof v['effective-at'] === 'string') body.effective_at = v['effective-at'];
      if (typeof v.currency === 'string') body.currency = v.currency;
      const r = await c.json<Record<string, unknown>>('POST', '/cost-rates', body);
      return out(`rate ${r.event_id} for ${r.channel} from ${r.effective_at}: input ${r.input}, output ${r.output} ${r.currency} per million tokens`, r);
    }
    case 'cost rates': {
      const r = await c.json<{ data: Array<Record<string, unknown>> }>('GET', '/cost-rates');
      return out(
        r.data
          .map(
            (x) =>
              `${x.channel}\t${x.effective_at}\tinput=${x.input}\tcache_read=${x.cache_read}\tcache_write_5m=${x.cache_write_5m}\tcache_write_1h=${x.cache_write_1h}\toutput=${x.output}\timage=${x.image ?? '-'}`,
          )
          .join('\n') || '(no rates)',
        r,
      );
    }
    case 'cost import': {
      const path = arg(p.positionals, 4, 'file');
      const file = readFileSync(path, 'utf8');
      // --format, or the file's extension: a .csv file is the CSV export.
      const format = typeof v.format === 'string' ? v.format : /\.csv$/i.test(path) ? 'csv' : 'json';
      const r = await c.json<Record<string, unknown>>('POST', '/upstream-bills', {
        provider: arg(p.positionals, 2, 'provider'),
        channel: arg(p.positionals, 3, 'channel'),
        file,
        format,
      });
      return out(`bill ${r.id} ${r.already_imported ? 'was already imported' : 'imported'}: ${(r.lines as unknown[]).length} lines`, r);
    }
    case 'cost reconcile': {
      const format = (v.format as string | undefined) ?? 'json';
      if (format !== 'csv' && format !== 'json') throw new CliError(`--format must be csv or json, got '${format}'.`, 2);
      if (typeof v.from !== 'string' || typeof v.to !== 'string') throw new CliError('--from and --to are required.', 2);
      const res = await c.request('GET', `/upstream-bills/reconciliation?${new URLSearchParams({ from: v.from, to: v.to, format })}`);
      const text = await res.text();
      if (format === 'csv') return void process.stdout.write(text);
      const r = JSON.parse(text) as { lines: Array<Record<string, unknown>> };
      return out(
        r.lines
          .map(
            (l) =>
              `${l.day}\t${l.channel}\t${l.upstream_model}\t${l.status}\ttollgate=${l.tollgate_cost_minor}\tbill=${l.bill_cost_minor ?? '-'}\tdiff=${l.difference_minor ?? '-'}`,
          )
          .join('\n') || '(no lines)',
        r,
      );
    }
    default:
      throw new CliError(`Unknown command '${p.positionals.join(' ')}'.`, 2);
  }
}
