import { WorkerPool } from '../../src/platform/workers';

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
    for (let i = 0; i < 100 && done.length < 5; i += 1) await new Promise((r) => setTimeout(r, 10));
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
});
