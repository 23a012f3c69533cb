/**
 * The images of a completion request given by URL (`http`, `https`), read through the outbound
 * guard (the resolved address checked: no loopback, private, link-local or metadata address;
 * no redirect followed), bounded in time and size, before the model is called.
 */
import type { UserContentPart } from '../../platform/ai/models';
import { type ErrorDetail, errors } from '../../platform/errors';
import { connectionFailure } from '../../platform/net/failures';
import { AddressNotAllowed, HostNotResolved, type Outbound, OutboundTimeout, UrlNotAllowed } from '../../platform/net/outbound';

/** The image types the providers read. */
export const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/** An image part of the prompt whose bytes are still at `url` (filled in by `RemoteImages.fill`). */
export interface RemoteImage {
  url: string;
  /** The field that named it (`messages/0/content/1/image_url/url`). */
  path: string;
  part: Extract<UserContentPart, { type: 'image' }>;
}

export interface RemoteImageLimits {
  /** The largest image read (`CHAT_ATTACHMENT_IMAGE_MAX_BYTES`, as chat's attachments). */
  maxBytes: number;
  timeoutMs: number;
}

/** Why an image could not be read, as the `400` says it (no more than the guard's reason). */
function unreadable(error: unknown, limits: RemoteImageLimits): string {
  if (error instanceof UrlNotAllowed || error instanceof AddressNotAllowed) return `is not allowed: ${error.message}`;
  if (error instanceof HostNotResolved) return 'could not be read: its host does not resolve';
  if (error instanceof OutboundTimeout) return `could not be read within ${limits.timeoutMs} ms`;
  const failure = connectionFailure(error);
  return `could not be read${failure ? `: ${failure.reason}` : ''}`;
}

export class RemoteImages {
  constructor(
    private readonly outbound: Pick<Outbound, 'request'>,
    private readonly limits: RemoteImageLimits,
  ) {}

  /** Reads every image into its part, at once; `400` naming each one that cannot be read. */
  async fill(images: RemoteImage[], signal: AbortSignal): Promise<void> {
    if (images.length === 0) return;
    const problems: ErrorDetail[] = [];
    await Promise.all(
      images.map(async (image) => {
        const problem = await this.read(image, signal);
        if (problem) problems.push({ path: `/body/${image.path}`, message: problem });
      }),
    );
    if (problems.length > 0) throw errors.invalidRequest('An image could not be read.', problems);
  }

  /** Reads one image into its part; what is wrong with it, or null. */
  private async read(image: RemoteImage, signal: AbortSignal): Promise<string | null> {
    const { maxBytes } = this.limits;
    let answer;
    try {
      answer = await this.outbound.request(
        image.url,
        { method: 'GET', headers: { accept: [...IMAGE_TYPES].join(', ') }, signal },
        { timeoutMs: this.limits.timeoutMs, maxBytes },
      );
    } catch (error) {
      return unreadable(error, this.limits);
    }
    if (answer.status !== 200) return `could not be read: it answered ${answer.status}`;
    if (answer.truncated) return `is larger than ${maxBytes} bytes`;
    const mediaType = String(answer.headers['content-type'] ?? '')
      .split(';')[0]!
      .trim()
      .toLowerCase();
    if (!IMAGE_TYPES.has(mediaType)) return 'must be a PNG, JPEG, GIF or WebP image';
    if (answer.body.byteLength === 0) return 'holds no image';
    Object.assign(image.part, { data: new Uint8Array(answer.body), mediaType, name: `image.${mediaType.slice('image/'.length)}` });
    return null;
  }
}
