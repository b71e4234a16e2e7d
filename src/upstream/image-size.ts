import type { ImageSize } from './port.ts';

export function dimensions(size: ImageSize): { width: number; height: number } {
  const [width, height] = size.split('x').map(Number) as [number, number];
  return { width, height };
}
