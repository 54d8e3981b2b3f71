import { APIRequestContext, expect } from "@playwright/test";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

import { scratchDir } from "../scratch";

/** A bare git remote with one commit on main, for the embedded worker to clone. */
export function remote(): string {
  const dir = scratchDir("live-");
  const seed = join(dir, "seed");
  const git = (cwd: string, ...args: string[]) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd });
  git(dir, "init", "--quiet", "--initial-branch=main", seed);
  writeFileSync(join(seed, "README.md"), "hello\n");
  git(seed, "add", ".");
  git(seed, "commit", "--quiet", "-m", "first");
  git(dir, "clone", "--quiet", "--bare", seed, "remote.git");
  return join(dir, "remote.git");
}

/** Submits a claude task, which the embedded worker runs with the scripted agent; `publish`
 * is its `task.publish` (nothing is published by default), `more` any other task fields. */
export async function submit(
  request: APIRequestContext,
  steps: string[],
  objective = "Count slowly",
  publish: Record<string, string> = { mode: "none" },
  more: Record<string, unknown> = {},
): Promise<string> {
  const response = await request.post("/api/queue/jobs", {
    headers: { Authorization: `Bearer ${process.env.STEPWISE_E2E_TOKEN}` },
    data: {
      payload: {
        repository: remote(),
        task: {
          instructions: objective,
          runtime: { mode: "claude" },
          publish,
          steps: steps.map((instructions) => ({ instructions })),
          ...more,
        },
      },
    },
  });
  expect(response.status(), await response.text()).toBe(201);
  return (await response.json()).id;
}
