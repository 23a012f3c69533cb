/**
 * The S3 server of B4 in its own process (so that neither the raw client nor the service shares
 * one with it): s3rver with bucket `bench` on 127.0.0.1.
 *   tsx bench/s3-server.ts <port> <directory>
 */
import S3rver from 's3rver';

const [port, directory = 's3'] = process.argv.slice(2);
const server = new S3rver({
  port: Number(port),
  address: '127.0.0.1',
  silent: true,
  directory,
  configureBuckets: [{ name: 'bench', configs: [] }],
});
void server.run();
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
