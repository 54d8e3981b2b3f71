import { expect, test } from "@playwright/test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { logIn } from "./login";

const screenshots = join(__dirname, "..", "..", "docs", "screenshots");

test("the new-task page is rendered on the server, hydrates, and validates with the contract in wasm", async ({ page }) => {
  const consoleErrors: string[] = [];
  page.on("console", (msg) => {
    if (msg.type() === "error") consoleErrors.push(msg.text());
  });
  page.on("pageerror", (err) => consoleErrors.push(err.message));

  // The server function answered during SSR: the configured default (not the built-in pr).
  await logIn(page, "/tasks/queue/new");
  await expect(page.getByRole("heading", { name: "New task" })).toBeVisible();
  await expect(page.getByTestId("default-publish-mode")).toHaveText("branch");
  await expect(page.getByTestId("default-runtime")).toHaveText("codex");

  // Hydration happened: typing runs the contract's rules in the browser, no round trip.
  const objective = page.getByLabel("Objective");
  await objective.fill("x");
  await objective.fill("");
  await expect(page.getByText("describe the task objective", { exact: false })).toBeVisible();

  const step = page.getByLabel("Step 1 instructions");
  await step.fill("a");
  await step.fill("");
  await expect(page.getByText("step is blank", { exact: false })).toBeVisible();

  // A refused submit takes the reader to the first field in error, far above the button.
  await page.getByRole("button", { name: "Submit task" }).click();
  await expect(page.getByText("The server refused the task")).toBeVisible();
  await expect(page.getByLabel("Repository")).toBeFocused();

  await page.getByLabel("Repository").fill("octo/hello");
  await objective.fill("Add a README");
  await step.fill("Write the README");
  await expect(page.getByText("step is blank", { exact: false })).toHaveCount(0);
  await expect(page.getByText("describe the task objective", { exact: false })).toHaveCount(0);

  // A second step, then the server function over HTTP: its answer derives capabilities.
  await page.getByRole("button", { name: "Add step" }).click();
  await page.getByLabel("Step 2 instructions").fill("Link it from the docs");
  await page.getByRole("button", { name: "Check on the server" }).click();
  await expect(page.getByRole("status")).toContainText("The server accepted this task");
  // The latest answer alone: the earlier refusal is gone, not left above the acceptance.
  await expect(page.getByText("The server refused the task")).toHaveCount(0);
  await expect(page.getByTestId("required-capabilities")).toHaveText("codex, git");
  mkdirSync(screenshots, { recursive: true });
  await page.screenshot({ path: join(screenshots, "new-task.png"), fullPage: true });

  // User text is inert: markup in a step is shown as text, never parsed.
  await page.getByLabel("Step 2 instructions").fill("<img src=x onerror=alert(1)>");
  await page.getByRole("button", { name: "Check on the server" }).click();
  await page.getByText("Canonical payload").click();
  await expect(page.locator("pre")).toContainText("<img src=x onerror=alert(1)>");
  await expect(page.locator("img")).toHaveCount(0);

  expect(consoleErrors).toEqual([]);
});

test("the queue pages work at phone width", async ({ page }) => {
  await page.setViewportSize({ width: 375, height: 800 });
  await logIn(page, "/tasks/queue/new");
  await expect(page.getByRole("heading", { name: "New task" })).toBeVisible();
  const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  expect(await overflow()).toBeLessThanOrEqual(0);
  // A job's page and the list, with a long unbroken objective.
  await page.getByLabel("Repository").fill("octo/narrow");
  await page.getByLabel("Objective").fill(`Narrow ${"x".repeat(80)}`);
  await page.getByLabel("Step 1 instructions").fill("One step");
  await page.getByRole("button", { name: "Submit task" }).click();
  await expect(page).toHaveURL(/\/tasks\/queue\/[0-9a-f-]{36}$/);
  await expect(page.getByTestId("job-status")).toBeVisible();
  expect(await overflow()).toBeLessThanOrEqual(0);
  // The badge stays beside the long heading, not under it; "Log out" stays on one line.
  const heading = (await page.getByRole("heading", { level: 1 }).boundingBox())!;
  const badge = (await page.getByTestId("job-status").boundingBox())!;
  expect(badge.x).toBeGreaterThanOrEqual(heading.x + heading.width);
  expect(badge.y).toBeLessThan(heading.y + heading.height / 2);
  const logOut = (await page.getByRole("button", { name: "Log out" }).boundingBox())!;
  expect(logOut.height).toBeLessThan(40);
  await page.goto("/tasks/queue");
  const narrow = page.getByRole("row").filter({ hasText: "Narrow" }).first();
  await expect(narrow).toBeVisible();
  // The step progress is kept on a phone.
  await expect(narrow.locator("td").nth(4)).toBeVisible();
  await expect(narrow.locator("td").nth(4)).toContainText("0/1");
  expect(await overflow()).toBeLessThanOrEqual(0);
  await page.goto("/tasks/workers");
  expect(await overflow()).toBeLessThanOrEqual(0);
});

test("an unknown page answers 404 with a way back", async ({ page }) => {
  await logIn(page);
  const response = await page.goto("/no/such/page");
  expect(response?.status()).toBe(404);
  await expect(page.getByRole("link", { name: "Go to the queue" })).toBeVisible();
});

