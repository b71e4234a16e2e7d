// Validates every event against schemas/events/<Type>.json before it is appended.
import { readFileSync } from 'node:fs';
import type { ValidateFunction } from 'ajv';
import { createAjv } from '../ajv.ts';
import { EVENT_TYPES } from './events.ts';
import { InvalidEventError } from '../eventstore/errors.ts';
import type { NewEvent } from '../eventstore/port.ts';

const schemaDir = new URL('../../schemas/events/', import.meta.url);

function compileCatalogue(): { byType: Map<string, ValidateFunction>; metadata: ValidateFunction } {
  const ajv = createAjv();
  const load = (name: string) => JSON.parse(readFileSync(new URL(`${name}.json`, schemaDir), 'utf8'));
  const byType = new Map<string, ValidateFunction>();
  for (const type of EVENT_TYPES) byType.set(type, ajv.compile(load(type)));
  return { byType, metadata: ajv.compile(load('_metadata')) };
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
