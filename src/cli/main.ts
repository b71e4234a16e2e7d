// The `tollgate` command line: `serve` runs the gateway; the rest drive its admin API.
import { parseArgs } from 'node:util';
import { settingsFromEnv } from '../config.ts';
import { createLogger } from '../logger.ts';
import { LANDING_PAGES } from '../pages/web-routes.ts';
import { startGateway } from '../server.ts';
import { runProjector } from '../projector.ts';
import { CliError } from './admin-client.ts';
import { COMMAND_HELP, runAdminCommand } from './commands.ts';

/** The start-up banner, written in one piece so a reader of the pipe never sees half of it. */
function banner(gw: Awaited<ReturnType<typeof startGateway>>): string {
  const site = gw.baseUrl.replace(/\/v1\/?$/, '');
  const lines = [
    '',
    'Tollgate is listening.',
    gw.publicOrigin
      ? `  public origin (of sign-in links and redirects; TOLLGATE_PUBLIC_URL): ${gw.publicOrigin}`
      : '  no public origin: sign-in links are refused until TOLLGATE_PUBLIC_URL is set',
    `  base URL: ${gw.baseUrl}`,
    '  pages:',
    ...LANDING_PAGES.map((p) => `    ${site}${p.path}  ${p.what}`),
    gw.stripeOn
      ? '  payments: Stripe on (webhook at /webhooks/stripe); manual payments and redemption codes too'
      : '  payments: Stripe is off (STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET not set); manual payments and redemption codes work',
  ];
  if (gw.newAdminToken) lines.push(`  admin token (shown once; saved with mode 0600 in ${gw.newAdminToken.path}): ${gw.newAdminToken.token}`);
  if (gw.demo) {
    lines.push(`  demo API key (shown once, stored only as a hash): ${gw.demo.keySecret}`);
    if (gw.demo.books)
      lines.push(
        `  demo books: account demo-books bought the demo plan by a recorded transfer (${gw.demo.books.paid} minor units of ${gw.demo.books.currency}) and made ${gw.demo.books.calls} calls today at a cost rate: the console's Finance page shows revenue, deferred revenue, upstream cost and margin`,
      );
    lines.push(
      '',
      `  curl ${gw.baseUrl}/chat/completions -H "Authorization: Bearer ${gw.demo.keySecret}" -H "Content-Type: application/json" -d '{"model":"cx/gen-6-luna","messages":[{"role":"user","content":"Hello"}]}'`,
      '',
    );
  }
  return `${lines.join('\n')}\n`;
}

async function serve() {
  const gw = await startGateway(settingsFromEnv());
  process.stdout.write(banner(gw));
  const stop = async () => {
    await gw.close();
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

async function projector() {
  const settings = settingsFromEnv();
  const log = createLogger(settings);
  const p = await runProjector(settings, log);
  process.stdout.write('projector running\n');
  const stop = async () => {
    await p.stop();
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

const options = {
  url: { type: 'string' },
  token: { type: 'string' },
  actor: { type: 'string' },
  json: { type: 'boolean' },
  name: { type: 'string' },
  id: { type: 'string' },
  quota: { type: 'string' },
  'validity-days': { type: 'string' },
  rpm: { type: 'string' },
  models: { type: 'string' },
  plan: { type: 'string' },
  amount: { type: 'string' },
  reason: { type: 'string' },
  multiplier: { type: 'string' },
  status: { type: 'string' },
  alias: { type: 'string' },
  'no-alias': { type: 'boolean' },
  model: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  'dry-run': { type: 'boolean' },
  format: { type: 'string' },
  out: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  'cache-read-weight': { type: 'string' },
  'cache-write-weight': { type: 'string' },
  component: { type: 'string' },
  value: { type: 'string' },
  'also-from-now': { type: 'boolean' },
  full: { type: 'boolean' },
  events: { type: 'string' },
  thresholds: { type: 'string' },
  'expiring-days': { type: 'string' },
  limit: { type: 'string' },
  period: { type: 'string' },
  expires: { type: 'string' },
  'expires-in-days': { type: 'string' },
  priority: { type: 'string' },
  grace: { type: 'string' },
  pack: { type: 'string' },
  tokens: { type: 'string' },
  fee: { type: 'string' },
  reference: { type: 'string' },
  currency: { type: 'string' },
  count: { type: 'string' },
  input: { type: 'string' },
  output: { type: 'string' },
  'cache-read': { type: 'string' },
  'cache-write-5m': { type: 'string' },
  'cache-write-1h': { type: 'string' },
  image: { type: 'string' },
  'effective-at': { type: 'string' },
  since: { type: 'string' },
  event: { type: 'string' },
  rate: { type: 'string' },
  source: { type: 'string' },
  day: { type: 'string' },
} as const;

async function main(): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({ args: process.argv.slice(2), options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new CliError(`${(err as Error).message}\n\n${COMMAND_HELP}`, 2);
  }
  if (parsed.values.help) {
    process.stdout.write(COMMAND_HELP + '\n');
    return;
  }
  if (parsed.positionals.length === 0 || parsed.positionals[0] === 'serve') return serve();
  if (parsed.positionals[0] === 'projector') return projector();
  const json = !!parsed.values.json;
  await runAdminCommand(parsed, (human, data) => process.stdout.write((json ? JSON.stringify(data, null, 2) : human) + '\n'));
}

main().catch((err) => {
  process.stderr.write(`tollgate: ${err instanceof CliError ? err.message : (err as Error).stack}\n`);
  process.exit(err instanceof CliError ? err.exitCode : 1);
});
