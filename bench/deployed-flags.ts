// The V8 flags the gateway is deployed with, read from package.json's start script (the one
// definition; the Dockerfile's ENTRYPOINT and NODE_OPTIONS carry the same, checked by
// test/compose.test.ts), so a benchmark's gateway runs as `npm start` runs it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export function deployedNodeFlags(root: string): string[] {
  const start = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
  return start
    .split(' --import')[0]
    .split(' ')
    .filter((f) => f.startsWith('--'));
}
