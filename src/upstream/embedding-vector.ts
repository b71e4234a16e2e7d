// OpenAI's base64 encoding of an embedding: the float32 values' little-endian bytes, base64.
// For upstreams that answer floats when the caller asked for base64 (the simulated one, Gemini).
export function base64Of(values: ArrayLike<number>): string {
  const bytes = Buffer.alloc(values.length * 4);
  for (let i = 0; i < values.length; i++) bytes.writeFloatLE(values[i]!, i * 4);
  return bytes.toString('base64');
}
