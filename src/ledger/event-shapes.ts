// Every event's shape, declared once. TypeBox gives both the JSON Schema that ajv checks at every
// append (catalogue.ts; schemas/events/*.json is written from it by `npm run schemas`) and the
// TypeScript type the deciders use (events.ts), so the two cannot drift apart. Each feature's
// events are in a file of their own under event-shapes/; the base holds them (it checks every
// append), so no feature has to be imported here.
import { Type } from '@sinclair/typebox';
import { Text200 } from './event-atoms.ts';
import { ACCOUNT_EVENTS } from './event-shapes/accounts.ts';
import { KEY_EVENTS } from './event-shapes/keys.ts';
import { CALL_EVENTS } from './event-shapes/calls.ts';
import { CATALOGUE_EVENTS } from './event-shapes/catalogue.ts';
import { CORRECTION_EVENTS } from './event-shapes/corrections.ts';
import { BOOK_EVENTS } from './event-shapes/books.ts';
import { CUSTOMER_EVENTS } from './event-shapes/customers.ts';
import { WEBHOOK_EVENTS } from './event-shapes/webhooks.ts';

/** The data of each event type. */
export const EVENT_SHAPES = {
  ...ACCOUNT_EVENTS,
  ...KEY_EVENTS,
  ...CALL_EVENTS,
  ...CATALOGUE_EVENTS,
  ...CORRECTION_EVENTS,
  ...BOOK_EVENTS,
  ...CUSTOMER_EVENTS,
  ...WEBHOOK_EVENTS,
};

// A type declared in two files would keep only the later shape, silently.
const declaredTwice = Object.entries({
  ACCOUNT_EVENTS,
  KEY_EVENTS,
  CALL_EVENTS,
  CATALOGUE_EVENTS,
  CORRECTION_EVENTS,
  BOOK_EVENTS,
  CUSTOMER_EVENTS,
  WEBHOOK_EVENTS,
})
  .flatMap(([group, shapes]) => Object.keys(shapes).map((type) => ({ group, type })))
  .filter(({ type }, i, all) => all.findIndex((d) => d.type === type) !== i);
if (declaredTwice.length > 0) throw new Error(`event types declared twice: ${declaredTwice.map((d) => `${d.type} (again in ${d.group})`).join(', ')}`);

/** Who and what caused an event (every event's metadata). */
export const EVENT_METADATA = Type.Object(
  {
    correlationId: Text200,
    causationId: Type.Union([Type.String({ maxLength: 200 }), Type.Null()]),
    actor: Text200,
    requestId: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false, description: 'Who and what caused an event: the request or admin action that led to it.' },
);
