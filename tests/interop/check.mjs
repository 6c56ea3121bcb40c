// Reads fabricsim traces with readers fabricsim did not write and checks
// them against what fctstats reports (fctstats --format json):
//
//   node check.mjs parquet TRACE.parquet FCTSTATS.json   DuckDB (@duckdb/node-api)
//   node check.mjs arrow   TRACE.arrows|.arrow FCTSTATS.json   Arrow JS (apache-arrow)
//   node check.mjs links   LOADS.parquet LINKS.json   DuckDB, a per-link load file
//   node check.mjs requests REQUESTS.parquet SERVING.json   DuckDB, a per-request serving trace
//
// Row count, column names (the 26 of fabricsim.flows/v3, formats/trace.md),
// sum(size_bytes), sum(fct_ns), the schema metadata, every row's status
// and every collective's completion time must agree. For a links file
// (formats/links.md) against fctstats --links FILE --format json --top 0:
// rows, columns and their types, the metadata, and per tier and group type
// the directed links, bytes and mean and max utilization. For a request
// file (formats/requests.md) against fctstats --requests FILE --format json:
// rows, the 16 columns and their types, the metadata, the token and KV byte
// sums, the span, the KV transfer share and per latency (ttft, tpot,
// kv_transfer, e2e) the count, nearest-rank p50/p90/p99, max and mean,
// recomputed in SQL from the rows' times. Prints one
// "ok" line, or the differences and exits 1.
import { readFileSync } from 'node:fs';

const [kind, file, jsonFile] = process.argv.slice(2);
if (!kind || !file || !jsonFile) {
  console.error('usage: node check.mjs parquet|arrow|links|requests FILE FCTSTATS.json');
  process.exit(2);
}
const want = JSON.parse(readFileSync(jsonFile, 'utf8'));
const problems = [];
let reader;
const expect = (what, got, exp) => {
  const g = typeof got === 'bigint' ? got.toString() : JSON.stringify(got);
  const e = typeof exp === 'bigint' ? exp.toString() : JSON.stringify(exp);
  if (g !== e) problems.push(`${what}: ${reader} says ${g}, fctstats says ${e}`);
};
// Integers in fctstats' JSON are exact only below 2^53; the demo's are far below.
const big = (n) => {
  if (!Number.isSafeInteger(n)) throw new Error(`fctstats JSON number ${n} is not an exact integer`);
  return BigInt(n);
};
// Sums of utilizations in another order: equal to a few ulps.
const expectNear = (what, got, exp) => {
  if (!(Math.abs(got - exp) <= 1e-12 * Math.max(1, Math.abs(exp)))) problems.push(`${what}: ${reader} says ${got}, fctstats says ${exp}`);
};

