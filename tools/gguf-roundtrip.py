#!/usr/bin/env python3
"""Checks that GGUF files written by the package are read by the `gguf`
Python package: writes a file with every metadata value type and every
tensor type through R's gguf_write(), reads it with gguf.GGUFReader and
compares values, types, shapes and tensor bytes. Needs the package
installed (R_LIBS) and prints one line per check, then "ok". Run from the
repository root:

    R_LIBS=<library> python3 tools/gguf-roundtrip.py
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
import gguf.quants as gq

tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "from-r.gguf")
script = r'''
library(ggmlR)
args <- commandArgs(TRUE)
set.seed(1)
meta <- list(general.architecture = "ggmlr", u8 = 200L, i8 = -100L, u16 = 60000L, i16 = -30000L,
  u32 = 4e9, i32 = -2e9, f32 = 0.5, u64 = 2^53, i64 = -2^40, f64 = 1/3, b = TRUE, s = "h\u00e9llo",
  au32 = c(1, 2, 3), astr = c("a", "", "c"), ab = c(TRUE, FALSE), nested = list(1:2, 3L))
types <- c(u8 = "uint8", i8 = "int8", u16 = "uint16", i16 = "int16", u32 = "uint32", i32 = "int32",
  f32 = "float32", u64 = "uint64", i64 = "int64", au32 = "array[uint32]")
codes <- c(f32 = 0, f16 = 1, bf16 = 30, i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28,
  q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q2_K = 10, q3_K = 11, q4_K = 12, q5_K = 13, q6_K = 14,
  iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21, iq2_s = 22,
  iq4_xs = 23, iq1_m = 29, tq1_0 = 34, tq2_0 = 35, mxfp4 = 39, nvfp4 = 40)
ctx <- ggml_init(64 * 1024 * 1024)
tensors <- list(); tt <- c()
for (nm in names(codes)) {
  x <- matrix(if (nm %in% c("i8", "i16", "i32", "i64")) sample(-100:100, 512, TRUE) else rnorm(512), 256, 2)
  ty <- codes[[nm]]
  if (ty %in% c(16, 17, 19)) {
    q <- ggml_quantize_chunk(ty, x, 2, 256, imatrix = rep(1, 256))
    t <- ggml_new_tensor_2d(ctx, ty, 256, 2)
    ggml_backend_tensor_set_data(t, q)
    tensors[[paste0("w.", nm)]] <- t
  } else {
    tensors[[paste0("w.", nm)]] <- x
    tt[paste0("w.", nm)] <- ty
  }
}
gguf_write(args[1], meta, tensors, types = types, tensor_types = tt)
for (nm in names(tensors)) {
  v <- if (inherits(tensors[[nm]], "ggml_tensor")) ggml_backend_tensor_get_raw(tensors[[nm]]) else NULL
  if (!is.null(v)) writeBin(v, paste0(args[1], ".", nm, ".bin"))
}
g <- gguf_load(args[1])
for (nm in gguf_tensor_names(g)) writeBin(as.vector(gguf_tensor_data(g, nm)), paste0(args[1], ".", nm, ".values"), size = 4)
'''
subprocess.run(["Rscript", "-e", script, path], check=True)

r = gguf.GGUFReader(path)
f = {k: v for k, v in r.fields.items()}


def val(k):
    return f[k].contents()


checks = {
    "u8": 200, "i8": -100, "u16": 60000, "i16": -30000, "u32": 4000000000, "i32": -2000000000,
    "f32": 0.5, "u64": 2**53, "i64": -(2**40), "f64": 1 / 3, "b": True, "s": "h\u00e9llo",
    "au32": [1, 2, 3], "astr": ["a", "", "c"], "ab": [True, False],
    # GGUFReader.contents() flattens nested arrays; the types show the nesting.
    "nested": [1, 2, 3],
}
for k, want in checks.items():
    got = val(k)
    assert got == want, (k, got, want)
    print("metadata", k, "ok")
kinds = {"u8": "UINT8", "i8": "INT8", "u16": "UINT16", "i16": "INT16", "u32": "UINT32", "i32": "INT32",
         "f32": "FLOAT32", "u64": "UINT64", "i64": "INT64", "f64": "FLOAT64", "b": "BOOL", "s": "STRING"}
for k, t in kinds.items():
    assert f[k].types[0].name == t, (k, f[k].types)
assert [t.name for t in f["nested"].types] == ["ARRAY", "ARRAY", "INT32"], f["nested"].types
assert [t.name for t in f["au32"].types] == ["ARRAY", "UINT32"]
print("metadata types ok")
assert r.alignment == 32
for t in r.tensors:
    assert list(t.shape) == [256, 2], (t.name, t.shape)
    vals = np.fromfile(f"{path}.{t.name}.values", dtype="<f4").reshape(2, 256)
    data = np.asarray(t.data)
    if t.tensor_type in (T.F32, T.F16, T.F64, T.I8, T.I16, T.I32, T.I64):
        ref = data.astype(np.float32).reshape(2, 256)
    else:
        ref = gq.dequantize(data.reshape(2, -1), t.tensor_type).astype(np.float32)
    same = (ref == vals) | (np.isnan(ref) & np.isnan(vals))
    assert same.all(), (t.name, (~same).sum())
    raw = f"{path}.{t.name}.bin"
    if os.path.exists(raw):
        assert np.array_equal(np.fromfile(raw, dtype=np.uint8), data.reshape(-1).view(np.uint8)), t.name
    print("tensor", t.name, t.tensor_type.name, "ok")
print("ok:", len(r.tensors), "tensors and", len(checks), "metadata values read back by gguf", gguf.__name__)
