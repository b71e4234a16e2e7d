// Image mode's optional source image: a file (read into a data URI, at most 20 MB, an image type)
// or an https URL, with a preview and a button to remove it. Either one replaces the other.
import { useRef, useState } from 'preact/hooks';
import { clientProblem } from '../../shared/problem.ts';

const MAX_SOURCE_BYTES = 20 * 1024 * 1024;

export interface Source {
  dataUri: string | null;
  name: string;
  url: string;
}

export const NO_SOURCE: Source = { dataUri: null, name: '', url: '' };

interface Props {
  hidden: boolean;
  source: Source;
  onChange: (s: Source) => void;
  onProblem: (err: unknown) => void;
}

export function SourceImage({ hidden, source, onChange, onProblem }: Props) {
  const file = useRef<HTMLInputElement>(null);
  const [reading, setReading] = useState(false);
  const clear = () => {
    if (file.current) file.current.value = '';
    onChange(NO_SOURCE);
  };
  const picked = () => {
    const f = file.current?.files?.[0];
    if (!f) return clear();
    if (!f.type.startsWith('image/')) {
      clear();
      return onProblem(clientProblem('The chosen file is not an image. Choose a PNG, JPEG, WebP or GIF file.', 'image'));
    }
    if (f.size > MAX_SOURCE_BYTES) {
      clear();
      return onProblem(clientProblem(`The chosen image is ${(f.size / 1048576).toFixed(1)} MB; the limit is 20 MB.`, 'image'));
    }
    const reader = new FileReader();
    setReading(true);
    reader.onload = () => {
      setReading(false);
      onChange({ dataUri: String(reader.result), name: f.name, url: '' });
    };
    reader.onerror = () => {
      setReading(false);
      onProblem(clientProblem('The chosen file could not be read.', 'image'));
    };
    reader.readAsDataURL(f);
  };
  return (
    <fieldset class="field source" hidden={hidden}>
      <legend>
        Source image to edit <span class="optional">(optional)</span>
      </legend>
      <label for="source-file">Image file</label>
      <input
        type="file"
        id="source-file"
        ref={file}
        accept="image/png,image/jpeg,image/webp,image/gif"
        onChange={picked}
        aria-busy={reading ? 'true' : undefined}
      />
      <label for="source-url">or an https URL</label>
      <input
        type="url"
        id="source-url"
        inputMode="url"
        placeholder="https://example.com/photo.jpg"
        aria-describedby="source-help"
        value={source.url}
        onInput={(e) => {
          const url = (e.target as HTMLInputElement).value;
          if (url.trim() && file.current) file.current.value = '';
          onChange(url.trim() ? { dataUri: null, name: '', url } : { ...source, url });
        }}
      />
      <p id="source-help" class="help">
        With a source image the prompt edits it; without one a new image is drawn.
      </p>
      {source.dataUri && (
        <div id="source-preview" class="source-preview">
          <img id="source-thumb" src={source.dataUri} alt="The source image you chose" />
          <span id="source-name">{source.name}</span>
        </div>
      )}
      {(source.dataUri || source.url.trim()) && (
        <button
          type="button"
          id="source-clear"
          class="secondary small"
          onClick={() => {
            clear();
            file.current?.focus();
          }}
        >
          Remove source image
        </button>
      )}
    </fieldset>
  );
}
