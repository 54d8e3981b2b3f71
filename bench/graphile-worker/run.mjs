// The peer of `stepwise bench queue --peer graphile-worker`: the same phases, run by
// graphile-worker on the same PostgreSQL, so the two columns come from one run.
//
//   node run.mjs <connection string> <phase> <jobs> <concurrency>
//
// Phases: `unbatched` (one fetch and one completion per job), `batched` (a local queue of
// 500 and completions batched with no delay) and `latency` (<jobs> samples of addJob →
// task start with one idle runner). Each prints one JSON line: {"phase", "jobs",
// "seconds", "walBytes", "walFrom", "walTo"} (the WAL the server wrote meanwhile,
// server-wide, and where: pg_waldump can break it down) or {"phase", "latenciesMs"}. The jobs of a throughput phase are queued first, with one
// addJobs call, untimed: what is timed is the claim + complete of every job, until the
// table is empty (so a batched completion counts once it is written, not when it is
// queued in memory).
import { EventEmitter } from "node:events";
import { Logger, run, makeWorkerUtils } from "graphile-worker";
import pg from "pg";

const [connectionString, phase, jobsArg, concurrencyArg] = process.argv.slice(2);
const jobs = Number(jobsArg);
const concurrency = Number(concurrencyArg);
if (!connectionString || !["unbatched", "batched", "latency"].includes(phase) || !(jobs > 0) || !(concurrency > 0)) {
  console.error("usage: node run.mjs <connection string> unbatched|batched|latency <jobs> <concurrency>");
  process.exit(2);
}

// Only errors reach stderr: stdout carries the figures.
const logger = new Logger(() => (level, message) => {
  if (level === "error") console.error(message);
});

const utils = await makeWorkerUtils({ connectionString, logger });
await utils.migrate();
const probe = new pg.Client({ connectionString });
await probe.connect();

const worker = (phase) =>
  phase === "batched" ? { localQueue: { size: 500 }, completeJobBatchDelay: 0 } : {};

// Where the WAL is: bytes from its start, and the position as text for pg_waldump.
async function wal() {
  const { rows } = await probe.query(
    "SELECT (lsn - '0/0'::pg_lsn)::bigint AS bytes, lsn::text AS at FROM pg_current_wal_lsn() AS lsn",
  );
  return [Number(rows[0].bytes), rows[0].at];
}

async function remaining() {
  const { rows } = await probe.query("SELECT count(*)::int AS n FROM graphile_worker._private_jobs");
  return rows[0].n;
}

async function throughput(phase) {
  await utils.addJobs(Array.from({ length: jobs }, (_, i) => ({ identifier: "noop", payload: { i } })));
  const events = new EventEmitter();
  let done = 0;
  let allRan;
  const ran = new Promise((resolve) => (allRan = resolve));
  events.on("job:success", () => {
    done += 1;
    if (done === jobs) allRan();
  });
  const walBefore = await wal();
  const started = process.hrtime.bigint();
  const runner = await run({
    connectionString,
    concurrency,
    // Its default pool of 10 would be less than a fetch and a completion per worker
    // above 5 workers; at 16 workers the rate was the same with 10 and with 40.
    maxPoolSize: Math.max(10, 2 * concurrency),
    noHandleSignals: true,
    logger,
    pollInterval: 1000,
    events,
    taskList: { noop: async () => {} },
    preset: { worker: worker(phase) },
  });
  await ran;
  while ((await remaining()) > 0) await new Promise((r) => setTimeout(r, 1));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const walAfter = await wal();
  await runner.stop();
  const walBytes = walAfter[0] - walBefore[0];
  const [walFrom, walTo] = [walBefore[1], walAfter[1]];
  console.log(JSON.stringify({ phase, jobs, seconds, walBytes, walFrom, walTo }));
}

async function latency() {
  let startedAt;
  const events = new EventEmitter();
  const runner = await run({
    connectionString,
    concurrency: 1,
    noHandleSignals: true,
    logger,
    pollInterval: 1000,
    events,
    taskList: { noop: async () => startedAt(process.hrtime.bigint()) },
  });
  const latenciesMs = [];
  for (let i = 0; i < jobs; i++) {
    // As stepwise's phase does: let the idle runner settle before the job exists.
    await new Promise((r) => setTimeout(r, 3));
    const began = new Promise((resolve) => (startedAt = resolve));
    const created = process.hrtime.bigint();
    await utils.addJob("noop", { i });
    latenciesMs.push(Number((await began) - created) / 1e6);
  }
  await runner.stop();
  console.log(JSON.stringify({ phase, latenciesMs }));
}

try {
  if (phase === "latency") await latency();
  else await throughput(phase);
} finally {
  await probe.end();
  await utils.release();
}
