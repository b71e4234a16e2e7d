// What a section reads from the gateway: the answer once loaded, whether it is loading (for
// aria-busy) or failed, the error to show, and `load` to read it again.
import { useEffect, useState } from 'preact/hooks';

export interface Loaded<T> {
  data: T | null;
  busy: boolean;
  failed: boolean;
  problem: unknown;
  setProblem: (p: unknown) => void;
  load: () => Promise<T | null>;
}

/** Loads with `read` when the component appears (unless `now` is false) and on every `load()`. */
export function useLoaded<T>(read: () => Promise<T>, now = true): Loaded<T> {
  const [data, setData] = useState<T | null>(null);
  const [busy, setBusy] = useState(now);
  const [failed, setFailed] = useState(false);
  const [problem, setProblem] = useState<unknown>(null);
  const load = async (): Promise<T | null> => {
    setBusy(true);
    try {
      const value = await read();
      setData(value);
      setFailed(false);
      return value;
    } catch (err) {
      setFailed(true);
      setProblem(err);
      return null;
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => {
    if (now) void load();
  }, []);
  return { data, busy, failed, problem, setProblem, load };
}
