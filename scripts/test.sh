#!/usr/bin/env bash
# Runs every test: clippy, the Rust unit and integration tests (the queue conformance
# suite on SQLite and on PostgreSQL), the release build (with the wasm bundle's gzip
# size), and the browser tests in headless Chromium.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

setup_build
setup_browser
setup_postgres
cd "$STEPWISE_ROOT"

say "cargo clippy"
cargo clippy --workspace --exclude frontend --all-targets --locked -- -D warnings
cargo clippy -p frontend --target wasm32-unknown-unknown --locked -- -D warnings

say "cargo test"
cargo test --workspace --exclude frontend --locked

build_release
scripts/bundle-size.sh

say "browser tests (headless Chromium)"
export STEPWISE_BIN
STEPWISE_BIN="$(target_dir)/release/stepwise"
export LEPTOS_SITE_ROOT="$STEPWISE_ROOT/target/site"
(cd end2end && npx playwright test)
