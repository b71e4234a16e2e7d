// npm run schemas: writes schemas/events/, schemas/requests/ and schemas/responses/ from the shapes
// that declare them once (folders.ts names where). `--check` writes nothing and exits 1 naming
// every file that is missing, stale or left over (a test runs it, so CI fails on a stale file).
import { mkdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SCHEMA_FOLDERS, differences, expectedFiles, folderPath, type Difference } from './folders.ts';

const SAYS: Record<Difference, (source: string) => string> = {
  missing: (source) => `is missing (${source} declares it)`,
  stale: (source) => `is stale (it differs from what ${source} gives)`,
  'left over': (source) => `is left over (${source} declares no such shape)`,
};

/** What --check prints: one line per file that differs, in every folder. */
export function checkMessages(): string[] {
  return SCHEMA_FOLDERS.flatMap((folder) =>
    [...differences(folder)].map(([name, kind]) => `schemas/${folder.name}/${name} ${SAYS[kind](folder.source)}: npm run schemas rewrites it`),
  );
}

function write(): void {
  for (const folder of SCHEMA_FOLDERS) {
    const dir = folderPath(folder);
    mkdirSync(dir, { recursive: true });
    const expected = expectedFiles(folder);
    const found = differences(folder);
    for (const name of found.keys()) {
      const text = expected.get(name);
      if (text === undefined) unlinkSync(dir + name);
      else writeFileSync(dir + name, text);
    }
    console.log(`schemas/${folder.name}: ${found.size} file(s) written or removed, ${expected.size} in all`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--check')) {
    const messages = checkMessages();
    for (const line of messages) console.log(line);
    process.exit(messages.length > 0 ? 1 : 0);
  }
  write();
}
