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


def save(m, path):
    m.ir_version = 8
    onnx.save(m, path)


def test_models():
    """Small models of the package's tests (tests/testthat/fixtures/onnx)."""
    d = os.path.join(here, "..", "tests", "testthat", "fixtures", "onnx")
    os.makedirs(d, exist_ok=True)
    opset = [helper.make_opsetid("", 17)]
    f = TensorProto.FLOAT
    # Three unsupported operators, one of them twice.
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ok"),
        helper.make_node("ImageDecoder", ["a"], ["b"], name="dec1"),
        helper.make_node("ImageDecoder", ["b"], ["c"], name="dec2"),
        helper.make_node("TfIdfVectorizer", ["c"], ["d"], name="tfidf"),
        helper.make_node("FancyOp", ["d"], ["y"], name="fancy", domain="example.org"),
    ]
    g = helper.make_graph(nodes, "unsupported", [helper.make_tensor_value_info("x", f, [2])],
                          [helper.make_tensor_value_info("y", f, [2])])
    save(helper.make_model(g, opset_imports=opset + [helper.make_opsetid("example.org", 1)]), os.path.join(d, "unsupported.onnx"))
    # A dynamic batch dimension: x [N, 3] -> y = x * 2 + 1, and the sum over it.
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    one = numpy_helper.from_array(np.array(1, np.float32), "one")
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["m"]),
        helper.make_node("Add", ["m", "one"], ["y"]),
        helper.make_node("ReduceSum", ["y"], ["s"], keepdims=0),
    ]
    g = helper.make_graph(nodes, "dynamic", [helper.make_tensor_value_info("x", f, ["N", 3])],
                          [helper.make_tensor_value_info("y", f, ["N", 3]), helper.make_tensor_value_info("s", f, [])],
                          [two, one])
    save(helper.make_model(g, opset_imports=opset), os.path.join(d, "dynamic.onnx"))
    # Two inputs, one of them int64 indices into an embedding table.
    table = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "table")
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["e"], axis=0),
        helper.make_node("Add", ["e", "bias"], ["y"]),
    ]
    g = helper.make_graph(nodes, "embed",
                          [helper.make_tensor_value_info("ids", TensorProto.INT64, [2]),
                           helper.make_tensor_value_info("bias", f, [3])],
                          [helper.make_tensor_value_info("y", f, [2, 3])], [table])
    save(helper.make_model(g, opset_imports=opset), os.path.join(d, "embed.onnx"))
    # A data-dependent shape: NonZero of x [4] then a Gather of those positions.
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"]),
        helper.make_node("Squeeze", ["nz", "zero"], ["idx"]),
        helper.make_node("Gather", ["x", "idx"], ["y"], axis=0),
    ]
    zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
    g = helper.make_graph(nodes, "nonzero", [helper.make_tensor_value_info("x", f, [4])],
                          [helper.make_tensor_value_info("y", f, ["K"])], [zero])
    save(helper.make_model(g, opset_imports=opset), os.path.join(d, "nonzero.onnx"))
    # Weights in an external data file beside the model.
    w = numpy_helper.from_array(np.array([[1, 2], [3, 4]], np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "external",
                          [helper.make_tensor_value_info("x", f, [1, 2])],
                          [helper.make_tensor_value_info("y", f, [1, 2])], [w])
    m = helper.make_model(g, opset_imports=opset)
    m.ir_version = 8
    onnx.save_model(m, os.path.join(d, "external.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="external.bin", size_threshold=0)
    print("wrote", d)


if __name__ == "__main__":
    tiny_mlp()
    test_models()
    print("wrote", out)
