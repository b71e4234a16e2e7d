import { InvalidStreamNameError } from './errors.ts';

export const MAX_STREAM_NAME = 200;

export function assertStreamName(stream: string): void {
  if (typeof stream !== 'string' || stream.length === 0) throw new InvalidStreamNameError(String(stream), 'empty');
  if (stream.length > MAX_STREAM_NAME) throw new InvalidStreamNameError(stream, `longer than ${MAX_STREAM_NAME} characters`);
  if (stream.startsWith('$')) throw new InvalidStreamNameError(stream, 'names starting with $ are reserved');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f]/.test(stream)) throw new InvalidStreamNameError(stream, 'control characters');
}
