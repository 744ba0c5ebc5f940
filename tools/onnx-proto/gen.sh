#!/usr/bin/env bash
# Regenerates src/rust/core/src/models/onnx/proto_gen.rs from the onnx.proto
# shipped in the `onnx` Python package (pip install onnx), then applies the
# renames of rename.pl. Needs only cargo and perl.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
proto=$(python3 -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "onnx.proto"))')
out="$here/../../src/rust/core/src/models/onnx/proto_gen.rs"
mkdir -p "$(dirname "$out")"
cargo run --release --quiet --manifest-path "$here/Cargo.toml" --target-dir "${CARGO_TARGET_DIR:-/tmp/onnx-proto-target}" -- "$proto" "$out"
perl -0777 -pi "$here/rename.pl" "$out"
echo "wrote $out"
