// Authoring a task in the browser: the steps editor and every task-level field, checked
// against the payload the server stored.
import { Page, expect, test } from "@playwright/test";

import { logIn, plainServer } from "./login";

/** The stored payload of the job whose page the browser is on. */
async function storedPayload(page: Page, base = "", token = process.env.STEPWISE_E2E_TOKEN!) {
  await expect(page).toHaveURL(/\/tasks\/queue\/[0-9a-f-]{36}$/);
  const id = /\/tasks\/queue\/([0-9a-f-]{36})$/.exec(page.url())![1];
  const response = await page.request.get(`${base}/api/queue/jobs/${id}`, {
    headers: { Authorization: `Bearer ${token}` },
  });
  expect(response.status(), await response.text()).toBe(200);
  return (await response.json()).payload;
}

function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("pageerror", (err) => errors.push(err.message));
  page.on("console", (msg) => {
    if (msg.type() === "error") errors.push(msg.text());
  });
  return errors;
}

const stepHeadings = (page: Page) => page.getByRole("heading", { name: /^Step \d+$/ });

test("the steps editor: paste a checklist, add, reorder, remove, a title and a skill", async ({ page }) => {
  const errors = watchErrors(page);
  await logIn(page, "/tasks/queue/new");
  await page.getByLabel("Repository").fill("octo/steps");
  await page.getByLabel("Objective").fill("Ship the steps editor");

  // One step by default; a pasted checklist takes the place of that blank one.
  await expect(stepHeadings(page)).toHaveCount(1);
  await page.getByText("Paste a markdown checklist").click();
  await page.getByLabel("Markdown checklist").fill("## Steps\n- [ ] Write the spec\nnot an item");
  await page.getByRole("button", { name: "Add these steps" }).click();
  await expect(page.getByText("line 3: not a checklist item")).toBeVisible();
  await expect(stepHeadings(page)).toHaveCount(1);
  await page.getByLabel("Markdown checklist").fill("## Steps\n- [ ] Write the spec\n- [x] Implement it");
  await page.getByRole("button", { name: "Add these steps" }).click();
  await expect(page.getByText("Added 2 steps.")).toBeVisible();
  await expect(stepHeadings(page)).toHaveCount(2);
  await expect(page.getByLabel("Step 1 instructions")).toHaveValue("Write the spec");
  await expect(page.getByLabel("Step 2 instructions")).toHaveValue("Implement it");

  // Add two, move the third up, remove the fourth.
  await page.getByRole("button", { name: "Add step" }).click();
  await page.getByLabel("Step 3 instructions").fill("Update the docs");
  await page.getByRole("button", { name: "Add step" }).click();
  await page.getByLabel("Step 4 instructions").fill("Remove me");
  await page.getByRole("button", { name: "Move step 3 up" }).click();
  await expect(page.getByLabel("Step 2 instructions")).toHaveValue("Update the docs");
  await expect(page.getByLabel("Step 3 instructions")).toHaveValue("Implement it");
  await expect(page.getByRole("button", { name: "Move step 1 up" })).toBeDisabled();
  await expect(page.getByRole("button", { name: "Move step 4 down" })).toBeDisabled();
  await page.getByRole("button", { name: "Remove step 4" }).click();
  await expect(stepHeadings(page)).toHaveCount(3);

  // A title on one (with markup, which must stay text), a skill the server knows on another.
  await page.getByLabel("Step 2 title").fill("Docs <img src=x onerror=\"window.owned=1\">");
  await expect(page.getByLabel("Step 1 skill").locator("option")).toContainText(["Inherit the task's skill", "auto (the agent decides)", "speckit — spec first"]);
  await page.getByLabel("Step 1 skill").selectOption("speckit");

  // A completely blank step is refused with a message until it is filled or removed.
  await page.getByRole("button", { name: "Add step" }).click();
  await page.getByLabel("Step 4 title").fill("x");
  await page.getByLabel("Step 4 title").fill("");
  await expect(page.getByText("step is blank", { exact: false })).toBeVisible();
  await page.getByRole("button", { name: "Remove step 4" }).click();
  await expect(page.getByText("step is blank", { exact: false })).toHaveCount(0);

  await page.getByRole("button", { name: "Submit task" }).click();
  const payload = await storedPayload(page);
  const steps = payload.task.steps;
  expect(steps.map((s: { instructions: string }) => s.instructions)).toEqual([
    "Write the spec",
    "Update the docs",
    "Implement it",
  ]);
  expect(steps[0].skill.id).toBe("speckit");
  expect(steps[1].title).toBe('Docs <img src=x onerror="window.owned=1">');
  expect(steps[1].skill ?? null).toBeNull();
  expect(steps.map((s: { id: string }) => s.id)).toEqual(["step-1", "step-2", "step-3"]);
  // This server sets STEPWISE_DEFAULT_PUBLISH_MODE=branch; the form left it to the server.
  expect(payload.task.publish.mode).toBe("branch");

  // The job's page shows the three steps in that order, the skill and the title.
  const timeline = page.locator("ol.timeline li");
  await expect(timeline).toHaveCount(3);
  await expect(timeline.nth(0)).toContainText("Write the spec");
  await expect(timeline.nth(0)).toContainText("speckit");
  await expect(timeline.nth(1)).toContainText('Docs <img src=x onerror="window.owned=1">');
  await expect(page.locator("img")).toHaveCount(0);
  expect(await page.evaluate(() => (window as unknown as { owned?: number }).owned)).toBeUndefined();
  expect(errors).toEqual([]);
});

