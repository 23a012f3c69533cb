import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  NoSuchKey,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { type ByteRange, MeasuringStream, ObjectNotFoundError, type ObjectStore, type StoredObject } from './index';

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
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  async put(key: string, body: Readable, options: { contentType: string; size: number }): Promise<StoredObject> {
    const measure = new MeasuringStream(options.size);
    const passThrough = new PassThrough();
    const piping = pipeline(body, measure, passThrough);
    const upload = this.client.send(
      new PutObjectCommand({
        Bucket: this.settings.bucket,
        Key: key,
        Body: passThrough,
        ContentLength: options.size,
        ContentType: options.contentType,
      }),
    );
    // Whichever fails first wins; the other is awaited so nothing is left running.
    const [piped, sent] = await Promise.allSettled([piping, upload]);
    const failure = piped.status === 'rejected' ? piped.reason : sent.status === 'rejected' ? sent.reason : null;
    let stored: StoredObject | null = null;
    try {
      if (failure === null) stored = measure.complete();
    } catch (error) {
      await this.delete(key).catch(() => undefined);
      throw error;
    }
    if (stored) return stored;
    passThrough.destroy();
    await this.delete(key).catch(() => undefined);
    throw failure;
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
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.settings.bucket, Key: key }));
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
