import { expect, test } from "@playwright/test";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

import { scratchDir } from "../scratch";
import { logIn } from "./login";
import { remote, submit } from "./tasks";

test("the job page's timeline and log tail advance live while the agent runs, with no reload", async ({ page }) => {
  // Step 1 holds until the page has shown it running: a slow hydration on a busy machine
  // must not let the step end before the page follows the stream.
  const gate = join(scratchDir("gate-"), "go");
  const id = await submit(page.request, [
    `@fake say alpha speaks\n@fake write notes.txt hello from step one\n@fake wait-for ${gate}`,
    "@fake say bravo speaks\n@fake sleep 2",
    "@fake say charlie speaks\n@fake sleep 1",
  ]);
  const steps = page.locator("ol.timeline li");
  const tail = page.getByTestId("log-tail");
  // Opened whatever happens: a held step would keep the one embedded worker busy, and every
  // later test's job queued, for the rest of the run.
  try {
    await logIn(page, `/tasks/queue/${id}`);
    // Marks this document: a reload would lose it.
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 1));
    await expect(steps).toHaveCount(3);
    await expect(steps.nth(0)).toContainText("running", { timeout: 30_000 });
    // The running step's output, as the agent's words rather than its JSON.
    await expect(tail).toContainText("alpha speaks", { timeout: 30_000 });
    await expect(tail).not.toContainText('"type"');
    await expect(page.getByRole("heading", { name: /^Live output of step 1\./ })).toBeVisible();
    // The running step's duration and the job's count on with no event to say so.
    for (const ticking of [steps.nth(0).locator("[data-since]"), page.locator("dd[data-since]")]) {
      const before = await ticking.textContent();
      expect(before).toMatch(/^\d+(ms|\.\ds)$/);
      await expect(ticking).not.toHaveText(before!, { timeout: 5_000 });
      await expect(ticking).toHaveText(/^\d+(ms|\.\ds)$/);
    }
  } finally {
    writeFileSync(gate, "");
  }
  await expect(steps.nth(0)).toContainText("succeeded", { timeout: 30_000 });
  await expect(tail).toContainText("bravo speaks", { timeout: 30_000 });
  await expect(steps.nth(1)).toContainText("succeeded", { timeout: 30_000 });
  await expect(steps.nth(2)).toContainText("succeeded", { timeout: 30_000 });
  await expect(page.getByTestId("job-status")).toHaveText("succeeded", { timeout: 30_000 });
  await expect(page.getByText("3/3 steps done")).toBeVisible();
  // Nothing counts on once the job has ended.
  await expect(page.locator("[data-since]")).toHaveCount(0);
  await expect(page.getByRole("heading", { name: /^Last output of step 3\./ })).toBeVisible();
  await expect(tail).toContainText("charlie speaks");
  expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(1);
  await page.screenshot({ path: join(__dirname, "..", "..", "docs", "screenshots", "job.png"), fullPage: true });

  // Step 1's patch reads as a diff: the file it wrote, its line added.
  await page.getByRole("link", { name: "Diff of step 1" }).click();
  await expect(page.getByRole("heading", { name: "patches/steps/step-0000.patch" })).toBeVisible();
  await expect(page.getByRole("heading", { name: "Files changed" })).toBeVisible();
  await expect(page.locator(".diff-files")).toContainText("notes.txt");
  await expect(page.locator(".diff-files")).toContainText("+1");
  await expect(page.locator("pre.diff .add")).toContainText("+hello from step one");
  await page.screenshot({ path: join(__dirname, "..", "..", "docs", "screenshots", "diff.png"), fullPage: true });
  await page.getByRole("link", { name: "← The job" }).click();
  await page.getByRole("link", { name: "Log of step 2" }).click();
  await expect(page.getByTestId("text")).toContainText("bravo speaks");
});

test("a job that ends while its page is open loses a running job's controls and shows what it published, with no reload", async ({ page }) => {
  const gate = join(scratchDir("gate-"), "go");
  const id = await submit(page.request, [`@fake write result.txt done\n@fake wait-for ${gate}`], "Publish while watched", {
    mode: "branch",
  });
  try {
    await logIn(page, `/tasks/queue/${id}`);
    await page.evaluate(() => ((window as unknown as { marker: number }).marker = 1));
    await expect(page.getByTestId("job-status")).toHaveText("running", { timeout: 30_000 });
    await expect(page.getByTestId("pause-now")).toBeVisible();
    await expect(page.getByTestId("published-branch")).toHaveCount(0);
  } finally {
    writeFileSync(gate, "");
  }
  await expect(page.getByTestId("job-status")).toHaveText("succeeded", { timeout: 30_000 });
  // The cards the server draws follow the job's end: what it published appears, and the
  // controls of a running job go.
  await expect(page.getByTestId("published-branch")).toHaveText(/\S/, { timeout: 10_000 });
  await expect(page.getByTestId("published-outcome")).toBeVisible();
  await expect(page.getByTestId("pause-now")).toHaveCount(0);
  await expect(page.getByTestId("add-step")).toHaveCount(0);
  await expect(page.getByRole("heading", { name: "Pause, resume, retry" })).toHaveCount(0);
  expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(1);
  // The job's card opens with its objective, or with its facts when the heading says it all:
  // no empty band above "Repository".
  const card = page.locator("section.card", { has: page.locator("#job-facts") });
  const gap = await card.evaluate((el) => el.querySelector("dt")!.getBoundingClientRect().top - el.getBoundingClientRect().top);
  const padding = await card.evaluate((el) => parseFloat(getComputedStyle(el).paddingTop) + parseFloat(getComputedStyle(el).borderTopWidth));
  expect(gap).toBeLessThanOrEqual(padding + 1);
});