if (kind === 'links') {
  reader = 'DuckDB';
  const { DuckDBInstance } = await import('@duckdb/node-api');
  const db = await DuckDBInstance.create(':memory:');
  const con = await db.connect();
  const quoted = `'${file.replaceAll("'", "''")}'`;
  const src = `read_parquet(${quoted})`;
  const rows = async (sql) => (await con.runAndReadAll(sql)).getRowObjects();
  // formats/links.md, in order, with the types DuckDB gives them.
  const columns = [
    ['link', 'INTEGER'], ['src', 'INTEGER'], ['dst', 'INTEGER'], ['src_role', 'VARCHAR'], ['dst_role', 'VARCHAR'],
    ['tier', 'VARCHAR'], ['kind', 'VARCHAR'], ['bw_bps', 'DOUBLE'], ['group_type', 'VARCHAR'], ['op', 'VARCHAR'],
    ['job', 'VARCHAR'], ['bytes', 'BIGINT'], ['busy_ns', 'BIGINT'], ['utilization', 'DOUBLE'],
  ];
  const cols = await rows(`DESCRIBE SELECT * FROM ${src}`);
  expect('columns', cols.map((c) => [c.column_name, c.column_type]), columns);
  const meta = Object.fromEntries((await rows(`SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata(${quoted})`)).map((m) => [m.k, m.v]));
  expect('fabricsim.schema', meta['fabricsim.schema'], 'fabricsim.links/v2');
  expect('fabricsim.backend', meta['fabricsim.backend'], want.backend);
  expect('fabricsim.routing', meta['fabricsim.routing'], want.routing);
  expect('fabricsim.granularity', meta['fabricsim.granularity'], want.granularity);
  expect('fabricsim.makespan_ns', meta['fabricsim.makespan_ns'], String(want.makespan_ns));
  expect('fabricsim.topology', JSON.parse(meta['fabricsim.topology'] ?? 'null'), want.topology);
  const [t] = await rows(`SELECT count(*)::BIGINT AS n, sum(bytes)::BIGINT AS bytes, count(DISTINCT (link, src))::BIGINT AS links FROM ${src}`);
  expect('rows', t.n, big(want.rows));
  expect('sum(bytes)', t.bytes, big(want.bytes));
  expect('directed links', t.links, big(want.links));
  // Per tier: every group type together ("all"), then each on its own,
  // over the directed links that carried its bytes.
  const per = async (groupBy) => rows(`
    WITH d AS (SELECT tier, ${groupBy} AS g, link, src, sum(bytes) AS b, sum(utilization) AS u FROM ${src} GROUP BY ALL)
    SELECT tier, g, count(*)::BIGINT AS links, sum(b)::BIGINT AS bytes, avg(u) AS mean, max(u) AS max FROM d GROUP BY ALL`);
  const got = new Map([...await per(`'all'`), ...await per('group_type')].map((r) => [`${r.tier} ${r.g}`, r]));
  expect('tier and group type rows', got.size, want.tiers.length);
  for (const w of want.tiers) {
    const g = got.get(`${w.tier} ${w.group_type}`);
    const what = `tier ${w.tier}, group ${w.group_type}`;
    if (!g) {
      problems.push(`${what}: missing in ${reader}'s sums`);
      continue;
    }
    expect(`${what}: links`, g.links, big(w.links));
    expect(`${what}: bytes`, g.bytes, big(w.bytes));
    expectNear(`${what}: mean utilization`, g.mean, w.util_mean);
    expectNear(`${what}: max utilization`, g.max, w.util_max);
  }
  con.closeSync?.();
  if (problems.length) {
    for (const p of problems) console.error(`interop: ${file}: ${p}`);
    process.exit(1);
  }
  console.log(`interop: ${reader} read ${file}: ${want.rows} rows, ${columns.length} columns, ${want.links} directed links, ` +
    `sum(bytes) ${want.bytes}, ${want.tiers.length} tier and group type sums: as fctstats --links says`);
  process.exit(0);
}
if (kind === 'requests') {
  reader = 'DuckDB';
  const { DuckDBInstance } = await import('@duckdb/node-api');
  const db = await DuckDBInstance.create(':memory:');
  const con = await db.connect();
  const quoted = `'${file.replaceAll("'", "''")}'`;
  const src = `read_parquet(${quoted})`;
  const rows = async (sql) => (await con.runAndReadAll(sql)).getRowObjects();
  // formats/requests.md, in order: replicas INT32, the rest INT64.
  const columns = [
    'request_id', 'prefill_replica', 'decode_replica', 'prefill_tokens', 'decode_tokens', 'kv_bytes',
    'arrival_ns', 'scheduled_ns', 'prefill_done_ns', 'kv_start_ns', 'kv_end_ns', 'decode_start_ns', 'completed_ns',
    'ttft_ns', 'tpot_ns', 'e2e_ns',
  ].map((c) => [c, c.endsWith('_replica') ? 'INTEGER' : 'BIGINT']);
  const cols = await rows(`DESCRIBE SELECT * FROM ${src}`);
  expect('columns', cols.map((c) => [c.column_name, c.column_type]), columns);
  const meta = Object.fromEntries((await rows(`SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata(${quoted})`)).map((m) => [m.k, m.v]));
  expect('fabricsim.schema', meta['fabricsim.schema'], 'fabricsim.requests/v1');
  expect('fabricsim.model', meta['fabricsim.model'], want.model);
  const [t] = await rows(`SELECT count(*)::BIGINT AS n, sum(prefill_tokens)::BIGINT AS p, sum(decode_tokens)::BIGINT AS d,
                          sum(kv_bytes)::BIGINT AS kv, (max(completed_ns) - min(arrival_ns))::BIGINT AS span,
                          sum(kv_end_ns - kv_start_ns)::DOUBLE / sum(e2e_ns)::DOUBLE AS share FROM ${src}`);
  expect('rows', t.n, big(want.requests));
  expect('sum(prefill_tokens)', t.p, big(want.prefill_tokens));
  expect('sum(decode_tokens)', t.d, big(want.decode_tokens));
  expect('sum(kv_bytes)', t.kv, big(want.kv_bytes));
  expect('span (max completed_ns - min arrival_ns)', t.span, big(want.span_ns));
  expectNear('KV transfer share', t.share, want.kv_share);
  // Each latency from its definition, not from the stored latency columns
  // alone: TTFT and e2e from the stage times, TPOT over requests of more
  // than one output token, KV transfer over requests that moved bytes.
  const metrics = {
    ttft: ['prefill_done_ns - arrival_ns', 'true'],
    tpot: ['(completed_ns - prefill_done_ns) // (decode_tokens - 1)', 'decode_tokens > 1'],
    kv_transfer: ['kv_end_ns - kv_start_ns', 'kv_bytes > 0'],
    e2e: ['completed_ns - arrival_ns', 'true'],
  };
  expect('latencies', want.latencies.map((l) => l.metric), Object.keys(metrics));
  for (const w of want.latencies) {
    const [expr, where] = metrics[w.metric];
    // Nearest rank: the ceil(p n / 100)-th smallest (pkg/stats.NearestRank).
    const [g] = await rows(`WITH v AS (SELECT (${expr})::BIGINT AS x FROM ${src} WHERE ${where}),
        r AS (SELECT x, row_number() OVER (ORDER BY x) AS k, count(*) OVER () AS n FROM v)
      SELECT count(*)::BIGINT AS count, max(x)::BIGINT AS max, avg(x)::DOUBLE AS mean,
        max(x) FILTER (WHERE k = greatest(1, ceil(50 * n / 100)))::BIGINT AS p50,
        max(x) FILTER (WHERE k = greatest(1, ceil(90 * n / 100)))::BIGINT AS p90,
        max(x) FILTER (WHERE k = greatest(1, ceil(99 * n / 100)))::BIGINT AS p99 FROM r`);
    expect(`${w.metric}: count`, g.count, big(w.count));
    if (w.count === 0) continue;
    for (const p of ['p50', 'p90', 'p99', 'max']) expect(`${w.metric}: ${p}`, g[p], big(w[`${p}_ns`]));
    expectNear(`${w.metric}: mean`, g.mean, w.mean_ns);
  }
  con.closeSync?.();
  if (problems.length) {
    for (const p of problems) console.error(`interop: ${file}: ${p}`);
    process.exit(1);
  }
  console.log(`interop: ${reader} read ${file}: ${want.requests} rows, ${columns.length} columns, ` +
    `sum(prefill_tokens) ${want.prefill_tokens}, sum(decode_tokens) ${want.decode_tokens}, sum(kv_bytes) ${want.kv_bytes}, ` +
    `${want.latencies.length} latencies' percentiles: as fctstats --requests says`);
  process.exit(0);
}
// formats/trace.md, in order; fctstats must list the same.
const schema = 'fabricsim.flows/v3';
const columns = [
  'flow_id', 'collective_id', 'src', 'dst', 'size_bytes', 'start_ns', 'end_ns', 'fct_ns', 'ideal_fct_ns',
  'conn_type', 'channel', 'chunk', 'op', 'algorithm', 'group_type', 'coll_size_bytes', 'nranks',
  'layer', 'layer_name', 'phase', 'microbatch', 'stage', 'protocol', 'predicted_ns', 'status', 'job',
];
if (JSON.stringify(want.columns) !== JSON.stringify(columns)) {
  console.error(`interop: ${jsonFile}: fctstats lists columns ${JSON.stringify(want.columns)}, want ${JSON.stringify(columns)}`);
  process.exit(1);
}
const wantTimes = new Map(want.collectives.map((c) => [String(c.collective_id), big(c.time_ns)]));

