// A choice of a few options as radio buttons styled as one segmented control, inside a fieldset
// whose legend names it for screen readers. The arrow keys move between options (native radios).
export interface Option<T extends string> {
  value: T;
  label: string;
  id?: string;
}

export interface SegmentedProps<T extends string> {
  id: string;
  name: string;
  legend: string;
  options: Option<T>[];
  value: T;
  onChange: (value: T) => void;
  wide?: boolean;
}

export function Segmented<T extends string>({ id, name, legend, options, value, onChange, wide }: SegmentedProps<T>) {
  return (
    <fieldset class="seg-field" id={id}>
      <legend class="visually-hidden">{legend}</legend>
      <div class={wide ? 'segmented wide' : 'segmented'}>
        {options.map((o) => (
          <label key={o.value}>
            <input type="radio" name={name} id={o.id} value={o.value} checked={o.value === value} onChange={() => onChange(o.value)} />
            <span>{o.label}</span>
          </label>
        ))}
      </div>
    </fieldset>
  );
}
