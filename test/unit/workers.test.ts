import { WorkerPool } from '../../src/platform/workers';
import { eventually } from '../helpers/receiver';

describe('WorkerPool', () => {
  test('a slow job does not hold the others back; stop waits for it', async () => {
    const queue = ['slow', 'a', 'b', 'c', 'd', 'e'];
    const done: string[] = [];
    let release = () => undefined as void;
    const slow = new Promise<void>((resolve) => (release = resolve));
    const pool = new WorkerPool<string>({
      capacity: 2,
      intervalMs: 10,
      claim: async (limit) => queue.splice(0, limit),
      work: async (job) => {
        if (job === 'slow') await slow;
        done.push(job);
      },
      onError: () => undefined,
    });
    pool.start();
    await eventually(() => (done.length === 5 ? true : undefined));
    expect(done).toEqual(['a', 'b', 'c', 'd', 'e']);
    const stopped = pool.stop();
    release();
    await stopped;
    expect(done).toContain('slow');
    expect(pool.completed).toBe(6);
  });

  test('a failing job is reported and the pool goes on', async () => {
    const errors: unknown[] = [];
    const queue = [1, 2, 3];
    const pool = new WorkerPool<number>({
      capacity: 4,
      intervalMs: 1000,
      claim: async (limit) => queue.splice(0, limit),
      work: async (job) => {
        if (job === 2) throw new Error('boom');
      },
      onError: (error, job) => errors.push([job, (error as Error).message]),
    });
    expect(await pool.fill()).toBe(3);
    await pool.idle();
    expect(errors).toEqual([[2, 'boom']]);
    expect(pool.completed).toBe(3);
  });

  test('a running job’s claim is renewed until the job ends', async () => {
    let release = () => undefined as void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const renewed: string[] = [];
    const queue = ['long'];
    const pool = new WorkerPool<string>({
      capacity: 1,
      intervalMs: 1000,
      claim: async (limit) => queue.splice(0, limit),
      work: () => held,
      onError: () => undefined,
      renew: { everyMs: 10, lease: async (job) => renewed.push(job) },
    });
    await pool.fill();
    await eventually(() => (renewed.length >= 3 ? true : undefined));
    expect(new Set(renewed)).toEqual(new Set(['long']));
    release();
    await pool.idle();
    const after = renewed.length;
    await new Promise((r) => setTimeout(r, 50)); // several renewal periods: none comes
    expect(renewed.length).toBe(after);
  });
});
