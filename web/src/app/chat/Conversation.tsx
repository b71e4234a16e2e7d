// The conversation frame: a focusable log (role="log", read out politely as replies arrive) of
// the bubbles, kept scrolled to the newest unless the reader scrolled up.
import { useLayoutEffect, useRef } from 'preact/hooks';
import type { Message } from './messages.ts';

function Bubble({ m, onImage }: { m: Message; onImage: () => void }) {
  const who = m.role === 'user' ? 'You' : 'Assistant';
  return (
    <article class={`message ${m.role}${m.failed ? ' failed' : ''}`} aria-label={`${who} said`} data-state={m.state}>
      <p class="who">{who}</p>
      <div class="bubble-body">
        {m.pending ? (
          <span class="pending">
            <span class="dots" aria-hidden="true">
              <span />
              <span />
              <span />
            </span>
            <span class="pending-text">{m.pending}</span>
          </span>
        ) : m.image ? (
          <img class="result" src={m.image.href} alt={m.image.alt} width={m.image.width} height={m.image.height} onLoad={onImage} />
        ) : (
          m.text !== undefined && <p class={m.muted ? 'text muted' : 'text'}>{m.text}</p>
        )}
        {m.role === 'user' && m.sourceThumb && <img class="source-thumb" src={m.sourceThumb} alt="Source image" />}
        {m.role === 'user' && m.sourceUrl && <p class="meta">Source: {m.sourceUrl}</p>}
      </div>
      {m.image ? (
        <div class="image-actions">
          <a class="button secondary small" href={m.image.href} download={m.image.fileName}>
            Download image
          </a>
          {m.meta && <span class="meta">{m.meta}</span>}
        </div>
      ) : (
        m.meta && <p class={m.metaWarn ? 'meta warn' : 'meta'}>{m.meta}</p>
      )}
    </article>
  );
}

export function Conversation({ messages, busy, cleared }: { messages: Message[]; busy: boolean; cleared: boolean }) {
  const log = useRef<HTMLDivElement>(null);
  const count = useRef(0);
  // A drawn image shows whole once it has loaded, with its download button below it.
  const toEnd = () => {
    if (log.current) log.current.scrollTop = log.current.scrollHeight;
  };
  useLayoutEffect(() => {
    const node = log.current;
    if (!node) return;
    // A new bubble always scrolls into view; more words only when the reader is near the end.
    const added = messages.length !== count.current;
    count.current = messages.length;
    if (added || node.scrollHeight - node.scrollTop - node.clientHeight < 80) node.scrollTop = node.scrollHeight;
  });
  return (
    <div
      id="log"
      ref={log}
      class="log"
      role="log"
      aria-live="polite"
      aria-relevant="additions text"
      aria-label="Conversation"
      aria-busy={busy ? 'true' : 'false'}
      tabIndex={0}
    >
      {messages.length ? (
        messages.map((m) => <Bubble key={m.id} m={m} onImage={toEnd} />)
      ) : cleared ? (
        <div class="empty" id="empty">
          <p class="empty-title">New conversation</p>
          <p>Earlier messages are no longer sent to the model.</p>
        </div>
      ) : (
        <div class="empty" id="empty">
          <p class="empty-title">Start a conversation</p>
          <p>
            Save your API key, pick a model and write a message. Switch to <em>Image</em> mode to draw or edit an image.
          </p>
        </div>
      )}
    </div>
  );
}
