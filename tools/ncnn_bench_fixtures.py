"""Random weights and real-ncnn outputs for ncnn's 35 benchmark networks.

The benchmark params (structure only, no weights) come from a directory
given on the command line. For every network this script writes, into the
output directory:

    <net>.param        a copy of the param
    <net>.bin          random weights in ncnn's weight format (fp32, fp16 or
                       int8 with per-channel scales for the *_int8 nets,
                       whose scales are calibrated on an fp32 run)
    <net>.0.in         the input (GGMLRF32 blob file, see ncnn_fixtures.py)
    <net>.<k>.out      the outputs of the real ncnn (PyPI `ncnn`) on it (and
                       the input of a final Softmax)
    bench.tsv          net, input blob:shape, output blobs:shapes, weights
                       (rows of nets not written this time are kept)

Weights are random, scaled layer by layer so that every convolution, inner
product and attention output has standard deviation 1 on the input (deep
nets then neither vanish nor overflow); each net's random stream is seeded
by its name.

Run from the repository root:

    python3 tools/ncnn_bench_fixtures.py BENCH_DIR OUT_DIR [--small] [--nets a,b]

`--small` writes only the small networks the package's tests ship (at a
reduced input size), the default is all 35 at ncnn's benchmark input sizes.
`--quick` skips the normalisation but for the int8 nets (weights for
timing only: inst/bench/ncnn.R).
"""
import argparse
import os
import shutil
import struct
import sys
import zlib

import numpy as np
import ncnn

FP16_TAG = 0x01306B47
INT8_TAG = 0x000D4B38
BLOB_MAGIC = b"GGMLRF32"

# benchncnn's input sizes (w, h); channels are 3 everywhere.
SIZES = {
    "squeezenet": 227, "squeezenet_int8": 227, "alexnet": 227, "blazeface": 128,
    "squeezenet_ssd": 300, "squeezenet_ssd_int8": 300, "mobilenet_ssd": 300,
    "mobilenet_ssd_int8": 300, "mobilenet_yolo": 416, "mobilenetv2_yolov3": 352,
    "yolov4-tiny": 416, "nanodet_m": 320, "yolo-fastest-1.1": 320,
    "yolo-fastestv2": 352, "FastestDet": 352, "vision_transformer": 384,
}

# Shipped with the tests: (input size, weight storage).
SMALL = {
    "blazeface": (96, "fp16"),
    "FastestDet": (96, "fp16"),
    "yolo-fastestv2": (96, "fp16"),
    "yolo-fastest-1.1": (96, "fp16"),
}

CONV_TYPES = ("Convolution", "ConvolutionDepthWise", "Deconvolution", "DeconvolutionDepthWise")


def parse_param(path):
    """[(type, name, bottoms, tops, {key: value string})] of a text param."""
    toks = open(path).read().split()
    assert toks[0] == "7767517"
    nl = int(toks[1])
    pos = 3
    layers = []
    for _ in range(nl):
        ty, name, nb, nt = toks[pos], toks[pos + 1], int(toks[pos + 2]), int(toks[pos + 3])
        pos += 4
        bottoms = toks[pos:pos + nb]
        pos += nb
        tops = toks[pos:pos + nt]
        pos += nt
        kv = {}
        while pos < len(toks) and "=" in toks[pos] and toks[pos].split("=")[0].lstrip("-").isdigit():
            k, v = toks[pos].split("=", 1)
            kv[int(k)] = v
            pos += 1
        layers.append((ty, name, bottoms, tops, kv))
    return layers


def iget(kv, k, default):
    return int(kv[k]) if k in kv else default


class Weights:
    def __init__(self, storage):
        self.storage = storage
        self.buf = bytearray()

    def raw(self, a):
        self.buf += np.asarray(a, dtype="<f4").ravel().tobytes()

    def tagged(self, a):
        a = np.asarray(a, dtype=np.float32).ravel()
        if self.storage == "fp16":
            self.buf += struct.pack("<I", FP16_TAG)
            d = a.astype("<f2").tobytes()
            self.buf += d + b"\0" * ((4 - len(d) % 4) % 4)
        else:
            self.buf += struct.pack("<I", 0)
            self.buf += a.astype("<f4").tobytes()

    def int8(self, q):
        self.buf += struct.pack("<I", INT8_TAG)
        d = np.asarray(q, dtype=np.int8).tobytes()
        self.buf += d + b"\0" * ((4 - len(d) % 4) % 4)


