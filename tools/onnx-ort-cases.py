#!/usr/bin/env python3
"""Writes single-operator ONNX models with random inputs and onnxruntime's
outputs for them, laid out as onnx's node test cases (one folder per case:
model.onnx, test_data_set_0/{input,output}_*.pb.gz) with index.tsv (case, op,
rtol, atol), into OUT (default tests/testthat/fixtures/onnx-ort).

The cases cover what the onnx package's own node tests leave thin: Resize
with antialias at several scales, 3-D and dilated pooling (with MaxPool's
indices), 3-D Conv and ConvTranspose, BatchNormalization in training mode.

    python3 tools/onnx-ort-cases.py [OUT]
"""
import gzip
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper, TensorProto

here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "testthat", "fixtures", "onnx-ort")
rng = np.random.default_rng(20261201)
F = TensorProto.FLOAT
cases = []


def save_tensor(t, path):
    # Compressed: uncompressed, some tensors look like executables to file(1),
    # which R CMD check reports.
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(t.SerializeToString())


def case(name, node, inputs, n_out, opset=19, inits=(), rtol=1e-4, atol=1e-5):
    """One case: `node` over graph inputs `inputs` (name -> array) and
    initializers `inits` (name -> array); onnxruntime gives the outputs."""
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()]
    types = [TensorProto.INT64 if (node.op_type == "MaxPool" and j == 1) else F for j in range(n_out)]
    outs = [helper.make_tensor_value_info(o, t, None) for o, t in zip(node.output[:n_out], types)]
    g = helper.make_graph([node], name, ins, outs, [numpy_helper.from_array(v, k) for k, v in dict(inits).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="ggmlR tools/onnx-ort-cases.py")
    m.ir_version = 9
    m = onnx.shape_inference.infer_shapes(m)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    res = sess.run(None, inputs)
    d = os.path.join(out, name)
    ds = os.path.join(d, "test_data_set_0")
    os.makedirs(ds)
    onnx.save(m, os.path.join(d, "model.onnx"))
    for j, (k, v) in enumerate(inputs.items()):
        save_tensor(numpy_helper.from_array(v, k), os.path.join(ds, f"input_{j}.pb.gz"))
    for j, v in enumerate(res):
        save_tensor(numpy_helper.from_array(np.asarray(v), node.output[j]), os.path.join(ds, f"output_{j}.pb.gz"))
    cases.append((name, node.op_type, rtol, atol))


def x(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def f32(v):
    return np.array(v, np.float32)


def i64(v):
    return np.array(v, np.int64)


if os.path.exists(out):
    shutil.rmtree(out)
os.makedirs(out)

# Resize with antialias: downsampling by several factors, linear and cubic,
# scales and sizes, and an upsampling axis (antialias leaves it alone).
for mode in ["linear", "cubic"]:
    for tag, sizes in [("half", [1, 2, 6, 5]), ("third", [1, 2, 4, 3]), ("mixed", [1, 2, 5, 17])]:
        n = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, antialias=1)
        case(f"resize_antialias_{mode}_{tag}", n, {"x": x(1, 2, 12, 9)}, 1, inits={"sizes": i64(sizes)})
    n = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, antialias=1, exclude_outside=1)
    case(f"resize_antialias_{mode}_scales_exclude_outside", n, {"x": x(1, 1, 10, 10)}, 1, inits={"scales": f32([1, 1, 0.4, 0.6])})
n = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", antialias=1, axes=[2, 3],
                     coordinate_transformation_mode="pytorch_half_pixel")
case("resize_antialias_linear_axes_pytorch", n, {"x": x(2, 3, 16, 11)}, 1, inits={"sizes": i64([7, 4])})

# 3-D and dilated pooling.
for op in ["MaxPool", "AveragePool", "LpPool"]:
    low = op.lower()
    n = helper.make_node(op, ["x"], ["y"], kernel_shape=[2, 3, 2], strides=[1, 2, 2], pads=[1, 1, 0, 0, 1, 1])
    case(f"{low}_3d_pads_strides", n, {"x": x(2, 3, 5, 7, 6)}, 1)
    n = helper.make_node(op, ["x"], ["y"], kernel_shape=[3, 2], dilations=[2, 1], strides=[1, 2])
    case(f"{low}_2d_dilations", n, {"x": x(1, 2, 9, 8)}, 1)
n = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2], dilations=[2, 2, 1], ceil_mode=1, strides=[2, 2, 2])
case("maxpool_3d_dilations_ceil", n, {"x": x(1, 2, 7, 6, 5)}, 1)
for inc in [0, 1]:
    n = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3, 3], strides=[2, 2, 2], pads=[1, 1, 1, 1, 1, 1],
                         count_include_pad=inc, ceil_mode=1)
    case(f"averagepool_3d_ceil_count_include_pad_{inc}", n, {"x": x(1, 2, 6, 7, 5)}, 1)
for order in [0, 1]:
    n = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], storage_order=order)
    case(f"maxpool_2d_indices_order_{order}", n, {"x": x(2, 3, 7, 6)}, 2, opset=12)
n = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2, 2], strides=[2, 2, 2])
case("maxpool_3d_indices", n, {"x": x(1, 2, 4, 6, 4)}, 2)

# 3-D convolutions.
n = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3, 2], strides=[2, 1, 1], pads=[1, 1, 0, 1, 1, 1], dilations=[1, 2, 1])
case("conv_3d_strides_pads_dilations", n, {"x": x(2, 4, 6, 7, 5)}, 1, inits={"w": x(6, 4, 3, 3, 2), "b": x(6)})
n = helper.make_node("Conv", ["x", "w"], ["y"], group=2, kernel_shape=[2, 2, 2])
case("conv_3d_group", n, {"x": x(1, 4, 4, 5, 4)}, 1, inits={"w": x(6, 2, 2, 2, 2)})
n = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2, 1], pads=[1, 0, 1, 0, 1, 0], output_padding=[1, 0, 0])
case("convtranspose_3d_strides_pads", n, {"x": x(2, 3, 3, 4, 5)}, 1, inits={"w": x(3, 4, 3, 3, 2), "b": x(4)})
n = helper.make_node("ConvTranspose", ["x", "w"], ["y"], group=2, strides=[1, 2, 2], dilations=[2, 1, 1])
case("convtranspose_3d_group_dilations", n, {"x": x(1, 4, 3, 3, 3)}, 1, inits={"w": x(4, 2, 2, 3, 2)})

# BatchNormalization in training mode: the batch's statistics, running ones updated.
for shape in [(4, 3, 5, 6), (3, 5, 2, 3, 4), (8, 4)]:
    c = shape[1]
    n = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1, momentum=0.8, epsilon=1e-3)
    tag = "x".join(str(s) for s in shape)
    case(f"batchnorm_training_{tag}", n, {"x": x(*shape) * 2 + 1}, 3, opset=15,
         inits={"s": x(c), "b": x(c), "m": x(c), "v": np.abs(x(c)) + 0.5})

with open(os.path.join(out, "index.tsv"), "w") as f:
    f.write("case\top\trtol\tatol\n")
    for row in cases:
        f.write("\t".join(str(v) for v in row) + "\n")
print(f"wrote {len(cases)} cases to {out}")
