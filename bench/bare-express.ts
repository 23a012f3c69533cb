/**
 * The baseline of `make bench`: bare Express 5 answering a constant JSON body of the same size as
 * `GET /api/v1/notes?limit=20`, with no validation, authentication, database or logging.
 */
import express from 'express';

const note = (i: number) => ({
  noteId: `01936d2e-7b1a-7c3e-9f00-5a2b9c4d${String(1000 + i)}`,
  title: `Bench note ${i}`,
  content: `Content of bench note ${i}. `.repeat(4),
  projectId: null,
  pinned: false,
  createdAt: 1763784000000 + i,
  updatedAt: 1763784000000 + i,
});
const body = { notes: Array.from({ length: 20 }, (_, i) => note(i)), nextCursor: 'MDE5MzZkMmUtN2IxYS03YzNl' };

const app = express();
app.disable('x-powered-by');
app.get('/notes', (_req, res) => {
  res.json(body);
});
// The same body as the service's GET /api/v1/capabilities (B2).
app.get('/capabilities', (_req, res) => {
  res.json({ capabilities: { automations: true, billing: false, vectorSearch: true, billingProvider: 'none' } });
});
app.listen(Number(process.env.PORT), '127.0.0.1');
