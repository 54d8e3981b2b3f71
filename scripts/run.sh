#!/usr/bin/env bash
# Runs stepwise: installs what the build needs, builds if needed, and serves on
# http://127.0.0.1:3000 (or --port N / STEPWISE_PORT) with SQLite under ./data.
# Extra arguments go to `stepwise serve`; see `stepwise serve --help`.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

setup_build
setup_sandbox
build_release
cd "$STEPWISE_ROOT"
exec "$(target_dir)/release/stepwise" serve --site-root "$STEPWISE_ROOT/target/site" "$@"
