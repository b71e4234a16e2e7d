// POST /v1/messages and /v1/messages/count_tokens: the Anthropic Messages dialect (Claude Code,
// the Anthropic SDKs). Requests are translated into the canonical chat shape and metered by
// the shared chat core; replies, streams and errors are rendered the way Anthropic's API does.
import type { Context, Next } from 'koa';
import type { CallDeps } from './call-deps.ts';
import { validateBody } from '../http/validate.ts';
import type { ApiError } from '../http/errors.ts';
import { resolveCallerModel } from './model-access.ts';
import { withBilledTokens } from './billed-usage.ts';
import { chatCall, sendChatStream } from './metered-chat-routes.ts';
import { countMessageTokensYielding } from '../upstream/tokenizer.ts';
import { withFailover } from '../upstream/channels/failover.ts';
import { abortWhenClientGone } from '../http/client-gone.ts';
import {
  anthropicErrorBody,
  messageBody,
  messageId,
  messagesStreamRenderer,
  toCanonical,
  toCanonicalMessages,
  toCanonicalTools,
  type MessagesBody,
} from './dialects/anthropic-messages/render.ts';
import { keyCallerOf } from '../http/state.ts';

/**
 * The beta features the caller asked for (Claude Code sends several): an Anthropic channel gets
 * them with the body, whose beta-only fields they allow. Only well-formed feature names pass.
 */
function betaHeaders(ctx: Context): Record<string, string> | undefined {
  const beta = ctx.get('anthropic-beta').trim();
  return beta && beta.length <= 1000 && /^[A-Za-z0-9._-]+(\s*,\s*[A-Za-z0-9._-]+)*$/.test(beta) ? { 'anthropic-beta': beta } : undefined;
}

/** Mounted before auth on the Anthropic routes, so that every failure there, 401 included, is in Anthropic's shape. */
export async function anthropicErrors(ctx: Context, next: Next): Promise<void> {
  ctx.state.errorShape = (e: ApiError) => anthropicErrorBody(e, ctx.state.requestId);
  await next();
}

export function messages(deps: CallDeps) {
  return async (ctx: Context) => {
    const body = await validateBody<MessagesBody>('messages', ctx.request.body);
    const canonical = toCanonical(body);
    const id = messageId();
    const result = await chatCall(deps, ctx, {
      ...canonical,
      api: 'messages',
      model: body.model,
      maxTokens: body.max_tokens,
      stream: !!body.stream,
      body: body as unknown as Record<string, unknown>,
      headers: betaHeaders(ctx),
    });
    const model = result.model.id;
    if (!result.stream) {
      const { reply, billing } = result;
      ctx.body = 'native' in reply ? reply.native.body : withBilledTokens(messageBody(id, model, reply.canonical), billing.billed);
      return;
    }
    await sendChatStream(deps, ctx, result, {
      renderer: (sse) => messagesStreamRenderer(sse, id, model, result.promptTokens),
      nativeError: (sse, message) => sse.event('error', { type: 'error', error: { type: 'api_error', message } }),
    });
  };
}

/**
 * Counts what a /v1/messages call with this body would send as input; nothing is charged. A model
 * served by an Anthropic channel is counted by that upstream (its own tokenizer); if it cannot
 * answer, or the model has no such channel, the gateway's tokenizer counts.
 */
export function countTokens(deps: CallDeps) {
  return async (ctx: Context) => {
    const body = await validateBody<Pick<MessagesBody, 'model' | 'messages' | 'system' | 'tools'>>('messages-count-tokens', ctx.request.body);
    const model = await resolveCallerModel(deps, keyCallerOf(ctx), body.model, deps.baseUrl(ctx));
    ctx.state.model = model.id;
    const signal = abortWhenClientGone(ctx).signal;
    const counted = await withFailover(
      model.route.channels,
      { registry: deps.channels, signal, capable: (c) => !!c.provider.native?.countTokens && c.provider.native.dialects.has('messages') },
      (c) =>
        c.provider.native!.countTokens!({
          dialect: 'messages',
          upstreamModel: c.upstreamModel,
          publicModel: model.id,
          body: body as unknown as Record<string, unknown>,
          signal,
          headers: betaHeaders(ctx),
        }),
    ).then(
      (r) => r.value,
      () => null,
    );
    ctx.body = { input_tokens: counted ?? (await countMessageTokensYielding(toCanonicalMessages(body), toCanonicalTools(body.tools))) };
  };
}
