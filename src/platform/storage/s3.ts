import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DeleteObjectCommand, GetObjectCommand, HeadBucketCommand, NoSuchKey, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import {
  asUnavailable,
  type ByteRange,
  MeasuringStream,
  ObjectIncompleteError,
  ObjectNotFoundError,
  type ObjectStore,
  ObjectTooLargeError,
  StorageUnavailableError,
  type StoredObject,
} from './index';

export interface S3Settings {
  endpoint: string | null;
  bucket: string;
  region: string;
  accessKeyId: string | null;
  secretAccessKey: string | null;
  forcePathStyle: boolean;
}

/**
 * Objects in an S3-compatible bucket. Uploads stream with their exact length (S3 makes an object
 * visible only when its PUT completes); checksums are computed only when required, so that stores
 * without aws-chunked support keep the bytes intact.
 */
export class S3ObjectStore implements ObjectStore {
  readonly kind = 's3' as const;
  private readonly client: S3Client;

  constructor(private readonly settings: S3Settings) {
    this.client = new S3Client({
      region: settings.region,
      endpoint: settings.endpoint ?? undefined,
      forcePathStyle: settings.forcePathStyle,
      credentials:
        settings.accessKeyId && settings.secretAccessKey
          ? { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey }
          : undefined,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      // An unreachable store fails within seconds instead of holding requests open.
      requestHandler: { connectionTimeout: 5000, requestTimeout: 30_000 },
      responseChecksumValidation: 'WHEN_REQUIRED',
      // Failures reach the caller as errors; the SDK's own console notes (an aborted upload) are noise.
      logger: { trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
    });
  }

  async put(key: string, body: Readable, options: { contentType: string; size: number }): Promise<StoredObject> {
    const measure = new MeasuringStream(options.size);
    const passThrough = new PassThrough();
    const abort = new AbortController();
    const upload = this.client.send(
      new PutObjectCommand({
        Bucket: this.settings.bucket,
        Key: key,
        Body: passThrough,
        ContentLength: options.size,
        ContentType: options.contentType,
      }),
      { abortSignal: abort.signal },
    );
    // Too many bytes, too few, or a failing body: abort the PUT at once (it would otherwise wait
    // for bytes that never come), so S3 keeps nothing.
    const piping = pipeline(body, measure, passThrough).then(() => measure.complete());
    piping.catch((error: unknown) => {
      abort.abort(error);
      passThrough.destroy(error as Error);
    });
    // The store failing (unreachable, an error answer) ends the body too.
    upload.catch((error: unknown) => passThrough.destroy(error as Error));
    const [piped, sent] = await Promise.allSettled([piping, upload]);
    if (piped.status === 'fulfilled' && sent.status === 'fulfilled') return piped.value;
    await this.discard(key);
    // A wrong size is the upload's fault; otherwise an unavailable store is the cause.
    if (piped.status === 'rejected' && (piped.reason instanceof ObjectTooLargeError || piped.reason instanceof ObjectIncompleteError))
      throw piped.reason;
    const unavailable = sent.status === 'rejected' ? asUnavailable(sent.reason, 's3') : null;
    if (unavailable instanceof StorageUnavailableError) throw unavailable;
    throw piped.status === 'rejected' ? piped.reason : (sent as PromiseRejectedResult).reason;
  }

  /**
   * Deletes what a failed PUT may have left. S3 itself stores nothing from an aborted PUT, but some
   * S3-compatible servers finish writing a partial object after the client has gone, so the delete
   * is repeated once that request has settled.
   */
  private async discard(key: string): Promise<void> {
    const attempt = () => this.delete(key).catch(() => undefined);
    await attempt();
    for (const delayMs of [200, 2000]) setTimeout(() => void attempt(), delayMs).unref();
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    try {
      const out = await this.client.send(
        new GetObjectCommand({
          Bucket: this.settings.bucket,
          Key: key,
          Range: range ? `bytes=${range.start}-${range.end}` : undefined,
        }),
      );
      return out.Body as Readable;
    } catch (error) {
      if (error instanceof NoSuchKey || (error as { name?: string }).name === 'NoSuchKey') throw new ObjectNotFoundError(key);
      throw asUnavailable(error, 's3');
    }
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.settings.bucket, Key: key }));
  }

  /**
   * Nothing to sweep: uploads are single PUTs (never multipart), and S3 keeps nothing of a PUT
   * that does not complete, so a process stopping mid-upload leaves no partial object.
   */
  async sweepIncoming(): Promise<number> {
    return 0;
  }

  async isReachable(): Promise<boolean> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.settings.bucket }));
      return true;
    } catch {
      return false;
    }
  }

  close(): void {
    this.client.destroy();
  }
}
