import { Page, expect, test } from "@playwright/test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

import { scratchDir } from "../scratch";
import { logIn } from "./login";
import { submit } from "./tasks";

/** The job over REST, as its admin reads it. */
async function job(page: Page, id: string): Promise<{ attempt: number; status: string }> {
  const response = await page.request.get(`/api/queue/jobs/${id}`, {
    headers: { Authorization: `Bearer ${process.env.STEPWISE_E2E_TOKEN}` },
  });
  expect(response.status()).toBe(200);
  return response.json();
}

/** The job's status as the page was rendered, reloading until it reads `status`: the course
 * card is drawn by the server when the page loads, so its forms follow the state only then. */
async function reloadUntil(page: Page, status: string): Promise<void> {
  await expect
    .poll(
      async () => {
        await page.reload();
        return page.getByTestId("job-status").textContent();
      },
      { timeout: 30_000, intervals: [300] },
    )
    .toBe(status);
}

test("an operator pauses a job, adds a step, resumes it and approves its changes beside the diff", async ({ page }) => {
  const consoleErrors: string[] = [];
  page.on("pageerror", (err) => consoleErrors.push(err.message));
  // Step 1 runs until the pause has been asked for, however slow the page is to show it.
  const gate = join(scratchDir("gate-"), "go");
  const id = await submit(
    page.request,
    [`@fake write one.txt first\n@fake wait-for ${gate}`, "@fake write two.txt second"],
    "Steer me",
    { mode: "none", approval: "required" },
  );
  const steps = page.locator("ol.timeline li");
  // Opened whatever happens, so that a failure here leaves the embedded worker free.
  try {
    await logIn(page, `/tasks/queue/${id}`);
    await expect(steps.nth(0)).toContainText("running", { timeout: 30_000 });
    await page.getByRole("button", { name: "Pause after the running step" }).click();
    await expect(page).toHaveURL(new RegExp(`/tasks/queue/${id}\\??$`));
  } finally {
    writeFileSync(gate, "");
  }
  // The step ends, its checkpoint is saved, and the job waits holding nothing. The course
  // card follows the state without a reload: it offers Resume now.
  await page.evaluate(() => ((window as unknown as { marker: number }).marker = 1));
  await expect(page.getByTestId("job-status")).toHaveText("paused", { timeout: 30_000 });
  await expect(page.getByRole("button", { name: "Resume" })).toBeVisible();
  await expect(page.getByRole("button", { name: "Pause after the running step" })).toHaveCount(0);
  expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(1);
  await expect(steps.nth(0)).toContainText("succeeded");
  await expect(steps.nth(1)).toContainText("pending");

  // A step added to the paused job, with hostile text that stays text.
  await page.getByLabel("New step's instructions").fill("@fake write three.txt third <img src=x onerror=alert(1)>");
  await page.getByRole("button", { name: "Add step" }).click();
  await expect(steps).toHaveCount(3);
  await expect(steps.nth(2)).toContainText("<img src=x onerror=alert(1)>");
  await expect(page.locator("img")).toHaveCount(0);

  await page.getByRole("button", { name: "Resume" }).click();
  await page.evaluate(() => ((window as unknown as { marker: number }).marker = 2));
  await expect(page.getByTestId("job-status")).toHaveText("awaiting_approval", { timeout: 30_000 });
  // Step 1 ran once, in the first attempt; the diff shows the work of both attempts.
  await expect(page.getByRole("heading", { name: "Approval" })).toBeVisible();
  const diff = page.getByTestId("diff");
  await expect(diff).toContainText("+first");
  await expect(diff).toContainText("+second");
  await expect(diff).toContainText("+third <img src=x onerror=alert(1)>");
  await expect(page.locator(".diff-files")).toContainText("three.txt");
  // The approval card and its diff came in live, with no reload.
  expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(2);
  // Paused, resumed, then approved: three attempts of one job.
  expect((await job(page, id)).attempt).toBe(2);
  await page.getByRole("button", { name: "Approve and publish" }).click();
  await expect(page.getByTestId("job-status")).toHaveText("succeeded", { timeout: 30_000 });
  await expect(steps.nth(2)).toContainText("succeeded");
  expect((await job(page, id)).attempt).toBe(3);
  expect(consoleErrors).toEqual([]);
});

test.describe("with JavaScript off", () => {
  test.use({ javaScriptEnabled: false });

  test("a step added while the job runs runs in the same attempt, and a rejection and a retry are plain forms", async ({ page }) => {
    const id = await submit(
      page.request,
      ["@fake sleep 5\n@fake write one.txt first"],
      "Steer me without scripts",
      { mode: "none", approval: "required" },
    );
    await logIn(page, `/tasks/queue/${id}`);
    await reloadUntil(page, "running");
    await page.getByLabel("New step's instructions").fill("@fake write two.txt second");
    await page.getByRole("button", { name: "Add step" }).click();
    await expect(page).toHaveURL(new RegExp(`/tasks/queue/${id}\\??$`));
    await expect(page.locator("ol.timeline li")).toHaveCount(2);
    await reloadUntil(page, "awaiting_approval");
    const diff = page.getByTestId("diff");
    await expect(diff).toContainText("+first");
    await expect(diff).toContainText("+second");
    // The added step ran in the attempt that was running, not in a new one.
    expect((await job(page, id)).attempt).toBe(1);
    await page.locator("#reject-reason").fill("not like this <b>bold</b>");
    await page.getByRole("button", { name: "Reject" }).click();
    await expect(page.getByTestId("job-status")).toHaveText("failed");
    await expect(page.getByText("not like this <b>bold</b>").first()).toBeVisible();
    await expect(page.locator("b", { hasText: "bold" })).toHaveCount(0);

    // Retry from step 2: step 1's work comes back from its checkpoint.
    await page.getByLabel("Retry from step").selectOption("2");
    await page.getByRole("button", { name: "Retry" }).click();
    // The post's answer is the page again: reloading before it lands would race it.
    await expect(page.getByTestId("job-status")).not.toHaveText("failed");
    await reloadUntil(page, "awaiting_approval");
    await expect(page.getByTestId("diff")).toContainText("+first");
    await page.getByRole("button", { name: "Approve and publish" }).click();
    await expect(page.getByTestId("job-status")).not.toHaveText("awaiting_approval");
    await reloadUntil(page, "succeeded");
  });
});
