#!/usr/bin/env bash
# Builds the release server and the site (target/release/stepwise, target/site), installing
# what the build needs first. scripts/run.sh and scripts/test.sh build the same way.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

setup_build
build_release
"$STEPWISE_ROOT/scripts/bundle-size.sh"
