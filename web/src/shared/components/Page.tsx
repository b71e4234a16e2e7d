// Small pieces of a page's body: the view's heading, a result region, a state pill, a loading line.
import type { ComponentChildren } from 'preact';

/** A polite live region for the result of an action; empty until there is one. */
export function Result({ children, id }: { children?: ComponentChildren; id?: string }) {
  const has = children !== undefined && children !== null && children !== false && children !== '';
  return (
    <div class="result" id={id} role="status" aria-live="polite">
      {has && <div class="result-box">{children}</div>}
    </div>
  );
}

export function Pill({ state, text }: { state: string; text?: string }) {
  return <span class={`pill pill-${state.replace(/[^a-z_]/gi, '')}`}>{text ?? state}</span>;
}

export function Heading({ text, intro }: { text: ComponentChildren; intro?: string }) {
  return (
    <>
      <h1 tabIndex={-1} id="view-heading">
        {text}
      </h1>
      {intro && <p class="muted intro">{intro}</p>}
    </>
  );
}

/** A list's body while it loads, once loaded, or when it failed. */
export function Loading({ text }: { text: string }) {
  return <p class="loading">{text}</p>;
}
