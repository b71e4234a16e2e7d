// `tollgate fx …`: exchange rates into the settlement currency (src/books/exchange-rate-routes.ts).
import { CliError, requiredArg as arg, requiredOption as need, type AdminClient, type CliArgs as Args, type CliOut as Out } from './admin-client.ts';

interface RateRow {
  currency: string;
  rate: string;
  day: string;
  source: string;
}

/** One rate as a line: currency, day, rate (settlement units per one unit of the currency), source. */
const line = (r: RateRow, settlement: string | null) => `${r.currency}\t${r.day}\t${r.rate} ${settlement ?? '?'}/${r.currency}\t${r.source}`;

export async function runFxCommand(sub: string | undefined, p: Args, c: AdminClient, out: Out): Promise<void> {
  const v = p.values;
  switch (sub) {
    case 'set': {
      const currency = arg(p.positionals, 2, 'currency');
      // The rate goes as the string typed: a decimal is exact only as text.
      const body: Record<string, unknown> = { rate: need(v.rate, 'rate'), source: need(v.source, 'source') };
      if (v.day !== undefined) body.day = need(v.day, 'day');
      const r = await c.json<RateRow & { settlement: string }>('PUT', `/exchange-rates/${encodeURIComponent(currency)}`, body);
      return out(`rate set: ${line(r, r.settlement)}`, r);
    }
    case 'list': {
      const q = v.currency === undefined ? '' : `?${new URLSearchParams({ currency: need(v.currency, 'currency') })}`;
      const r = await c.json<{ settlement: string | null; data: RateRow[] }>('GET', `/exchange-rates${q}`);
      return out(r.data.map((x) => line(x, r.settlement)).join('\n') || '(no rates)', r);
    }
    default:
      throw new CliError(`Unknown command '${p.positionals.join(' ')}'.`, 2);
  }
}
