// POST /v1/embeddings: OpenAI's request and reply. Metered like a chat call without completion:
// the input's tokens are held (at the model's multiplier) before any upstream is asked, the
// channels that make embeddings are tried with failover, and the tokens the upstream counted are
// charged (a ChatCharged with api "embeddings"), durably before the reply.
import type { Context } from 'koa';
import type { CallDeps } from './call-deps.ts';
import { validateBody } from '../http/validate.ts';
import { badRequest } from '../http/errors.ts';
import { resolveCallerModel } from './model-access.ts';
import { keyCallerOf } from '../http/state.ts';
import { applyRateHeaders } from '../http/rate-limit.ts';
import { abortWhenClientGone } from '../http/client-gone.ts';
import { setBillingHeaders } from '../http/billing-headers.ts';
import { callTraceOf } from '../http/call-spans.ts';
import { releaseReasonOf } from './metering.ts';
import { failedAttemptsOf, withFailover } from '../upstream/channels/failover.ts';
import { countEmbeddingTokensYielding } from '../upstream/tokenizer.ts';
import { inSpan, noteUsage } from '../tracing/spans.ts';
import type { EmbedOutcome } from '../upstream/port.ts';
import type { EmbeddingsRequest } from './shapes/request-shapes.ts';

export function embeddings(deps: CallDeps) {
  return async (ctx: Context) => {
    const body = await validateBody<EmbeddingsRequest>('embeddings', ctx.request.body);
    const caller = keyCallerOf(ctx);
    const model = await resolveCallerModel(deps, caller, body.model, deps.baseUrl(ctx));
    ctx.state.model = model.id;
    // A model none of whose channels makes embeddings is the caller's mistake: refused before any hold.
    if (!model.route.channels.some((c) => c.provider.embed))
      throw badRequest(`The model '${model.id}' does not make embeddings: use one of your embedding models.`, 'model', 'model_not_supported');
    await deps.metering.refuseEarly(caller, model.id, model);
    const inputTokens = await countEmbeddingTokensYielding(body.input);
    const trace = callTraceOf(ctx);
    // Committed before the upstream is asked (an embedding is quick; nothing to gain by starting early).
    const hold = await inSpan('tollgate.hold', { 'tollgate.prompt_tokens_counted': inputTokens }, trace, async (span) => {
      const h = await deps.metering.reserveChat(caller, model.id, model, inputTokens, 1, { early: false });
      span.setAttribute('tollgate.hold.tokens', h.amount);
      return h;
    });
    applyRateHeaders(ctx, hold.rate);
    const abort = abortWhenClientGone(ctx);
    const encodingFormat = body.encoding_format ?? 'float';
    let made: Awaited<ReturnType<typeof withFailover<EmbedOutcome>>>;
    try {
      made = await withFailover(
        model.route.channels,
        { registry: deps.channels, signal: abort.signal, capable: (c) => !!c.provider.embed, operation: 'embeddings', trace },
        (channel) =>
          channel.provider.embed!({
            upstreamModel: channel.upstreamModel,
            input: body.input,
            encodingFormat,
            dimensions: body.dimensions,
            user: body.user,
            signal: abort.signal,
          }),
      );
    } catch (err) {
      await deps.metering.release(hold, releaseReasonOf(err, abort.signal.aborted), failedAttemptsOf(err));
      throw err;
    }
    const usage = { prompt_tokens: made.value.promptTokens, completion_tokens: 0 };
    const trail = { channel: made.channel.id, upstreamModel: made.channel.upstreamModel, upstreamId: null, failovers: made.failed };
    const billing = await inSpan('tollgate.charge', { 'tollgate.channel': made.channel.id }, trace, async (span) => {
      const b = await deps.metering.settleChat(hold, usage, { reasoningEffort: null, api: 'embeddings', streamed: false, aborted: false, trail });
      span.setAttribute('tollgate.billed_tokens', b.billed);
      return b;
    });
    noteUsage(trace, usage, billing.billed);
    setBillingHeaders(ctx, billing.billed, billing.remaining);
    ctx.body = {
      object: 'list',
      data: made.value.vectors.map((embedding, index) => ({ object: 'embedding', index, embedding })),
      model: model.id,
      usage: { prompt_tokens: usage.prompt_tokens, total_tokens: usage.prompt_tokens, billed_tokens: billing.billed },
    };
  };
}
