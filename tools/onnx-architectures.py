#!/usr/bin/env python3
"""Exports four architectures with fixed random weights from PyTorch to
ONNX and records onnxruntime's outputs for them:

  cnn          convolutions with batch norm, a residual block, pooling, a
               strided and a depthwise convolution, global pooling, a linear head
  transformer  one encoder block: multi-head self-attention, layer norms,
               a GELU feed-forward, residuals
  lstm         a two-layer LSTM over a sequence and a linear head
  recurrent    an Elman RNN under an LSTM over one sequence, a linear head

    python3 tools/onnx-architectures.py [OUT] [--size small|bench]

OUT defaults to tests/testthat/fixtures/onnx-arch. Each model is
OUT/<name>.onnx with OUT/<name>/input_0.pb.gz and output_0.pb.gz (onnxruntime's
result on the CPU). --size bench makes the larger variants inst/bench/onnx.R
times.
"""
import argparse
import gzip
import math
import os

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper
from torch import nn

SIZES = {
    "small": dict(img=32, ch=16, d_model=64, heads=4, ffn=128, seq=16, batch=2, lstm_in=16, lstm_h=32, steps=10),
    "bench": dict(img=96, ch=32, d_model=256, heads=8, ffn=1024, seq=128, batch=1, lstm_in=64, lstm_h=128, steps=64),
}


class CNN(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU())
        self.block = nn.Sequential(
            nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
            nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))
        self.pool = nn.MaxPool2d(2)
        self.down = nn.Sequential(nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.ReLU())
        self.dw = nn.Sequential(nn.Conv2d(2 * c, 2 * c, 3, padding=1, groups=2 * c), nn.ReLU(),
                                nn.Conv2d(2 * c, 2 * c, 1), nn.ReLU())
        self.head = nn.Linear(2 * c, 10)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.block(x))
        x = self.dw(self.down(self.pool(x)))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.head(x)


class Encoder(nn.Module):
    def __init__(self, d, h, f):
        super().__init__()
        self.h, self.dh = h, d // h
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, f), nn.GELU(), nn.Linear(f, d))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        heads = lambda t: t.reshape(b, s, self.h, self.dh).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.out(y))
        return self.ln2(x + self.ff(x))


class LSTMNet(nn.Module):
    def __init__(self, i, h):
        super().__init__()
        self.lstm = nn.LSTM(i, h, num_layers=2, batch_first=True)
        self.head = nn.Linear(h, 5)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y[:, -1, :])


class RecurrentNet(nn.Module):
    """An Elman RNN under an LSTM over one sequence (batch 1: the CPU
    backend computes each step's gates as fused products)."""

    def __init__(self, i, h):
        super().__init__()
        self.rnn = nn.RNN(i, h, batch_first=True)
        self.lstm = nn.LSTM(h, h, batch_first=True)
        self.head = nn.Linear(h, 5)

    def forward(self, x):
        y, _ = self.rnn(x)
        y, _ = self.lstm(y)
        return self.head(y[:, -1, :])


def randomise(m):
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (0.3 if p.dim() > 1 else 0.1))
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.copy_(torch.randn(mod.running_mean.shape, generator=g) * 0.1)
                mod.running_var.copy_(torch.rand(mod.running_var.shape, generator=g) + 0.5)
    return m.eval()


def export(m, x, path):
    kw = dict(input_names=["x"], output_names=["y"], opset_version=17)
    try:
        torch.onnx.export(m, (x,), path, dynamo=False, **kw)
    except TypeError:
        torch.onnx.export(m, (x,), path, **kw)
    onnx.checker.check_model(onnx.load(path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "tests", "testthat", "fixtures", "onnx-arch"))
    ap.add_argument("--size", default="small", choices=list(SIZES))
    a = ap.parse_args()
    s = SIZES[a.size]
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(11)
    models = {
        "cnn": (CNN(s["ch"]), rng.normal(size=(1, 3, s["img"], s["img"])).astype(np.float32)),
        "transformer": (Encoder(s["d_model"], s["heads"], s["ffn"]), rng.normal(size=(s["batch"], s["seq"], s["d_model"])).astype(np.float32)),
        "lstm": (LSTMNet(s["lstm_in"], s["lstm_h"]), rng.normal(size=(s["batch"], s["steps"], s["lstm_in"])).astype(np.float32)),
        "recurrent": (RecurrentNet(s["lstm_in"], s["lstm_h"]), rng.normal(size=(1, s["steps"], s["lstm_in"])).astype(np.float32)),
    }
    for name, (m, x) in models.items():
        path = os.path.join(a.out, f"{name}.onnx")
        export(randomise(m), torch.from_numpy(x), path)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        y = sess.run(None, {"x": x})[0]
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        # Compressed: uncompressed, some tensors look like executables to
        # file(1), which R CMD check reports.
        with gzip.GzipFile(os.path.join(d, "input_0.pb.gz"), "wb", mtime=0) as f:
            f.write(numpy_helper.from_array(x, "x").SerializeToString())
        with gzip.GzipFile(os.path.join(d, "output_0.pb.gz"), "wb", mtime=0) as f:
            f.write(numpy_helper.from_array(y, "y").SerializeToString())
        print(f"{name}: {path} ({os.path.getsize(path)} bytes), output {list(y.shape)}")


if __name__ == "__main__":
    main()
