// The message box: Enter sends, Shift+Enter starts a new line; Stop ends the call in progress.
import type { Ref } from 'preact';
import type { Mode } from './Settings.tsx';

interface Props {
  mode: Mode;
  text: string;
  onText: (t: string) => void;
  busy: boolean;
  onSend: () => void;
  onStop: () => void;
  inputRef: Ref<HTMLTextAreaElement>;
}

export function Composer({ mode, text, onText, busy, onSend, onStop, inputRef }: Props) {
  const image = mode === 'image';
  return (
    <form
      id="composer"
      class="composer"
      onSubmit={(ev) => {
        ev.preventDefault();
        onSend();
      }}
    >
      <label for="prompt" id="prompt-label">
        {image ? 'Image prompt' : 'Your message'}
      </label>
      <div class="composer-row">
        <textarea
          id="prompt"
          name="prompt"
          rows={2}
          ref={inputRef}
          aria-describedby="prompt-help"
          placeholder={image ? 'Describe the image to draw, or the change to make…' : 'Write a message…'}
          value={text}
          onInput={(e) => onText((e.target as HTMLTextAreaElement).value)}
          onKeyDown={(ev) => {
            if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
              ev.preventDefault();
              onSend();
            }
          }}
        />
        <div class="composer-actions">
          <button type="submit" id="send" disabled={busy}>
            {image ? 'Create image' : 'Send'}
          </button>
          <button type="button" id="stop" class="secondary" hidden={!busy} onClick={onStop}>
            Stop
          </button>
        </div>
      </div>
      <p id="prompt-help" class="help">
        Enter sends, Shift+Enter starts a new line.
      </p>
    </form>
  );
}
