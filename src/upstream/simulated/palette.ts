// Colours for simulated images: named colours in the prompt come first, the rest from the seed,
// so "a red fox in blue snow" really looks red and blue.
export type Rgb = [number, number, number];

const NAMED: Record<string, Rgb> = {
  red: [214, 39, 40],
  orange: [255, 127, 14],
  yellow: [250, 214, 40],
  gold: [212, 175, 55],
  green: [44, 160, 44],
  lime: [150, 220, 60],
  teal: [0, 128, 128],
  cyan: [23, 190, 207],
  blue: [31, 90, 200],
  navy: [20, 30, 110],
  purple: [128, 60, 170],
  violet: [148, 103, 189],
  magenta: [220, 40, 160],
  pink: [247, 129, 191],
  brown: [140, 86, 75],
  black: [20, 20, 24],
  white: [240, 240, 236],
  gray: [127, 127, 127],
  grey: [127, 127, 127],
  silver: [190, 190, 200],
};

function hslToRgb(h: number, s: number, l: number): Rgb {
  const k = (n: number) => (n + h * 12) % 12;
  const a = s * Math.min(l, 1 - l);
  const f = (n: number) => l - a * Math.max(-1, Math.min(k(n) - 3, 9 - k(n), 1));
  return [Math.round(f(0) * 255), Math.round(f(8) * 255), Math.round(f(4) * 255)];
}

export function paletteFor(prompt: string, random: () => number, size = 6): Rgb[] {
  const colours: Rgb[] = [];
  for (const word of prompt.toLowerCase().match(/\p{L}+/gu) ?? []) {
    const named = NAMED[word];
    if (named && !colours.includes(named)) colours.push(named);
    if (colours.length === size) return colours;
  }
  while (colours.length < size) colours.push(hslToRgb(random(), 0.55 + random() * 0.4, 0.35 + random() * 0.3));
  return colours;
}
