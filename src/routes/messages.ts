// POST /v1/messages and /v1/messages/count_tokens: the Anthropic Messages dialect (Claude Code,
// the Anthropic SDKs). Requests are translated into the canonical chat shape and metered by
// the shared chat core; replies, streams and errors are rendered the way Anthropic's API does.
import type { Context, Next } from 'koa';
import type { GatewayDeps } from '../gateway/deps.ts';
import { validateBody } from '../http/validate.ts';
import type { ApiError } from '../http/errors.ts';
import { resolveCallerModel } from '../gateway/model-access.ts';
import { prepareChat } from '../gateway/chat-call.ts';
import { openSse } from '../gateway/sse.ts';
import { setBillingHeaders } from '../gateway/billing-headers.ts';
import { countMessageTokens } from '../upstream/tokenizer.ts';
import {
  anthropicErrorBody, messageBody, messageId, messagesStreamRenderer, toCanonical, toCanonicalMessages, toCanonicalTools,
  type MessagesBody,
} from '../gateway/anthropic-messages.ts';

/** Mounted before auth on the Anthropic routes, so that every failure there, 401 included, is in Anthropic's shape. */
export async function anthropicErrors(ctx: Context, next: Next): Promise<void> {
  ctx.state.errorShape = (e: ApiError) => anthropicErrorBody(e, ctx.state.requestId as string | undefined);
  await next();
}

export function messages(deps: GatewayDeps) {
  return async (ctx: Context) => {
    const body = validateBody<MessagesBody>('messages', ctx.request.body);
    const canonical = toCanonical(body);
    const prepared = await prepareChat(deps, ctx, {
      ...canonical, api: 'messages', model: body.model, maxTokens: body.max_tokens, stream: !!body.stream,
    });
    const id = messageId();
    const model = prepared.model.id;
    if (!body.stream) {
      const { outcome } = await prepared.complete();
      ctx.body = messageBody(id, model, outcome);
      return;
    }
    const sse = openSse(ctx);
    setBillingHeaders(ctx, 0, await deps.metering.remaining(ctx.state.auth.accountId));
    prepared.stream(sse, messagesStreamRenderer(sse, id, model, prepared.promptTokens));
  };
}

/** Counts what a /v1/messages call with this body would send as input; nothing is charged. */
export function countTokens(deps: GatewayDeps) {
  return async (ctx: Context) => {
    const body = validateBody<Pick<MessagesBody, 'model' | 'messages' | 'system' | 'tools'>>('messages-count-tokens', ctx.request.body);
    await resolveCallerModel(deps, ctx, body.model);
    ctx.body = { input_tokens: countMessageTokens(toCanonicalMessages(body), toCanonicalTools(body.tools)) };
  };
}
