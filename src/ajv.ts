// ajv and ajv-formats are CommonJS; under NodeNext their default exports need unwrapping once.
import { Ajv, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';

const addFormats = (addFormatsModule as unknown as { default: typeof addFormatsModule }).default ?? addFormatsModule;

export function createAjv(options: Options = {}): Ajv {
  const ajv = new Ajv({ allErrors: false, strict: true, ...options });
  (addFormats as unknown as (a: Ajv) => void)(ajv);
  return ajv;
}
