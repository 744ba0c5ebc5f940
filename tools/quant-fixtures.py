#!/usr/bin/env python3
"""Reference outputs of the `gguf` Python package's quantizers and
dequantizers (gguf.quants), for the engine's and the R package's tests.

Writes tests/testthat/fixtures/quant/<type>.qf for every quantized type the
package implements. Run from the repository root:

    python3 tools/quant-fixtures.py

File format (little-endian): b"GGMLRQF1", u32 type code, then two sections,
each a u32 case count followed by cases:
  quantize:   u32 n, f32[n] input, u8[row_size(n)] expected bytes
  dequantize: u32 n, u8[row_size(n)] input bytes, f32[n] expected values
"""
import os
import struct

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
import gguf.quants as gq

OUT = "tests/testthat/fixtures/quant"
N = 512  # values per case: a whole number of blocks of every type
rng = np.random.default_rng(20240611)


def row_size(t, n):
    bs, ts = GGML_QUANT_SIZES[t]
    if t == T.Q8_1:
        ts = 36  # ggml's block_q8_1 holds two f16 (gguf-py's table still says 40)
    return n // bs * ts


def quant_inputs():
    """Random and adversarial rows (no NaN: ggml's NaN handling depends on
    C's MAX, which numpy's max does not follow; the engine's own tests cover it)."""
    f = np.float32
    cases = []
    cases.append(rng.standard_normal(N).astype(f))
    cases.append(rng.uniform(-1, 1, N).astype(f))
    cases.append((rng.standard_normal(N) * 1e-3 + 0.5).astype(f))  # all positive, offset
    cases.append(np.zeros(N, f))
    x = rng.standard_normal(N).astype(f)
    x[::37] = f(1e4)  # one huge value per block
    cases.append(x)
    x = np.zeros(N, f)
    x[5] = f(-3.0e38)  # f16 overflow of the scale
    x[300] = f(65504.0 * 8)
    cases.append(x)
    cases.append((rng.standard_normal(N) * 1e-40).astype(f))  # denormals
    cases.append(np.full(N, f(1e-30)))
    x = np.tile(np.array([1, -1, 0.5, -0.5], f), N // 4)  # exact ties of magnitude
    cases.append(x)
    cases.append(np.linspace(-8.5, 8.5, N).astype(f))  # rounding boundaries
    x = rng.standard_normal(N).astype(f)
    x[::2] = f(0.99999994)
    x[1::4] = f(3.9999998)  # just below powers of two (MXFP4 exponents)
    cases.append(x)
    cases.append(np.full(N, f(0.25)))
    cases.append(np.full(N, f(-7.0)))
    return cases


def deq_inputs(t):
    cases = [rng.integers(0, 256, row_size(t, N), dtype=np.uint8) for _ in range(4)]
    cases.append(np.zeros(row_size(t, N), np.uint8))
    cases.append(np.full(row_size(t, N), 0xFF, np.uint8))  # NaN/inf f16 scales
    return cases


def write(t, qcases, dcases):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, t.name.lower() + ".qf")
    with open(path, "wb") as fh:
        fh.write(b"GGMLRQF1")
        fh.write(struct.pack("<I", int(t)))
        fh.write(struct.pack("<I", len(qcases)))
        for x, q in qcases:
            fh.write(struct.pack("<I", x.size))
            fh.write(x.astype("<f4").tobytes())
            fh.write(q.tobytes())
        fh.write(struct.pack("<I", len(dcases)))
        for b, v in dcases:
            fh.write(struct.pack("<I", v.size))
            fh.write(b.tobytes())
            fh.write(v.astype("<f4").tobytes())
    return path


def special_inputs():
    """NaN, infinities and the largest finite values (bf16 only: its rounding
    of these is plain bit arithmetic, the same in numpy and C)."""
    f = np.float32
    x = rng.standard_normal(N).astype(f)
    x[::8] = np.nan
    x[1::8] = np.inf
    x[2::8] = -np.inf
    x[3::8] = f(3.4028235e38)
    x[4::8] = f(-3.3961776e38)  # rounds to the largest finite bf16
    x[5::8] = np.frombuffer(np.uint32(0x7F808000).tobytes(), f)[0]  # signalling NaN
    return [x]


quantizable = [T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.TQ1_0, T.TQ2_0, T.MXFP4]
dequantizable = list(gq._type_traits)
for t in sorted(set(quantizable) | set(dequantizable), key=int):
    qcases, dcases = [], []
    if t in quantizable:
        for x in quant_inputs() + (special_inputs() if t == T.BF16 else []):
            with np.errstate(all="ignore"):
                q = gq.quantize(x.reshape(1, -1), t).reshape(-1)
            qcases.append((x, q))
            with np.errstate(all="ignore"):
                v = gq.dequantize(q.reshape(1, -1), t).reshape(-1)
            dcases.append((q, v))
    for b in deq_inputs(t):
        with np.errstate(all="ignore"):
            v = gq.dequantize(b.reshape(1, -1), t).reshape(-1)
        dcases.append((b, v))
    p = write(t, qcases, dcases)
    print(f"{p}: {len(qcases)} quantize, {len(dcases)} dequantize cases")

