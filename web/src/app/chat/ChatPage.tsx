// The chat page: streamed chat completions and image generation or editing against this gateway
// with the key saved in this browser; the quota in the header, refreshed after every call; every
// error as what went wrong and what to do, in the page's alert region.
import { useEffect, useRef, useState } from 'preact/hooks';
import { KeyBar, type KeyBarControl } from '../../shared/components/KeyBar.tsx';
import { ProblemRegion } from '../../shared/components/ProblemBox.tsx';
import { QuotaBadge } from '../../shared/components/QuotaBadge.tsx';
import { Topbar } from '../../shared/components/Topbar.tsx';
import { useKey } from '../../shared/key.ts';
import { ApiProblem, clientProblem } from '../../shared/problem.ts';
import { getPref, setPref } from '../../shared/storage.ts';
import { v1, type Subscription } from '../../shared/v1.ts';
import { Composer } from './Composer.tsx';
import { Conversation } from './Conversation.tsx';
import { Settings, type Mode, type ModelList } from './Settings.tsx';
import { NO_SOURCE, type Source } from './SourceImage.tsx';
import { useChat } from './useChat.ts';

export function ChatPage() {
  const key = useKey();
  const keyBar = useRef<KeyBarControl | null>(null);
  const prompt = useRef<HTMLTextAreaElement>(null);
  const [mode, setMode] = useState<Mode>(() => (getPref('mode', 'chat') === 'image' ? 'image' : 'chat'));
  const [list, setList] = useState<ModelList>({ state: 'no-key', models: [] });
  const [model, setModel] = useState(() => getPref('model', ''));
  const [effort, setEffort] = useState(() => getPref('effort', 'none'));
  const [size, setSize] = useState(() => getPref('size', '1024x1024'));
  const [source, setSource] = useState<Source>(NO_SOURCE);
  const [text, setText] = useState('');
  const [problem, setProblem] = useState<unknown>(null);
  const [quota, setQuota] = useState<{ sub: Subscription | null; error: ApiProblem | null }>({ sub: null, error: null });
  const [modelLoads, setModelLoads] = useState(0);
  const chat = useChat();

  const refreshQuota = () =>
    v1.json<Subscription>('subscription').then(
      (sub) => setQuota({ sub, error: null }),
      (error: ApiProblem) => setQuota({ sub: null, error }),
    );

  // A new key starts afresh: the old key's error and quota go.
  useEffect(() => {
    setProblem(null);
    setQuota({ sub: null, error: null });
  }, [key]);

  useEffect(() => {
    if (!key) return setList({ state: 'no-key', models: [] });
    let current = true;
    setList({ state: 'loading', models: [] });
    v1.json<{ data?: Array<{ id: string; multiplier?: number }> }>('models').then(
      (res) => {
        if (!current) return;
        const models = (Array.isArray(res.data) ? res.data : []).map((m) => ({ id: m.id, multiplier: Number(m.multiplier ?? 1) }));
        setList({ state: models.length ? 'ready' : 'empty', models });
        setModel((wanted) => (models.some((m) => m.id === wanted) ? wanted : (models[0]?.id ?? '')));
      },
      (err) => {
        if (!current) return;
        setList({ state: 'failed', models: [] });
        setProblem(err);
      },
    );
    refreshQuota();
    return () => {
      current = false;
    };
  }, [key, modelLoads]);

  const remember =
    <T extends string>(name: string, set: (v: T) => void) =>
    (v: T) => {
      setPref(name, v);
      set(v);
    };

  async function send() {
    if (chat.busy) return;
    const said = text.trim();
    if (!said) return prompt.current?.focus();
    setProblem(null);
    setText('');
    try {
      if (!key) throw new ApiProblem(401, { message: 'No API key entered yet.', code: 'missing_api_key' });
      const chosen = list.state === 'ready' ? list.models.find((m) => m.id === model) : undefined;
      if (!chosen) throw clientProblem('Pick a model first. If the list is empty, check your API key.', 'model');
      if (mode === 'image') await chat.sendImage(said, { model: chosen.id, size, ...imageSource(source) });
      else await chat.sendChat(said, { model: chosen.id, multiplier: chosen.multiplier, effort });
    } catch (err) {
      setText((now) => now || said);
      setProblem(err);
      if (err instanceof ApiProblem && err.status === 403) setModelLoads((n) => n + 1);
    } finally {
      if (key) refreshQuota();
      prompt.current?.focus();
    }
  }

  return (
    <>
      <a class="skip-link" href="#prompt">
        Skip to the message box
      </a>
      <Topbar current="chat">
        <QuotaBadge sub={key ? quota.sub : null} error={quota.error} hasKey={!!key} />
      </Topbar>
      <main class="chat-layout">
        <aside class="sidebar" aria-label="Settings">
          <KeyBar control={keyBar} />
          <Settings
            mode={mode}
            onMode={remember<Mode>('mode', setMode)}
            list={list}
            model={model}
            onModel={remember('model', setModel)}
            effort={effort}
            onEffort={remember('effort', setEffort)}
            size={size}
            onSize={remember('size', setSize)}
            source={source}
            onSource={setSource}
            onProblem={setProblem}
            onNewChat={() => {
              chat.reset();
              setProblem(null);
              prompt.current?.focus();
            }}
          />
        </aside>
        <section class="conversation card" aria-labelledby="conversation-heading">
          <h2 id="conversation-heading" class="visually-hidden">
            Conversation
          </h2>
          <Conversation messages={chat.messages} busy={chat.busy} cleared={chat.cleared} />
          <ProblemRegion id="problem" problem={problem} onKey={() => keyBar.current?.open()} onDismiss={() => setProblem(null)} />
          <Composer mode={mode} text={text} onText={setText} busy={chat.busy} onSend={send} onStop={chat.stop} inputRef={prompt} />
        </section>
      </main>
    </>
  );
}

/** The source to send: a chosen file's data URI, or a checked https URL; none draws a new image. */
function imageSource(s: Source): { source: string | null; sourceIsFile: boolean } {
  if (s.dataUri) return { source: s.dataUri, sourceIsFile: true };
  const url = s.url.trim();
  if (!url) return { source: null, sourceIsFile: false };
  let parsed: URL | null = null;
  try {
    parsed = new URL(url);
  } catch {
    /* refused below */
  }
  if (!parsed || parsed.protocol !== 'https:') throw clientProblem('The source image URL must be a full https:// address.', 'image');
  return { source: parsed.href, sourceIsFile: false };
}
