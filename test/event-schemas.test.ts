// Each event's shape is declared once (src/ledger/event-shapes.ts): the JSON Schemas under
// schemas/events/ are written from it and must be current, and what the shapes describe is what
// every append accepts. Run alone with: node --import tsx test/event-schemas.test.ts
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { cpSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateSync, type JsonSchema } from 'json-schema-faker';
import { eventSchemaDocuments, validateEvent } from '../src/ledger/event-catalogue.ts';
import { belongsTo, streamEvent, streams, type DomainEvent, type StreamKind } from '../src/ledger/events.ts';
import { InvalidEventError } from '../src/eventstore/errors.ts';
import { SCHEMA_FOLDERS, differences, staleFiles } from '../tools/schemas/folders.ts';
import { checkMessages } from '../tools/schemas/write.ts';

const SCHEMA_DIR = fileURLToPath(new URL('../schemas/events/', import.meta.url));
const EVENTS = SCHEMA_FOLDERS.find((folder) => folder.name === 'events')!;
const METADATA = { correlationId: 'c-1', causationId: null, actor: 'test' };

function rejection(event: { type: string; data: unknown; metadata?: unknown }): string | null {
  try {
    validateEvent({ metadata: METADATA, ...event } as never);
    return null;
  } catch (err) {
    assert.instance(err, InvalidEventError);
    return (err as Error).message;
  }
}

test('the checked-in schemas/events/*.json are what the shapes give (npm run schemas)', () => {
  assert.equal(staleFiles(EVENTS), []);
});

test('npm run schemas -- --check finds every file of schemas/events, requests and responses current', () => {
  assert.equal(
    SCHEMA_FOLDERS.map((folder) => folder.name),
    ['events', 'requests', 'responses'],
  );
  assert.equal(checkMessages(), []);
});

test('a changed, a missing and a left-over schema file are each named', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-schemas-')) + '/';
  try {
    cpSync(SCHEMA_DIR, dir, { recursive: true });
    writeFileSync(dir + 'KeyIssued.json', '{}\n');
    unlinkSync(dir + 'PlanDefined.json');
    writeFileSync(dir + 'Gone.json', '{}\n');
    assert.equal(
      [...differences(EVENTS, dir)],
      [
        ['Gone.json', 'left over'],
        ['KeyIssued.json', 'stale'],
        ['PlanDefined.json', 'missing'],
      ],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('data generated from each shape is accepted; one property too many, or one missing, is refused', () => {
  const { _metadata, ...documents } = eventSchemaDocuments();
  for (const [type, document] of Object.entries(documents)) {
    for (let seed = 1; seed <= 5; seed++) {
      const data = generateSync(document as JsonSchema, { seed, alwaysFakeOptionals: seed % 2 === 0, maxItems: 4 }) as Record<string, unknown>;
      assert.is(rejection({ type, data }), null, `${type} seed ${seed}: ${JSON.stringify(data).slice(0, 300)}`);
      assert.match(rejection({ type, data: { ...data, unexpected: 1 } }) ?? '', /additional properties/, `${type}: an unknown property`);
      const required = (document as { required?: string[] }).required ?? [];
      if (required.length > 0) {
        const { [required[0]!]: _dropped, ...missing } = data;
        assert.match(rejection({ type, data: missing }) ?? '', /required property/, `${type}: ${required[0]} missing`);
      }
    }
  }
});

test('an unknown type and bad metadata are refused', () => {
  assert.match(rejection({ type: 'NoSuchEvent', data: {} }) ?? '', /unknown event type/);
  assert.match(rejection({ type: 'AccountOpened', data: { accountId: 'a1', name: 'A' }, metadata: { actor: 'x' } }) ?? '', /metadata/);
  assert.match(rejection({ type: 'AccountOpened', data: { accountId: 'a1', name: '' } }) ?? '', /name/);
});

test('every event type is held by exactly one kind of stream, and a foreign event read from a stream throws', () => {
  const { _metadata, ...documents } = eventSchemaDocuments();
  const kinds = Object.keys(streams) as StreamKind[];
  for (const type of Object.keys(documents)) {
    const holders = kinds.filter((kind) => belongsTo(kind, { type } as DomainEvent));
    assert.is(holders.length, 1, `${type} is held by ${holders.join(', ') || 'no stream'}`);
  }
  const opened: DomainEvent = { type: 'AccountOpened', data: { accountId: 'a1', name: 'A' } };
  assert.is(streamEvent('account', opened), opened);
  assert.throws(() => streamEvent('key', opened), /AccountOpened read from a key stream, which holds only KeyIssued, KeyRevoked, KeyRotated/);
});

test.run();
