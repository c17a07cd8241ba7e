// Writes the Parquet files of this directory with DuckDB (npm package
// @duckdb/node-api 1.5.6-r.1, which ships DuckDB built):
//   npm install @duckdb/node-api && node gen.mjs [out dir]
// Row i (0 to 2999) of kv-<codec>.parquet holds
//   key   'key-' || lpad(i, 6, '0')                 VARCHAR
//   value md5(i), NULL when i % 13 = 0             VARCHAR (plain)
//   cat   'cat-' || i % 7                          VARCHAR (dictionary)
//   raw   unhex(md5(i)): md5's 16 bytes            BLOB
// in row groups of 1000 rows; typed.parquet (zstd) holds
//   id i * 1000003 - 500000000 (BIGINT), small -i (INTEGER),
//   score i / 3 (DOUBLE), flag i % 2 = 0 (BOOLEAN).
// The Go tests compute the same values and compare every one.
import { DuckDBInstance } from '@duckdb/node-api';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = process.argv[2] ?? dirname(fileURLToPath(import.meta.url));
const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
await c.run(`CREATE TABLE kv AS SELECT
  'key-' || lpad(i::VARCHAR, 6, '0') AS key,
  CASE WHEN i % 13 = 0 THEN NULL ELSE md5(i::VARCHAR) END AS value,
  'cat-' || (i % 7)::VARCHAR AS cat,
  unhex(md5(i::VARCHAR)) AS raw
  FROM range(3000) t(i) ORDER BY i`);
for (const codec of ['uncompressed', 'snappy', 'gzip', 'zstd', 'lz4_raw']) {
  await c.run(`COPY kv TO '${dir}/kv-${codec}.parquet' (FORMAT parquet, COMPRESSION ${codec}, ROW_GROUP_SIZE 1000)`);
}
await c.run(`COPY (SELECT i * 1000003 - 500000000 AS id, (-i)::INTEGER AS small, i / 3 AS score, i % 2 = 0 AS flag
  FROM range(3000) t(i) ORDER BY i) TO '${dir}/typed.parquet' (FORMAT parquet, COMPRESSION zstd)`);
