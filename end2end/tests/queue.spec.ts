import { expect, test } from "@playwright/test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

import { logIn } from "./login";

const screenshots = join(__dirname, "..", "..", "docs", "screenshots");

test("queue page is rendered on the server, hydrates, and validates with the contract in wasm", async ({ page }) => {
  const consoleErrors: string[] = [];
  page.on("console", (msg) => {
    if (msg.type() === "error") consoleErrors.push(msg.text());
  });
  page.on("pageerror", (err) => consoleErrors.push(err.message));

  // The server function answered during SSR: the configured default (not the built-in pr).
  await logIn(page);
  await expect(page.getByRole("heading", { name: "Task queue" })).toBeVisible();
  await expect(page.getByTestId("default-publish-mode")).toHaveText("branch");
  await expect(page.getByTestId("default-runtime")).toHaveText("codex");

  // Hydration happened: typing runs the contract's rules in the browser, no round trip.
  const objective = page.getByLabel("Objective");
  await objective.fill("x");
  await objective.fill("");
  await expect(page.getByText("describe the task objective", { exact: false })).toBeVisible();

  const step = page.getByLabel("Step 1", { exact: true });
  await step.fill("a");
  await step.fill("");
  await expect(page.getByText("step is blank", { exact: false })).toBeVisible();

  await page.getByLabel("Repository").fill("octo/hello");
  await objective.fill("Add a README");
  await step.fill("Write the README");
  await expect(page.getByText("step is blank", { exact: false })).toHaveCount(0);
  await expect(page.getByText("describe the task objective", { exact: false })).toHaveCount(0);

  // A second step, then the server function over HTTP: its answer derives capabilities.
  await page.getByRole("button", { name: "Add step" }).click();
  await page.getByLabel("Step 2", { exact: true }).fill("Link it from the docs");
  await page.getByRole("button", { name: "Check on the server" }).click();
  await expect(page.getByRole("status")).toContainText("The server accepted this task");
  await expect(page.getByTestId("required-capabilities")).toHaveText("codex, git");
  mkdirSync(screenshots, { recursive: true });
  await page.screenshot({ path: join(screenshots, "queue.png"), fullPage: true });

  // User text is inert: markup in a step is shown as text, never parsed.
  await page.getByLabel("Step 2", { exact: true }).fill("<img src=x onerror=alert(1)>");
  await page.getByRole("button", { name: "Check on the server" }).click();
  await page.getByText("Canonical payload").click();
  await expect(page.locator("pre")).toContainText("<img src=x onerror=alert(1)>");
  await expect(page.locator("img")).toHaveCount(0);

  expect(consoleErrors).toEqual([]);
});

test("the queue page works at phone width", async ({ page }) => {
  await page.setViewportSize({ width: 375, height: 800 });
  await logIn(page);
  await expect(page.getByRole("heading", { name: "Task queue" })).toBeVisible();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  expect(overflow).toBeLessThanOrEqual(0);
});

test("an unknown page answers 404 with a way back", async ({ page }) => {
  await logIn(page);
  const response = await page.goto("/no/such/page");
  expect(response?.status()).toBe(404);
  await expect(page.getByRole("link", { name: "Go to the queue" })).toBeVisible();
});
