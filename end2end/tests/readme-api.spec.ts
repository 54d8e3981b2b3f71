// The README's curl examples, run as written against a real `stepwise serve`: the section
// "## The API" is read at test time, so an example that drifts from the API fails here.
//
// Each command runs unchanged through bash with TOKEN, API, JOB and WORKER set, as a reader
// would set them. Only two things are added from outside the commands: API points at this
// test's port instead of 3000, and a curlrc (CURL_HOME) makes every curl print its HTTP
// status after the body and give up after a few seconds (the SSE example never ends).
import { expect, test } from "@playwright/test";
import { ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

import { scratchDir } from "../scratch";

const root = resolve(__dirname, "..", "..");
const bin = process.env.STEPWISE_BIN ?? join(root, "target", "release", "stepwise");
const port = Number(process.env.STEPWISE_README_PORT ?? 3918);

/** The README's shell commands under "## The API", one entry per ```sh block. */
function apiBlocks(): string[][] {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const start = readme.indexOf("\n## The API");
  const end = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => commands(m[1]));
}

/** Splits shell text into commands the way bash reads them: a newline ends a command
 * unless it is quoted or escaped by a backslash. */
function commands(text: string): string[] {
  const found: string[] = [];
  let current = "";
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === "'" || c === '"') {
      quote = c;
    } else if (c === "\\" && text[i + 1] === "\n") {
      i++;
      current += " ";
      continue;
    } else if (c === "#" && (current === "" || /\s$/.test(current))) {
      // A comment runs to the end of the line.
      while (i + 1 < text.length && text[i + 1] !== "\n") i++;
      continue;
    } else if (c === "\n") {
      if (current.trim() !== "") found.push(current.trim());
      current = "";
      continue;
    }
    current += c;
  }
  if (current.trim() !== "") found.push(current.trim());
  return found;
}

type Answer = { status: number; body: string; exit: number };

class Reader {
  env: Record<string, string>;
  constructor(
    readonly dir: string,
    vars: Record<string, string>,
  ) {
    this.env = { ...(process.env as Record<string, string>), ...vars, CURL_HOME: dir };
  }

  run(command: string): Answer {
    const done = spawnSync("bash", ["-c", command], { cwd: this.dir, env: this.env, encoding: "utf8" });
    const out = done.stdout ?? "";
    const cut = out.lastIndexOf("\n");
    return { status: Number(out.slice(cut + 1)), body: out.slice(0, Math.max(cut, 0)), exit: done.status ?? -1 };
  }

  /** Runs the command in the background (a stream), answering when it ends. */
  start(command: string): Promise<Answer> {
    const child = spawn("bash", ["-c", command], { cwd: this.dir, env: this.env });
    let out = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    return new Promise((resolveAnswer) =>
      child.on("close", (code) => {
        const cut = out.lastIndexOf("\n");
        resolveAnswer({ status: Number(out.slice(cut + 1)), body: out.slice(0, Math.max(cut, 0)), exit: code ?? -1 });
      }),
    );
  }

  /** Runs the command and expects a 2xx, naming the command when it is not. */
  ok(command: string): any {
    const answer = this.run(command);
    expect(answer.status, `${command}\n→ ${answer.body}`).toBeGreaterThanOrEqual(200);
    expect(answer.status, `${command}\n→ ${answer.body}`).toBeLessThan(300);
    return JSON.parse(answer.body);
  }
}

/** The one command of `commands` that calls `path` (a suffix of the URL, before any query). */
function find(commands: string[], pattern: RegExp): string {
  const found = commands.filter((c) => pattern.test(c));
  expect(found, `exactly one README example matches ${pattern}`).toHaveLength(1);
  return found[0];
}

let server: ChildProcess | undefined;
test.afterAll(() => {
  server?.kill("SIGTERM");
});

