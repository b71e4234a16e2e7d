// The /app pages' header: the brand, the page links (the current one marked for screen readers),
// and whatever the page puts at the right (the quota badge).
import type { ComponentChildren } from 'preact';

const PAGES = [
  { href: 'chat', label: 'Chat' },
  { href: 'usage', label: 'Usage' },
];

export function Topbar({ current, children }: { current: string; children?: ComponentChildren }) {
  return (
    <header class="topbar">
      <a class="brand" href="chat">
        <img src="assets/icon.svg" alt="" width={24} height={24} /> Tollgate
      </a>
      <nav aria-label="Pages">
        {PAGES.map((p) => (
          <a key={p.href} href={p.href} aria-current={p.href === current ? 'page' : undefined}>
            {p.label}
          </a>
        ))}
      </nav>
      {children}
    </header>
  );
}
