#!/usr/bin/env bash
# Installs what building and testing stepwise needs, on a Debian machine that has rustup.
# Sourced by scripts/run.sh and scripts/test.sh. Idempotent: each step checks first and
# skips what is already there. Only package registries are used (crates.io, npm, apt):
# nothing is downloaded from anywhere else.
#
#   setup_build     wasm32 target, wasm-bindgen-cli, wasm-opt and lightningcss (npm)
#   setup_browser   Debian's chromium and the end2end npm packages
#   setup_agents    the agent CLIs (codex, claude, gemini) pinned in agents/, for the tests
#   setup_sandbox   bubblewrap, the box every agent step runs in
#   setup_containers  Podman and runc, for container tasks' tests, and busybox for their image
#   setup_postgres  a running PostgreSQL for the test suite (STEPWISE_TEST_PG_URL)

set -euo pipefail

STEPWISE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$STEPWISE_ROOT/tools/node_modules/.bin:$PATH"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Runs a command as root: directly when we are root, else through sudo when there is one.
as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "'$*' needs root; run it as root, then run this again"
  fi
}

apt_updated=0
apt_install() {
  if (( ! apt_updated )); then
    say "apt-get update"
    as_root apt-get update -qq
    apt_updated=1
  fi
  say "apt-get install $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# The version of a crate as Cargo.lock pins it.
locked_version() {
  awk -v name="$1" '$0 == "name = \"" name "\"" { getline; gsub(/version = |"/, ""); print; exit }' \
    "$STEPWISE_ROOT/Cargo.lock"
}

# `npm ci` in a folder, only when its lockfile changed since the last install there.
npm_ci() {
  local dir="$1" stamp="$1/node_modules/.stepwise-lock"
  if [[ -f $stamp ]] && cmp -s "$dir/package-lock.json" "$stamp"; then return; fi
  say "npm ci in ${dir#"$STEPWISE_ROOT"/}"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$dir/package-lock.json" "$stamp"
}

setup_node() {
  command -v npm >/dev/null && return
  apt_install nodejs npm
}

setup_build() {
  command -v cargo >/dev/null || die "cargo is missing: install Rust with rustup first"
  command -v cc >/dev/null || apt_install build-essential
  # The worker's tests drive real repositories with the git CLI.
  command -v git >/dev/null || apt_install git
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    say "rustup target add wasm32-unknown-unknown"
    rustup target add wasm32-unknown-unknown
  fi
  local bindgen
  bindgen="$(locked_version wasm-bindgen)"
  [[ -n $bindgen ]] || die "wasm-bindgen is not in Cargo.lock"
  if [[ $(wasm-bindgen --version 2>/dev/null) != "wasm-bindgen $bindgen"* ]]; then
    # Not --locked: its lockfile names a webpki-roots version the registry no longer has.
    say "cargo install wasm-bindgen-cli $bindgen (matches Cargo.lock)"
    cargo install wasm-bindgen-cli --version "$bindgen" --force
  fi
  setup_node
  # wasm-opt from npm's binaryen, first on PATH (Debian's older one breaks hydration), and
  # lightningcss for the stylesheet: each ships its binary inside its npm package.
  npm_ci "$STEPWISE_ROOT/tools"
}

setup_browser() {
  [[ -x /usr/bin/chromium ]] || apt_install chromium
  # end2end/tests/readme-api.spec.ts runs the README's curl examples as written.
  command -v curl >/dev/null || apt_install curl
  setup_node
  npm_ci "$STEPWISE_ROOT/end2end"
}

# The real agent CLIs, at the versions agents/package-lock.json pins; each ships its native
# binary inside its npm package, so nothing is fetched from elsewhere. The worker's
# real-agent tests run them from STEPWISE_AGENTS_BIN against a scripted model server.
setup_agents() {
  setup_node
  npm_ci "$STEPWISE_ROOT/agents"
  # graphile-worker, the peer `stepwise bench queue --peer` runs beside ours; a small
  # side-by-side run is one of the bench's tests.
  npm_ci "$STEPWISE_ROOT/bench/graphile-worker"
  export STEPWISE_AGENTS_BIN="$STEPWISE_ROOT/agents/node_modules/.bin"
}

# bubblewrap: the worker runs every agent step and check in a box of its own
# (`--sandbox bwrap`, the default), and refuses to start without it.
setup_sandbox() {
  command -v bwrap >/dev/null || apt_install bubblewrap
}

# Podman (with runc) runs container tasks in the tests, on an image they build from
# busybox's static binary: no registry is reachable.
setup_containers() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
  dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
  ((${#missing[@]} == 0)) || apt_install "${missing[@]}"
}

pg_ok() { psql "$1" -Atqc 'select 1' >/dev/null 2>&1; }

# The PostgreSQL suite needs a server where the test user may create databases. The
# default is the local server over TCP with trust auth (how CI machines come); on a fresh
# Debian install (peer auth) it falls back to the local socket with a role for this user.
setup_postgres() {
  export STEPWISE_TEST_PG_URL="${STEPWISE_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
  command -v psql >/dev/null && pg_ok "$STEPWISE_TEST_PG_URL" && return
  command -v pg_ctlcluster >/dev/null || apt_install postgresql
  local version
  version="$(ls /etc/postgresql | sort -V | tail -n 1)"
  if ! pg_ctlcluster "$version" main status >/dev/null 2>&1; then
    say "starting PostgreSQL $version"
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start
  fi
  for _ in $(seq 1 30); do pg_isready -q && break; sleep 1; done
  pg_ok "$STEPWISE_TEST_PG_URL" && return
  local me socket_url
  me="$(id -un)"
  socket_url="postgres://$me@localhost/postgres?host=/var/run/postgresql"
  if ! pg_ok "$socket_url"; then
    say "creating the PostgreSQL role $me for the tests"
    as_root runuser -u postgres -- createuser --superuser "$me" 2>/dev/null || true
  fi
  pg_ok "$socket_url" || die "cannot reach PostgreSQL at $STEPWISE_TEST_PG_URL nor over its socket; set STEPWISE_TEST_PG_URL to a server where this user may create databases"
  export STEPWISE_TEST_PG_URL="$socket_url"
}

# Where cargo puts binaries: CARGO_TARGET_DIR when set (CI may share one), else target/.
target_dir() {
  local dir="${CARGO_TARGET_DIR:-$STEPWISE_ROOT/target}"
  [[ $dir = /* ]] || dir="$STEPWISE_ROOT/$dir"
  printf '%s\n' "$dir"
}

# Builds the server binary and the site (wasm, JS, CSS, assets) in release mode, as
# `cargo leptos build --release` does with the workspace's [package.metadata.leptos] (which
# `cargo leptos watch` still reads), without installing cargo-leptos: 13 minutes on 2 cores.
# A subshell, so its `cd` and environment stay its own.
build_release() (
  local started=$SECONDS target site="$STEPWISE_ROOT/target/site"
  target="$(target_dir)"
  local next="$site/pkg.next" wasm="$target/wasm32-unknown-unknown/wasm-release/frontend.wasm"
  cd "$STEPWISE_ROOT"
  # LEPTOS_OUTPUT_NAME set at build time tells leptos the bundle is pkg/stepwise.wasm.
  export LEPTOS_OUTPUT_NAME=stepwise
  say "build 1/4: the server (cargo build --release -p stepwise)"
  cargo build --release --locked -p stepwise --no-default-features
  say "build 2/4: the browser bundle (cargo build -p frontend for wasm32, profile wasm-release)"
  cargo build --locked -p frontend --lib --target wasm32-unknown-unknown --profile wasm-release --no-default-features
  say "build 3/4: wasm-bindgen, then wasm-opt -Oz, twice"
  rm -rf "$next" && mkdir -p "$next"
  wasm-bindgen --target web --no-typescript --out-dir "$next" --out-name stepwise "$wasm"
  # The features rustc's wasm32 target turns on. A second -Oz pass finds about 1.7 KB
  # (gzip) more than one; a third finds none.
  wasm-opt -Oz -Oz --strip-producers --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals --enable-reference-types --enable-multivalue \
    "$next/stepwise_bg.wasm" -o "$next/stepwise.wasm"
  rm "$next/stepwise_bg.wasm"
  say "build 4/4: the stylesheet (lightningcss) and public/"
  BROWSERSLIST=defaults lightningcss --minify --browserslist style/main.css -o "$next/stepwise.css"
  cp -R public/. "$site/"
  rm -rf "$site/pkg" && mv "$next" "$site/pkg"
  say "built the server and the site in $((SECONDS - started)) s"
)
