"""Fixtures for the layers beyond the common CNN set (see ncnn_fixtures.py
for the format): each case is a small net, random weights, random inputs
and the outputs of the real ncnn (PyPI `ncnn`), edge parameters included.
Run from the repository root:

    python3 tools/ncnn_layer_fixtures.py [outdir]

Writes into tests/testthat/fixtures/ncnn-layers by default, with its own
cases.tsv.
"""
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncnn_fixtures as nf  # noqa: E402

nf.OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/testthat/fixtures/ncnn-layers"
nf.rng = np.random.default_rng(20261201)
nf.INT8 = True
rng = nf.rng
Model, case = nf.Model, nf.case


def inp(m, name, shape):
    """An Input of any rank (numpy shape, outermost first)."""
    w = shape[::-1]
    keys = ["0", "1", "11", "2"] if len(w) == 4 else ["0", "1", "2"]
    return m.add("Input", name, [], [name], " ".join("%s=%d" % (k, v) for k, v in zip(keys, w)))


def single(name, type_, params, shape, lo=-1.0, hi=1.0, weights=None):
    m = inp(Model(), "data", shape).add(type_, "l", ["data"], ["out"], params)
    for kind, arr in weights or []:
        (m.raw if kind == "raw" else m.tagged)(arr)
    case(name, m, [("data", shape)], ["out"], lo, hi)


def multi(name, type_, params, shapes, ntop=1, lo=-1.0, hi=1.0, weights=None):
    m = Model()
    names = ["in%d" % i for i in range(len(shapes))]
    for n, s in zip(names, shapes):
        inp(m, n, s)
    tops = ["out%d" % i for i in range(ntop)]
    m.add(type_, "l", names, tops, params)
    for kind, arr in weights or []:
        (m.raw if kind == "raw" else m.tagged)(arr)
    case(name, m, list(zip(names, shapes)), tops, lo, hi)


def int8_tagged(m, q):
    m.weights += struct.pack("<I", 0x000D4B38)
    d = np.asarray(q, dtype=np.int8).tobytes()
    m.weights += d + b"\0" * ((4 - len(d) % 4) % 4)


def elementwise():
    A = (3, 5, 6)
    for nm, t, p, lo, hi in [
        ("absval", "AbsVal", "", -1, 1), ("bnll", "BNLL", "", -4, 4), ("elu", "ELU", "0=0.3", -3, 3),
        ("selu", "SELU", "", -3, 3), ("celu", "CELU", "0=0.7", -3, 3), ("mish", "Mish", "", -4, 4),
        ("softplus", "Softplus", "", -4, 4), ("gelu", "GELU", "", -4, 4), ("gelu_fast", "GELU", "0=1", -4, 4),
        ("erf", "Erf", "", -3, 3), ("exp", "Exp", "", -2, 2), ("exp_base", "Exp", "0=2.0 1=0.5 2=0.25", -2, 2),
        ("log", "Log", "", 0.1, 3), ("log_base", "Log", "0=10.0 1=2.0 2=0.5", 0.1, 3),
        ("power", "Power", "0=2.5 1=0.5 2=1.5", 0, 2), ("threshold", "Threshold", "0=0.2", -1, 1),
        ("shrink", "Shrink", "0=0.1 1=0.4", -1, 1),
    ]:
        single(nm, t, p, A, lo, hi)
    for op in range(20):
        lo, hi = {5: (0.1, 2), 6: (0.1, 2), 8: (0.1, 2), 12: (-0.9, 0.9), 13: (-0.9, 0.9), 15: (0.5, 2), 17: (0.1, 2)}.get(op, (-1.6, 1.6))
        single("unary%d" % op, "UnaryOp", "0=%d" % op, A, lo, hi)


def shapes():
    m = Model().input("a", (3, 4, 5)).input("b", (3, 4, 5)).add("Noop", "n", ["a", "b"], ["out"])
    case("noop", m, [("a", (3, 4, 5)), ("b", (3, 4, 5))], ["out"])
    for nm, keys, n in [("memorydata_1d", "0=7", 7), ("memorydata_2d", "0=5 1=3", 15), ("memorydata_3d", "0=4 1=3 2=2", 24),
                        ("memorydata_4d", "0=3 1=2 11=2 2=2", 24)]:
        m = Model().input("data", (1,)).add("MemoryData", "md", [], ["md"], keys)
        m.raw(rng.normal(0, 1, n))
        m.add("BinaryOp", "add", ["md", "data"], ["out"], "0=0")
        case(nm, m, [("data", (1,))], ["out"])
    for o in range(2):
        single("permute2d_%d" % o, "Permute", "0=%d" % o, (5, 7))
    for o in range(6):
        single("permute3d_%d" % o, "Permute", "0=%d" % o, (3, 4, 5))
    for o in [0, 1, 5, 9, 13, 17, 23]:
        single("permute4d_%d" % o, "Permute", "0=%d" % o, (2, 3, 4, 5))
    C = (4, 5, 6)
    for nm, p, s in [
        ("crop_offsets", "0=1 1=1 2=1 3=-233 4=-233 5=-233", C), ("crop_size", "0=1 3=2 4=-233 5=-233", C),
        ("crop_tail", "0=1 6=2 3=-233 4=-233 5=-233", C), ("crop_clamped", "0=1 3=9 4=-233 5=-233", C),
        ("crop_all", "0=1 1=2 2=1 3=3 4=2 5=2 6=1", C), ("crop_tail2", "7=1 8=1 3=-233 4=-233 5=-233", C),
        ("crop_np_c", "-23309=1,1 -23310=1,3 -23311=1,-3", C), ("crop_np_neg", "-23309=1,-233 -23310=1,-2 -23311=1,2", C),
        ("crop_np_big", "-23309=1,0 -23310=1,100 -23311=1,1", C), ("crop_np_all", "-23309=3,0,1,2 -23310=3,-1,-1,-1", C),
        ("crop_np_negstart", "-23309=1,-2 -23310=1,-233 -23311=1,-1", C),
        ("crop_1d", "0=1 3=3", (6,)), ("crop_2d", "0=1 1=1 3=-233 4=2", (5, 6)),
        ("crop_4d", "13=1 14=2 0=1 3=-233 4=-233 5=-233", (2, 4, 5, 6)),
        ("crop_np_4d", "-23309=1,1 -23310=1,3 -23311=1,1", (2, 4, 5, 6)),
    ]:
        single(nm, "Crop", p, s)
    multi("crop_ref", "Crop", "0=1 1=2", [(4, 7, 8), (2, 3, 5)])
    multi("copyto", "CopyTo", "-23309=2,1,2 -23310=2,3,5 -23311=2,1,2", [(3, 5, 6), (3, 2, 3)])
    multi("copyto_c", "CopyTo", "-23309=1,1 -23310=1,3 -23311=1,0", [(4, 3, 5), (2, 3, 5)])
    for r, mode in [(2, 0), (2, 1), (3, 0), (3, 1)]:
        single("pixelshuffle_r%d_m%d" % (r, mode), "PixelShuffle", "0=%d 1=%d" % (r, mode), (2 * r * r, 3, 4))
        single("reorg_s%d_m%d" % (r, mode), "Reorg", "0=%d 1=%d" % (r, mode), (2, 3 * r, 2 * r))


