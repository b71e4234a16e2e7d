// The chat page's settings card: chat or image mode, the model (with its cost multiplier), the
// reasoning effort (chat) or the image size and source (image), and "New conversation".
import { Segmented } from '../../shared/components/Segmented.tsx';
import { SourceImage, type Source } from './SourceImage.tsx';

export type Mode = 'chat' | 'image';

export interface ModelList {
  state: 'no-key' | 'loading' | 'ready' | 'empty' | 'failed';
  models: Array<{ id: string; multiplier: number }>;
}

const EFFORTS: Array<[string, string]> = [
  ['none', 'None (model default)'],
  ['low', 'Low'],
  ['medium', 'Medium'],
  ['high', 'High'],
  ['xhigh', 'Extra high'],
  ['max', 'Max'],
];
const SIZES: Array<[string, string]> = [
  ['1024x1024', '1024 × 1024 (square)'],
  ['1024x1536', '1024 × 1536 (portrait)'],
  ['1536x1024', '1536 × 1024 (landscape)'],
];
const PLACEHOLDER: Record<Exclude<ModelList['state'], 'ready'>, string> = {
  'no-key': 'Enter your key to load the models',
  loading: 'Loading models…',
  empty: 'No models are enabled in your plan',
  failed: 'Models could not be loaded',
};

export interface SettingsProps {
  mode: Mode;
  onMode: (m: Mode) => void;
  list: ModelList;
  model: string;
  onModel: (id: string) => void;
  effort: string;
  onEffort: (e: string) => void;
  size: string;
  onSize: (s: string) => void;
  source: Source;
  onSource: (s: Source) => void;
  onProblem: (err: unknown) => void;
  onNewChat: () => void;
}

const value = (e: Event) => (e.target as HTMLSelectElement).value;

export function Settings(p: SettingsProps) {
  const ready = p.list.state === 'ready';
  return (
    <section class="card settings" aria-labelledby="settings-heading">
      <h2 id="settings-heading">Settings</h2>
      <Segmented
        id="mode"
        name="mode"
        legend="Mode"
        value={p.mode}
        onChange={p.onMode}
        options={[
          { value: 'chat', label: 'Chat', id: 'mode-chat' },
          { value: 'image', label: 'Image', id: 'mode-image' },
        ]}
      />
      <div class="field field-model">
        <label for="model">Model</label>
        <select id="model" aria-describedby="model-help" disabled={!ready} value={ready ? p.model : ''} onChange={(e) => p.onModel(value(e))}>
          {ready ? (
            p.list.models.map((m) => (
              <option key={m.id} value={m.id}>
                {`${m.id} — ×${m.multiplier}`}
              </option>
            ))
          ) : (
            <option value="">{PLACEHOLDER[p.list.state as Exclude<ModelList['state'], 'ready'>]}</option>
          )}
        </select>
        <p id="model-help" class="help">
          × is the token-cost multiplier of the model.
        </p>
      </div>
      <div class="field" hidden={p.mode !== 'chat'}>
        <label for="effort">Reasoning effort</label>
        <select id="effort" aria-describedby="effort-help" value={p.effort} onChange={(e) => p.onEffort(value(e))}>
          {EFFORTS.map(([v, label]) => (
            <option key={v} value={v}>
              {label}
            </option>
          ))}
        </select>
        <p id="effort-help" class="help">
          Every level costs the same.
        </p>
      </div>
      <div class="field" hidden={p.mode !== 'image'}>
        <label for="size">Image size</label>
        <select id="size" value={p.size} onChange={(e) => p.onSize(value(e))}>
          {SIZES.map(([v, label]) => (
            <option key={v} value={v}>
              {label}
            </option>
          ))}
        </select>
      </div>
      <SourceImage hidden={p.mode !== 'image'} source={p.source} onChange={p.onSource} onProblem={p.onProblem} />
      <button type="button" id="new-chat" class="secondary" onClick={p.onNewChat}>
        New conversation
      </button>
    </section>
  );
}
