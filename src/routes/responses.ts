// POST /v1/responses: the OpenAI Responses dialect (Codex CLI, the openai SDK's responses.create).
// Stateless: nothing is stored, so the caller sends the whole conversation each time (Codex does,
// with store: false). Metering is the shared chat core's; errors keep the OpenAI shape.
import type { Context } from 'koa';
import type { GatewayDeps } from '../gateway/deps.ts';
import { validateBody } from '../http/validate.ts';
import { prepareChat } from '../gateway/chat-call.ts';
import { withBilledTokens } from '../gateway/billed-usage.ts';
import { openSse } from '../gateway/sse.ts';
import { setRemainingHeader } from '../gateway/billing-headers.ts';
import { completedResponse, newId, responsesStreamRenderer, type ResponseShell } from '../dialects/responses/render.ts';
import { toCanonical, type ResponsesBody } from '../dialects/responses/request.ts';

export function responses(deps: GatewayDeps) {
  return async (ctx: Context) => {
    const body = await validateBody<ResponsesBody>('responses', ctx.request.body);
    const canonical = toCanonical(body);
    const prepared = await prepareChat(deps, ctx, {
      ...canonical,
      api: 'responses',
      model: body.model,
      maxTokens: body.max_output_tokens ?? undefined,
      stream: !!body.stream,
      body: body as unknown as Record<string, unknown>,
    });
    const shell: ResponseShell = {
      id: newId('resp'),
      createdAt: Math.floor(Date.now() / 1000),
      model: prepared.model.id,
      body,
      reasoningEffort: canonical.reasoningEffort,
    };
    if (!body.stream) {
      const { reply, billing } = await prepared.complete();
      ctx.body = 'native' in reply ? reply.native.body : withBilledTokens(completedResponse(shell, reply.canonical), billing.billed);
      return;
    }
    const stream = await prepared.openStream();
    const sse = openSse(ctx);
    setRemainingHeader(ctx, await deps.metering.remaining(ctx.state.auth.accountId));
    stream.pipe(sse, {
      renderer: () => responsesStreamRenderer(sse, shell),
      // Codex and the SDK stop at an `error` event; its payload is the code and message.
      nativeError: (message) => sse.event('error', { type: 'error', code: 'upstream_error', message, param: null, sequence_number: 0 }),
    });
  };
}