test("the jobs list follows the queue live: a new job, its state and its steps", async ({ page }) => {
  await logIn(page, "/tasks/queue");
  await page.evaluate(() => ((window as unknown as { marker: number }).marker = 1));
  const objective = `Live list ${Date.now()}`;
  await submit(page.request, ["@fake say one\n@fake sleep 2", "@fake say two\n@fake sleep 2"], objective);
  const row = page.getByRole("row").filter({ hasText: objective });
  await expect(row).toBeVisible({ timeout: 10_000 });
  await expect(row).toContainText("running", { timeout: 30_000 });
  await expect(row).toContainText("1/2", { timeout: 30_000 });
  await expect(row).toContainText("succeeded", { timeout: 30_000 });
  await expect(row).toContainText("2/2");
  expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(1);
  await page.screenshot({ path: join(__dirname, "..", "..", "docs", "screenshots", "jobs.png"), fullPage: true });
});

test("cancelling a running job shows the request, then the job cancelled", async ({ page }) => {
  // The agent ignores SIGTERM, so the stop waits for the grace period: long enough to see.
  const id = await submit(page.request, ["@fake ignore-term\n@fake say started\n@fake sleep 60", "@fake say never"]);
  await logIn(page, `/tasks/queue/${id}`);
  const steps = page.locator("ol.timeline li");
  await expect(steps.nth(0)).toContainText("running", { timeout: 30_000 });
  await page.getByText("Cancel this job…").click();
  await page.getByLabel("Reason (optional)").fill("not today");
  await page.getByRole("button", { name: "Confirm cancel" }).click();
  await expect(page.getByRole("heading", { name: "Cancellation requested" })).toBeVisible();
  // While the worker stops it, the badge says so and the form is gone, not left open.
  await expect(page.getByTestId("job-status")).toHaveText("stopping");
  await expect(page.getByTestId("cancel-pending")).toBeVisible();
  await expect(page.getByRole("button", { name: "Confirm cancel" })).toHaveCount(0);
  await expect(page.getByTestId("job-status")).toHaveText("cancelled", { timeout: 30_000 });
  await expect(steps.nth(0)).toContainText("cancelled");
  // What never ran says so, and stages are named as a person reads them.
  await expect(steps.nth(1)).toContainText("skipped");
  await expect(page.locator("ol.stages")).toContainText("publish: skipped");
  await expect(page.locator("ol.stages")).not.toContainText("moonmind");
  await expect(page.getByText("not today")).toBeVisible();
});

