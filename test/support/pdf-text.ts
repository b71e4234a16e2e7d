// The text of a PDF as a reader extracts it, by Mozilla's PDF.js, installed on first use from its
// own lock file (test/support/pdf-text/; never a dependency of Tollgate).
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { installOnFirstUse } from './first-use-install.ts';

const DIR = new URL('./pdf-text/', import.meta.url).pathname;

/** Each page's text items joined with spaces, pages with newlines. */
export async function pdfText(pdf: Uint8Array): Promise<string> {
  await installOnFirstUse({ dir: DIR, label: "the PDF reader (Mozilla's pdfjs-dist)", ignoreScripts: true }, (line) => process.stderr.write(`${line}\n`));
  const entry = createRequire(`${DIR}package.json`).resolve('pdfjs-dist/legacy/build/pdf.mjs');
  const pdfjs = await import(pathToFileURL(entry).href);
  const doc = await pdfjs.getDocument({ data: new Uint8Array(pdf), useSystemFonts: false, isEvalSupported: false }).promise;
  const pages: string[] = [];
  for (let n = 1; n <= doc.numPages; n++) {
    const content = await (await doc.getPage(n)).getTextContent();
    pages.push(content.items.map((item: { str?: string }) => item.str ?? '').join(' '));
  }
  await doc.destroy();
  return pages.join('\n');
}
