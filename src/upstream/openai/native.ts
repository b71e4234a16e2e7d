// The pass-through side of the OpenAI provider: chat completions and Responses bodies forwarded
// in the caller's own dialect.
import { UpstreamError, type Dialect, type NativeCall, type NativeProvider, type NativeReply, type NativeStreamEvent } from '../port.ts';
import type { UpstreamTarget } from '../upstream-http.ts';
import { nativeChatCall, nativeChatStream } from './native-chat.ts';
import { responsesCall, responsesStream } from './responses.ts';

export const OPENAI_DIALECTS: ReadonlySet<Dialect> = new Set<Dialect>(['chat.completions', 'responses']);

function unsupported(dialect: Dialect): UpstreamError {
  // A routing mistake of the gateway's configuration, not the caller's.
  return new UpstreamError(`openai upstreams do not speak the ${dialect} dialect`, undefined, 'config');
}

export function createNativeOpenAI(target: UpstreamTarget): NativeProvider {
  return {
    dialects: OPENAI_DIALECTS,
    async call(call: NativeCall): Promise<NativeReply> {
      if (call.dialect === 'chat.completions') return nativeChatCall(target, call);
      if (call.dialect === 'responses') return responsesCall(target, call);
      throw unsupported(call.dialect);
    },
    stream(call: NativeCall): AsyncIterable<NativeStreamEvent> {
      if (call.dialect === 'chat.completions') return nativeChatStream(target, call);
      if (call.dialect === 'responses') return responsesStream(target, call);
      const error = unsupported(call.dialect);
      return { [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(error) }) };
    },
  };
}