test("a task submitted in the browser is listed, has its page, and can be cancelled", async ({ page }) => {
  const consoleErrors: string[] = [];
  page.on("pageerror", (err) => consoleErrors.push(err.message));
  await logIn(page, "/tasks/queue/new");
  const objective = "Tidy the docs <img src=x onerror=alert(1)>";
  await page.getByLabel("Repository").fill("octo/hello");
  await page.getByLabel("Objective").fill(objective);
  await page.getByLabel("Step 1 instructions").fill("Fix the typos");
  await page.getByRole("button", { name: "Add step" }).click();
  await page.getByLabel("Step 2 instructions").fill("<script>window.owned = 1</script> Link the guide");
  await page.getByRole("button", { name: "Submit task" }).click();

  // The job's page: the header, the two steps pending, the server's publish default.
  await expect(page).toHaveURL(/\/tasks\/queue\/[0-9a-f-]{36}$/);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText(objective);
  await expect(page.getByTestId("job-status")).toHaveText("queued");
  await expect(page.getByText("branch", { exact: true })).toBeVisible();
  const timeline = page.locator("ol.timeline li");
  await expect(timeline).toHaveCount(2);
  await expect(timeline.nth(1)).toContainText("<script>window.owned = 1</script> Link the guide");
  expect(await page.evaluate(() => (window as unknown as { owned?: number }).owned)).toBeUndefined();
  await expect(page.locator("img")).toHaveCount(0);
  // The embedded worker offers git only: the page says why nothing runs this codex task.
  await expect(page.getByTestId("waiting")).toContainText("no connected worker has: codex");
  const jobUrl = page.url();

  // Listed on the queue page, newest first, with a link back to it.
  await page.goto("/tasks/queue");
  const row = page.getByRole("row").filter({ hasText: "Tidy the docs" }).first();
  await expect(row).toContainText("queued");
  await expect(row).toContainText("octo/hello");
  await expect(row).toContainText("0/2");
  await expect(row).toContainText("no connected worker has: codex");
  await row.getByRole("link").click();
  await expect(page).toHaveURL(jobUrl);

  // Cancel, with a reason: a queued job is cancelled at once.
  await page.getByText("Cancel this job…").click();
  await page.getByLabel("Reason (optional)").fill("wrong repo");
  await page.getByRole("button", { name: "Confirm cancel" }).click();
  await expect(page.getByTestId("job-status")).toHaveText("cancelled");
  await expect(page.getByText("wrong repo")).toBeVisible();
  await expect(page.getByRole("button", { name: "Confirm cancel" })).toHaveCount(0);
  // An ended job offers no cancel, not even a faded one.
  await expect(page.getByRole("button", { name: "Cancel this job" })).toHaveCount(0);
  // The tab is titled after the job.
  await expect(page).toHaveTitle(`${objective} · stepwise`);
  await expect(page.getByText("This job has ended (cancelled)")).toBeVisible();

  // The status filter is a plain GET form.
  await page.goto("/tasks/queue");
  await page.getByLabel("Status").selectOption("cancelled");
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/status=cancelled/);
  await expect(page.getByRole("row").filter({ hasText: "Tidy the docs" }).first()).toBeVisible();
  expect(consoleErrors).toEqual([]);
});

test("the workers page lists the embedded worker and what it can run", async ({ page }) => {
  await logIn(page, "/tasks/workers");
  await expect(page.getByRole("heading", { name: "Workers" })).toBeVisible();
  const row = page.getByRole("row").filter({ hasText: "embedded@" });
  await expect(row).toContainText("connected");
  await expect(row).toContainText("git");
  await expect(row).toContainText("stepwise-worker");
  // Its steps run in the bubblewrap box, and the page says so.
  await expect(row.getByRole("cell", { name: "bwrap", exact: true })).toBeVisible();
  mkdirSync(screenshots, { recursive: true });
  await page.screenshot({ path: join(screenshots, "workers.png"), fullPage: true });
});

test.describe("with JavaScript off", () => {
  test.use({ javaScriptEnabled: false });

  test("the pages render, and a job can still be cancelled with its plain form", async ({ page }) => {
    await logIn(page, "/tasks/queue");
    const created = await page.request.post("/api/queue/jobs", {
      headers: { Authorization: `Bearer ${process.env.STEPWISE_E2E_TOKEN}` },
      data: { payload: { repository: "octo/nojs", task: { instructions: "Cancel me without scripts" } } },
    });
    expect(created.status()).toBe(201);
    const id = (await created.json()).id;
    await page.goto(`/tasks/queue/${id}`);
    await expect(page.getByTestId("job-status")).toHaveText("queued");
    await page.getByText("Cancel this job…").click();
    await page.getByLabel("Reason (optional)").fill("no scripts here");
    await page.getByRole("button", { name: "Confirm cancel" }).click();
    // The server function answers a plain form post with a redirect back to the page.
    await expect(page).toHaveURL(new RegExp(`/tasks/queue/${id}\\??$`));
    await expect(page.getByTestId("job-status")).toHaveText("cancelled");
    await expect(page.getByText("no scripts here")).toBeVisible();
    // The other pages are whole without scripts too.
    await page.goto("/tasks/queue");
    await expect(page.getByRole("row").filter({ hasText: "Cancel me without scripts" })).toContainText("cancelled");
    await page.goto("/tasks/workers");
    await expect(page.getByRole("heading", { name: "Workers" })).toBeVisible();
    await expect(page.getByRole("row").filter({ hasText: "embedded@" })).toBeVisible();
    // The task form cannot work without scripts, and says so rather than sitting greyed out.
    await page.goto("/tasks/queue/new");
    await expect(page.getByTestId("needs-javascript")).toContainText("This form needs JavaScript");
    await expect(page.getByTestId("needs-javascript")).toContainText("stepwise submit");
  });
});

test("with JavaScript on, the task form does not say it needs it", async ({ page }) => {
  await logIn(page, "/tasks/queue/new");
  await expect(page.getByLabel("Repository")).toBeEnabled();
  await expect(page.getByTestId("needs-javascript")).toBeHidden();
});
