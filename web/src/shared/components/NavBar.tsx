// A row of page links with the current one marked for screen readers (aria-current="page").
export interface NavLink {
  href: string;
  label: string;
  current?: boolean;
}

export function NavBar({ label, links }: { label: string; links: NavLink[] }) {
  return (
    <nav aria-label={label} class="navbar">
      {links.map((l) => (
        <a key={l.href} href={l.href} aria-current={l.current ? 'page' : undefined}>
          {l.label}
        </a>
      ))}
    </nav>
  );
}