def norms():
    for nm, shape, n, extra in [("layernorm_1d", (12,), 12, ""), ("layernorm_2d", (5, 8), 8, ""),
                                ("layernorm_3d_rows", (3, 4, 6), 6, ""), ("layernorm_3d_planes", (3, 4, 6), 24, ""),
                                ("layernorm_noaffine", (4, 7), 7, " 2=0")]:
        w = [] if extra else [("raw", rng.uniform(0.5, 1.5, n)), ("raw", rng.normal(0, 0.3, n))]
        single(nm, "LayerNorm", "0=%d 1=0.0001%s" % (n, extra), shape, weights=w)


def reductions():
    R = (3, 4, 5)
    for op in range(11):
        lo, hi = (0.2, 1.2) if op in (6, 9) else (-1, 1)
        single("reduce%d_all" % op, "Reduction", "0=%d 1=1 2=0.7" % op, R, lo, hi)
        single("reduce%d_hw_keep" % op, "Reduction", "0=%d 1=0 -23303=2,1,2 4=1 5=1" % op, R, lo, hi)
    for nm, p in [("reduce_c", "0=0 1=0 -23303=1,0 5=1"), ("reduce_w", "0=3 1=0 -23303=1,-1 5=1"),
                  ("reduce_h_keep", "0=4 1=0 -23303=1,1 4=1 5=1"), ("reduce_cw", "0=2 1=0 -23303=2,0,2 5=1"),
                  ("reduce_all_keep", "0=0 1=1 4=1 5=1")]:
        single(nm, "Reduction", p, R)
    single("reduce_2d_rows", "Reduction", "0=0 1=0 -23303=1,1 5=1", (4, 6))
    single("reduce_4d_d", "Reduction", "0=3 1=0 -23303=1,1 4=1 5=1", (2, 3, 4, 5))


