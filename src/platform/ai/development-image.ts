import { createHash } from 'node:crypto';
import { DEVELOPMENT_PROVIDER, encodePng } from './development-files';
import type { ImageModelV3 } from './media';

/** The development image model: PNGs whose pattern follows from the prompt (and the input image of an edit). */
export const DEVELOPMENT_IMAGE_MODEL = 'development-image';

const SIGNATURE = 'Made by the development provider (deterministic, not an AI)';

/** `length` bytes derived from `seed` (SHA-256 in counter mode). */
function stream(seed: string, length: number): Buffer {
  const parts: Buffer[] = [];
  for (let i = 0; parts.length * 32 < length; i += 1) parts.push(createHash('sha256').update(`${seed}:${i}`).digest());
  return Buffer.concat(parts).subarray(0, length);
}

const DEFAULT_SIDE = 256;
const MIN_SIDE = 16;
const MAX_SIDE = 1024;

/** The width and height for a `WxH` size or a `W:H` ratio (longest side 512), clamped to 16–1024. */
export function developmentImageSize(size?: string, aspectRatio?: string): { width: number; height: number; clamped: boolean } {
  let width = DEFAULT_SIDE;
  let height = DEFAULT_SIDE;
  if (size) [width, height] = size.split('x').map(Number) as [number, number];
  else if (aspectRatio) {
    const [w, h] = aspectRatio.split(':').map(Number) as [number, number];
    const scale = 512 / Math.max(w, h);
    width = Math.round(w * scale);
    height = Math.round(h * scale);
  }
  const clamp = (v: number) => Math.min(MAX_SIDE, Math.max(MIN_SIDE, v));
  return { width: clamp(width), height: clamp(height), clamped: clamp(width) !== width || clamp(height) !== height };
}

/**
 * A picture that follows from `seed`: a diagonal gradient between two of its colours under a grid
 * of tiles in two more, each tile's colour and shade chosen by the seed.
 */
export function developmentPicture(seed: string, width: number, height: number): Buffer {
  const bytes = stream(seed, 12 + 64);
  const colour = (i: number) => [bytes[i * 3] as number, bytes[i * 3 + 1] as number, bytes[i * 3 + 2] as number];
  const palette = [colour(0), colour(1), colour(2), colour(3)];
  const rgb = Buffer.alloc(width * height * 3);
  const tile = Math.max(4, Math.floor(Math.min(width, height) / 8));
  for (let y = 0; y < height; y += 1) {
    for (let x = 0; x < width; x += 1) {
      const t = (x + y) / (width + height);
      const cell = (bytes[12 + ((Math.floor(y / tile) * 8 + Math.floor(x / tile)) % 64)] as number) ?? 0;
      const inset = x % tile > 0 && y % tile > 0 && cell % 3 === 0;
      const base = inset ? (palette[2 + (cell & 1)] as number[]) : null;
      for (let c = 0; c < 3; c += 1) {
        const gradient = (palette[0]![c] as number) * (1 - t) + (palette[1]![c] as number) * t;
        rgb[(y * width + x) * 3 + c] = Math.round(base ? ((base[c] as number) * 3 + gradient) / 4 : gradient);
      }
    }
  }
  return rgb;
}

/** The development image model: `n` PNGs from the prompt (and the input image of an edit). */
export function developmentImageModel(): ImageModelV3 {
  return {
    specificationVersion: 'v3',
    provider: DEVELOPMENT_PROVIDER,
    modelId: DEVELOPMENT_IMAGE_MODEL,
    maxImagesPerCall: 4,
    async doGenerate(options) {
      options.abortSignal?.throwIfAborted();
      const warnings: Array<{ type: 'unsupported'; feature: string; details?: string }> = [];
      const { width, height, clamped } = developmentImageSize(options.size, options.aspectRatio);
      if (clamped)
        warnings.push({
          type: 'unsupported',
          feature: 'size',
          details: `The development model makes images of 16 to 1024 pixels a side: ${width}x${height}.`,
        });
      if (options.seed !== undefined) warnings.push({ type: 'unsupported', feature: 'seed' });
      // An edit depends on the input image's bytes too.
      const input = (options.files ?? []).map((file) =>
        file.type === 'file'
          ? createHash('sha256')
              .update(typeof file.data === 'string' ? Buffer.from(file.data, 'base64') : file.data)
              .digest('hex')
          : file.url,
      );
      const images = Array.from({ length: options.n }, (_, i) => {
        const seed = JSON.stringify([options.prompt ?? '', input, width, height, i]);
        return new Uint8Array(
          encodePng(width, height, developmentPicture(seed, width, height), {
            Software: SIGNATURE,
            Description: (options.prompt ?? '').slice(0, 1000),
          }),
        );
      });
      return { images, warnings, response: { timestamp: new Date(), modelId: DEVELOPMENT_IMAGE_MODEL, headers: undefined } };
    },
  };
}
