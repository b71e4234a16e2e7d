// The three folders of schemas/ that are written from TypeBox shapes, what each file should hold,
// and which files differ from that (missing, stale, or left over from a shape since removed).
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { eventSchemaDocuments } from '../../src/ledger/event-catalogue.ts';
import { requestSchemaDocuments, responseSchemaDocuments } from '../../src/calls/shapes/documents.ts';

export interface SchemaFolder {
  /** The folder under schemas/. */
  name: 'events' | 'requests' | 'responses';
  /** Where its shapes are declared (named in --check's messages). */
  source: string;
  documents(): Record<string, object>;
}

export const SCHEMA_FOLDERS: readonly SchemaFolder[] = [
  { name: 'events', source: 'src/ledger/event-shapes.ts', documents: eventSchemaDocuments },
  { name: 'requests', source: 'src/calls/shapes/request-shapes.ts', documents: requestSchemaDocuments },
  { name: 'responses', source: 'src/calls/shapes/response-shapes.ts', documents: responseSchemaDocuments },
];

export const folderPath = (folder: SchemaFolder): string => fileURLToPath(new URL(`../../schemas/${folder.name}/`, import.meta.url));

/** What each file of the folder should hold, by file name. */
export function expectedFiles(folder: SchemaFolder): Map<string, string> {
  return new Map(Object.entries(folder.documents()).map(([name, document]) => [`${name}.json`, JSON.stringify(document, null, 2) + '\n']));
}

export type Difference = 'missing' | 'stale' | 'left over';

/** The files of `dir` (the folder's own by default) that differ from what the shapes give, by name. */
export function differences(folder: SchemaFolder, dir = folderPath(folder)): Map<string, Difference> {
  const expected = expectedFiles(folder);
  const present = existsSync(dir) ? readdirSync(dir).filter((name) => name.endsWith('.json')) : [];
  const found = new Map<string, Difference>();
  for (const [name, text] of expected) {
    if (!present.includes(name)) found.set(name, 'missing');
    else if (readFileSync(dir + name, 'utf8') !== text) found.set(name, 'stale');
  }
  for (const name of present) if (!expected.has(name)) found.set(name, 'left over');
  return new Map([...found].sort(([a], [b]) => a.localeCompare(b)));
}

/** The names of the files that differ, sorted. */
export const staleFiles = (folder: SchemaFolder, dir?: string): string[] => [...differences(folder, dir).keys()];
