// Encodes pixels as a JPEG whose size lands in the band the spec promises (500-800 KB).
// The band is chosen so both readings of the spec hold: the raw JPEG is 500-800 KB and so is
// its base64 (4/3 larger) in the response body. Size is steered by film grain (entropy) and
// by JPEG quality, searched per image because sources differ in how much detail they carry.
import { loadSharp } from './sharp-lazy.ts';
import { createRng } from './seed.ts';

export const JPEG_BAND = { min: 515_000, max: 595_000 } as const;

const GRAIN_LEVELS = [0, 10, 20, 32, 46, 64, 88, 120];
const START_GRAIN = 3;
const QUALITY_MIN = 50;
const QUALITY_MAX = 98;
const START_QUALITY = 90;

export interface RawImage {
  pixels: Buffer; // RGB, 3 bytes per pixel, row-major
  width: number;
  height: number;
}

/** A copy of `pixels` with deterministic grain of amplitude `amp` added to every channel. */
function withGrain(pixels: Buffer, seed: number, amp: number): Buffer {
  const out = Buffer.from(pixels);
  if (amp === 0) return out;
  let state = (createRng(seed)() * 4294967296) >>> 0 || 1;
  const scale = (2 * amp) / 255;
  for (let i = 0; i < out.length; i++) {
    // xorshift32 inline: this loop runs millions of times per image.
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    const value = out[i]! + ((state & 255) - 127.5) * scale;
    out[i] = value < 0 ? 0 : value > 255 ? 255 : value;
  }
  return out;
}

async function encode(image: RawImage, pixels: Buffer, quality: number): Promise<Buffer> {
  const sharp = await loadSharp();
  return sharp(pixels, { raw: { width: image.width, height: image.height, channels: 3 } })
    .jpeg({ quality, mozjpeg: false })
    .toBuffer();
}

type Search = { jpeg: Buffer; verdict: 'in' | 'small' | 'large' };

const TARGET = (JPEG_BAND.min + JPEG_BAND.max) / 2;
const verdictOf = (bytes: number): Search['verdict'] => (bytes < JPEG_BAND.min ? 'small' : bytes > JPEG_BAND.max ? 'large' : 'in');
const closer = (a: Buffer | undefined, b: Buffer): Buffer => (a && Math.abs(a.length - TARGET) <= Math.abs(b.length - TARGET) ? a : b);

/** Binary search on quality; size grows with quality, so this finds the band if it exists. */
async function searchQuality(image: RawImage, pixels: Buffer): Promise<Search> {
  let low = QUALITY_MIN;
  let high = QUALITY_MAX;
  let quality = START_QUALITY;
  let best: Buffer | undefined;
  let verdict: Search['verdict'] = 'small';
  while (low <= high) {
    const jpeg = await encode(image, pixels, quality);
    verdict = verdictOf(jpeg.length);
    if (verdict === 'in') return { jpeg, verdict };
    best = closer(best, jpeg);
    if (verdict === 'small') low = quality + 1;
    else high = quality - 1;
    quality = Math.floor((low + high) / 2);
  }
  return { jpeg: best!, verdict };
}

/** Synthetic pictures: quality first, then more or less grain until the size is in the band. */
export async function encodeJpegInBand(image: RawImage, seed: number): Promise<Buffer> {
  let level = START_GRAIN;
  let closest: Buffer | undefined;
  for (let attempt = 0; attempt < GRAIN_LEVELS.length; attempt++) {
    const result = await searchQuality(image, withGrain(image.pixels, seed, GRAIN_LEVELS[level]!));
    if (result.verdict === 'in') return result.jpeg;
    closest = closer(closest, result.jpeg);
    const next = result.verdict === 'small' ? level + 1 : level - 1;
    if (next < 0 || next >= GRAIN_LEVELS.length) break;
    level = next;
  }
  return closest!;
}

/** Real pictures are never altered: only the quality moves, and the nearest size wins. */
export async function encodeJpegNearBand(image: RawImage): Promise<Buffer> {
  return (await searchQuality(image, image.pixels)).jpeg;
}

export const isInBand = (bytes: number): boolean => verdictOf(bytes) === 'in';
