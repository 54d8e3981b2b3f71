import { Page, expect } from "@playwright/test";

/** Logs the browser in through the login page with the admin token the config made. */
export async function logIn(page: Page, next = "/tasks/queue"): Promise<void> {
  const token = process.env.STEPWISE_E2E_TOKEN;
  if (!token) throw new Error("STEPWISE_E2E_TOKEN is unset: playwright.config.ts makes it");
  await page.goto(next);
  await expect(page).toHaveURL(/\/login\?next=/);
  await page.getByLabel("User token").fill(token);
  await page.getByRole("button", { name: "Log in" }).click();
  await expect(page).toHaveURL(new RegExp(`${next.replace(/[?]/g, "\\?")}$`));
}
