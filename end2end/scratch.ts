import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// Every data dir, remote and working copy the browser tests make lives under one folder per
// run, which the config creates and global teardown removes, so a run leaves nothing in /tmp.

/** The run's folder, made once by the config's main process; test workers inherit it. */
export function scratchRoot(): string {
  if (!process.env.STEPWISE_E2E_SCRATCH) {
    process.env.STEPWISE_E2E_SCRATCH = mkdtempSync(join(tmpdir(), "stepwise-e2e-"));
  }
  return process.env.STEPWISE_E2E_SCRATCH;
}

/** A fresh folder under the run's, named from `prefix`. */
export function scratchDir(prefix: string): string {
  return mkdtempSync(join(scratchRoot(), prefix));
}

/** Playwright's global teardown: runs once, after every test. */
export default function removeScratch(): void {
  const root = process.env.STEPWISE_E2E_SCRATCH;
  if (root) rmSync(root, { recursive: true, force: true });
}
