#!/usr/bin/env bash
# Prints the size of the hydrate bundle as the browser downloads it (gzip -9), so it can be
# tracked from run to run. Run after `cargo leptos build --release`.
set -euo pipefail
pkg="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/site/pkg"
for file in "$pkg"/stepwise.wasm "$pkg"/stepwise.js "$pkg"/stepwise.css; do
  [[ -f $file ]] || { echo "bundle-size: $file is missing; build with cargo leptos build --release" >&2; exit 1; }
  raw=$(wc -c <"$file")
  gz=$(gzip -9 -c "$file" | wc -c)
  printf 'bundle %-14s %8d bytes raw %8d bytes gzip (%d KiB)\n' "$(basename "$file")" "$raw" "$gz" $(( (gz + 1023) / 1024 ))
done
