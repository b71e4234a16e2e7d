// POST /v1/responses: the OpenAI Responses dialect (Codex CLI, the openai SDK's responses.create).
// Stateless: nothing is stored, so the caller sends the whole conversation each time (Codex does,
// with store: false). Metering is the shared chat core's; errors keep the OpenAI shape.
import type { Context } from 'koa';
import type { CallDeps } from './call-deps.ts';
import { validateBody } from '../http/validate.ts';
import { withBilledTokens } from './billed-usage.ts';
import { chatCall, sendChatStream } from './metered-chat-routes.ts';
import { completedResponse, newId, responsesStreamRenderer, type ResponseShell } from './dialects/responses/render.ts';
import { toCanonical, type ResponsesBody } from './dialects/responses/request.ts';

export function responses(deps: CallDeps) {
  return async (ctx: Context) => {
    const body = await validateBody<ResponsesBody>('responses', ctx.request.body);
    const canonical = toCanonical(body);
    const id = newId('resp');
    const createdAt = Math.floor(Date.now() / 1000);
    const result = await chatCall(deps, ctx, {
      ...canonical,
      api: 'responses',
      model: body.model,
      maxTokens: body.max_output_tokens ?? undefined,
      stream: !!body.stream,
      body: body as unknown as Record<string, unknown>,
    });
    const shell: ResponseShell = {
      id,
      createdAt,
      model: result.model.id,
      body,
      reasoningEffort: canonical.reasoningEffort,
    };
    if (!result.stream) {
      const { reply, billing } = result;
      ctx.body = 'native' in reply ? reply.native.body : withBilledTokens(completedResponse(shell, reply.canonical), billing.billed);
      return;
    }
    await sendChatStream(deps, ctx, result, {
      renderer: (sse) => responsesStreamRenderer(sse, shell),
      // Codex and the SDK stop at an `error` event; its payload is the code and message.
      nativeError: (sse, message) => sse.event('error', { type: 'error', code: 'upstream_error', message, param: null, sequence_number: 0 }),
    });
  };
}
