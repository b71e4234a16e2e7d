// Makes an upstream's image fit what the gateway promises: a JPEG of the requested size,
// about 500-800 KB. A JPEG that already fits is passed through untouched.
import { loadSharp } from './sharp-lazy.ts';
import { UpstreamError, type ImageSize } from './port.ts';
import { encodeJpegNearBand, isInBand } from './jpeg-band.ts';
import { dimensions } from './image-size.ts';
import { coverAsRgb } from './image-source.ts';

export async function normaliseUpstreamImage(bytes: Buffer, size: ImageSize): Promise<Buffer> {
  const { width, height } = dimensions(size);
  let format: string | undefined;
  try {
    const sharp = await loadSharp();
    const meta = await sharp(bytes).metadata();
    format = meta.format;
    if (format === 'jpeg' && meta.width === width && meta.height === height && isInBand(bytes.length)) return bytes;
    return await encodeJpegNearBand(await coverAsRgb(bytes, width, height));
  } catch {
    throw new UpstreamError(`upstream returned an image that could not be decoded${format ? ` (${format})` : ''}`);
  }
}
