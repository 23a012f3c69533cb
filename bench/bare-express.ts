/**
 * B2's baseline in `make bench`: bare Express 5 answering the constant body of
 * `GET /api/v1/capabilities`, with no validation, authentication, database or logging.
 */
import express from 'express';

const app = express();
app.disable('x-powered-by');
app.get('/capabilities', (_req, res) => {
  res.json({ capabilities: { automations: true, billing: false, vectorSearch: true, billingProvider: 'none' } });
});
app.listen(Number(process.env.PORT), '127.0.0.1');
