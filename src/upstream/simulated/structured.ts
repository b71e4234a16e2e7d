// Structured answers of the simulated upstream: JSON that validates against the caller's schema,
// built by json-schema-faker with a seed taken from the request, so the same request gets the
// same JSON. A JSON-object request gets the prose reply wrapped in an object.
import { generateSync } from 'json-schema-faker';
import { UpstreamError } from '../port.ts';
import type { ResponseFormat, Schema } from '../response-format.ts';

/**
 * The largest size a schema may demand of one value (minLength, minItems, minProperties, a
 * pattern's repeat count). More than this is far past any output cap, and generating it would
 * block the event loop (a million-character string takes ~0.6 s).
 */
const LARGEST_DEMAND = 4096;
/** Nesting the generator follows before it stops filling required properties (OpenAI allows 10 levels). */
const MAX_DEPTH = 16;
/** How deep the size check looks; a deeper schema is refused rather than walked without end. */
const MAX_SCHEMA_DEPTH = 64;

export function structuredText(format: ResponseFormat, seed: number, prose: () => string): string {
  if (format.type === 'json_object') return JSON.stringify({ answer: prose() });
  const tooLarge = excessiveDemand(format.schema, 0);
  if (tooLarge) throw unusable(format.name, tooLarge);
  try {
    return JSON.stringify(generateSync(format.schema, { seed, maxDepth: MAX_DEPTH }));
  } catch (error) {
    // An unknown type, a remote $ref (never fetched) and the like: the caller's schema is at fault.
    throw unusable(format.name, (error as Error).message);
  }
}

function unusable(name: string, why: string): UpstreamError {
  return new UpstreamError(`Invalid schema for response_format '${name}': ${why}`, 400, 'request');
}

/** What in the schema asks for more than LARGEST_DEMAND, or null. */
function excessiveDemand(schema: unknown, depth: number): string | null {
  if (typeof schema !== 'object' || schema === null) return null;
  if (depth > MAX_SCHEMA_DEPTH) return `it nests deeper than ${MAX_SCHEMA_DEPTH} levels`;
  if (Array.isArray(schema)) {
    for (const item of schema) {
      const found = excessiveDemand(item, depth + 1);
      if (found) return found;
    }
    return null;
  }
  const node = schema as Schema;
  for (const keyword of ['minLength', 'minItems', 'minProperties', 'minContains']) {
    const value = node[keyword];
    if (typeof value === 'number' && value > LARGEST_DEMAND) return `${keyword} ${value} is more than ${LARGEST_DEMAND}`;
  }
  if (typeof node.pattern === 'string') {
    for (const [, low, high] of node.pattern.matchAll(/\{(\d+)(?:,(\d*))?\}/g)) {
      if (Number(low) > LARGEST_DEMAND || Number(high ?? 0) > LARGEST_DEMAND) return `the pattern repeats more than ${LARGEST_DEMAND} times`;
    }
  }
  for (const value of Object.values(node)) {
    const found = excessiveDemand(value, depth + 1);
    if (found) return found;
  }
  return null;
}
