// Reading a caller's source image for an edit. Any failure here is the caller's fault (400).
import { loadSharp } from './sharp-lazy.ts';
import { InvalidImageError } from './image-error.ts';
import type { RawImage } from './jpeg-band.ts';

// Sources above this are refused rather than decoded (a decompression bomb guard).
const MAX_SOURCE_PIXELS = 40_000_000;
const FORMATS = new Set(['png', 'jpeg', 'webp', 'gif']);

function invalid(error: unknown): InvalidImageError {
  if (error instanceof InvalidImageError) return error;
  const tooLarge = error instanceof Error && /pixel limit/i.test(error.message);
  return new InvalidImageError(tooLarge ? 'source image is too large' : 'source image could not be decoded; send a png, jpeg, webp or gif image');
}

/** Checks the bytes are a png, jpeg, webp or gif sharp can fully decode; returns the format. */
export async function assertSourceImage(bytes: Buffer): Promise<string> {
  const sharp = await loadSharp();
  try {
    const meta = await sharp(bytes, { limitInputPixels: MAX_SOURCE_PIXELS }).metadata();
    if (!meta.format || !FORMATS.has(meta.format)) throw new InvalidImageError('source image must be png, jpeg, webp or gif');
    await sharp(bytes, { limitInputPixels: MAX_SOURCE_PIXELS, failOn: 'error' }).resize(8, 8).raw().toBuffer();
    return meta.format;
  } catch (error) {
    throw invalid(error);
  }
}

/** Decodes the source, honours EXIF rotation and crops it to cover width x height, as RGB. */
/** Any image as raw sRGB of exactly width x height: EXIF-rotated, cropped to cover, alpha on white. */
export async function coverAsRgb(bytes: Buffer, width: number, height: number): Promise<RawImage> {
  const sharp = await loadSharp();
  const { data, info } = await sharp(bytes, { limitInputPixels: MAX_SOURCE_PIXELS })
    .rotate()
    .resize(width, height, { fit: 'cover' })
    .flatten({ background: '#ffffff' })
    .toColourspace('srgb')
    .removeAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  if (info.channels !== 3) throw new Error(`unexpected channel count ${info.channels}`);
  return { pixels: data, width, height };
}

export async function decodeSource(bytes: Buffer, width: number, height: number): Promise<RawImage> {
  await assertSourceImage(bytes);
  try {
    return await coverAsRgb(bytes, width, height);
  } catch (error) {
    throw invalid(error);
  }
}
