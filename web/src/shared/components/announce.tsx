// Short announcements of what just happened, for screen readers, through the page's one polite
// status region, <Announcer /> (the console mounts it; results are also shown on the page).
import { useEffect, useState } from 'preact/hooks';

const bus = new EventTarget();
let current = '';

export function announce(text: string): void {
  current = '';
  bus.dispatchEvent(new Event('change'));
  // Emptied first and filled a moment later, so the same sentence twice is read twice.
  setTimeout(() => {
    current = text;
    bus.dispatchEvent(new Event('change'));
  }, 30);
}

export function Announcer() {
  const [text, setText] = useState(current);
  useEffect(() => {
    const update = () => setText(current);
    bus.addEventListener('change', update);
    return () => bus.removeEventListener('change', update);
  }, []);
  return (
    <div id="announce" class="visually-hidden" role="status" aria-live="polite" aria-atomic="true">
      {text}
    </div>
  );
}
