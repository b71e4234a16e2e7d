// Offline image generation and editing for the simulated upstream: real JPEGs, deterministic
// per (prompt, model), drawn from the prompt's colours, sized to the spec's payload band.
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { ImageSize } from '../port.ts';
import { decodeSource } from '../image-source.ts';
import { encodeJpegInBand, type RawImage } from '../jpeg-band.ts';
import { paletteFor, type Rgb } from './palette.ts';
import { createRng, seedFrom } from '../seed.ts';
import { dimensions } from '../image-size.ts';

function blank(width: number, height: number): RawImage {
  return { pixels: Buffer.alloc(width * height * 3), width, height };
}

/** Four-corner gradient over the whole canvas. */
function paintGradient(image: RawImage, corners: Rgb[]): void {
  const { pixels, width, height } = image;
  const [a, b, c, d] = corners as [Rgb, Rgb, Rgb, Rgb];
  for (let y = 0; y < height; y++) {
    const v = y / (height - 1);
    for (let x = 0; x < width; x++) {
      const u = x / (width - 1);
      const i = (y * width + x) * 3;
      for (let ch = 0; ch < 3; ch++) {
        const top = a[ch]! + (b[ch]! - a[ch]!) * u;
        const bottom = c[ch]! + (d[ch]! - c[ch]!) * u;
        pixels[i + ch] = top + (bottom - top) * v;
      }
    }
  }
}

/** Blends a disc (or ring) of `colour` into the canvas, touching only its bounding box. */
function paintDisc(image: RawImage, cx: number, cy: number, radius: number, ring: boolean, colour: Rgb, alpha: number): void {
  const { pixels, width, height } = image;
  const inner = ring ? (radius * 0.7) ** 2 : -1;
  const outer = radius * radius;
  for (let y = Math.max(0, Math.floor(cy - radius)); y < Math.min(height, Math.ceil(cy + radius)); y++) {
    for (let x = Math.max(0, Math.floor(cx - radius)); x < Math.min(width, Math.ceil(cx + radius)); x++) {
      const d2 = (x - cx) ** 2 + (y - cy) ** 2;
      if (d2 > outer || d2 < inner) continue;
      const i = (y * width + x) * 3;
      for (let ch = 0; ch < 3; ch++) pixels[i + ch] = pixels[i + ch]! * (1 - alpha) + colour[ch]! * alpha;
    }
  }
}

/** Concentric waves around (cx, cy) that brighten and darken the canvas. */
function paintWaves(image: RawImage, cx: number, cy: number, period: number, strength: number): void {
  const { pixels, width, height } = image;
  // A table per whole-pixel distance: sin() per pixel was most of the drawing time.
  const shifts = new Float64Array(Math.ceil(Math.hypot(width, height)) + 1);
  for (let d = 0; d < shifts.length; d++) shifts[d] = Math.sin(d / period) * strength;
  for (let y = 0; y < height; y++) {
    const dy2 = (y - cy) ** 2;
    for (let x = 0; x < width; x++) {
      const shift = shifts[Math.sqrt((x - cx) ** 2 + dy2) | 0]!;
      const i = (y * width + x) * 3;
      for (let ch = 0; ch < 3; ch++) {
        const value = pixels[i + ch]! + shift;
        pixels[i + ch] = value < 0 ? 0 : value > 255 ? 255 : value;
      }
    }
  }
}

export async function drawImage(prompt: string, model: string, size: ImageSize): Promise<Buffer> {
  const seed = seedFrom('image', model, prompt);
  const random = createRng(seed);
  const colours = paletteFor(prompt, random);
  const { width, height } = dimensions(size);
  const image = blank(width, height);
  paintGradient(image, [colours[0]!, colours[1]!, colours[2]!, colours[3]!]);
  // Painting is synchronous; yielding between layers keeps other requests (streams) moving.
  await nextTurn();
  const shapes = 8 + Math.floor(random() * 8);
  for (let s = 0; s < shapes; s++) {
    const radius = (0.05 + random() * 0.2) * Math.min(width, height);
    const colour = colours[Math.floor(random() * colours.length)]!;
    paintDisc(image, random() * width, random() * height, radius, random() < 0.35, colour, 0.5 + random() * 0.35);
  }
  await nextTurn();
  paintWaves(image, random() * width, random() * height, 12 + random() * 30, 14);
  await nextTurn();
  return encodeJpegInBand(image, seed);
}

/**
 * Edits really transform the source: crop to size, tint toward the prompt's main colour, then
 * translucent shapes and waves in the prompt's palette, so even a grey source edited with a
 * grey prompt comes out visibly different.
 */
export async function editImage(source: Buffer, prompt: string, model: string, size: ImageSize): Promise<Buffer> {
  const { width, height } = dimensions(size);
  const image = await decodeSource(source, width, height);
  const seed = seedFrom('edit', model, prompt);
  const random = createRng(seed);
  const colours = paletteFor(prompt, random, 4);
  const tint = colours[0]!;
  const { pixels } = image;
  const strength = 0.35;
  for (let i = 0; i < pixels.length; i += 3) {
    for (let ch = 0; ch < 3; ch++) pixels[i + ch] = pixels[i + ch]! * (1 - strength) + tint[ch]! * strength;
  }
  await nextTurn();
  const shapes = 4 + Math.floor(random() * 4);
  for (let s = 0; s < shapes; s++) {
    const radius = (0.1 + random() * 0.2) * Math.min(width, height);
    const colour = colours[1 + Math.floor(random() * (colours.length - 1))]!;
    paintDisc(image, random() * width, random() * height, radius, random() < 0.5, colour, 0.3 + random() * 0.2);
  }
  await nextTurn();
  paintWaves(image, random() * width, random() * height, 10 + random() * 20, 22);
  await nextTurn();
  return encodeJpegInBand(image, seed);
}
