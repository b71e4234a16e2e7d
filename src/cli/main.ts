// The `tollgate` command line.
import { settingsFromEnv } from '../config.ts';
import { startGateway } from '../server.ts';

async function serve() {
  const settings = settingsFromEnv();
  const gw = await startGateway(settings);
  process.stdout.write(`\nTollgate is listening.\n  base URL: ${gw.baseUrl}\n`);
  if (gw.demo) {
    process.stdout.write(`  demo API key (shown once, stored only as a hash): ${gw.demo.keySecret}\n\n`);
    process.stdout.write(`  curl ${gw.baseUrl}/chat/completions -H "Authorization: Bearer ${gw.demo.keySecret}" -H "Content-Type: application/json" -d '{"model":"cx/gen-6-luna","messages":[{"role":"user","content":"Hello"}]}'\n\n`);
  }
  const stop = async () => { await gw.close(); process.exit(0); };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

const [command = 'serve'] = process.argv.slice(2);
const commands: Record<string, () => Promise<void>> = { serve };
if (!commands[command]) {
  process.stderr.write(`tollgate: unknown command '${command}'. Commands: ${Object.keys(commands).join(', ')}\n`);
  process.exit(2);
}
await commands[command]();