if (kind === 'parquet') {
  reader = 'DuckDB';
  const { DuckDBInstance } = await import('@duckdb/node-api');
  const db = await DuckDBInstance.create(':memory:');
  const con = await db.connect();
  const src = `read_parquet('${file.replaceAll("'", "''")}')`;
  const rows = async (sql) => (await con.runAndReadAll(sql)).getRowObjects();
  const [t] = await rows(`SELECT count(*)::BIGINT AS n, sum(size_bytes)::BIGINT AS size, sum(fct_ns)::BIGINT AS fct,
                          count(*) FILTER (WHERE conn_type = 'DELAY')::BIGINT AS delay,
                          count(*) FILTER (WHERE status <> 'ok')::BIGINT AS failed FROM ${src}`);
  expect('rows', t.n, big(want.totals.rows));
  expect('sum(size_bytes)', t.size, big(want.totals.sum_size_bytes));
  expect('sum(fct_ns)', t.fct, big(want.totals.sum_fct_ns));
  expect('delay rows', t.delay, big(want.totals.delay_rows));
  expect('rows with status other than ok', t.failed, 0n);
  const cols = await rows(`DESCRIBE SELECT * FROM ${src}`);
  expect('columns', cols.map((c) => c.column_name), columns);
  // formats/trace.md: DuckDB reads the integers as BIGINT/INTEGER and the strings as VARCHAR.
  for (const c of cols) {
    const ok = ['BIGINT', 'INTEGER', 'VARCHAR'].includes(c.column_type);
    if (!ok) problems.push(`column ${c.column_name}: DuckDB type ${c.column_type}`);
  }
  const meta = await rows(`SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata('${file.replaceAll("'", "''")}')`);
  expect('fabricsim.schema', meta.find((m) => m.k === 'fabricsim.schema')?.v, schema);
  const colls = await rows(`SELECT collective_id AS id, (max(end_ns) - min(start_ns))::BIGINT AS t FROM ${src}
                            WHERE collective_id >= 0 GROUP BY collective_id ORDER BY collective_id`);
  expect('collectives', colls.length, want.collectives.length);
  for (const c of colls) expect(`collective ${c.id} time_ns`, c.t, wantTimes.get(String(c.id)));
  con.closeSync?.();
} else if (kind === 'arrow') {
  reader = 'Arrow JS';
  const { tableFromIPC } = await import('apache-arrow');
  const table = tableFromIPC(readFileSync(file));
  expect('rows', BigInt(table.numRows), big(want.totals.rows));
  expect('columns', table.schema.fields.map((f) => f.name), columns);
  expect('fabricsim.schema', table.schema.metadata.get('fabricsim.schema'), schema);
  const col = (name) => table.getChild(name);
  const [size, fct, start, end, coll, conn, status] = ['size_bytes', 'fct_ns', 'start_ns', 'end_ns', 'collective_id', 'conn_type', 'status'].map(col);
  let sumSize = 0n, sumFct = 0n, delay = 0n, failed = 0n;
  const lo = new Map(), hi = new Map();
  for (let i = 0; i < table.numRows; i++) {
    sumSize += size.get(i);
    sumFct += fct.get(i);
    if (conn.get(i) === 'DELAY') delay++;
    if (status.get(i) !== 'ok') failed++;
    const id = coll.get(i);
    if (id < 0n) continue;
    const k = id.toString();
    if (!lo.has(k) || start.get(i) < lo.get(k)) lo.set(k, start.get(i));
    if (!hi.has(k) || end.get(i) > hi.get(k)) hi.set(k, end.get(i));
  }
  expect('sum(size_bytes)', sumSize, big(want.totals.sum_size_bytes));
  expect('sum(fct_ns)', sumFct, big(want.totals.sum_fct_ns));
  expect('delay rows', delay, big(want.totals.delay_rows));
  expect('rows with status other than ok', failed, 0n);
  expect('collectives', lo.size, want.collectives.length);
  for (const [k, t0] of lo) expect(`collective ${k} time_ns`, hi.get(k) - t0, wantTimes.get(k));
} else {
  console.error(`unknown kind ${kind} (parquet or arrow)`);
  process.exit(2);
}

if (problems.length) {
  for (const p of problems) console.error(`interop: ${file}: ${p}`);
  process.exit(1);
}
console.log(`interop: ${reader} read ${file}: ${want.totals.rows} rows, ${want.columns.length} columns, ` +
  `sum(size_bytes) ${want.totals.sum_size_bytes}, sum(fct_ns) ${want.totals.sum_fct_ns}, ` +
  `${want.collectives.length} collective times: as fctstats says`);
