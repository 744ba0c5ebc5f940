#!/usr/bin/env python3
"""GGUF files written by the `gguf` Python package, for the engine's and the
R package's tests of the GGUF reader (and of the writer, which must write
the same bytes). Run from the repository root:

    python3 tools/gguf-fixtures.py

Writes tests/testthat/fixtures/gguf/:
  all-types.gguf   every metadata value type, typed and nested arrays, and
                   one tensor of every tensor type (rows of 256 values);
  all-types.f32    the gguf package's dequantized values of those tensors,
                   in file order (little-endian f32);
  aligned.gguf     a file with general.alignment = 64 and odd tensor sizes.
"""
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T, GGUFValueType as V
from gguf.constants import GGML_QUANT_SIZES
import gguf.quants as gq

OUT = "tests/testthat/fixtures/gguf"
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(7)

w = gguf.GGUFWriter(os.path.join(OUT, "all-types.gguf"), "ggmlr-test")
w.add_uint8("t.u8", 200)
w.add_int8("t.i8", -100)
w.add_uint16("t.u16", 60000)
w.add_int16("t.i16", -30000)
w.add_uint32("t.u32", 4000000000)
w.add_int32("t.i32", -2000000000)
w.add_float32("t.f32", 0.1)
w.add_uint64("t.u64", 2**53 + 2)
w.add_int64("t.i64", -(2**40) - 3)
w.add_float64("t.f64", 1.0 / 3.0)
w.add_bool("t.bool", True)
w.add_bool("t.false", False)
w.add_string("t.str", "hello, GGUF \u00e9\u4e2d")
w.add_key_value("t.empty", "", V.STRING)  # add_string skips empty strings
for name, vt, vals in [
    ("a.u8", V.UINT8, [0, 1, 255]),
    ("a.i8", V.INT8, [-128, 0, 127]),
    ("a.u16", V.UINT16, [0, 65535]),
    ("a.i16", V.INT16, [-32768, 32767]),
    ("a.u32", V.UINT32, [0, 4294967295]),
    ("a.i32", V.INT32, [-1, 0, 1, 2147483647]),
    ("a.f32", V.FLOAT32, [0.5, -1.25, 3.0e38]),
    ("a.u64", V.UINT64, [0, 2**64 - 1]),
    ("a.i64", V.INT64, [-(2**63), 2**63 - 1]),
    ("a.f64", V.FLOAT64, [1e-300, -2.5]),
    ("a.bool", V.BOOL, [True, False, True]),
    ("a.str", V.STRING, ["a", "", "tokens \u2581x"]),
]:
    w.add_key_value(name, vals, V.ARRAY, sub_type=vt)
w.add_array("a.nested", [[1, 2, 3], [4], [5, 6]])
w.add_array("a.nested_str", [["x", "y"], ["z"]])

values = []
plain = [
    (T.F32, np.float32), (T.F16, np.float16), (T.F64, np.float64),
    (T.I8, np.int8), (T.I16, np.int16), (T.I32, np.int32), (T.I64, np.int64),
]
for t, dt in plain:
    x = rng.standard_normal((2, 256)) * (100 if dt in (np.int8, np.int16, np.int32, np.int64) else 1)
    a = x.astype(dt)
    w.add_tensor(f"w.{t.name.lower()}", a)
    values.append(a.astype(np.float32).reshape(-1))
quantizable = {T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.TQ1_0, T.TQ2_0, T.MXFP4}
for t in sorted(gq._type_traits, key=int):
    if t in quantizable:
        q = gq.quantize(rng.standard_normal((2, 256)).astype(np.float32), t)
    else:
        bs, ts = GGML_QUANT_SIZES[t]
        q = rng.integers(0, 256, (2, 256 // bs * ts), dtype=np.uint8)
    w.add_tensor(f"w.{t.name.lower()}", q, raw_dtype=t)
    with np.errstate(all="ignore"):
        values.append(gq.dequantize(q, t).astype(np.float32).reshape(-1))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
np.concatenate(values).astype("<f4").tofile(os.path.join(OUT, "all-types.f32"))

w = gguf.GGUFWriter(os.path.join(OUT, "aligned.gguf"), "ggmlr-test")
w.add_custom_alignment(64)
w.add_string("general.name", "aligned")
w.add_tensor("odd", np.arange(7, dtype=np.float32))
w.add_tensor("matrix", np.arange(12, dtype=np.float32).reshape(3, 4))
w.add_tensor("q", gq.quantize(np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32), T.Q8_0), raw_dtype=T.Q8_0)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
for f in sorted(os.listdir(OUT)):
    print(f, os.path.getsize(os.path.join(OUT, f)))
