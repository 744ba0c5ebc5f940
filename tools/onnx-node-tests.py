#!/usr/bin/env python3
"""Writes the node test cases of the `onnx` Python package (its backend test
data, made by its own case generators) into OUT (default /tmp/onnx-node):
one folder per case with model.onnx and test_data_set_*/{input,output}_*.pb,
as onnx's backend test data is laid out, plus index.tsv (case, operator).

    python3 tools/onnx-node-tests.py [OUT]

tools/onnx-node-run.R runs them against the installed ggmlR;
tools/onnx-node-fixtures.R copies a small subset into the package's tests.
"""
import os
import re
import shutil
import sys
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
import onnx.backend.test.case.node as node_cases

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/onnx-node"
warnings.simplefilter("ignore")
cases = node_cases.collect_testcases(None) if node_cases.collect_testcases.__code__.co_argcount else node_cases.collect_testcases()
schemas = {s.name for s in onnx.defs.get_all_schemas_with_history()}
lower = {s.lower(): s for s in schemas}


def operator_of(case):
    """The operator a case tests: the single node's, else the longest
    operator name the case's name starts with."""
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    name = case.name[len("test_"):]
    best = None
    for low, op in lower.items():
        if name == low or name.startswith(low + "_"):
            if best is None or len(low) > len(best[0]):
                best = (low, op)
    return best[1] if best else nodes[0].op_type


def tensor_pb(value, name):
    if isinstance(value, onnx.TensorProto):
        return value.SerializeToString()
    if isinstance(value, np.ndarray) or np.isscalar(value):
        return numpy_helper.from_array(np.asarray(value), name).SerializeToString()
    return None


if os.path.exists(out):
    shutil.rmtree(out)
os.makedirs(out)
index = []
for case in cases:
    d = os.path.join(out, case.name)
    os.makedirs(d)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    ok = True
    for i, (inputs, outputs) in enumerate(case.data_sets):
        ds = os.path.join(d, f"test_data_set_{i}")
        os.makedirs(ds)
        for j, v in enumerate(inputs):
            b = tensor_pb(v, case.model.graph.input[j].name)
            if b is None:
                ok = False
                continue
            with open(os.path.join(ds, f"input_{j}.pb"), "wb") as f:
                f.write(b)
        for j, v in enumerate(outputs):
            b = tensor_pb(v, case.model.graph.output[j].name)
            if b is None:
                ok = False
                continue
            with open(os.path.join(ds, f"output_{j}.pb"), "wb") as f:
                f.write(b)
    rtol = getattr(case, "rtol", 1e-3)
    atol = getattr(case, "atol", 1e-7)
    index.append((case.name, operator_of(case), "tensor" if ok else "non-tensor", rtol, atol))
with open(os.path.join(out, "index.tsv"), "w") as f:
    f.write("case\top\tdata\trtol\tatol\n")
    for row in index:
        f.write("\t".join(str(x) for x in row) + "\n")
print(f"wrote {len(index)} cases to {out}")