test("figures: event stored → shown on the job page (printed, not asserted)", async ({ page }) => {
  // A gemini job: the embedded worker cannot take it, so this test plays its worker (with
  // gemini, not codex, so that the codex job of another test still has no worker).
  const made = execFileSync(
    process.env.STEPWISE_BIN!,
    ["token", "create", "--name", "latency-worker", "--kind", "worker", "--data-dir", process.env.STEPWISE_E2E_DATA_DIR!],
    { encoding: "utf8" },
  );
  const worker = /shown only now\): (sww_\S+)/.exec(made)![1];
  const auth = (token: string) => ({ Authorization: `Bearer ${token}` });
  const created = await page.request.post("/api/queue/jobs", {
    headers: auth(process.env.STEPWISE_E2E_TOKEN!),
    data: {
      payload: {
        repository: "octo/latency",
        task: { instructions: "Latency probe", runtime: { mode: "gemini" }, publish: { mode: "none" } },
      },
    },
  });
  const id = (await created.json()).id;
  const claimed = await page.request.post("/api/queue/jobs/claim", {
    headers: auth(worker),
    data: { capabilities: ["gemini", "git"] },
  });
  expect((await claimed.json()).job?.id).toBe(id);
  await logIn(page, `/tasks/queue/${id}`);
  await expect(page.getByTestId("job-status")).toHaveText("running");

  /**
   * Appends `count` events and times each until `shown` is true in the page: from the event's
   * own time, when the server stored it (`createdAt`, in ms), and from the POST being sent,
   * which adds the request's trip through Playwright's driver.
   */
  async function timed(
    count: number,
    event: (i: number) => object,
    shown: (i: number) => { selector: string; text: string },
  ): Promise<{ stored: number[]; sent: number[] }> {
    const stored: number[] = [];
    const fromSent: number[] = [];
    for (let i = 0; i < count; i++) {
      const seen = page.evaluate(
        ({ selector, text }) =>
          new Promise<number>((resolve) => {
            const test = () => document.querySelector(selector)?.textContent?.includes(text) ?? false;
            if (test()) return resolve(Date.now());
            new MutationObserver(() => test() && resolve(Date.now())).observe(document.body, {
              childList: true,
              subtree: true,
              characterData: true,
            });
          }),
        shown(i),
      );
      const sent = Date.now();
      const appended = await page.request.post(`/api/queue/jobs/${id}/events`, { headers: auth(worker), data: { attempt: 1, ...event(i) } });
      expect(appended.status()).toBe(200);
      const shownAt = await seen;
      stored.push(shownAt - Date.parse((await appended.json()).createdAt));
      fromSent.push(shownAt - sent);
    }
    const sorted = (values: number[]) => values.sort((a, b) => a - b);
    return { stored: sorted(stored), sent: sorted(fromSent) };
  }
  const at = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
  const report = (what: string, { stored, sent }: { stored: number[]; sent: number[] }) =>
    console.log(
      `${what}: p50 ${at(stored, 50)} ms, p99 ${at(stored, 99)} ms over ${stored.length} events ` +
        `(from the POST being sent: p50 ${at(sent, 50)} ms, p99 ${at(sent, 99)} ms)`,
    );

  // A warning is added to the events table straight from the stream.
  const direct = await timed(
    20,
    (i) => ({ kind: "task.warning", message: `probe-${i}` }),
    (i) => ({ selector: "body", text: `probe-${i}` }),
  );
  report("event stored → in the DOM (added from the stream)", direct);
  // A step event changes the timeline, which the page reloads its data for.
  const reloaded = await timed(
    20,
    (i) => ({ kind: i % 2 === 0 ? "task.step.started" : "task.step.finished", payload: { stepIndex: 0 } }),
    (i) => ({ selector: "ol.timeline li", text: i % 2 === 0 ? "running" : "succeeded" }),
  );
  report("step event stored → timeline updated (page data reloaded)", reloaded);

  // The same page once the job has 1,000 more events, most of them log lines, as a busy
  // agent leaves them: how long the server takes to render it, and how big it is.
  for (let sent = 0; sent < 1000; sent += 25) {
    const batch = Array.from({ length: 25 }, (_, k) => {
      const n = sent + k;
      const data = n % 50 === 0
        ? { attempt: 1, kind: "task.warning", message: `warning ${n}` }
        : { attempt: 1, kind: "task.step.log", message: `line ${n}: ${"x".repeat(60)}`, payload: { stepIndex: 0 } };
      return page.request.post(`/api/queue/jobs/${id}/events`, { headers: auth(worker), data });
    });
    for (const response of await Promise.all(batch)) expect(response.status()).toBe(200);
  }
  const renders: number[] = [];
  let bytes = 0;
  for (let i = 0; i < 12; i++) {
    const started = Date.now();
    const response = await page.request.get(`/tasks/queue/${id}`);
    const html = await response.text();
    renders.push(Date.now() - started);
    expect(response.status()).toBe(200);
    bytes = html.length;
  }
  renders.sort((a, b) => a - b);
  console.log(
    `job page with ${1000 + 42} events, server-rendered: p50 ${at(renders, 50)} ms, max ${renders[renders.length - 1]} ms over ${renders.length} requests (${Math.round(bytes / 1024)} KiB of HTML)`,
  );
});

test("a task with a completion check shows each iteration as it runs, with its verdict, and its checkpoints", async ({ page }) => {
  const response = await page.request.post("/api/queue/jobs", {
    headers: { Authorization: `Bearer ${process.env.STEPWISE_E2E_TOKEN}` },
    data: {
      payload: {
        repository: remote(),
        task: {
          // Every agent run (the step's and each iteration's) adds a line; the check wants two.
          instructions: "Count the runs\n@fake write runs.txt run\n@fake sleep 1",
          runtime: { mode: "claude" },
          publish: { mode: "none" },
          steps: [{ instructions: "Begin" }],
          completion: { command: "echo runs: $(wc -l < runs.txt); test $(wc -l < runs.txt) -ge 2", maxIterations: 3 },
        },
      },
    },
  });
  expect(response.status(), await response.text()).toBe(201);
  const id = (await response.json()).id;
  await logIn(page, `/tasks/queue/${id}`);
  const iterations = page.getByTestId("iterations").locator("li");
  await expect(iterations).toHaveCount(2, { timeout: 30_000 });
  await expect(iterations.nth(0)).toContainText("Check of the steps' work");
  await expect(iterations.nth(0)).toContainText("the check failed (exit code 1)");
  await expect(iterations.nth(1)).toContainText("the check passed", { timeout: 30_000 });
  await expect(page.getByTestId("job-status")).toHaveText("succeeded", { timeout: 30_000 });
  // The job's own facts (the Published card has its own).
  const facts = page.locator("section.card", { has: page.locator("#job-facts") }).locator(".facts");
  await expect(facts).toContainText("after step 1, after iteration 1");
  await expect(facts).toContainText("up to 3 times");
  // The check's output of iteration 0, as a log.
  await page.getByRole("link", { name: "Check output of iteration 0" }).click();
  await expect(page.getByTestId("text")).toContainText("runs: 1");
});
