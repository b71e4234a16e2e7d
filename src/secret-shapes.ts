// Strings shaped like a secret, wherever a caller may have put one by mistake (a key pasted into
// the URL, the request id, an upstream echoing its own key in an error code): what the gateway
// logs or passes on is cut of them.
const SECRET_SHAPES = [
  // This gateway's API keys and admin tokens, and the usual upstream key prefixes (OpenAI sk-…, sk-proj-…, Anthropic sk-ant-…).
  /sk_svc_[A-Za-z0-9]{4,}/g,
  /sk_mgmt_[A-Za-z0-9_]{4,}/g,
  /tg_admin_[A-Za-z0-9_-]{4,}/g,
  /\bsk-[A-Za-z0-9_-]{8,}/g,
];
/** Any other long token: 40+ characters of base64url. */
const LONG_TOKEN = /[A-Za-z0-9_-]{40,}/g;
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

/** An id made of UUIDs and a short prefix (`req-<uuid>`, a trace id) is no secret, however long. */
const isIdLike = (token: string): boolean => token.replace(UUID, '').length < 16;

export function redactSecretShapes(text: string): string {
  let out = text;
  for (const shape of SECRET_SHAPES) out = out.replace(shape, '[redacted]');
  return out.replace(LONG_TOKEN, (token) => (isIdLike(token) ? token : '[redacted]'));
}

export const looksLikeSecret = (text: string): boolean => redactSecretShapes(text) !== text;
