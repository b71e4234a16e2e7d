// The pages' one UI kit: every component under web/src (an exported function or constant whose
// name starts with a capital letter) is defined in one file only, so the console and /app share
// each piece instead of writing it twice.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const SOURCES = fileURLToPath(new URL('../web/src/', import.meta.url));
const DEFINITION = /^export\s+(?:default\s+)?(?:async\s+)?(?:function\s*\*?|const\s+|let\s+|class\s+)([A-Z][A-Za-z0-9_]*)/gm;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : /\.tsx?$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}

/** Each component name with the files that define it. */
function definitions(): Map<string, string[]> {
  const where = new Map<string, string[]>();
  for (const file of sources(SOURCES)) {
    for (const m of readFileSync(file, 'utf8').matchAll(DEFINITION)) {
      const files = where.get(m[1]) ?? [];
      files.push(relative(SOURCES, file));
      where.set(m[1], files);
    }
  }
  return where;
}

test('the scan finds the kit’s components', () => {
  const where = definitions();
  for (const name of ['Field', 'InputField', 'DataTable', 'ProblemRegion', 'FormActions', 'ProgressBar', 'Announcer', 'Result', 'Loading']) {
    assert.equal(where.get(name), [where.get(name)?.[0]], `${name} is defined once`);
    assert.match(where.get(name)![0], /^shared\//, `${name} lives in web/src/shared`);
  }
});

test('no component is defined in two files under web/src', () => {
  const twice = [...definitions()].filter(([, files]) => files.length > 1).map(([name, files]) => `${name}: ${files.join(', ')}`);
  assert.equal(twice, [], `defined more than once:\n${twice.join('\n')}`);
});

test.run();
