// A body refused as JSON.parse refuses it: by the parse in pieces (InvalidJson), or earlier by the
// body's reader (a 400 `invalid_json`: an empty item, a literal or key past its limit).
import { ApiError } from '../../src/http/errors.ts';
import { InvalidJson } from '../../src/http/json-long-strings.ts';

export const refusedAsJson = (err: unknown): boolean =>
  err instanceof InvalidJson || (err instanceof ApiError && err.status === 400 && err.code === 'invalid_json');