def quantize_rows(w, rows):
    """Per-row int8 quantization of w (rows x rest): (int8 values, scales)."""
    w = w.reshape(rows, -1)
    amax = np.abs(w).max(axis=1)
    scales = np.where(amax == 0, 1.0, 127.0 / np.maximum(amax, 1e-30)).astype(np.float32)
    q = np.clip(np.round(w * scales[:, None]), -127, 127).astype(np.int8)
    return q, scales


SCALED = CONV_TYPES + ("InnerProduct", "MultiHeadAttention")


def draw(layers, rng):
    """Random weights: layer name -> its arrays in file order (float32)."""
    arrays = {}
    for ty, name, bottoms, tops, kv in layers:
        a = []
        if ty in CONV_TYPES or ty == "InnerProduct":
            ip = ty == "InnerProduct"
            num_output = iget(kv, 0, 0)
            n = iget(kv, 2 if ip else 6, 0)
            fan_in = max(1, n // num_output)
            a.append(rng.normal(0, (1.0 / fan_in) ** 0.5, n))
            if iget(kv, 1 if ip else 5, 0):
                a.append(rng.normal(0, 0.1, num_output))
        elif ty == "BatchNorm":
            c = iget(kv, 0, 0)
            a += [rng.uniform(0.5, 1.5, c), rng.normal(0, 0.1, c), rng.uniform(0.5, 1.5, c), rng.normal(0, 0.1, c)]
        elif ty == "Scale":
            n = iget(kv, 0, 0)
            if n != -233:
                a.append(rng.uniform(0.5, 1.5, n))
                if iget(kv, 1, 0):
                    a.append(rng.normal(0, 0.1, n))
        elif ty == "PReLU":
            a.append(rng.uniform(0, 0.3, iget(kv, 0, 0)))
        elif ty == "MemoryData":
            w, h, d, c = iget(kv, 0, 0), iget(kv, 1, 0), iget(kv, 11, 0), iget(kv, 2, 0)
            a.append(rng.normal(0, 0.5, max(w, 1) * max(h, 1) * max(d, 1) * max(c, 1)))
        elif ty == "LayerNorm":
            if iget(kv, 2, 1):
                n = iget(kv, 0, 0)
                a += [rng.uniform(0.5, 1.5, n), rng.normal(0, 0.1, n)]
        elif ty == "MultiHeadAttention":
            e = iget(kv, 0, 0)
            qdim = iget(kv, 2, 0) // e
            kdim, vdim = iget(kv, 3, e), iget(kv, 4, e)
            for n, fan, nb in [(e * qdim, qdim, e), (e * kdim, kdim, e), (e * vdim, vdim, e), (qdim * e, e, qdim)]:
                a += [rng.normal(0, (1.0 / fan) ** 0.5, n), rng.normal(0, 0.02, nb)]
        elif ty == "Padding":
            n = iget(kv, 6, 0)
            if n:
                a.append(rng.normal(0, 0.5, n))
        if a:
            arrays[name] = [np.asarray(x, dtype=np.float32) for x in a]
    return arrays


def serialize(layers, arrays, gains, storage, calib=None):
    """The .bin: each layer's arrays (the scaled ones times their gain);
    layers with int8_scale_term get int8 weights and scales from `calib`
    (layer name -> absmax of its bottom and top on the fp32 net)."""
    wb = Weights(storage)
    for ty, name, bottoms, tops, kv in layers:
        a = arrays.get(name, [])
        g = gains.get(name, 1.0)
        if ty in CONV_TYPES or ty == "InnerProduct":
            num_output = iget(kv, 0, 0)
            group = 1 if ty in ("Convolution", "Deconvolution", "InnerProduct") else iget(kv, 7, 1)
            w = a[0] * g
            int8 = iget(kv, 8, 0)
            if int8:
                q, scales = quantize_rows(w, num_output if group == 1 else group)
                wb.int8(q)
            else:
                wb.tagged(w)
            for x in a[1:]:
                wb.raw(x * g)
            if int8:
                bmax, tmax = calib[name]
                wb.raw(scales)
                wb.raw([127.0 / max(bmax, 1e-6)])
                if int8 > 100:
                    wb.raw([127.0 / max(tmax, 1e-6)])
        elif ty == "MultiHeadAttention":
            for i in range(0, 8, 2):
                s = g if i == 6 else 1.0
                wb.tagged(a[i] * s)
                wb.raw(a[i + 1] * s)
        else:
            for x in a:
                wb.raw(x)
    return bytes(wb.buf)


def std_in_child(param_path, model, inp_name, x, blob):
    """The standard deviation of `blob`, computed in a child process: the
    binding sometimes crashes extracting an inner blob of a net (then NaN)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        y = run(real_net(param_path, model, False, light=False), inp_name, x, [blob])[0]
        os.write(w, struct.pack("<d", float(np.std(y)) if y.size else 0.0))
        os._exit(0)
    os.close(w)
    data = os.read(r, 8)
    os.close(r)
    os.waitpid(pid, 0)
    return struct.unpack("<d", data)[0] if len(data) == 8 else float("nan")


def normalize_gains(param_path, layers, arrays, inp_name, x):
    """Gains that give every convolution, inner product and attention layer
    an output of standard deviation 1 on input x (layer after layer, on the
    real ncnn in fp32), so that deep nets with random weights neither
    vanish nor overflow."""
    fp32_layers = without_int8(layers)
    fp32_param = param_path + ".gain.param"
    with open(fp32_param, "w") as f:
        f.write(param_text(fp32_layers))
    gains = {}
    for ty, name, b, t, kv in fp32_layers:
        if ty not in SCALED:
            continue
        sd = std_in_child(fp32_param, serialize(fp32_layers, arrays, gains, "fp32"), inp_name, x, t[0])
        if np.isfinite(sd) and sd > 0:
            gains[name] = gains.get(name, 1.0) / sd
    os.remove(fp32_param)
    return gains


def write_blob(path, a):
    with open(path, "wb") as f:
        f.write(BLOB_MAGIC)
        f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def real_net(param_path, model_bytes, int8, threads=1, light=True):
    """A real ncnn net in fp32 (int8 layers in int8 when `int8`)."""
    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    net.opt.num_threads = threads
    net.opt.lightmode = light
    for k in ["use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic", "use_bf16_storage", "use_bf16_packed"]:
        setattr(net.opt, k, False)
    net.opt.use_int8_inference = int8
    assert net.load_param(param_path) == 0, param_path
    bin_path = param_path + ".%d.bin" % os.getpid()
    with open(bin_path, "wb") as f:
        f.write(model_bytes)
    assert net.load_model(bin_path) == 0, param_path
    os.remove(bin_path)
    return net


def run(net, inp_name, x, outs):
    ex = net.create_extractor()
    a = np.ascontiguousarray(x, dtype=np.float32)
    m = ncnn.Mat(a).clone()
    assert ex.input(inp_name, m) == 0
    res = []
    for o in outs:
        ret, y = ex.extract(o)
        assert ret == 0, (o, ret)
        # An empty blob (a detector that found nothing) has no array view.
        res.append(np.zeros(0, np.float32) if y.empty() else np.array(y).copy())
    return res


def without_int8(layers):
    """The layers with int8_scale_term dropped."""
    return [(t, n, b, tp, {k: v for k, v in kv.items() if k != 8}) for t, n, b, tp, kv in layers]


def param_text(layers):
    blobs = []
    for _, _, b, t, _ in layers:
        for x in b + t:
            if x not in blobs:
                blobs.append(x)
    lines = ["7767517", "%d %d" % (len(layers), len(blobs))]
    for t, n, b, tp, kv in layers:
        lines.append(" ".join([t, n, str(len(b)), str(len(tp))] + b + tp + ["%d=%s" % (k, v) for k, v in kv.items()]))
    return "\n".join(lines) + "\n"


def calibrate(param_path, layers, fp32_bytes, inp_name, x):
    """absmax of every int8 layer's bottom and top on the fp32 net."""
    fp32_param = param_path + ".fp32.param"
    with open(fp32_param, "w") as f:
        f.write(param_text(without_int8(layers)))
    net = real_net(fp32_param, fp32_bytes, False, light=False)
    os.remove(fp32_param)
    names = []
    for ty, name, b, t, kv in layers:
        if iget(kv, 8, 0):
            names.append((name, b[0], t[0]))
    blobs = sorted({n for _, b, t in names for n in (b, t)})
    vals = dict(zip(blobs, run(net, inp_name, x, blobs)))
    def absmax(a):
        m = float(np.abs(a).max()) if a.size else 0.0
        return m if np.isfinite(m) and m > 0 else 1.0
    return {name: (absmax(vals[b]), absmax(vals[t])) for name, b, t in names}


def shape_str(name, a):
    return "%s:%s" % (name, ",".join(str(s) for s in a.shape[::-1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--nets", default="")
    ap.add_argument("--quick", action="store_true", help="no normalisation but for int8 nets (for timing only)")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    nets = sorted(p[:-6] for p in os.listdir(args.bench_dir) if p.endswith(".param"))
    if args.small:
        nets = [n for n in nets if n in SMALL]
    if args.nets:
        nets = [n for n in nets if n in args.nets.split(",")]
    manifest = os.path.join(args.out_dir, "bench.tsv")
    old = {}
    if os.path.exists(manifest):
        for line in open(manifest).read().splitlines()[1:]:
            if line:
                old[line.split("\t")[0]] = line
    for net_name in nets:
        rng = np.random.default_rng(20261130 + zlib.crc32(net_name.encode()) % 100000)
        src = os.path.join(args.bench_dir, net_name + ".param")
        dst = os.path.join(args.out_dir, net_name + ".param")
        shutil.copyfile(src, dst)
        layers = parse_param(dst)
        size, storage = SMALL[net_name] if args.small else (SIZES.get(net_name, 224), "fp32")
        int8 = net_name.endswith("_int8")
        inp = [l for l in layers if l[0] == "Input"][0][3][0]
        x = rng.uniform(-1, 1, (3, size, size)).astype(np.float32)
        arrays = draw(layers, rng)
        # (int8 nets need sane ranges to run at all)
        gains = {} if args.quick and not int8 else normalize_gains(dst, layers, arrays, inp, x)
        model = serialize(without_int8(layers), arrays, gains, "fp32" if int8 else storage)
        if int8:
            calib = calibrate(dst, layers, model, inp, x)
            model = serialize(layers, arrays, gains, "fp32", calib)
        net = real_net(dst, model, int8, light=False)
        outs = [n for n in net.output_names()]
        # A final Softmax squashes (or, over an axis of one, erases) what
        # the net computed: its input is checked too.
        for ty, _, b, t, _ in layers:
            if ty == "Softmax" and t[0] in outs and b[0] not in outs:
                outs.append(b[0])
        ys = run(net, inp, x, outs)
        with open(os.path.join(args.out_dir, net_name + ".bin"), "wb") as f:
            f.write(model)
        write_blob(os.path.join(args.out_dir, net_name + ".0.in"), x)
        for k, y in enumerate(ys):
            write_blob(os.path.join(args.out_dir, "%s.%d.out" % (net_name, k)), y)
        old[net_name] = "\t".join([net_name, shape_str(inp, x), ";".join(shape_str(o, y) for o, y in zip(outs, ys)),
                                   "int8" if int8 else storage])
        print(net_name, [y.shape for y in ys], flush=True)
    # Nets written before and not now keep their rows.
    with open(manifest, "w") as f:
        f.write("net\tinputs\toutputs\tweights\n")
        f.write("\n".join(old[n] for n in sorted(old)) + "\n")


if __name__ == "__main__":
    main()
