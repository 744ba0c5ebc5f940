"""Per-layer time of the real ncnn (PyPI `ncnn`) on one benchmark network,
for comparison with this package's per-layer profile.

Every Convolution, ConvolutionDepthWise and InnerProduct layer (fp32) of
the network becomes a net of its own (an Input of the shape that layer
sees in the whole network, then the layer with random weights); the real
ncnn times it on one thread. Written into OUT_DIR:

    <tag>.param, <tag>.bin   the single-layer net (blobs `data`, `out`)
    <tag>.in                 its input (GGMLRF32 blob file)
    layers.tsv               tag, type, input extents (w,h,c), params,
                             the real ncnn's time in ms

which the Rust profile `ncnn_layer_profile` reads:

    python3 tools/ncnn_layer_timing.py BENCH_DIR NET OUT_DIR [--threads 1]
    GGMLR_NCNN_LAYER_DIR=OUT_DIR cargo test --release -p ggmlr-core \\
        ncnn_layer_profile -- --ignored --nocapture

BENCH_DIR is a folder made by tools/ncnn_bench_fixtures.py.
"""
import argparse
import os
import sys
import time

import numpy as np
import ncnn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ncnn_bench_fixtures import (  # noqa: E402
    draw, param_text, parse_param, real_net, serialize, write_blob,
)

TIMED = ("Convolution", "ConvolutionDepthWise", "InnerProduct")


def blob_shapes(d, net, layers):
    """Blob name -> (w, h, c) and its values, from a full run of the real net."""
    # The net's Input layer gives the input's name and extents (w, h, c).
    ty, _, _, tops, kv = [l for l in layers if l[0] == "Input"][0]
    inp = tops[0]
    dims = [int(kv.get(k, 1)) for k in (0, 1, 2)]
    x = np.fromfile(os.path.join(d, net + ".0.in"), dtype="<f4", offset=8)
    x = x.reshape(list(reversed(dims)))
    model = open(os.path.join(d, net + ".bin"), "rb").read()
    rn = real_net(os.path.join(d, net + ".param"), model, False, light=False)
    ex = rn.create_extractor()
    assert ex.input(inp, ncnn.Mat(np.ascontiguousarray(x, dtype=np.float32)).clone()) == 0
    want = {b for ty, _, bs, _, _ in layers if ty in TIMED for b in bs}
    out = {}
    for b in want:
        ret, m = ex.extract(b)
        if ret == 0 and not m.empty():
            out[b] = np.array(m).copy()
    return out


def time_ms(net, x, reps):
    m = ncnn.Mat(x).clone()

    def once():
        ex = net.create_extractor()
        ex.input("data", m)
        ex.extract("out")

    once()
    best = 1e9
    for _ in range(reps):
        t0 = time.perf_counter()
        once()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench_dir")
    ap.add_argument("net")
    ap.add_argument("out_dir")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    layers = parse_param(os.path.join(a.bench_dir, a.net + ".param"))
    values = blob_shapes(a.bench_dir, a.net, layers)
    rng = np.random.default_rng(7)
    rows = []
    k = 0
    for ty, name, bottoms, tops, kv in layers:
        if ty not in TIMED or 8 in kv or bottoms[0] not in values:
            continue
        x = values[bottoms[0]]
        if x.ndim != 3:
            continue
        c, h, w = x.shape
        tag = "%03d" % k
        k += 1
        one = [("Input", "input", [], ["data"], {0: str(w), 1: str(h), 2: str(c)}),
               (ty, name, ["data"], ["out"], kv)]
        p = os.path.join(a.out_dir, tag + ".param")
        with open(p, "w") as f:
            f.write(param_text(one))
        model = serialize(one, draw(one, rng), {}, "fp32")
        with open(os.path.join(a.out_dir, tag + ".bin"), "wb") as f:
            f.write(model)
        write_blob(os.path.join(a.out_dir, tag + ".in"), x)
        net = real_net(p, model, False, threads=a.threads)
        ms = time_ms(net, np.ascontiguousarray(x, dtype=np.float32), a.reps)
        params = " ".join("%d=%s" % (kk, v) for kk, v in kv.items())
        rows.append("\t".join([tag, ty, "%d,%d,%d" % (w, h, c), params, "%.4f" % ms]))
        print(rows[-1], flush=True)
    with open(os.path.join(a.out_dir, "layers.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
