#!/usr/bin/env bash
# Writes the crates the package's Rust code needs, as `cargo vendor` lays them
# out, to a compressed tarball (default src/rust/vendor.tar.xz) that a source
# tarball carries, so that installing it needs neither the network nor a
# filled ~/.cargo (see src/Makevars). The crates are those of the binding
# crate's own lock file (src/rust/ggmlr/Cargo.lock, kept equal to the
# workspace's by `make lockfile`), vendored outside the workspace.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/src/rust/vendor.tar.xz}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/rust"
for crate in core ggmlr; do
  (cd "$root/src/rust" && tar --exclude=./target -cf - "$crate") | tar -xf - -C "$stage/rust"
done
rm -rf "$stage"/rust/*/target
cargo vendor --locked --quiet --manifest-path "$stage/rust/ggmlr/Cargo.toml" "$stage/rust/vendor" >/dev/null
XZ_OPT=-6 tar -cJf "$out" -C "$stage/rust" vendor
echo "vendored $(ls "$stage/rust/vendor" | wc -l) crates into $out ($(du -h "$out" | cut -f1))"
