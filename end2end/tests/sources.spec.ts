import { Page, expect, test } from "@playwright/test";

import { logIn } from "./login";
import { remote, submit } from "./tasks";

const auth = { Authorization: `Bearer ${process.env.STEPWISE_E2E_TOKEN}` };

/** The job over REST. */
async function job(page: Page, id: string): Promise<{ status: string; waitingFor?: string[] }> {
  const response = await page.request.get(`/api/queue/jobs/${id}`, { headers: auth });
  expect(response.status()).toBe(200);
  return response.json();
}

test("an operator makes a schedule on its page, pauses, resumes and deletes it, its name kept as text", async ({ page }) => {
  const consoleErrors: string[] = [];
  page.on("pageerror", (err) => consoleErrors.push(err.message));
  await logIn(page, "/tasks/schedules");
  await expect(page.getByRole("heading", { name: "Schedules" })).toBeVisible();
  const name = `nightly <img src=x onerror=alert(1)> ${Date.now()}`;
  await page.getByLabel("Name").fill(name);
  await page.getByLabel("Cron (minute hour day month weekday)").fill("0 3 * * *");
  await page.getByLabel("Time zone").fill("Europe/Berlin");
  await page.getByLabel("Task: a job request in JSON, as POST /api/queue/jobs takes it").fill(
    JSON.stringify({ payload: { repository: remote(), task: { instructions: "Hunt flaky tests" } } }),
  );
  await page.getByRole("button", { name: "Make the schedule" }).click();
  const row = page.locator("tr", { hasText: name });
  await expect(row).toHaveCount(1, { timeout: 15_000 });
  await expect(row).toContainText("0 3 * * * in Europe/Berlin");
  await expect(row).toContainText("active");
  await expect(page.locator("img")).toHaveCount(0);

  await row.getByRole("button", { name: "Pause" }).click();
  await expect(page.locator("tr", { hasText: name })).toContainText("paused");
  await page.locator("tr", { hasText: name }).getByRole("button", { name: "Resume" }).click();
  await expect(page.locator("tr", { hasText: name })).toContainText("active");
  // The same schedule over REST.
  const listed = await page.request.get("/api/queue/schedules", { headers: auth });
  const items: { name: string; paused: boolean }[] = (await listed.json()).items;
  expect(items.find((s) => s.name === name)?.paused).toBe(false);
  await page.locator("tr", { hasText: name }).getByRole("button", { name: "Delete" }).click();
  await expect(page.locator("tr", { hasText: name })).toHaveCount(0);
  expect(consoleErrors).toEqual([]);
});

test("a job that waits for another shows the edge both ways and runs once the other succeeded", async ({ page }) => {
  const first = await submit(page.request, ["@fake sleep 2\n@fake say first"], "First");
  const response = await page.request.post("/api/queue/jobs", {
    headers: auth,
    data: {
      dependsOn: [first],
      payload: {
        repository: remote(),
        task: { instructions: "Second", runtime: { mode: "claude" }, publish: { mode: "none" }, steps: [{ instructions: "@fake say second" }] },
      },
    },
  });
  expect(response.status(), await response.text()).toBe(201);
  const second: { id: string; waitingFor: string[] } = await response.json();
  expect(second.waitingFor).toEqual([first]);

  await logIn(page, `/tasks/queue/${second.id}`);
  await expect(page.getByTestId("depends-on")).toContainText(first.slice(0, 8));
  await page.goto(`/tasks/queue/${first}`);
  await expect(page.getByTestId("needed-by")).toContainText(second.id.slice(0, 8));
  await expect.poll(async () => (await job(page, second.id)).status, { timeout: 40_000 }).toBe("succeeded");
  await page.goto(`/tasks/queue/${second.id}`);
  await expect(page.getByTestId("depends-on")).toContainText("succeeded");
});
