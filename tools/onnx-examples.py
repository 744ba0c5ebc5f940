#!/usr/bin/env python3
"""Writes the small example models shipped in inst/extdata/onnx/ (used by
the examples, the vignette and the tests), with fixed random weights."""
import os
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "..", "inst", "extdata", "onnx")
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(20240601)


def tiny_mlp():
    """x [1, 4] -> Gemm(8) -> Relu -> MatMul(3) + b -> Softmax -> y [1, 3]."""
    w1 = numpy_helper.from_array(rng.normal(0, 0.5, (8, 4)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.normal(0, 0.1, (8,)).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.normal(0, 0.5, (8, 3)).astype(np.float32), "w2")
    b2 = numpy_helper.from_array(rng.normal(0, 0.1, (3,)).astype(np.float32), "b2")
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["m"], name="fc2"),
        helper.make_node("Add", ["m", "b2"], ["logits"], name="bias"),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(
        nodes, "tiny_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [w1, b1, w2, b2])
    m = helper.make_model(g, producer_name="ggmlR tools/onnx-examples.py",
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "tiny_mlp.onnx"))


if __name__ == "__main__":
    tiny_mlp()
    print("wrote", out)
