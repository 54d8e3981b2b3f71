import { defineConfig } from "@playwright/test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

// scripts/test.sh builds the release binary and the site, then points us at them.
const root = resolve(__dirname, "..");
const bin = process.env.STEPWISE_BIN ?? join(root, "target", "release", "stepwise");
const siteRoot = process.env.LEPTOS_SITE_ROOT ?? join(root, "target", "site");
const port = Number(process.env.STEPWISE_E2E_PORT ?? 3917);
const dataDir = mkdtempSync(join(tmpdir(), "stepwise-e2e-"));

export default defineConfig({
  testDir: "./tests",
  timeout: 60_000,
  expect: { timeout: 10_000 },
  fullyParallel: false,
  workers: 1,
  forbidOnly: !!process.env.CI,
  retries: 0,
  reporter: [["list"]],
  outputDir: "test-results",
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    trace: "retain-on-failure",
    launchOptions: {
      // Debian's chromium: browser downloads are impossible on these machines.
      executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    },
  },
  projects: [{ name: "chromium" }],
  webServer: {
    command: `"${bin}" serve --port ${port} --data-dir "${dataDir}" --site-root "${siteRoot}"`,
    url: `http://127.0.0.1:${port}/tasks/queue`,
    reuseExistingServer: false,
    timeout: 60_000,
    stdout: "pipe",
    stderr: "pipe",
    env: {
      // Proves the page shows the server's configured default, not a hard-coded one.
      STEPWISE_DEFAULT_PUBLISH_MODE: "branch",
      RUST_LOG: "warn",
    },
  },
});
