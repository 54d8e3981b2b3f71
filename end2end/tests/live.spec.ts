import { APIRequestContext, expect, test } from "@playwright/test";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { logIn } from "./login";

/** A bare git remote with one commit on main, for the embedded worker to clone. */
function remote(): string {
  const dir = mkdtempSync(join(tmpdir(), "stepwise-live-"));
  const seed = join(dir, "seed");
  const git = (cwd: string, ...args: string[]) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd });
  git(dir, "init", "--quiet", "--initial-branch=main", seed);
  writeFileSync(join(seed, "README.md"), "hello\n");
  git(seed, "add", ".");
  git(seed, "commit", "--quiet", "-m", "first");
  git(dir, "clone", "--quiet", "--bare", seed, "remote.git");
  return join(dir, "remote.git");
}

/** Submits a claude task over the REST API (the form has no runtime field yet). */
async function submit(request: APIRequestContext, steps: string[]): Promise<string> {
  const response = await request.post("/api/queue/jobs", {
    headers: { Authorization: `Bearer ${process.env.STEPWISE_E2E_TOKEN}` },
    data: {
      payload: {
        repository: remote(),
        task: {
          instructions: "Count slowly",
          runtime: { mode: "claude" },
          publish: { mode: "none" },
          steps: steps.map((instructions) => ({ instructions })),
        },
      },
    },
  });
  expect(response.status(), await response.text()).toBe(201);
  return (await response.json()).id;
}

test("the job page's timeline advances live while the agent runs, with no reload", async ({ page }) => {
  const id = await submit(page.request, [
    "@fake say one\n@fake sleep 1",
    "@fake say two\n@fake sleep 1",
    "@fake say three\n@fake sleep 1",
  ]);
  await logIn(page, `/tasks/queue/${id}`);
  // Marks this document: a reload would lose it.
  await page.evaluate(() => ((window as unknown as { marker: number }).marker = 1));
  const steps = page.locator("ol.timeline li");
  await expect(steps).toHaveCount(3);
  await expect(steps.nth(0)).toContainText("running", { timeout: 30_000 });
  await expect(steps.nth(0)).toContainText("succeeded", { timeout: 30_000 });
  await expect(steps.nth(1)).toContainText("succeeded", { timeout: 30_000 });
  await expect(steps.nth(2)).toContainText("succeeded", { timeout: 30_000 });
  await expect(page.getByTestId("job-status")).toHaveText("succeeded", { timeout: 30_000 });
  await expect(page.getByText("3/3 steps done")).toBeVisible();
  expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(1);
  await page.screenshot({ path: join(__dirname, "..", "..", "docs", "screenshots", "job.png"), fullPage: true });
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
  await expect(page.getByTestId("job-status")).toHaveText("cancelled", { timeout: 30_000 });
  await expect(steps.nth(0)).toContainText("cancelled");
  await expect(steps.nth(1)).toContainText("pending");
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

  const latencies: number[] = [];
  for (let i = 0; i < 20; i++) {
    const marker = `probe-${i}`;
    const seen = page.evaluate(
      (text) =>
        new Promise<number>((resolve) => {
          const check = () => document.body.innerText.includes(text) && (resolve(Date.now()), true);
          if (check()) return;
          new MutationObserver(() => check()).observe(document.body, { childList: true, subtree: true, characterData: true });
        }),
      marker,
    );
    const sent = Date.now();
    const appended = await page.request.post(`/api/queue/jobs/${id}/events`, {
      headers: auth(worker),
      data: { attempt: 1, kind: "task.warning", message: marker },
    });
    expect(appended.status()).toBe(200);
    latencies.push((await seen) - sent);
  }
  latencies.sort((a, b) => a - b);
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)];
  console.log(`event appended → in the DOM: p50 ${at(50)} ms, p99 ${at(99)} ms over ${latencies.length} events`);
});
