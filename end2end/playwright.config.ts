import { defineConfig } from "@playwright/test";
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

import { scratchDir, scratchRoot } from "./scratch";

// scripts/test.sh builds the release binary and the site, then points us at them.
const root = resolve(__dirname, "..");
const bin = process.env.STEPWISE_BIN ?? join(root, "target", "release", "stepwise");
const siteRoot = process.env.LEPTOS_SITE_ROOT ?? join(root, "target", "site");
const port = Number(process.env.STEPWISE_E2E_PORT ?? 3917);
// The second server runs with no configuration at all, to show the built-in defaults
// (port + 1 and + 2 belong to the README and login-link tests, which start their own).
const plainPort = port + 3;

/** A fresh data dir with an admin token in it. */
function dataDirWithToken(): { dir: string; token: string } {
  const dir = scratchDir("data-");
  const made = execFileSync(bin, ["token", "create", "--name", "e2e-admin", "--role", "admin", "--data-dir", dir], {
    encoding: "utf8",
  });
  const token = /shown only now\): (swu_\S+)/.exec(made)?.[1];
  if (!token) throw new Error(`stepwise token create printed no token: ${made}`);
  return { dir, token };
}

// This file is loaded again in every test worker; the main process picks the data dirs and
// makes the admin tokens the tests log in with, and the workers inherit them through env.
if (!process.env.STEPWISE_E2E_DATA_DIR) {
  const main = dataDirWithToken();
  // A skill the task form offers (the embedded worker's skills live in <data-dir>/skills).
  const skill = join(main.dir, "skills", "speckit");
  mkdirSync(skill, { recursive: true });
  writeFileSync(join(skill, "SKILL.md"), "# speckit\nWrite the spec first.\n");
  writeFileSync(join(skill, "manifest.json"), JSON.stringify({ description: "spec first", requiredCapabilities: [] }));
  process.env.STEPWISE_E2E_DATA_DIR = main.dir;
  process.env.STEPWISE_E2E_TOKEN = main.token;
  const plain = dataDirWithToken();
  process.env.STEPWISE_E2E_PLAIN_DATA_DIR = plain.dir;
  process.env.STEPWISE_E2E_PLAIN_TOKEN = plain.token;
  process.env.STEPWISE_E2E_PLAIN_URL = `http://127.0.0.1:${plainPort}`;
}
const dataDir = process.env.STEPWISE_E2E_DATA_DIR;
const plainDataDir = process.env.STEPWISE_E2E_PLAIN_DATA_DIR;

export default defineConfig({
  testDir: "./tests",
  globalTeardown: "./scratch.ts",
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
  webServer: [
    {
      // The embedded worker runs the scripted agent as claude and offers claude and git
      // only, so a codex task waits and says why.
      command:
        `"${bin}" serve --port ${port} --data-dir "${dataDir}" --site-root "${siteRoot}" ` +
        `--capability claude --capability git --claude-bin "${join(root, "worker", "tests", "fixtures", "fake-agent")}" ` +
        // The steps run in the sandbox; the gates the tests open are files in the run's
        // scratch folder, which the steps may read (its data dir stays hidden).
        `--grace-seconds 3 --sandbox-ro "${scratchRoot()}"`,
      url: `http://127.0.0.1:${port}/login`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
      env: {
        // Proves the pages use the server's configured default, not a hard-coded one.
        STEPWISE_DEFAULT_PUBLISH_MODE: "branch",
        RUST_LOG: "warn",
      },
    },
    {
      // Nothing configured: the built-in defaults (publish mode pr), and no worker.
      command: `"${bin}" serve --port ${plainPort} --data-dir "${plainDataDir}" --site-root "${siteRoot}" --no-worker`,
      url: `http://127.0.0.1:${plainPort}/login`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
      env: { RUST_LOG: "warn", STEPWISE_DEFAULT_PUBLISH_MODE: "", MOONMIND_DEFAULT_PUBLISH_MODE: "" },
    },
  ],
});