test("every task-level field of the form reaches the stored payload", async ({ page }) => {
  const errors = watchErrors(page);
  await logIn(page, "/tasks/queue/new");
  await page.getByLabel("Repository").fill("octo/fields");
  await page.getByLabel("Objective").fill("Use every field");
  // The efforts offered follow the runtime.
  await expect(page.getByLabel("Effort").locator("option", { hasText: "ultra" })).toHaveCount(1);
  await page.getByLabel("Runtime").selectOption("claude");
  await expect(page.getByLabel("Effort").locator("option", { hasText: "max" })).toHaveCount(1);
  await expect(page.getByLabel("Effort").locator("option", { hasText: "ultra" })).toHaveCount(0);
  await page.getByLabel("Model").fill("opus");
  await page.getByLabel("Effort").selectOption("high");
  await page.getByLabel("Skill", { exact: true }).selectOption("speckit");
  await page.getByLabel("Step 1 instructions").fill("Do the work");
  await page.getByLabel("Starting branch").fill("main");
  await page.getByLabel("New branch").fill("feature/fields");
  await page.getByLabel("Publish", { exact: true }).selectOption("pr");
  await page.getByLabel("Pull request base").fill("develop");
  await page.getByLabel("Commit message").fill("Use every field");
  await page.getByLabel("Pull request title").fill("Every field");
  await page.getByLabel("Pull request body").fill("All of them.");
  await page.getByRole("button", { name: "Submit task" }).click();
  const payload = await storedPayload(page);
  expect(payload.task.runtime).toEqual({ mode: "claude", model: "opus", effort: "high" });
  expect(payload.targetRuntime).toBe("claude");
  expect(payload.task.skill.id).toBe("speckit");
  expect(payload.task.git).toEqual({ startingBranch: "main", newBranch: "feature/fields" });
  expect(payload.task.publish).toEqual({
    mode: "pr",
    prBaseBranch: "develop",
    commitMessage: "Use every field",
    prTitle: "Every field",
    prBody: "All of them.",
  });
  expect(payload.requiredCapabilities).toEqual(expect.arrayContaining(["claude", "git", "gh"]));
  expect(errors).toEqual([]);
});

test("the server's errors show beside their fields", async ({ page }) => {
  await logIn(page, "/tasks/queue/new");
  await page.getByRole("button", { name: "Submit task" }).click();
  await expect(page.getByRole("alert").filter({ hasText: "The server refused the task" })).toBeVisible();
  await expect(page.locator("#repository-error")).not.toBeEmpty();
  await expect(page.locator("#objective-error")).toContainText("describe the task objective");
  await expect(page).toHaveURL(/\/tasks\/queue\/new$/);
  // Fixing a field clears what the server said; the browser's own check takes over.
  await page.getByLabel("Objective").fill("Now there is one");
  await expect(page.locator("#objective-error")).toBeEmpty();
});

test("with nothing configured, the form leaves publishing to the server, which opens a pull request", async ({ page }) => {
  const plain = plainServer();
  await logIn(page, "/tasks/queue/new", plain);
  await expect(page.getByTestId("default-publish-mode")).toHaveText("pr");
  await expect(page.getByLabel("Publish", { exact: true }).locator("option:checked")).toHaveText("Server default (pr)");
  await page.getByLabel("Repository").fill("octo/plain");
  await page.getByLabel("Objective").fill("Publish by default");
  await page.getByLabel("Step 1 instructions").fill("Change something");
  await page.getByRole("button", { name: "Submit task" }).click();
  const payload = await storedPayload(page, plain.base, plain.token);
  expect(payload.task.publish.mode).toBe("pr");
  expect(payload.requiredCapabilities).toContain("gh");
});
