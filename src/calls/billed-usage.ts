// What a call cost, in its reply's own usage object: `usage.billed_tokens` (chat completions,
// Messages, Responses), or `response.usage.billed_tokens` in a Responses stream's final event.
// Pass-through replies are the upstream's own bodies: only this one field is added to them.
// A chat completions stream whose caller did not ask for usage (`stream_options.include_usage`)
// has no usage object to put it in: its final chunk carries a top-level `billed_tokens` instead.

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The body with `billed_tokens` added to its usage (top-level, or of its `response`); unchanged if it has none. */
export function withBilledTokens<T extends Json>(body: T, billed: number): T {
  if (isObject(body.usage)) return { ...body, usage: { ...body.usage, billed_tokens: billed } };
  const response = body.response;
  if (isObject(response) && isObject(response.usage)) return { ...body, response: { ...response, usage: { ...response.usage, billed_tokens: billed } } };
  return body;
}

/**
 * A pass-through stream event's data line with `billed_tokens` added to the usage it carries; a
 * chat completion chunk without usage gets it as a top-level field. As is otherwise, or if not JSON.
 */
export function eventWithBilledTokens(data: string, billed: number): string {
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    return data;
  }
  if (!isObject(json)) return data;
  let out = withBilledTokens(json, billed);
  if (out === json && Array.isArray(json.choices)) out = { ...json, billed_tokens: billed };
  return out === json ? data : JSON.stringify(out);
}
