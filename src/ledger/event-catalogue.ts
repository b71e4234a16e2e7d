// Validates every event against its shape (event-shapes.ts) before it is appended.
import type { ValidateFunction } from 'ajv';
import { createAjv } from '../ajv.ts';
import { EVENT_METADATA, EVENT_SHAPES } from './event-shapes.ts';
import { InvalidEventError } from '../eventstore/errors.ts';
import type { NewEvent } from '../eventstore/port.ts';

const DRAFT_07 = 'http://json-schema.org/draft-07/schema#';

/** Each event type's JSON Schema as a document of its own (as schemas/events/<Type>.json holds it), and the metadata's as `_metadata`. */
export function eventSchemaDocuments(): Record<string, object> {
  // JSON round trip: the plain schema, without TypeBox's own (symbol) marks.
  const plain = (schema: object) => JSON.parse(JSON.stringify(schema)) as object;
  const documents: Record<string, object> = {
    _metadata: { $schema: DRAFT_07, $id: 'tollgate/events/metadata', title: 'EventMetadata', ...plain(EVENT_METADATA) },
  };
  for (const [type, shape] of Object.entries(EVENT_SHAPES))
    documents[type] = { $schema: DRAFT_07, $id: `tollgate/events/${type}`, title: type, ...plain(shape) };
  return documents;
}

function compileCatalogue(): { byType: Map<string, ValidateFunction>; metadata: ValidateFunction } {
  const ajv = createAjv();
  const { _metadata, ...byTypeDocuments } = eventSchemaDocuments();
  const byType = new Map<string, ValidateFunction>();
  for (const [type, document] of Object.entries(byTypeDocuments)) byType.set(type, ajv.compile(document));
  return { byType, metadata: ajv.compile(_metadata!) };
}

let compiled: ReturnType<typeof compileCatalogue> | null = null;

/** Throws InvalidEventError for an unknown type, bad data or bad metadata. */
export function validateEvent(event: NewEvent): void {
  compiled ??= compileCatalogue();
  const validate = compiled.byType.get(event.type);
  if (!validate) throw new InvalidEventError(event.type, 'unknown event type');
  if (!validate(event.data)) throw new InvalidEventError(event.type, ajvMessage(validate));
  if (!compiled.metadata(event.metadata)) throw new InvalidEventError(event.type, 'metadata ' + ajvMessage(compiled.metadata));
}

function ajvMessage(v: ValidateFunction): string {
  const e = v.errors?.[0];
  return e ? `${e.instancePath || '/'} ${e.message}` : 'invalid';
}