def deconvs():
    X = (3, 5, 6)
    for nm, p, k, fp16 in [
        ("deconv_s1", "", 3, False), ("deconv_s2", "3=2", 3, False), ("deconv_s2_k4_pad", "3=2 4=1", 4, False),
        ("deconv_asym", "3=2 13=1 4=1 15=0 14=0 16=1", (3, 2), False), ("deconv_dilation", "2=2 12=2", 3, False),
        ("deconv_outpad", "3=2 4=1 18=1 19=1", 3, False), ("deconv_outsize_upper", "3=2 4=-233 20=11 21=9", 3, False),
        ("deconv_outsize_lower", "3=2 4=-234 20=12 21=10", 3, False), ("deconv_act", "3=2 9=2 -23310=1,0.2", 3, False),
        ("deconv_fp16", "3=2 4=1 9=1", 4, True),
    ]:
        kw, kh = (k, k) if isinstance(k, int) else k
        cout = 4
        n = cout * 3 * kw * kh
        m = Model().input("data", X).add("Deconvolution", "d", ["data"], ["out"], "0=%d 1=%d 11=%d 5=1 6=%d %s" % (cout, kw, kh, n, p))
        m.tagged(rng.normal(0, 0.5, n), fp16)
        m.raw(rng.normal(0, 0.2, cout))
        case(nm, m, [("data", X)], ["out"])
    for nm, cin, cout, g, p in [("deconvdw", 4, 4, 4, "3=2 4=1"), ("deconvdw_group", 4, 6, 2, "3=2"), ("deconvdw_mult", 3, 6, 3, "")]:
        n = cout * (cin // g) * 9
        m = Model().input("data", (cin, 5, 6)).add("DeconvolutionDepthWise", "d", ["data"], ["out"], "0=%d 1=3 5=1 6=%d 7=%d %s" % (cout, n, g, p))
        m.tagged(rng.normal(0, 0.5, n))
        m.raw(rng.normal(0, 0.2, cout))
        case(nm, m, [("data", (cin, 5, 6))], ["out"])


def int8_layers():
    X = (4, 9, 10)
    for nm, extra, term, dw in [("conv_int8", "4=1", 1, False), ("conv_int8_requant", "4=1 9=1", 101, False),
                                ("conv_int8_s2", "3=2 4=1 9=1", 1, False), ("conv_int8_1x1", "", 1, False),
                                ("dwconv_int8", "4=1 9=1", 1, True), ("dwconv_int8_requant", "4=1 9=1", 101, True),
                                ("dwconv_int8_s2", "3=2 4=1", 1, True)]:
        cin, cout = 4, 4 if dw else 6
        k = 1 if nm.endswith("1x1") else 3
        n = cout * (1 if dw else cin) * k * k
        ty = "ConvolutionDepthWise" if dw else "Convolution"
        m = Model().input("data", X).add(ty, "c", ["data"], ["mid"], "0=%d 1=%d 5=1 6=%d 8=%d %s%s" % (cout, k, n, term, extra, " 7=4" if dw else ""))
        rows = cout
        q = rng.integers(-127, 128, n)
        int8_tagged(m, q)
        m.raw(rng.normal(0, 0.2, cout))
        m.raw(rng.uniform(40, 160, rows))
        m.raw([rng.uniform(60, 120)])
        if term > 100:
            m.raw([rng.uniform(5, 15)])
            # an int8 blob feeds the next int8 convolution as it is
            m.add("Convolution", "c2", ["mid"], ["out"], "0=3 1=1 5=0 6=%d 8=1" % (3 * cout))
            int8_tagged(m, rng.integers(-127, 128, 3 * cout))
            m.raw(rng.uniform(40, 160, 3))
            m.raw([1.0])
        else:
            m.add("Noop", "n", ["mid"], ["out"])
        case(nm, m, [("data", X)], ["out"])
    # per-output scales on float weights (quantized at load)
    m = Model().input("data", X).add("Convolution", "c", ["data"], ["out"], "0=5 1=3 4=1 5=1 6=180 8=1")
    w = rng.normal(0, 0.3, (5, 36)).astype(np.float32)
    m.tagged(w)
    m.raw(rng.normal(0, 0.2, 5))
    m.raw(127.0 / np.abs(w).max(axis=1))
    m.raw([90.0])
    case("conv_int8_float_weights", m, [("data", X)], ["out"])
    m = Model().input("data", (3, 4, 5)).add("InnerProduct", "fc", ["data"], ["out"], "0=7 1=1 2=420 8=1 9=1")
    int8_tagged(m, rng.integers(-127, 128, 420))
    m.raw(rng.normal(0, 0.2, 7))
    m.raw(rng.uniform(40, 160, 7))
    m.raw([100.0])
    case("innerproduct_int8", m, [("data", (3, 4, 5))], ["out"])
    m = Model().input("data", (12,)).conv("c", "data", "out", 12, 5, 1, "9=1")
    case("conv_1d_input", m, [("data", (12,))], ["out"])


def attention():
    def mha(name, e, h, qdim, kdim, vdim, nin, seq, mask=False, extra=""):
        m = Model()
        ins = []
        for i, d in enumerate([qdim, kdim, vdim][:nin]):
            s = (seq[min(i, 1)] if isinstance(seq, tuple) else seq, d)
            inp(m, "in%d" % i, s)
            ins.append(("in%d" % i, s))
        if mask:
            s = (seq[0] if isinstance(seq, tuple) else seq, seq[1] if isinstance(seq, tuple) else seq)
            inp(m, "mask", s)
            ins.append(("mask", s))
        params = "0=%d 1=%d 2=%d 3=%d 4=%d %s%s" % (e, h, e * qdim, kdim, vdim, "5=1 " if mask else "", extra)
        m.add("MultiHeadAttention", "mha", [n for n, _ in ins], ["out"], params)
        for n, fan, nb in [(e * qdim, qdim, e), (e * kdim, kdim, e), (e * vdim, vdim, e), (qdim * e, e, qdim)]:
            m.tagged(rng.normal(0, fan ** -0.5, n))
            m.raw(rng.normal(0, 0.1, nb))
        case(name, m, ins, ["out"])
    mha("mha_self", 8, 2, 8, 8, 8, 1, 5)
    mha("mha_qkv", 12, 3, 12, 12, 12, 3, 6)
    mha("mha_cross", 8, 2, 6, 10, 10, 2, (4, 7))
    mha("mha_kdim_vdim", 8, 4, 8, 5, 7, 3, (3, 6))
    mha("mha_mask", 8, 2, 8, 8, 8, 1, 5, mask=True)
    mha("mha_scale", 8, 2, 8, 8, 8, 1, 5, extra="6=0.3")


def detection():
    # PriorBox on a feature map and image, caffe style
    for nm, p in [("priorbox", "-23300=1,30.0 -23301=1,60.0 -23302=2,2.0,3.0 9=-233 10=-233 13=0.5"),
                  ("priorbox_noflip_clip", "-23300=2,20.0,40.0 -23302=1,2.0 7=0 8=1 9=-233 10=-233 11=16.0 12=16.0"),
                  ("priorbox_fixed", "-23300=1,50.0 -23301=1,80.0 9=300 10=300 3=0.1 4=0.2 5=0.3 6=0.4")]:
        multi(nm, "PriorBox", p, [(4, 5, 6), (1, 40, 48)])
    single("priorbox_mxnet", "PriorBox", "-23300=3,0.2,0.4,0.6 -23302=3,1.0,2.0,0.5 9=-233 10=-233 13=0.5", (4, 5, 6))
    # SSD head: locations, softmaxed confidences, prior boxes
    m = Model().input("loc", (4 * 30,)).input("conf", (30, 5)).input("feat", (2, 5, 6)).input("img", (1, 60, 60))
    m.add("Softmax", "sm", ["conf"], ["prob"], "0=1 1=1")
    m.add("PriorBox", "pb", ["feat", "img"], ["prior"], "-23300=1,20.0 9=-233 10=-233 13=0.5")
    m.add("DetectionOutput", "det", ["loc", "prob", "prior"], ["out"], "0=5 1=0.45 2=20 3=10 4=0.22")
    case("detectionoutput", m, [("loc", (120,)), ("conf", (30, 5)), ("feat", (2, 5, 6)), ("img", (1, 60, 60))], ["out"], -2, 2)
    # YOLOv3 over two scales
    biases = "-23304=8,10.0,14.0,23.0,27.0,37.0,58.0,81.0,82.0"
    m = Model().input("a", (2 * 8, 4, 5)).input("b", (2 * 8, 8, 10))
    m.add("Yolov3DetectionOutput", "y", ["a", "b"], ["out"], "0=3 1=2 2=0.55 3=0.4 %s -23305=4,2.0,3.0,0.0,1.0 -23306=2,16.0,8.0" % biases)
    case("yolov3detectionoutput", m, [("a", (16, 4, 5)), ("b", (16, 8, 10))], ["out"], -3, 3)
    m = Model().input("a", (2 * 8, 6, 7)).add("YoloDetectionOutput", "y", ["a"], ["out"], "0=3 1=2 2=0.3 3=0.45 -23304=4,1.5,2.0,3.0,2.5")
    case("yolodetectionoutput", m, [("a", (16, 6, 7))], ["out"], -3, 3)
    m = Model().input("a", (2 * 8, 3, 3)).add("YoloDetectionOutput", "y", ["a"], ["out"], "0=3 1=2 2=0.99 3=0.45 -23304=4,1.5,2.0,3.0,2.5")
    case("yolodetectionoutput_none", m, [("a", (16, 3, 3))], ["out"], -3, 3)


def shape_ops():
    for nm, p, s in [("squeeze_flags", "0=1 1=1 11=1 2=1", (1, 3, 1)), ("squeeze_axis0", "-23303=1,0", (1, 3, 1)),
                     ("squeeze_h", "1=1", (2, 1, 4)), ("squeeze_4d_axes", "-23303=2,0,2", (1, 2, 1, 4)),
                     ("squeeze_all", "0=1 1=1 2=1", (1, 1, 1)), ("squeeze_neg", "-23303=1,-1", (3, 1)),
                     ("squeeze_not_one", "-23303=1,1", (1, 2, 1, 4))]:
        single(nm, "Squeeze", p, s)
    for nm, p, s in [("expanddims_1d", "-23303=2,0,2", (5,)), ("expanddims_2d", "-23303=1,1", (3, 4)),
                     ("expanddims_3d_neg", "-23303=1,-1", (2, 3, 4)), ("expanddims_3d_front", "-23303=1,0", (2, 3, 4))]:
        single(nm, "ExpandDims", p, s)
    for nm, p, s in [("flip_c", "-23300=1,0", (2, 3, 4)), ("flip_h", "-23300=1,1", (2, 3, 4)), ("flip_w", "-23300=1,-1", (2, 3, 4)),
                     ("flip_cw", "-23300=2,0,2", (2, 3, 4)), ("flip_4d", "-23300=2,1,3", (2, 3, 4, 5)),
                     ("flip_2d", "-23300=1,-2", (3, 5)), ("flip_1d", "-23300=1,0", (7,))]:
        single(nm, "Flip", p, s)
    for nm, p, s in [("tile_w", "-23302=1,3", (2, 3, 4)), ("tile_axis_c", "0=0 1=2", (2, 3, 4)), ("tile_axis_h2d", "0=0 1=3", (3, 4)),
                     ("tile_1d", "1=3", (5,)), ("tile_2d_to_3d", "-23302=3,2,1,3", (3, 4)),
                     ("tile_3d_to_4d", "-23302=4,2,3,1,2", (2, 3, 4)), ("tile_4d", "-23302=3,2,1,2", (2, 3, 4, 5)),
                     ("tile_1d_rows", "-23302=2,3,2", (4,)), ("tile_ones", "-23302=2,1,1", (3, 4))]:
        single(nm, "Tile", p, s)


def more_norms():
    for nm, shape, g, c, extra in [("groupnorm_3d", (6, 4, 5), 3, 6, ""), ("groupnorm_1d", (8,), 2, 8, ""),
                                   ("groupnorm_2d", (6, 7), 3, 6, " 2=0.01"), ("groupnorm_4d", (4, 2, 3, 5), 2, 4, ""),
                                   ("groupnorm_noaffine", (6, 4, 5), 2, 6, " 3=0"), ("groupnorm_one_group", (4, 3, 3), 1, 4, "")]:
        w = [] if "3=0" in extra else [("raw", rng.uniform(0.5, 1.5, c)), ("raw", rng.normal(0, 0.3, c))]
        single(nm, "GroupNorm", "0=%d 1=%d%s" % (g, c, extra), shape, weights=w)
    single("instancenorm", "InstanceNorm", "0=4 1=0.0001", (4, 5, 6),
           weights=[("raw", rng.uniform(0.5, 1.5, 4)), ("raw", rng.normal(0, 0.3, 4))])
    single("instancenorm_noaffine", "InstanceNorm", "0=3 2=0", (3, 4, 7))
    single("bias", "Bias", "0=4", (4, 3, 5), weights=[("raw", rng.normal(0, 1, 4))])


def products():
    M, K, N = 3, 4, 5
    multi("gemm_ab", "Gemm", "", [(M, K), (K, N)])
    multi("gemm_abc_n", "Gemm", "0=0.5 1=2.0", [(M, K), (K, N), (N,)])
    multi("gemm_abc_mn", "Gemm", "1=0.7", [(M, K), (K, N), (M, N)])
    multi("gemm_abc_m1", "Gemm", "", [(M, K), (K, N), (M, 1)])
    multi("gemm_abc_m", "Gemm", "", [(M, K), (K, N), (M,)])
    multi("gemm_abc_scalar", "Gemm", "", [(M, K), (K, N), (1,)])
    multi("gemm_trans", "Gemm", "2=1 3=1", [(K, M), (N, K)])
    multi("gemm_out_trans", "Gemm", "14=1", [(M, K), (K, N)])
    multi("gemm_n1m", "Gemm", "11=1", [(M, 1, K), (K, N)])
    for nm, bc, cshape in [("gemm_linear", 4, (N,)), ("gemm_const_c_m", 1, (M,)), ("gemm_const_c_m1", 2, (M, 1)),
                           ("gemm_const_c_mn", 3, (M, N)), ("gemm_const_c_scalar", 0, (1,))]:
        m = inp(Model(), "data", (M, K)).add("Gemm", "l", ["data"], ["out"], "0=1.5 1=0.5 3=1 5=1 6=1 7=%d 8=%d 9=%d 10=%d" % (M, N, K, bc))
        m.tagged(rng.normal(0, 0.5, (N, K)))
        m.tagged(rng.normal(0, 0.5, cshape))
        case(nm, m, [("data", (M, K))], ["out"])
    m = inp(Model(), "data", (K, N)).add("Gemm", "l", ["data"], ["out"], "4=1 6=1 7=%d 9=%d 10=-1" % (M, K))
    m.tagged(rng.normal(0, 0.5, (M, K)), True)
    case("gemm_const_a_fp16", m, [("data", (K, N))], ["out"])
    m = inp(Model(), "data", (M, N)).add("Gemm", "l", ["data"], ["out"], "2=1 4=1 5=1 7=%d 8=%d 9=%d" % (M, N, K))
    m.tagged(rng.normal(0, 0.5, (K, M)))
    m.tagged(rng.normal(0, 0.5, (K, N)))
    case("gemm_const_ab_c_input", m, [("data", (M, N))], ["out"])
    for nm, sa, sb, tb in [("matmul_vv", (4,), (4,), 0), ("matmul_mm", (3, 4), (4, 5), 0), ("matmul_vm", (4,), (4, 5), 0),
                           ("matmul_mv", (3, 4), (4,), 0), ("matmul_batch", (2, 3, 4), (2, 4, 5), 0), ("matmul_bcast_b", (2, 3, 4), (4, 5), 0),
                           ("matmul_bcast_a", (3, 4), (2, 4, 5), 0), ("matmul_bcast_1", (1, 3, 4), (2, 4, 5), 0),
                           ("matmul_4d", (2, 1, 3, 4), (1, 2, 4, 5), 0), ("matmul_v_batch", (4,), (2, 4, 5), 0),
                           ("matmul_batch_v", (2, 3, 4), (4,), 0), ("matmul_transb", (3, 4), (5, 4), 1),
                           ("matmul_transb_batch", (2, 3, 4), (2, 5, 4), 1), ("matmul_4d_m", (2, 3, 4, 5), (5, 2), 0),
                           ("matmul_transb_v", (4,), (5, 4), 1)]:
        multi(nm, "MatMul", "0=%d" % tb, [sa, sb])


def index_case(name, m, idx):
    """A case whose input blob "data" holds int32 values (indices, int32
    sums) as ncnn reads them; the .in file holds the same values as floats."""
    pp, bp = os.path.join(nf.OUT, name + ".param"), os.path.join(nf.OUT, name + ".bin")
    with open(pp, "w") as f:
        f.write(m.text())
    with open(bp, "wb") as f:
        f.write(bytes(m.weights))
    net = nf.fp32_net()
    assert net.load_param(pp) == 0 and net.load_model(bp) == 0
    ex = net.create_extractor()
    a = np.array(idx, dtype=np.int32)
    mat = nf.ncnn.Mat(a).clone()
    assert ex.input("data", mat) == 0
    ret, out = ex.extract("out")
    assert ret == 0
    y = np.array(out).copy()
    x = a.astype(np.float32)
    nf.write_blob(os.path.join(nf.OUT, name + ".0.in"), x)
    nf.write_blob(os.path.join(nf.OUT, name + ".0.out"), y)
    nf.manifest.append((name, nf.shape_str("data", x), nf.shape_str("out", y)))


def lookups():
    for nm, p in [("normalize_channel", "0=0 4=1 3=4"), ("normalize_channel_shared", "0=0 1=1 4=1 3=1"),
                  ("normalize_spatial", "0=1 4=0 3=4"), ("normalize_all", "0=1 4=1 3=4 9=1"),
                  ("normalize_all_shared_tf", "0=1 1=1 4=1 3=1 9=2 2=0.5"), ("normalize_pytorch", "0=0 4=1 3=4 9=1 2=2.0")]:
        n = 1 if "1=1" in p.split() else 4
        w = rng.uniform(0.5, 2.0, n)
        if nm == "normalize_pytorch":
            # the drawn first scale made file(1) take the weights for a DOS
            # executable, which R CMD check reports
            w[0] = 1.0
        single(nm, "Normalize", p, (4, 3, 5), weights=[("raw", w)])
    idx = [0, 3, 9, 2, -4, 14, 3]
    for nm, p, bias, q in [("embed", "0=5 1=10 3=50", False, False), ("embed_bias", "0=5 1=10 2=1 3=50", True, False),
                           ("embed_int8", "0=5 1=10 2=1 3=50 18=1", True, True)]:
        m = inp(Model(), "data", (len(idx),)).add("Embed", "l", ["data"], ["out"], p)
        if q:
            int8_tagged(m, rng.integers(-127, 128, 50))
        else:
            m.tagged(rng.normal(0, 1, 50))
        if bias:
            m.raw(rng.normal(0, 0.3, 5))
        if q:
            m.raw([rng.uniform(20, 90)])
        index_case(nm, m, idx)


def one_d():
    X = (4, 11)  # channels, width
    for nm, p, k, fp16 in [("conv1d", "4=1", 3, False), ("conv1d_stride_dilation", "3=2 2=2 4=1 15=2", 3, False),
                           ("conv1d_same_upper", "3=2 4=-233 15=-233", 4, False), ("conv1d_same_lower", "3=2 4=-234 15=-234", 4, False),
                           ("conv1d_act", "4=1 9=2 -23310=1,0.1", 3, False), ("conv1d_padvalue", "4=2 18=0.5", 3, False),
                           ("conv1d_fp16", "4=1 9=1", 5, True), ("conv1d_k1", "", 1, False)]:
        n = 6 * 4 * k
        m = inp(Model(), "data", X).add("Convolution1D", "c", ["data"], ["out"], "0=6 1=%d 5=1 6=%d %s" % (k, n, p))
        m.tagged(rng.normal(0, 0.4, n), fp16)
        m.raw(rng.normal(0, 0.2, 6))
        case(nm, m, [("data", X)], ["out"])
    for nm, cout, g, p in [("convdw1d", 4, 4, "4=1"), ("convdw1d_group", 6, 2, "3=2 4=1 9=1"), ("convdw1d_mult", 8, 4, "2=2")]:
        n = cout * (4 // g) * 3
        m = inp(Model(), "data", X).add("ConvolutionDepthWise1D", "c", ["data"], ["out"], "0=%d 1=3 5=1 6=%d 7=%d %s" % (cout, n, g, p))
        m.tagged(rng.normal(0, 0.4, n))
        m.raw(rng.normal(0, 0.2, cout))
        case(nm, m, [("data", X)], ["out"])
    for nm, p, k in [("deconv1d", "", 3), ("deconv1d_s2_pad", "3=2 4=1", 4), ("deconv1d_outpad", "3=2 4=1 18=1", 3),
                     ("deconv1d_dilation", "2=2 9=1", 3), ("deconv1d_outsize", "3=2 4=-233 20=20", 3), ("deconv1d_asym", "3=3 4=0 15=2", 3)]:
        n = 5 * 4 * k
        m = inp(Model(), "data", X).add("Deconvolution1D", "d", ["data"], ["out"], "0=5 1=%d 5=1 6=%d %s" % (k, n, p))
        m.tagged(rng.normal(0, 0.4, n))
        m.raw(rng.normal(0, 0.2, 5))
        case(nm, m, [("data", X)], ["out"])
    for nm, cout, g in [("deconvdw1d", 4, 4), ("deconvdw1d_group", 6, 2)]:
        n = cout * (4 // g) * 3
        m = inp(Model(), "data", X).add("DeconvolutionDepthWise1D", "d", ["data"], ["out"], "0=%d 1=3 3=2 5=1 6=%d 7=%d" % (cout, n, g))
        m.tagged(rng.normal(0, 0.4, n))
        m.raw(rng.normal(0, 0.2, cout))
        case(nm, m, [("data", X)], ["out"])
    for nm, p in [("pool1d_max", "0=0 1=3 2=2"), ("pool1d_avg_pad", "0=1 1=3 2=2 3=1 14=1"), ("pool1d_avg_include", "0=1 1=3 2=2 3=1 6=1"),
                  ("pool1d_global_max", "0=0 4=1"), ("pool1d_global_avg", "0=1 4=1"), ("pool1d_adaptive", "0=1 7=1 8=4"),
                  ("pool1d_valid", "0=0 1=3 2=2 5=1"), ("pool1d_same", "0=0 1=3 2=2 5=2"), ("pool1d_asym", "0=0 1=2 2=2 3=0 14=1")]:
        single(nm, "Pooling1D", p, X)


def recurrent():
    T, F = 6, 5
    for cell, g in [("RNN", 1), ("LSTM", 4), ("GRU", 3)]:
        for d, sfx in [(0, ""), (1, "_reverse"), (2, "_bidir")]:
            for proj in ([0, 3] if cell == "LSTM" else [0]):
                no, hs = 4, (proj or 4)
                dirs = 2 if d == 2 else 1
                p = "0=%d 1=%d 2=%d" % (no, dirs * F * g * hs, d) + (" 3=%d" % hs if proj else "")
                nm = cell.lower() + sfx + ("_proj" if proj else "")
                for states in (False, True):
                    if states and d == 1:
                        continue
                    shapes = [(T, F)] + ([(dirs, no)] + ([(dirs, hs)] if cell == "LSTM" else []) if states else [])
                    m = Model()
                    names = ["in%d" % i for i in range(len(shapes))]
                    for n_, s_ in zip(names, shapes):
                        inp(m, n_, s_)
                    tops = ["out0"] + (["out1"] + (["out2"] if cell == "LSTM" else []) if states else [])
                    m.add(cell, "l", names, tops, p)
                    m.tagged(rng.normal(0, 0.5, dirs * g * hs * F))
                    m.tagged(rng.normal(0, 0.2, dirs * (4 if cell == "GRU" else g) * hs))
                    m.tagged(rng.normal(0, 0.5, dirs * g * hs * no))
                    if proj:
                        m.tagged(rng.normal(0, 0.5, dirs * hs * no))
                    case(nm + ("_states" if states else ""), m, list(zip(names, shapes)), tops)


def quantization():
    for nm, shape, n in [("quantize_scalar", (3, 4, 5), 1), ("quantize_channels", (3, 4, 5), 3), ("quantize_rows", (4, 6), 4),
                         ("quantize_elements", (7,), 7)]:
        single(nm, "Quantize", "0=%d" % n, shape, -2, 2, weights=[("raw", rng.uniform(20, 120, n))])
    for nm, shape, n, nb in [("dequantize", (3, 4, 5), 1, 0), ("dequantize_channels_bias", (3, 4, 5), 3, 3),
                             ("dequantize_rows_bias1", (4, 6), 4, 1), ("dequantize_elements", (7,), 7, 7)]:
        m = inp(Model(), "data", shape).add("Dequantize", "l", ["data"], ["out"], "0=%d 1=%d" % (n, nb))
        m.raw(rng.uniform(0.001, 0.01, n))
        if nb:
            m.raw(rng.normal(0, 0.5, nb))
        index_case(nm, m, rng.integers(-3000, 3000, shape))
    for nm, shape, ns, nb, act in [("requantize", (3, 4, 5), 1, 0, ""), ("requantize_channels", (3, 4, 5), 3, 3, " 3=1"),
                                   ("requantize_leaky", (3, 6), 3, 1, " 3=2 -23304=1,0.1")]:
        m = inp(Model(), "data", shape).add("Requantize", "l", ["data"], ["out"], "0=%d 1=%d 2=%d%s" % (ns, ns, nb, act))
        m.raw(rng.uniform(0.001, 0.01, ns))
        m.raw(rng.uniform(20, 60, ns))
        if nb:
            m.raw(rng.normal(0, 0.5, nb))
        index_case(nm, m, rng.integers(-3000, 3000, shape))
    for nm, t in [("cast_fp16", 2), ("cast_bf16", 4)]:
        m = inp(Model(), "data", (3, 4, 5)).add("Cast", "a", ["data"], ["mid"], "0=1 1=%d" % t)
        m.add("Cast", "b", ["mid"], ["out"], "0=%d 1=1" % t)
        case(nm, m, [("data", (3, 4, 5))], ["out"], -100, 100)


def im2col():
    X = (3, 7, 8)
    for nm, p in [("unfold", "1=3"), ("unfold_stride_pad", "1=3 3=2 4=1 18=0.5"), ("unfold_asym", "1=2 11=3 2=2 12=1 3=1 13=2 4=0 15=1 14=2 16=0"),
                  ("unfold_1x1", "1=1")]:
        single(nm, "Unfold", p, X)
    for nm, p, cols, rows in [("fold", "1=3 20=8 21=7", 6 * 5, 27), ("fold_stride_pad", "1=3 3=2 4=1 20=8 21=7", 4 * 4, 27),
                              ("fold_overlap", "1=2 11=3 2=2 3=1 13=2 20=9 21=8", 7 * 2, 12)]:
        single(nm, "Fold", p, (rows, cols))


def sampling():
    for kind in (1, 2, 3):
        for pad in (1, 2, 3):
            for align in (0, 1):
                nm = "gridsample_%s_%s%s" % (["", "bilinear", "nearest", "bicubic"][kind], ["", "zeros", "border", "reflection"][pad],
                                              "_align" if align else "")
                multi(nm, "GridSample", "0=%d 1=%d 2=%d" % (kind, pad, align), [(2, 5, 6), (4, 7, 2)], lo=-1.3, hi=1.3)
    multi("gridsample_permuted", "GridSample", "0=1 1=1 2=0 3=1", [(2, 5, 6), (2, 4, 7)], lo=-1.3, hi=1.3)


def einsum():
    """Einsum equations ncnn accepts: the result's axes are i, j, k, l in
    order, each on some input."""
    def eq(e):
        return "-23300=%d,%s" % (len(e), ",".join(str(ord(ch)) for ch in e))
    for nm, e, shapes in [("einsum_matmul", "ik,kj->ij", [(3, 4), (4, 5)]),
                          ("einsum_batch_matmul", "ijl,ilk->ijk", [(2, 3, 4), (2, 4, 5)]),
                          ("einsum_outer", "i,j->ij", [(3,), (4,)]),
                          ("einsum_mul", "i,i->i", [(6,), (6,)]),
                          ("einsum_rowsum", "ij->i", [(3, 5)]),
                          ("einsum_sum_two", "ijk->i", [(3, 4, 5)]),
                          ("einsum_skip_letters", "il->i", [(3, 4)]),
                          ("einsum_diag", "ii->i", [(4, 4)]),
                          ("einsum_transpose", "ji->ij", [(3, 5)]),
                          ("einsum_three", "ik,kl,lj->ij", [(2, 3), (3, 4), (4, 5)]),
                          ("einsum_4d", "ijkl,ijkl->ijkl", [(2, 3, 2, 4), (2, 3, 2, 4)]),
                          ("einsum_attention", "ijl,ikl->ijk", [(2, 5, 4), (2, 6, 4)])]:
        multi(nm, "Einsum", eq(e), shapes)


def three_d():
    """The 3-d layers on a 4-d blob (c, d, h, w outermost first)."""
    X = (3, 5, 6, 7)
    for nm, p, k, fp16 in [("conv3d", "4=1", 3, False), ("conv3d_nopad", "", 3, False),
                           ("conv3d_stride_dilation", "3=2 13=1 23=2 2=1 12=2 22=1 4=1", 3, False),
                           ("conv3d_asym", "4=1 15=0 14=0 16=1 24=2 17=0", (3, 2, 1), False),
                           ("conv3d_default_pads", "14=1 24=1", 3, False),
                           ("conv3d_same_upper", "3=2 4=-233", 2, False), ("conv3d_same_lower", "3=2 4=-234", 2, False),
                           ("conv3d_same_lower_k3", "3=2 13=1 23=2 4=-234", 3, False),
                           ("conv3d_padvalue", "4=1 18=0.5", 3, False), ("conv3d_relu", "4=1 9=1", 3, False),
                           ("conv3d_leaky", "9=2 -23310=1,0.1", 3, False), ("conv3d_clip", "9=3 -23310=2,-0.3,0.3", 3, False),
                           ("conv3d_sigmoid", "9=4", 3, False), ("conv3d_mish", "9=5", 3, False),
                           ("conv3d_hardswish", "9=6 -23310=2,0.2,0.5", 3, False), ("conv3d_fp16", "4=1", 3, True),
                           ("conv3d_1x1", "", 1, False), ("conv3d_nobias", "", 3, False)]:
        kw, kh, kd = (k, k, k) if isinstance(k, int) else k
        cout = 4
        n = cout * 3 * kw * kh * kd
        bias = nm != "conv3d_nobias"
        m = inp(Model(), "data", X).add("Convolution3D", "c", ["data"], ["out"],
                                       "0=%d 1=%d 11=%d 21=%d 5=%d 6=%d %s" % (cout, kw, kh, kd, int(bias), n, p))
        m.tagged(rng.normal(0, 0.3, n), fp16)
        if bias:
            m.raw(rng.normal(0, 0.2, cout))
        case(nm, m, [("data", X)], ["out"])
    for nm, cin, cout, g, p in [("convdw3d", 4, 4, 4, "4=1 9=1"), ("convdw3d_s2_same", 4, 4, 4, "3=2 4=-233"),
                                ("convdw3d_group", 4, 6, 2, "4=1"), ("convdw3d_mult", 3, 6, 3, "2=2"),
                                ("convdw3d_group_lower", 4, 8, 2, "3=2 4=-234")]:
        n = cout * (cin // g) * 27
        m = inp(Model(), "data", (cin, 5, 6, 7)).add("ConvolutionDepthWise3D", "c", ["data"], ["out"],
                                                    "0=%d 1=3 5=1 6=%d 7=%d %s" % (cout, n, g, p))
        m.tagged(rng.normal(0, 0.3, n))
        m.raw(rng.normal(0, 0.2, cout))
        case(nm, m, [("data", (cin, 5, 6, 7))], ["out"])
    Y = (3, 3, 4, 5)
    for nm, p, k, fp16 in [("deconv3d", "", 3, False), ("deconv3d_s2", "3=2", 3, False), ("deconv3d_s2_pad", "3=2 4=1", 4, False),
                           ("deconv3d_asym", "3=2 13=1 23=2 4=1 15=0 14=0 16=1 24=0 17=1", (3, 2, 2), False),
                           ("deconv3d_dilation", "2=2 12=1 22=2", 3, False),
                           ("deconv3d_outpad", "3=2 4=1 18=1 19=0 20=1", 3, False),
                           ("deconv3d_outsize_upper", "3=2 4=-233 25=10 26=8 27=6", 3, False),
                           ("deconv3d_outsize_lower", "3=2 4=-234 25=11 26=9 27=5", 3, False),
                           ("deconv3d_act", "3=2 9=2 -23310=1,0.2", 3, False), ("deconv3d_fp16", "3=2 4=1 9=1", 2, True)]:
        kw, kh, kd = (k, k, k) if isinstance(k, int) else k
        cout = 4
        n = cout * 3 * kw * kh * kd
        m = inp(Model(), "data", Y).add("Deconvolution3D", "d", ["data"], ["out"],
                                       "0=%d 1=%d 11=%d 21=%d 5=1 6=%d %s" % (cout, kw, kh, kd, n, p))
        m.tagged(rng.normal(0, 0.3, n), fp16)
        m.raw(rng.normal(0, 0.2, cout))
        case(nm, m, [("data", Y)], ["out"])
    for nm, cin, cout, g, p in [("deconvdw3d", 4, 4, 4, "3=2 4=1"), ("deconvdw3d_group", 4, 6, 2, "3=2 18=1"),
                                ("deconvdw3d_mult", 3, 6, 3, "2=2 9=1")]:
        n = cout * (cin // g) * 27
        m = inp(Model(), "data", (cin, 3, 4, 5)).add("DeconvolutionDepthWise3D", "d", ["data"], ["out"],
                                                    "0=%d 1=3 5=1 6=%d 7=%d %s" % (cout, n, g, p))
        m.tagged(rng.normal(0, 0.3, n))
        m.raw(rng.normal(0, 0.2, cout))
        case(nm, m, [("data", (cin, 3, 4, 5))], ["out"])
    P = (3, 7, 8, 9)
    for nm, p in [("pool3d_max", "0=0 1=3 2=2 3=1"), ("pool3d_max_ceil", "0=0 1=2 2=2"),
                  ("pool3d_avg_exclude", "0=1 1=3 2=2 3=1"), ("pool3d_avg_include", "0=1 1=3 2=2 3=1 6=1"),
                  ("pool3d_avg_tail", "0=1 1=2 2=3"), ("pool3d_avg_tail_include", "0=1 1=2 2=3 6=1"),
                  ("pool3d_anisotropic", "0=1 1=3 11=2 21=1 2=2 12=1 22=3 3=1 14=0 13=0 15=1 23=0 16=1"),
                  ("pool3d_global_max", "0=0 4=1"), ("pool3d_global_avg", "0=1 4=1"),
                  ("pool3d_adaptive_max", "0=0 7=1 8=3 18=4 28=2"), ("pool3d_adaptive_avg", "0=1 7=1 8=4 18=-233 28=3"),
                  ("pool3d_adaptive_same", "0=1 7=1 8=-233"),
                  ("pool3d_valid", "0=0 1=3 2=2 5=1"), ("pool3d_valid_avg_pad", "0=1 1=3 2=2 3=1 5=1"),
                  ("pool3d_same_upper", "0=0 1=2 2=2 5=2"), ("pool3d_same_lower", "0=0 1=2 2=2 5=3"),
                  ("pool3d_same_upper_avg", "0=1 1=2 2=2 5=2"), ("pool3d_same_lower_avg", "0=1 1=4 2=3 5=3")]:
        single(nm, "Pooling3D", p, P)


def int8_products():
    """Gemm and the recurrent layers with int8_scale_term: int8 weights with
    per-row scales, dynamically quantized bottoms."""
    M, K, N = 5, 9, 6
    for nm, p, shape in [("gemm_int8_b_const", "3=1 5=1 6=0 8=%d 9=%d 18=1" % (N, K), (M, K)),
                         ("gemm_int8_b_const_ab", "0=0.75 5=1 6=0 8=%d 9=%d 18=1" % (N, K), (M, K)),
                         ("gemm_int8_b_const_out_trans", "3=1 5=1 6=0 8=%d 9=%d 14=1 18=1" % (N, K), (M, K))]:
        m = inp(Model(), "data", shape).add("Gemm", "l", ["data"], ["out"], p)
        int8_tagged(m, rng.integers(-127, 128, N * K))
        m.raw([rng.uniform(40, 120)])
        case(nm, m, [("data", shape)], ["out"])
    for nm, p in [("gemm_int8_a_const_c", "0=1.5 1=0.5 4=1 6=1 7=%d 9=%d 10=1 18=1" % (M, K)),
                  ("gemm_int8_a_const_trans_c_mn", "1=2.0 2=1 4=1 6=1 7=%d 8=%d 9=%d 10=3 18=1" % (M, N, K))]:
        m = inp(Model(), "data", (K, N)).add("Gemm", "l", ["data"], ["out"], p)
        int8_tagged(m, rng.integers(-127, 128, M * K))
        m.tagged(rng.normal(0, 1, M if "10=1" in p else M * N))
        m.raw(rng.uniform(40, 160, M))
        case(nm, m, [("data", (K, N))], ["out"])
    multi("gemm_int8_dynamic", "Gemm", "18=1", [(M, K), (K, N)])
    multi("gemm_int8_dynamic_c", "Gemm", "0=0.5 1=2.0 2=1 18=1", [(K, M), (K, N), (M, N)])
    T, F, no = 7, 5, 4
    for cell, g in [("RNN", 1), ("LSTM", 4), ("GRU", 3)]:
        for d, sfx in [(0, ""), (1, "_reverse"), (2, "_bidir")]:
            for proj in ([0, 3] if cell == "LSTM" else [0]):
                hs = proj or no
                dirs = 2 if d == 2 else 1
                rows = g * hs
                p = "0=%d 1=%d 2=%d 8=1" % (no, dirs * F * rows, d) + (" 3=%d" % hs if proj else "")
                nm = cell.lower() + "_int8" + sfx + ("_proj" if proj else "")
                for states in ([False, True] if d != 1 else [False]):
                    shapes = [(T, F)] + ([(dirs, no)] + ([(dirs, hs)] if cell == "LSTM" else []) if states else [])
                    m = Model()
                    names = ["in%d" % i for i in range(len(shapes))]
                    for n_, s_ in zip(names, shapes):
                        inp(m, n_, s_)
                    tops = ["out%d" % i for i in range(len(shapes))]
                    m.add(cell, "l", names, tops, p)
                    int8_tagged(m, rng.integers(-127, 128, dirs * rows * F))
                    m.tagged(rng.normal(0, 0.2, dirs * (4 if cell == "GRU" else g) * hs))
                    int8_tagged(m, rng.integers(-127, 128, dirs * rows * no))
                    if proj:
                        m.tagged(rng.normal(0, 0.5, dirs * hs * no))
                    m.raw(rng.uniform(40, 160, dirs * rows))
                    m.raw(rng.uniform(40, 160, dirs * rows))
                    case(nm + ("_states" if states else ""), m, list(zip(names, shapes)), tops)


def padding_4d():
    """Padding of 4-d blobs: front/behind pad the depth."""
    V = (3, 4, 5, 6)
    for nm, p in [("pad4d_const", "0=1 1=2 2=2 3=1 4=0 5=0.5 7=1 8=2"), ("pad4d_depth_only", "7=2 8=1 5=-1.5"),
                  ("pad4d_hw_only", "0=1 1=1 2=1 3=1"), ("pad4d_replicate", "0=2 1=1 2=1 3=2 4=1 7=2 8=1"),
                  ("pad4d_reflect", "0=1 1=2 2=2 3=1 4=2 7=2 8=3"), ("pad4d_reflect_hw", "0=2 1=1 2=3 3=1 4=2")]:
        single(nm, "Padding", p, V)
    single("pad4d_per_channel", "Padding", "0=1 1=1 2=1 3=1 6=3 7=1 8=1", V, weights=[("raw", [0.25, -0.5, 2.0])])


def main():
    os.makedirs(nf.OUT, exist_ok=True)
    elementwise()
    shapes()
    norms()
    reductions()
    deconvs()
    int8_layers()
    attention()
    detection()
    shape_ops()
    more_norms()
    products()
    lookups()
    one_d()
    recurrent()
    quantization()
    im2col()
    sampling()
    einsum()
    three_d()
    int8_products()
    padding_4d()
    with open(os.path.join(nf.OUT, "cases.tsv"), "w") as f:
        f.write("case\tinputs\toutputs\n")
        for row in nf.manifest:
            f.write("\t".join(row) + "\n")
    print("%d cases written to %s" % (len(nf.manifest), nf.OUT))


if __name__ == "__main__":
    main()
