// A chat body whose bulk is one image inline as a base64 data URI: the largest legitimate body a
// model call carries (test/security-limits.test.ts and bench/worst-request.ts size it at the limit).
export function chatWithInlineImage(base64Chars: number): string {
  const url = `data:image/png;base64,${'A'.repeat(base64Chars)}`;
  return JSON.stringify({
    model: 'cx/gen-6-luna',
    max_tokens: 5,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'what is this?' },
          { type: 'image_url', image_url: { url } },
        ],
      },
    ],
  });
}
