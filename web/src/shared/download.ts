// Offers what the page fetched (with the key in the header, never in a URL) as a file to save.
export function saveAsFile(content: string | Blob, name: string, type: string): void {
  const href = URL.createObjectURL(new Blob([content], { type }));
  const a = document.createElement('a');
  a.href = href;
  a.download = name;
  a.className = 'visually-hidden';
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(href), 60_000);
}

/** The file name the server suggests (Content-Disposition) if it is a plain one, else `fallback`. */
export function suggestedName(disposition: string | null, extension: string, fallback: string): string {
  const name = (/filename="([^"]+)"/i.exec(disposition ?? '')?.[1] ?? '').replace(/[^\w.-]/g, '_');
  return new RegExp(`^\\w[\\w.-]*\\.${extension}$`).test(name) ? name : fallback;
}
