import { expect, test } from "@playwright/test";
import { ChildProcess, spawn } from "node:child_process";
import { join, resolve } from "node:path";

import { scratchDir } from "../scratch";

test("every page asks for a login; a wrong token says why; a user token gets in; log out ends it", async ({ page }) => {
  await page.goto("/tasks/queue");
  await expect(page).toHaveURL(/\/login\?next=\/tasks\/queue$/);
  await expect(page.getByRole("heading", { name: "Log in" })).toBeVisible();
  await expect(page.getByRole("button", { name: "Log out" })).toHaveCount(0);

  await page.getByLabel("User token").fill("swu_not-a-real-token");
  await page.getByRole("button", { name: "Log in" }).click();
  await expect(page.getByRole("alert")).toContainText("unknown or has been revoked");

  await page.getByLabel("User token").fill(process.env.STEPWISE_E2E_TOKEN!);
  await page.getByRole("button", { name: "Log in" }).click();
  await expect(page).toHaveURL(/\/tasks\/queue$/);
  await expect(page.getByRole("heading", { name: "Task queue" })).toBeVisible();

  // The session is an HttpOnly cookie: scripts on the page cannot read it.
  const cookies = await page.context().cookies();
  const session = cookies.find((c) => c.name === "stepwise_session");
  expect(session?.httpOnly).toBe(true);
  expect(session?.sameSite).toBe("Strict");
  expect(await page.evaluate(() => document.cookie)).not.toContain("stepwise_session");

  await page.getByRole("button", { name: "Log out" }).click();
  await expect(page).toHaveURL(/\/login$/);
  await page.goto("/tasks/queue");
  await expect(page).toHaveURL(/\/login\?next=/);
});

let server: ChildProcess | undefined;
test.afterAll(() => server?.kill("SIGTERM"));

test("the login link stepwise serve prints logs the browser in, once", async ({ page }) => {
  const root = resolve(__dirname, "..", "..");
  const bin = process.env.STEPWISE_BIN ?? join(root, "target", "release", "stepwise");
  const siteRoot = process.env.LEPTOS_SITE_ROOT ?? join(root, "target", "site");
  const port = Number(process.env.STEPWISE_E2E_PORT ?? 3917) + 2;
  const dataDir = scratchDir("login-");
  server = spawn(bin, ["serve", "--port", String(port), "--data-dir", dataDir, "--site-root", siteRoot], {
    env: { ...process.env, RUST_LOG: "warn" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const link = await new Promise<string>((resolveLink, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`no login link printed; saw: ${seen}`)), 30_000);
    server!.stdout!.on("data", (chunk) => {
      seen += chunk;
      const found = /log in to the dashboard[^:]*: (http\S+\/login\?code=swl_\S+)/.exec(seen);
      if (found) {
        clearTimeout(timer);
        resolveLink(found[1]);
      }
    });
  });
  await page.goto(link);
  await expect(page).toHaveURL(new RegExp(`:${port}/tasks/queue$`));
  await expect(page.getByRole("heading", { name: "Task queue" })).toBeVisible();

  await page.context().clearCookies();
  await page.goto(link);
  await expect(page.getByRole("alert")).toContainText("used already or has expired");
});


