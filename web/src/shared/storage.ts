// What the pages keep in this browser: the API key (localStorage only, never a cookie) and small
// preferences. Storage may be disabled; then everything lives for this page only.
const KEY_STORAGE = 'tollgate.apiKey';

function read(name: string): string | null {
  try {
    return localStorage.getItem(name);
  } catch {
    return null;
  }
}

function write(name: string, value: string | null): void {
  try {
    if (value) localStorage.setItem(name, value);
    else localStorage.removeItem(name);
  } catch {
    /* storage disabled */
  }
}

export const getKey = (): string => read(KEY_STORAGE) ?? '';
export const setKey = (key: string): void => write(KEY_STORAGE, key || null);
export const getPref = (name: string, fallback: string): string => read(`tollgate.${name}`) ?? fallback;
export const setPref = (name: string, value: string): void => write(`tollgate.${name}`, value);
