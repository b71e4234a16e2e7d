// The saved API key as state the components share: saving or forgetting it in one component
// re-renders every other that reads it.
import { useEffect, useState } from 'preact/hooks';
import { getKey, setKey } from './storage.ts';

const changes = new EventTarget();

export function saveKey(key: string): void {
  setKey(key);
  changes.dispatchEvent(new Event('change'));
}

/** The saved key; the component re-renders when it changes. */
export function useKey(): string {
  const [key, setState] = useState(getKey);
  useEffect(() => {
    const update = () => setState(getKey());
    changes.addEventListener('change', update);
    return () => changes.removeEventListener('change', update);
  }, []);
  return key;
}
