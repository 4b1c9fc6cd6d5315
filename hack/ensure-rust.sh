#!/usr/bin/env bash
# Prints the folder whose `cargo` builds native/dataplane (the Rust data plane,
# docs/design/native-data-plane.md): the first of PATH's cargo and rustup's ~/.cargo/bin/cargo that is
# at least the crate's rust-version and has clippy and rustfmt (make lint runs both).
#
# The minimum is native/dataplane/Cargo.toml's `rust-version` (1.85: edition 2024, and the MSRV of
# tokio 1.54 and hyper-util 0.1.21, on which the data plane is built), read from there so it is stated
# once. Any newer toolchain builds it; Cargo.lock pins the crates.
#
# Downloads nothing. A Rust toolchain comes from rustup's own server, which this project's machines
# cannot count on reaching (only package registries), and not from Debian, whose rustc (1.63 in
# bookworm) is too old: machines of this kind come with rustup's toolchain, and anywhere else the fix
# below says what to install. No rust-toolchain.toml either, for the same reason: rustup would try to
# download the toolchain it names wherever that one is not already installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
manifest="$here/../native/dataplane/Cargo.toml"
min=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$manifest")
[ -n "$min" ] || { echo "ensure-rust: no rust-version in $manifest" >&2; exit 1; }

# True when version $1 is at least $2 (both x.y or x.y.z).
at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

seen=()
for cargo in "$(command -v cargo || true)" "$HOME/.cargo/bin/cargo"; do
  [ -n "$cargo" ] && [ -x "$cargo" ] || continue
  dir=$(dirname "$cargo")
  # rustup's proxies find clippy and rustfmt through PATH: look them up the way make will run them.
  version=$(PATH="$dir:$PATH" "$cargo" --version 2>/dev/null | awk '{print $2}') || version=
  if [ -z "$version" ]; then seen+=("$cargo (does not run)"); continue; fi
  if ! at_least "${version%%-*}" "$min"; then seen+=("$cargo $version (older than $min)"); continue; fi
  missing=()
  PATH="$dir:$PATH" "$cargo" clippy --version >/dev/null 2>&1 || missing+=(clippy)
  PATH="$dir:$PATH" "$cargo" fmt --version >/dev/null 2>&1 || missing+=(rustfmt)
  if [ ${#missing[@]} -gt 0 ]; then
    seen+=("$cargo $version (no ${missing[*]}: rustup component add ${missing[*]})")
    continue
  fi
  echo "$dir"
  exit 0
done

{
  echo "ensure-rust: native/dataplane needs cargo $min or newer with clippy and rustfmt."
  if [ ${#seen[@]} -gt 0 ]; then printf '  found: %s\n' "${seen[@]}"; else echo "  found: no cargo on PATH or in ~/.cargo/bin"; fi
  echo "  fix: install Rust with rustup, then: rustup toolchain install stable --profile minimal -c clippy -c rustfmt"
  echo "       (Debian's rustc is too old; machines of this project's kind come with rustup's Rust in ~/.cargo/bin)"
} >&2
exit 1
