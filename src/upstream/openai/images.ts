// image: OpenAI's own image API, /images/generations and (multipart) /images/edits.
import { UpstreamError, type ImageCall, type ImageOutcome } from '../port.ts';
import { readJson, send, type UpstreamTarget } from '../upstream-http.ts';
import { assertSourceImage } from '../image-source.ts';
import { normaliseUpstreamImage } from '../image-output.ts';
import { isObject } from './json.ts';

// gpt-image models always answer in base64 and refuse `response_format`; DALL·E models answer
// with a URL unless asked for base64.
const needsResponseFormat = (model: string): boolean => /^dall-e/i.test(model);

export async function image(target: UpstreamTarget, call: ImageCall): Promise<ImageOutcome> {
  const op = 'image';
  const fields: Record<string, string> = { model: call.upstreamModel, prompt: call.prompt, size: call.size, n: '1' };
  if (needsResponseFormat(call.upstreamModel)) fields.response_format = 'b64_json';
  let path = '/images/generations';
  let body: string | FormData;
  if (call.source) {
    // A source that is not an image is the caller's fault (InvalidImageError), found before any upstream call.
    const format = await assertSourceImage(call.source.bytes);
    const form = new FormData();
    for (const [name, value] of Object.entries(fields)) form.set(name, value);
    form.set('image', new Blob([new Uint8Array(call.source.bytes)], { type: `image/${format}` }), `image.${format === 'jpeg' ? 'jpg' : format}`);
    path = '/images/edits';
    body = form;
  } else {
    body = JSON.stringify({ ...fields, n: 1 });
  }
  const { response, deadline } = await send(target, { op, path, body, signal: call.signal, secrets: [call.prompt] });
  const json = await readJson(response, op, call.signal, deadline);
  const first = isObject(json) && Array.isArray(json.data) ? json.data[0] : undefined;
  const b64 = isObject(first) ? first.b64_json : undefined;
  if (typeof b64 !== 'string' || b64 === '') throw new UpstreamError(`upstream ${op} returned no data[0].b64_json`);
  return { jpeg: await normaliseUpstreamImage(Buffer.from(b64, 'base64'), call.size) };
}
