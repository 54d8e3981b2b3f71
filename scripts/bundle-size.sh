#!/usr/bin/env bash
# Prints the size of the hydrate bundle as the browser downloads it (gzip -9), so it can be
# tracked from run to run, and fails when the wasm is past its line (STEPWISE_WASM_LIMIT,
# 300,000 bytes gzip by default). Run after scripts/build.sh (or `cargo leptos build --release`).
set -euo pipefail
pkg="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/site/pkg"
limit="${STEPWISE_WASM_LIMIT:-300000}"
for file in "$pkg"/stepwise.wasm "$pkg"/stepwise.js "$pkg"/stepwise.css; do
  [[ -f $file ]] || { echo "bundle-size: $file is missing; build with scripts/build.sh" >&2; exit 1; }
  raw=$(wc -c <"$file")
  gz=$(gzip -9 -c "$file" | wc -c)
  printf 'bundle %-14s %8d bytes raw %8d bytes gzip (%d KiB)\n' "$(basename "$file")" "$raw" "$gz" $(( (gz + 1023) / 1024 ))
  if [[ $file == *.wasm ]] && (( gz > limit )); then
    echo "bundle-size: stepwise.wasm is $gz bytes gzip, past the line of $limit by $((gz - limit)); win them back before adding to the islands (twiggy top shows what is big)" >&2
    over=1
  fi
done
exit "${over:-0}"
