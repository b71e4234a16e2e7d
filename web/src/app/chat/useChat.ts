// The conversation's logic: a streamed chat turn (POST /v1/chat/completions with stream and
// usage), an image turn (POST /v1/images/generations or /edits, b64 JSON), Stop, and a new
// conversation. A failed turn throws its ApiProblem to the page (which shows it) after marking
// the bubbles: a reply cut off keeps its words; an unanswered message says so.
import { useRef, useState } from 'preact/hooks';
import { fmt } from '../../shared/format.ts';
import { ApiProblem, clientProblem } from '../../shared/problem.ts';
import { v1 } from '../../shared/v1.ts';
import { jpegBlob, newMessage, type Message } from './messages.ts';
import { sseData } from './sse.ts';

export const MAX_IMAGE_PROMPT = 8000;

interface Turn {
  role: 'user' | 'assistant';
  content: string;
}

export interface ChatTurn {
  model: string;
  multiplier: number;
  effort: string;
}

export interface ImageTurn {
  model: string;
  size: string;
  /** A data URI (a chosen file) or an https URL; null draws a new image. */
  source: string | null;
  sourceIsFile: boolean;
}

export function useChat() {
  const [messages, setMessages] = useState<Message[]>([]);
  const [busy, setBusy] = useState(false);
  const [cleared, setCleared] = useState(false);
  const history = useRef<Turn[]>([]);
  const inFlight = useRef<AbortController | null>(null);
  const imageUrls = useRef<string[]>([]);

  const add = (m: Omit<Message, 'id'>) => {
    const msg = newMessage(m);
    setMessages((all) => [...all, msg]);
    return msg.id;
  };
  const update = (id: number, change: Partial<Message>) => setMessages((all) => all.map((m) => (m.id === id ? { ...m, ...change } : m)));
  const drop = (id: number) => setMessages((all) => all.filter((m) => m.id !== id));
  const begin = () => {
    const controller = new AbortController();
    inFlight.current = controller;
    setBusy(true);
    return controller;
  };
  const end = () => {
    inFlight.current = null;
    setBusy(false);
  };

  async function sendChat(text: string, turn: ChatTurn): Promise<void> {
    const messages = [...history.current, { role: 'user' as const, content: text }];
    const userId = add({ role: 'user', text });
    const id = add({ role: 'assistant', state: 'streaming', pending: 'Waiting for the reply…' });
    const controller = begin();
    let content = '';
    let usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null = null;
    let finished = false;
    try {
      const body = {
        model: turn.model,
        messages,
        stream: true,
        stream_options: { include_usage: true },
        ...(turn.effort !== 'none' ? { reasoning_effort: turn.effort } : {}),
      };
      const res = await v1.call('chat/completions', { method: 'POST', signal: controller.signal, body });
      for await (const data of sseData(res)) {
        if (data === '[DONE]') {
          finished = true;
          break;
        }
        let chunk;
        try {
          chunk = JSON.parse(data);
        } catch {
          continue;
        }
        if (chunk.error) throw new ApiProblem(chunk.error.type === 'upstream_error' ? 502 : 500, chunk.error);
        const delta = chunk.choices?.[0]?.delta?.content;
        if (delta) {
          content += delta;
          update(id, { pending: undefined, text: content });
        }
        if (chunk.usage) usage = chunk.usage;
      }
      if (!finished)
        throw new ApiProblem(502, { message: 'The reply stream ended before it was complete.', type: 'upstream_error', code: 'stream_incomplete' });
      history.current = [...messages, { role: 'assistant', content }];
      const meta = [turn.model, turn.effort !== 'none' ? `effort ${turn.effort}` : null];
      if (usage)
        meta.push(
          `${fmt(usage.prompt_tokens)} in + ${fmt(usage.completion_tokens)} out = ${fmt(usage.total_tokens)} tokens`,
          `≈ ${fmt(Math.ceil(usage.total_tokens * turn.multiplier))} billed (×${turn.multiplier})`,
        );
      update(id, { state: 'done', pending: undefined, ...(content ? {} : { text: '(empty reply)', muted: true }), meta: meta.filter(Boolean).join(' · ') });
    } catch (err) {
      if ((err as Error)?.name === 'AbortError') {
        if (content) history.current = [...messages, { role: 'assistant', content }];
        update(id, {
          state: 'stopped',
          pending: undefined,
          ...(content ? {} : { text: 'Stopped before the reply began.', muted: true }),
          meta: 'Stopped: you are charged for the prompt and the part already received.',
        });
        return;
      }
      if (content) update(id, { state: 'failed', meta: 'The reply was cut off: see the error below.', metaWarn: true });
      else {
        drop(id);
        update(userId, { failed: true, meta: 'Not answered: see the error below. Your text is back in the message box.', metaWarn: true });
      }
      throw err;
    } finally {
      end();
    }
  }

  async function sendImage(text: string, turn: ImageTurn): Promise<void> {
    if (text.length > MAX_IMAGE_PROMPT)
      throw clientProblem(`The image prompt is ${fmt(text.length)} characters; the limit is ${fmt(MAX_IMAGE_PROMPT)}. Shorten it and try again.`, 'prompt');
    const { model, size, source } = turn;
    const userId = add({
      role: 'user',
      text,
      ...(source && turn.sourceIsFile ? { sourceThumb: source } : source ? { sourceUrl: source } : {}),
    });
    const id = add({
      role: 'assistant',
      state: 'working',
      pending: source ? 'Editing the image… this takes about 10 to 20 seconds.' : 'Drawing the image… this takes about 10 to 20 seconds.',
    });
    const controller = begin();
    try {
      const res = await v1.call(source ? 'images/edits' : 'images/generations', {
        method: 'POST',
        signal: controller.signal,
        body: { model, prompt: text, size, n: 1, response_format: 'b64_json', ...(source ? { image: source } : {}) },
      });
      const billed = res.headers.get('x-tollgate-billed-tokens');
      const b64 = (await res.json())?.data?.[0]?.b64_json;
      if (typeof b64 !== 'string' || !b64)
        throw new ApiProblem(502, { message: 'The gateway answered without an image.', type: 'upstream_error', code: 'no_image' });
      const href = URL.createObjectURL(jpegBlob(b64));
      imageUrls.current.push(href);
      const [width, height] = size.split('x').map(Number);
      const stamp = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
      update(id, {
        state: 'done',
        pending: undefined,
        image: { href, width, height, alt: `Generated image: ${text.slice(0, 200)}`, fileName: `tollgate-${stamp}.jpg` },
        meta: [model, size.replace('x', ' × '), source ? 'edit' : null, billed ? `${fmt(Number(billed))} tokens billed` : null].filter(Boolean).join(' · '),
      });
    } catch (err) {
      drop(id);
      if ((err as Error)?.name === 'AbortError') {
        update(userId, { failed: true, meta: 'Stopped: nothing was charged.' });
        return;
      }
      update(userId, { failed: true, meta: 'No image: see the error below. Your prompt is back in the box.', metaWarn: true });
      throw err;
    } finally {
      end();
    }
  }

  function reset() {
    inFlight.current?.abort();
    history.current = [];
    for (const url of imageUrls.current.splice(0)) URL.revokeObjectURL(url);
    setMessages([]);
    setCleared(true);
  }

  return { messages, busy, cleared, sendChat, sendImage, stop: () => inFlight.current?.abort(), reset };
}
