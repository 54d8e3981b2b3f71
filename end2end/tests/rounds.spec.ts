import { expect, test } from "@playwright/test";

import { logIn } from "./login";
import { submit } from "./tasks";

test("a job paused for its budget is raised and resumed on its page, then followed up once it succeeded", async ({ page }) => {
  const consoleErrors: string[] = [];
  page.on("pageerror", (err) => consoleErrors.push(err.message));
  // Each of the first two steps costs $0.60: past the $1.00 budget, step 3 waits.
  const id = await submit(
    page.request,
    ["@fake cost 0.6\n@fake write one.txt first", "@fake cost 0.6\n@fake write two.txt second", "@fake write three.txt third"],
    "Spend within reason",
    { mode: "none" },
    { budget: { maxCostUsd: 1 } },
  );
  const steps = page.locator("ol.timeline li");
  await logIn(page, `/tasks/queue/${id}`);
  await expect(page.getByTestId("job-status")).toHaveText("paused", { timeout: 30_000 });
  await expect(page.getByTestId("budget")).toContainText("$1.20 of $1.00");
  await expect(page.getByTestId("budget")).toContainText("(spent)");
  await expect(page.locator(`section[aria-labelledby="job-facts"] .facts`)).toContainText("its budget is spent: raise it to resume");
  await expect(steps.nth(2)).toContainText("pending");

  // Resuming first is refused, saying where to raise it; the raise is kept.
  await page.getByLabel("Cost (US dollars)").fill("5");
  await page.getByRole("button", { name: "Set budget" }).click();
  await expect(page.getByTestId("budget")).toContainText("$1.20 of $5.00");
  await expect(page.getByTestId("budget")).not.toContainText("(spent)");
  await page.getByRole("button", { name: "Resume" }).click();
  await expect(page.getByTestId("job-status")).toHaveText("succeeded", { timeout: 30_000 });
  await expect(steps.nth(2)).toContainText("succeeded");

  // Succeeded, it offers a follow-up: the same job runs one more step as round 2.
  await page.getByLabel("Follow up: what to do next").fill("@fake write four.txt fourth <i>now</i>");
  await page.getByRole("button", { name: "Follow up" }).click();
  await expect(steps).toHaveCount(4, { timeout: 30_000 });
  await expect(steps.nth(3)).toContainText("<i>now</i>");
  await expect(page.locator("i", { hasText: "now" })).toHaveCount(0);
  await expect(page.getByTestId("job-status")).toHaveText("succeeded", { timeout: 30_000 });
  await expect(steps.nth(3)).toContainText("succeeded");
  await expect(page.locator(`section[aria-labelledby="job-facts"] .facts`)).toContainText("2 (a follow-up, from step 4)");
  expect(consoleErrors).toEqual([]);
});
