// No test bounds how fast something happened at 1 s or less: on a loaded machine such a bound
// fails although nothing is wrong. A test may check that something did not wait for a timeout,
// with a bound far below that timeout and far above the normal time (e.g. 10 s against 60 s);
// speed is measured by `npm run bench`. This reads every test source for an elapsed-time
// comparison (`Date.now() - t < N`, `performance.now() - t < N`, `took < N`) with N ≤ 1000 ms.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('.', import.meta.url).pathname;
const ELAPSED = /(?:(?:Date|performance)\.now\(\)\s*-\s*[\w.]+|\btook)\s*<=?\s*([\d_]+(?:\.\d+)?)/g;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? (d.name === 'node_modules' ? [] : sources(join(dir, d.name))) : d.name.endsWith('.ts') ? [join(dir, d.name)] : [],
  );
}

test('no elapsed-time bound of 1 s or less in any test', () => {
  const found: string[] = [];
  for (const file of sources(root)) {
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        for (const m of line.matchAll(ELAPSED)) if (Number(m[1].replace(/_/g, '')) <= 1000) found.push(`${file.slice(root.length)}:${i + 1}: ${line.trim()}`);
      });
  }
  assert.equal(found, [], `timing bounds of 1 s or less:\n${found.join('\n')}`);
});

test.run();
