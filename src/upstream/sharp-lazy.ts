// sharp (libvips) is loaded on the first image call, not at start-up: about 17 MB of resident
// memory that a gateway serving only text never needs.
import type Sharp from 'sharp';

let loading: Promise<typeof Sharp> | undefined;

export function loadSharp(): Promise<typeof Sharp> {
  loading ??= import('sharp').then((m) => m.default);
  return loading;
}
