#!/usr/bin/env bash
# Runs every test: clippy, the Rust unit and integration tests (the queue conformance
# suite on SQLite and on PostgreSQL, the real agent CLIs against a scripted model server,
# hostile input on both backends), a timed fuzz run of the task contract, the release
# build (with the wasm bundle's gzip size), and the browser tests in headless Chromium.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

# A CI run builds once from a fresh clone: incremental data (about half of the ~15 GB a
# build writes) is never reused there, and one run ran out of disk for it.
if [[ -n ${CI:-} ]]; then export CARGO_INCREMENTAL=0; fi

setup_build
setup_browser
setup_agents
setup_sandbox
setup_containers
setup_postgres
cd "$STEPWISE_ROOT"

say "cargo clippy"
cargo clippy --workspace --exclude frontend --all-targets --locked -- -D warnings
cargo clippy -p frontend --target wasm32-unknown-unknown --locked -- -D warnings

say "cargo test"
cargo test --workspace --exclude frontend --locked --no-run
# The tests run in about three minutes; a hung one would otherwise hold CI until its own
# limit and say nothing. libtest has already named it ("has been running for over 60 seconds").
status=0
timeout --kill-after=30s 20m cargo test --workspace --exclude frontend --locked || status=$?
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "cargo test did not finish within 20 minutes: a test hangs (named above)" >&2
fi
[ "$status" -eq 0 ] || exit "$status"

# Normalization takes whatever a client sends: generated and mutated requests for a fixed
# time, in release so the minute covers many of them (the figure is printed).
say "fuzz contract::normalize for ${STEPWISE_FUZZ_SECONDS:=60} s"
STEPWISE_FUZZ_SECONDS="$STEPWISE_FUZZ_SECONDS" cargo test --release --locked -p contract \
  --test task_contract -- --ignored --nocapture fuzz_normalize_for_a_fixed_time

build_release
scripts/bundle-size.sh

say "browser tests (headless Chromium)"
export STEPWISE_BIN
STEPWISE_BIN="$(target_dir)/release/stepwise"
export LEPTOS_SITE_ROOT="$STEPWISE_ROOT/target/site"
(cd end2end && npx playwright test)
