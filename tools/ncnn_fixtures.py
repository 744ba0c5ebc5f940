"""Generate the ncnn fixtures used by tests/testthat/test-ncnn-*.R.

Each case is a param, random weights, random inputs and the outputs of the
real ncnn (PyPI package `ncnn`) on them. Run from the repository root:

    python3 tools/ncnn_fixtures.py [outdir]

Writes <case>.param, <case>.bin, <case>.<k>.in / .out (raw little-endian
float32) and cases.tsv (case, inputs, outputs; blobs as name:w,h[,d],c
with w first, the order of R arrays).
"""
import os
import struct
import sys

import numpy as np
import ncnn

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/testthat/fixtures/ncnn"
rng = np.random.default_rng(20261129)

FP16_TAG = 0x01306B47


class Model:
    """Builds a text param and its weights layer by layer."""

    def __init__(self):
        self.layers = []
        self.blobs = []
        self.weights = bytearray()

    def add(self, type_, name, bottoms, tops, params=""):
        for b in bottoms + tops:
            if b not in self.blobs:
                self.blobs.append(b)
        self.layers.append((type_, name, bottoms, tops, params))
        return self

    def tagged(self, arr, fp16=False):
        arr = np.asarray(arr, dtype=np.float32).ravel()
        if fp16:
            self.weights += struct.pack("<I", FP16_TAG)
            data = arr.astype("<f2").tobytes()
            data += b"\0" * ((4 - len(data) % 4) % 4)
            self.weights += data
        else:
            self.weights += struct.pack("<I", 0)
            self.weights += arr.astype("<f4").tobytes()

    def raw(self, arr):
        self.weights += np.asarray(arr, dtype="<f4").ravel().tobytes()

    def text(self):
        lines = ["7767517", "%d %d" % (len(self.layers), len(self.blobs))]
        for t, n, b, tp, p in self.layers:
            lines.append(" ".join([t, n, str(len(b)), str(len(tp))] + b + tp + ([p] if p else [])))
        return "\n".join(lines) + "\n"

    # layer helpers with random weights -------------------------------
    def input(self, name, shape):
        w = shape[::-1]
        keys = {1: "0=%d", 2: "0=%d 1=%d", 3: "0=%d 1=%d 2=%d"}
        p = keys.get(len(w), "")
        return self.add("Input", name, [], [name], p % tuple(w) if p else "")

    def conv(self, name, b, t, cin, cout, k, extra="", bias=True, fp16=False, group=1, dw=False):
        kw, kh = (k, k) if isinstance(k, int) else k
        n = cout * (cin // group) * kw * kh
        p = "0=%d 1=%d 11=%d 5=%d 6=%d" % (cout, kw, kh, int(bias), n)
        if dw:
            p += " 7=%d" % group
        self.add("ConvolutionDepthWise" if dw else "Convolution", name, [b], [t], (p + " " + extra).strip())
        self.tagged(rng.normal(0, (2.0 / (cin // group * kw * kh)) ** 0.5, n), fp16)
        if bias:
            self.raw(rng.normal(0, 0.1, cout))
        return self

    def bn(self, name, b, t, c):
        self.add("BatchNorm", name, [b], [t], "0=%d 1=1e-5" % c)
        self.raw(rng.uniform(0.5, 1.5, c))
        self.raw(rng.normal(0, 0.1, c))
        self.raw(rng.uniform(0.5, 1.5, c))
        self.raw(rng.normal(0, 0.1, c))
        return self

    def fc(self, name, b, t, nin, nout, extra=""):
        self.add("InnerProduct", name, [b], [t], ("0=%d 1=1 2=%d " % (nout, nin * nout) + extra).strip())
        self.tagged(rng.normal(0, (1.0 / nin) ** 0.5, nin * nout))
        self.raw(rng.normal(0, 0.1, nout))
        return self



# Blob files start with this tag, so that no tool mistakes raw float data for
# an executable (R CMD check inspects every file of the package).
BLOB_MAGIC = b"GGMLRF32"


def write_blob(path, a):
    with open(path, "wb") as f:
        f.write(BLOB_MAGIC)
        f.write(a.astype("<f4").tobytes())

# Whether layers with int8_scale_term run as int8 (else int8 is off).
INT8 = False


def fp32_net(num_threads=1):
    """A real ncnn Net computing in fp32 on the CPU (int8 layers in int8
    when INT8 is set)."""
    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    net.opt.num_threads = num_threads
    for k in ["use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic", "use_bf16_storage",
              "use_int8_inference"]:
        if hasattr(net.opt, k):
            setattr(net.opt, k, False)
    net.opt.use_int8_inference = INT8
    return net


def run_ncnn(param_path, bin_path, inputs, outputs, binary_param=False):
    net = fp32_net()
    assert (net.load_param_bin(param_path) if binary_param else net.load_param(param_path)) == 0
    assert net.load_model(bin_path) == 0
    ex = net.create_extractor()
    # ncnn.Mat borrows the array's memory: keep both alive, and copy, since
    # in-place layers write into their input.
    keep = []
    for name, arr in inputs:
        a = np.array(arr, dtype=np.float32, copy=True, order="C")
        mat = ncnn.Mat(a).clone()
        keep.append((a, mat))
        assert ex.input(name, mat) == 0
    outs = []
    for name in outputs:
        ret, m = ex.extract(name)
        assert ret == 0, (param_path, name, ret)
        # An empty blob (a detector that found nothing) has no array view.
        outs.append(np.zeros(0, np.float32) if m.empty() else np.array(m).copy())
    return outs


def shape_str(name, arr):
    return "%s:%s" % (name, ",".join(str(s) for s in arr.shape[::-1]))


manifest = []


def case(name, model, inputs, outputs, lo=-1.0, hi=1.0):
    """inputs: list of (blob, numpy shape outermost first)."""
    pp = os.path.join(OUT, name + ".param")
    bp = os.path.join(OUT, name + ".bin")
    with open(pp, "w") as f:
        f.write(model.text())
    with open(bp, "wb") as f:
        f.write(bytes(model.weights))
    xs = [(b, rng.uniform(lo, hi, s).astype(np.float32)) for b, s in inputs]
    ys = run_ncnn(pp, bp, xs, outputs)
    for i, (b, x) in enumerate(xs):
        write_blob(os.path.join(OUT, "%s.%d.in" % (name, i)), x)
    for i, y in enumerate(ys):
        write_blob(os.path.join(OUT, "%s.%d.out" % (name, i)), y)
    manifest.append((name, ";".join(shape_str(b, x) for b, x in xs),
                     ";".join(shape_str(n, y) for n, y in zip(outputs, ys))))
    return model


def single(name, type_, params, shape, lo=-1.0, hi=1.0):
    m = Model().input("data", shape).add(type_, "l", ["data"], ["out"], params)
    case(name, m, [("data", shape)], ["out"], lo, hi)


def two(name, type_, params, s1, s2, lo=-1.0, hi=1.0):
    m = Model().input("a", s1).input("b", s2).add(type_, "l", ["a", "b"], ["out"], params)
    case(name, m, [("a", s1), ("b", s2)], ["out"], lo, hi)


def layer_cases():
    C = (3, 9, 11)
    for nm, extra in [("conv_basic", "4=1"), ("conv_nopad", ""),
                      ("conv_asym", "2=2 12=1 3=2 13=1 4=1 15=2 14=0 16=1"),
                      ("conv_same_upper", "3=2 4=-233 15=-233 14=-233 16=-233"),
                      ("conv_same_lower", "3=2 4=-234 15=-234 14=-234 16=-234"),
                      ("conv_padvalue", "4=2 18=0.5"),
                      ("conv_act1", "4=1 9=1"), ("conv_act2", "4=1 9=2 -23310=1,0.1"),
                      ("conv_act3", "4=1 9=3 -23310=2,-0.5,0.5"), ("conv_act4", "4=1 9=4"),
                      ("conv_act5", "4=1 9=5"), ("conv_act6", "4=1 9=6 -23310=2,0.2,0.5")]:
        k = (3, 2) if nm == "conv_asym" else 3
        case(nm, Model().input("data", C).conv("c", "data", "out", 3, 8, k, extra), [("data", C)], ["out"])
    case("conv_1x1", Model().input("data", C).conv("c", "data", "out", 3, 5, 1, "", bias=False), [("data", C)], ["out"])
    case("conv_fp16", Model().input("data", C).conv("c", "data", "out", 3, 8, 3, "4=1", fp16=True), [("data", C)], ["out"])
    D = (6, 10, 9)
    case("dwconv", Model().input("data", D).conv("d", "data", "out", 6, 6, 3, "4=1 9=1", group=6, dw=True), [("data", D)], ["out"])
    case("dwconv_s2", Model().input("data", D).conv("d", "data", "out", 6, 6, 3, "3=2 4=1", group=6, dw=True), [("data", D)], ["out"])
    case("gconv", Model().input("data", D).conv("d", "data", "out", 6, 4, 3, "4=1", group=2, dw=True), [("data", D)], ["out"])
    P = (4, 9, 11)
    for nm, p in [("pool_max", "0=0 1=3 2=2 3=1"), ("pool_max_ceil", "0=0 1=2 2=2"),
                  ("pool_avg", "0=1 1=3 2=2 3=1"), ("pool_avg_incl", "0=1 1=3 2=2 3=1 6=1"),
                  ("pool_avg_valid", "0=1 1=3 2=2 5=1"), ("pool_max_same", "0=0 1=3 2=2 5=2"),
                  ("pool_avg_same_lower", "0=1 1=2 2=2 5=3"), ("pool_avg_same_upper", "0=1 1=3 2=2 5=2"), ("pool_gmax", "0=0 4=1"),
                  ("pool_gavg", "0=1 4=1"), ("pool_adaptive", "0=1 7=1 8=4 18=3"),
                  ("pool_avg_asym", "0=1 1=3 11=2 2=2 12=1 3=1 14=0 13=1 15=0")]:
        single(nm, "Pooling", p, P)
    case("innerproduct", Model().input("data", (3, 4, 5)).fc("fc", "data", "out", 60, 7, "9=1"), [("data", (3, 4, 5))], ["out"])
    case("innerproduct_1d", Model().input("data", (20,)).fc("fc", "data", "out", 20, 6, "9=4"), [("data", (20,))], ["out"])
    A = (3, 5, 6)
    for nm, t, p in [("relu", "ReLU", ""), ("leakyrelu", "ReLU", "0=0.1"), ("sigmoid", "Sigmoid", ""),
                     ("tanh", "TanH", ""), ("swish", "Swish", ""), ("hardsigmoid", "HardSigmoid", "0=0.25 1=0.4"),
                     ("hardswish", "HardSwish", ""), ("clip", "Clip", "0=-0.3 1=0.6"),
                     ("dropout", "Dropout", "0=0.7"), ("flatten", "Flatten", ""),
                     ("softmax0", "Softmax", ""), ("softmax1", "Softmax", "0=1 1=1"),
                     ("softmax2", "Softmax", "0=2 1=1"), ("softmax_neg", "Softmax", "0=-1 1=1"),
                     ("reshape_2d", "Reshape", "0=-1 1=6"), ("reshape_1d", "Reshape", "0=-1"),
                     ("reshape_3d", "Reshape", "0=9 1=0 2=-1"),
                     ("pad_const", "Padding", "0=1 1=2 2=3 3=0 4=0 5=0.25"),
                     ("pad_replicate", "Padding", "0=2 1=1 2=1 3=2 4=1"),
                     ("pad_reflect", "Padding", "0=2 1=1 2=1 3=2 4=2"),
                     ("pad_channels", "Padding", "0=1 1=1 2=1 3=1 4=0 5=-1 7=1 8=2"),
                     ("shuffle", "ShuffleChannel", "0=3"),
                     ("lrn_across", "LRN", "0=0 1=3 2=0.5 3=0.75 4=1.5"),
                     ("lrn_within", "LRN", "0=1 1=3 2=0.5 3=0.75 4=1")]:
        shape = (6, 5, 4) if nm == "shuffle" else A
        single(nm, t, p, shape)
    single("softmax_1d", "Softmax", "", (9,))
    single("softmax_2d", "Softmax", "0=1 1=1", (4, 7))
    single("shuffle_rev", "ShuffleChannel", "0=2 1=1", (6, 5, 4))
    m = Model().input("data", (3, 4, 5)).add("Padding", "l", ["data"], ["out"], "0=1 1=1 2=1 3=1 4=0 6=3")
    m.raw([0.5, -0.5, 2.0])
    case("pad_per_channel", m, [("data", (3, 4, 5))], ["out"])
    for nm, p, s in [("interp_nearest", "0=1 1=2.0 2=2.0", (2, 4, 5)), ("interp_bilinear", "0=2 1=2.0 2=2.0", (2, 4, 5)),
                     ("interp_bilinear_size", "0=2 3=7 4=9 6=1", (2, 4, 5)), ("interp_bilinear_down", "0=2 3=3 4=4", (2, 7, 9)),
                     ("interp_bicubic", "0=3 1=2.0 2=2.0", (2, 4, 5)), ("interp_bicubic_size", "0=3 3=6 4=7", (2, 5, 4)),
                     ("interp_nearest_size", "0=1 3=7 4=3", (2, 4, 5))]:
        single(nm, "Interp", p, s)
    m = Model().input("data", A).bn("bn", "data", "out", 3)
    case("batchnorm", m, [("data", A)], ["out"])
    m = Model().input("data", (5,)).bn("bn", "data", "out", 5)
    case("batchnorm_1d", m, [("data", (5,))], ["out"])
    m = Model().input("data", A).add("Scale", "s", ["data"], ["out"], "0=3 1=1")
    m.raw(rng.normal(1, 0.3, 3)); m.raw(rng.normal(0, 0.3, 3))
    case("scale", m, [("data", A)], ["out"])
    two("scale_blob", "Scale", "0=-233", A, (3,))
    m = Model().input("data", A).add("PReLU", "p", ["data"], ["out"], "0=3")
    m.raw([0.1, 0.2, 0.3])
    case("prelu", m, [("data", A)], ["out"])
    m = Model().input("data", A).add("PReLU", "p", ["data"], ["out"], "0=1")
    m.raw([0.25])
    case("prelu_single", m, [("data", A)], ["out"])
    for ax in [0, 1, 2, -1]:
        s2 = list(A); s2[ax] = 2
        two("concat%d" % ax if ax >= 0 else "concat_neg", "Concat", "0=%d" % ax, A, tuple(s2))
    for op, p in [("prod", "0=0"), ("sum", "0=1"), ("sumcoef", "0=1 -23301=2,0.5,-2.0"), ("max", "0=2")]:
        two("eltwise_" + op, "Eltwise", p, A, A)
    for op in range(12):
        lo, hi = (0.5, 1.5) if op in (6, 9) else (-1.0, 1.0)
        two("binary%d" % op, "BinaryOp", "0=%d" % op, A, A, lo, hi)
        single("binary%d_scalar" % op, "BinaryOp", "0=%d 1=1 2=0.7" % op, A, lo, hi)
    two("binary_bc_c", "BinaryOp", "0=0", A, (3,))
    two("binary_bc_w", "BinaryOp", "0=2", A, (6,))
    two("binary_bc_ch", "BinaryOp", "0=1", A, (3, 5))
    two("binary_bc_c11", "BinaryOp", "0=3", A, (3, 1, 1), 0.5, 1.5)
    two("binary_bc_1hw", "BinaryOp", "0=0", A, (1, 5, 6))
    two("binary_bc_rev", "BinaryOp", "0=1", (3,), A)
    m = Model().input("data", (7, 4, 5)).add("Slice", "s", ["data"], ["o1", "o2", "o3"], "-23300=3,2,-233,-233 1=0")
    case("slice_c", m, [("data", (7, 4, 5))], ["o1", "o2", "o3"])
    m = Model().input("data", (3, 6, 5)).add("Slice", "s", ["data"], ["o1", "o2"], "-23300=2,4,-233 1=1")
    case("slice_h", m, [("data", (3, 6, 5))], ["o1", "o2"])
    m = Model().input("data", (3, 4, 8)).add("Slice", "s", ["data"], ["o1", "o2", "o3"], "1=-1 -23302=2,3,5")
    case("slice_indices", m, [("data", (3, 4, 8))], ["o1", "o2", "o3"])
    m = Model().input("data", A).add("Split", "sp", ["data"], ["a", "b"]).add("ReLU", "r", ["a"], ["ra"]) \
        .add("Sigmoid", "s", ["b"], ["sb"]).add("Concat", "c", ["ra", "sb"], ["out"], "0=0")
    case("split_concat", m, [("data", A)], ["out"])


def squeezenet():
    m = Model().input("data", (3, 48, 48))
    m.conv("conv1", "data", "c1", 3, 16, 3, "3=2 9=1")
    m.add("Pooling", "pool1", ["c1"], ["p1"], "0=0 1=3 2=2")
    cin = 16
    blob = "p1"
    for i, (s, e) in enumerate([(8, 16), (8, 16), (12, 24)]):
        f = "fire%d" % (i + 2)
        m.conv(f + "_sq", blob, f + "_s", cin, s, 1, "9=1")
        m.add("Split", f + "_split", [f + "_s"], [f + "_s1", f + "_s2"])
        m.conv(f + "_e1", f + "_s1", f + "_e1o", s, e, 1, "9=1")
        m.conv(f + "_e3", f + "_s2", f + "_e3o", s, e, 3, "4=1 9=1")
        m.add("Concat", f + "_cat", [f + "_e1o", f + "_e3o"], [f + "_out"])
        blob, cin = f + "_out", 2 * e
        if i == 1:
            m.add("Pooling", "pool3", [blob], ["p3"], "0=0 1=3 2=2")
            blob = "p3"
    m.add("Dropout", "drop", [blob], ["d"])
    m.conv("conv10", "d", "c10", cin, 10, 1, "9=1")
    m.add("Pooling", "gap", ["c10"], ["g"], "0=1 4=1")
    m.add("Softmax", "prob", ["g"], ["prob"])
    case("arch_squeezenet", m, [("data", (3, 48, 48))], ["prob"])


def mobilenet():
    m = Model().input("data", (3, 32, 32))
    m.conv("conv1", "data", "c1", 3, 16, 3, "3=2 4=1", bias=False)
    m.bn("bn1", "c1", "b1", 16)
    m.add("Clip", "relu6", ["b1"], ["r1"], "0=0.0 1=6.0")
    blob, cin = "r1", 16
    for i, (cout, s) in enumerate([(24, 1), (32, 2), (48, 1), (64, 2)]):
        n = "blk%d" % i
        m.conv(n + "_dw", blob, n + "_d", cin, cin, 3, "3=%d 4=1 9=3 -23310=2,0.0,6.0" % s, group=cin, dw=True)
        act = "9=6 -23310=2,0.1666667,0.5" if i % 2 else "9=1"
        m.conv(n + "_pw", n + "_d", n + "_p", cin, cout, 1, act)
        blob, cin = n + "_p", cout
    m.add("HardSwish", "hs", [blob], ["hs"], "0=0.1666667 1=0.5")
    m.add("Pooling", "gap", ["hs"], ["g"], "0=1 4=1")
    m.fc("fc", "g", "fc", cin, 10)
    m.add("Softmax", "prob", ["fc"], ["prob"])
    case("arch_mobilenet", m, [("data", (3, 32, 32))], ["prob"])


def resnet():
    m = Model().input("data", (3, 32, 32))
    m.conv("conv1", "data", "c1", 3, 16, 3, "4=1", bias=False)
    m.bn("bn1", "c1", "b1", 16)
    m.add("Scale", "sc1", ["b1"], ["s1"], "0=16 1=1")
    m.raw(rng.normal(1, 0.1, 16)); m.raw(rng.normal(0, 0.1, 16))
    m.add("ReLU", "r1", ["s1"], ["r1"])
    blob, cin = "r1", 16
    for i, (cout, s) in enumerate([(16, 1), (32, 2), (32, 1)]):
        n = "res%d" % i
        m.add("Split", n + "_split", [blob], [n + "_a", n + "_b"])
        m.conv(n + "_c1", n + "_a", n + "_c1o", cin, cout, 3, "3=%d 4=1" % s, bias=False)
        m.bn(n + "_bn1", n + "_c1o", n + "_b1", cout)
        m.add("ReLU", n + "_r", [n + "_b1"], [n + "_r"])
        m.conv(n + "_c2", n + "_r", n + "_c2o", cout, cout, 3, "4=1", bias=False)
        m.bn(n + "_bn2", n + "_c2o", n + "_b2", cout)
        short = n + "_b"
        if s != 1 or cin != cout:
            m.conv(n + "_proj", n + "_b", n + "_p", cin, cout, 1, "3=%d" % s)
            short = n + "_p"
        m.add("BinaryOp", n + "_add", [n + "_b2", short], [n + "_sum"], "0=0")
        m.add("ReLU", n + "_out", [n + "_sum"], [n + "_o"])
        blob, cin = n + "_o", cout
    m.add("Pooling", "gap", [blob], ["g"], "0=1 4=1")
    m.add("Flatten", "flat", ["g"], ["f"])
    m.fc("fc", "f", "fc", cin, 10)
    m.add("Softmax", "prob", ["fc"], ["prob"])
    case("arch_resnet", m, [("data", (3, 32, 32))], ["prob"])
    return m


TYPE_INDEX = {"Input": 16, "Convolution": 6, "BatchNorm": 2, "Scale": 29, "ReLU": 26, "Split": 33,
              "BinaryOp": 40, "Pooling": 21, "Flatten": 14, "InnerProduct": 15, "Softmax": 32}


def write_binary_param(m, path):
    """The same net as a .param.bin (type indices, blob indices, raw values)."""
    words = [7767517, len(m.layers), len(m.blobs)]
    data = bytearray()
    for t, n, b, tp, p in m.layers:
        words += [TYPE_INDEX[t], len(b), len(tp)] + [m.blobs.index(x) for x in b] + [m.blobs.index(x) for x in tp]
        for kv in p.split():
            k, v = kv.split("=")
            k = int(k)
            if k <= -23300:
                vals = v.split(",")[1:]
                isf = any("." in x or "e" in x for x in vals)
                words += [k, len(vals)] + [struct.unpack("<i", struct.pack("<f" if isf else "<i", float(x) if isf else int(x)))[0] for x in vals]
            else:
                isf = "." in v or "e" in v
                words += [k, struct.unpack("<i", struct.pack("<f", float(v)))[0] if isf else int(v)]
        words.append(-233)
    with open(path, "wb") as f:
        f.write(struct.pack("<%di" % len(words), *words))


def main():
    os.makedirs(OUT, exist_ok=True)
    layer_cases()
    squeezenet()
    mobilenet()
    m = resnet()
    # Binary param of the ResNet-style net, checked against real ncnn too.
    bp = os.path.join(OUT, "arch_resnet.param.bin")
    write_binary_param(m, bp)
    x = np.fromfile(os.path.join(OUT, "arch_resnet.0.in"), dtype="<f4", offset=len(BLOB_MAGIC)).reshape(3, 32, 32)
    ref = np.fromfile(os.path.join(OUT, "arch_resnet.0.out"), dtype="<f4", offset=len(BLOB_MAGIC))
    out_idx = m.blobs.index("prob")
    net = fp32_net()
    assert net.load_param_bin(bp) == 0 and net.load_model(os.path.join(OUT, "arch_resnet.bin")) == 0
    ex = net.create_extractor()
    xa = x.copy()
    xm = ncnn.Mat(xa).clone()
    ex.input(0, xm)
    _, y = ex.extract(out_idx)
    assert np.allclose(np.array(y).ravel(), ref, rtol=1e-5, atol=1e-6), ("binary param differs", np.array(y), ref)
    with open(os.path.join(OUT, "cases.tsv"), "w") as f:
        f.write("case\tinputs\toutputs\n")
        for row in manifest:
            f.write("\t".join(row) + "\n")
    print("%d cases written to %s (resnet output blob index %d)" % (len(manifest), OUT, out_idx))


if __name__ == "__main__":
    main()