test("the README's curl examples work as written against stepwise serve", async () => {
  test.setTimeout(90_000);
  const dataDir = scratchDir("readme-");
  const cwd = scratchDir("readme-cwd-");
  writeFileSync(join(cwd, ".curlrc"), 'write-out = "\\n%{http_code}"\nmax-time = 5\n');
  writeFileSync(join(cwd, "execute.log"), "step 1: done\n");

  // No embedded worker: this test plays the worker itself, with the README's curl commands.
  server = spawn(bin, ["serve", "--port", String(port), "--data-dir", dataDir, "--no-worker"], {
    env: { ...process.env, RUST_LOG: "warn" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const token = await new Promise<string>((resolveToken, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`no admin token printed; saw: ${seen}`)), 30_000);
    server!.stdout!.on("data", (chunk) => {
      seen += chunk;
      const token = /first admin token[^:]*: (swu_\S+)/.exec(seen);
      if (token && seen.includes("stepwise is running")) {
        clearTimeout(timer);
        resolveToken(token[1]);
      }
    });
  });
  const minted = execFileSync(bin, ["token", "create", "--name", "readme-worker", "--kind", "worker", "--data-dir", dataDir], {
    encoding: "utf8",
  });
  const worker = /shown only now\): (sww_\S+)/.exec(minted)?.[1];
  expect(worker, minted).toBeTruthy();

  const [user, workerRoutes] = apiBlocks();
  expect(workerRoutes, "the README has a block of user routes and one of worker routes").toBeTruthy();
  const apiLine = find(user, /^API=/);
  const api = apiLine.replace(/^API=/, "").trim().replace(":3000/", `:${port}/`);
  expect(find(user, /^TOKEN=/)).toContain("swu_");
  const reader = new Reader(cwd, { TOKEN: token, API: api, WORKER: worker! });

  const submit = find(user, /-X POST \$API\/jobs -H/);
  const submitJob = () => {
    const job = reader.ok(submit);
    expect(job.status).toBe("queued");
    reader.env.JOB = job.id;
    return job;
  };

  // The user routes, in the README's order; the jobs stream hears the first submit.
  const following = reader.start(find(user, /\$API\/jobs\/stream/));
  await new Promise((r) => setTimeout(r, 1000));
  const job = submitJob();
  const heard = await following;
  expect(heard.exit, "the stream stays open until curl's time limit").toBe(28);
  expect(heard.body).toContain(`"jobId":"${job.id}","what":"changed"`);
  expect(job.payload.task.steps.map((s: any) => s.instructions)).toEqual(["Write the README", "Link it from the docs"]);
  expect(reader.ok(find(user, /\$API\/jobs\?status=queued/)).items.map((j: any) => j.id)).toContain(job.id);
  expect(reader.ok(find(user, /curl -s \$API\/jobs\/\$JOB -H/)).id).toBe(job.id);
  const events = reader.ok(find(user, /\/events\?after=0/));
  expect(JSON.stringify(events)).toContain("job.created");
  const stream = reader.run(find(user, /\/events\/stream/));
  expect(stream.exit, "the stream stays open until curl's time limit").toBe(28);
  expect(stream.body).toContain("job.created");
  const cancel = find(user, /\/cancel -H/);
  expect(reader.ok(cancel).status).toBe("cancelled");
  expect(reader.ok(find(user, /\/artifacts -H/)).items).toEqual([]);

  // The worker routes: each of the three ways a job ends needs a job of its own.
  const claim = find(workerRoutes, /\/jobs\/claim/);
  const claimJob = () => {
    const claimed = reader.ok(claim).job;
    expect(claimed.id).toBe(reader.env.JOB);
    expect(claimed.attempt).toBe(1);
  };

  submitJob();
  claimJob();
  const beat = reader.ok(find(workerRoutes, /\/heartbeat/));
  expect([beat.status, beat.cancelRequestedAt ?? null]).toEqual(["running", null]);
  reader.ok(find(workerRoutes, /\$JOB\/events -H/));
  expect(reader.ok(find(workerRoutes, /\/artifacts\/upload/)).name).toBe("logs/execute.log");
  expect(reader.ok(find(workerRoutes, /\/complete -H/)).status).toBe("succeeded");
  const artifacts = reader.ok(find(user, /\/artifacts -H/)).items.map((a: any) => a.name);
  expect(artifacts).toEqual(["logs/execute.log"]);

  // A completion that takes the next job in the same call: the held job is $JOB. Before
  // the retryable failure below, whose job would be due again within seconds.
  submitJob();
  claimJob();
  const next = reader.ok(submit);
  const finished = reader.ok(find(workerRoutes, /\/complete-and-claim/));
  expect([finished.completed.id, finished.completed.status]).toEqual([reader.env.JOB, "succeeded"]);
  expect([finished.job.id, finished.job.status, finished.job.attempt]).toEqual([next.id, "running", 1]);

  submitJob();
  claimJob();
  expect(reader.ok(find(workerRoutes, /\/fail/)).status).toBe("queued");

  submitJob();
  claimJob();
  reader.ok(cancel);
  expect(reader.ok(find(workerRoutes, /\/cancel\/ack/)).status).toBe("cancelled");
});
