import { Page, expect } from "@playwright/test";

/** Logs the browser in through the login page, by default on the main test server with the
 * admin token the config made; `server` points at another (the plain-defaults server). */
export async function logIn(
  page: Page,
  next = "/tasks/queue",
  server: { base: string; token: string } | undefined = undefined,
): Promise<void> {
  const token = server?.token ?? process.env.STEPWISE_E2E_TOKEN;
  if (!token) throw new Error("STEPWISE_E2E_TOKEN is unset: playwright.config.ts makes it");
  await page.goto(`${server?.base ?? ""}${next}`);
  await expect(page).toHaveURL(/\/login\?next=/);
  await page.getByLabel("User token").fill(token);
  await page.getByRole("button", { name: "Log in" }).click();
  await expect(page).toHaveURL(new RegExp(`${next.replace(/[?]/g, "\\?")}$`));
}

/** The server without configuration that playwright.config.ts starts beside the main one. */
export function plainServer(): { base: string; token: string } {
  const base = process.env.STEPWISE_E2E_PLAIN_URL;
  const token = process.env.STEPWISE_E2E_PLAIN_TOKEN;
  if (!base || !token) throw new Error("the plain server is unset: playwright.config.ts makes it");
  return { base, token };
}
