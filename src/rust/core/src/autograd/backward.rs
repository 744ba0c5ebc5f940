//! Backward rules: given the gradient `g` of an op's output, the gradients of
//! the inputs that need one (`need[i]`), from the values the tape kept.

use super::mat::{gemm, Mat};
use super::ops::{bidx, broadcast, Act, Axis, Op, CE_EPS};
use anyhow::Result;

/// Sums a gradient of a broadcast result back to the shape of its input.
pub fn reduce_to(g: Mat, rows: usize, cols: usize) -> Mat {
    if g.rows == rows && g.cols == cols {
        return g;
    }
    let g = if rows == 1 && g.rows != 1 { g.col_sums() } else { g };
    if cols == 1 && g.cols != 1 {
        g.row_sums()
    } else {
        g
    }
}

fn scalar_of(g: &Mat) -> f64 {
    g.data.first().copied().unwrap_or(0.0)
}

/// Gradients of the inputs of one node.
pub fn backward(op: &Op, x: &[&Mat], out: &Mat, saved: &[Mat], g: &Mat, need: &[bool]) -> Result<Vec<Option<Mat>>> {
    let want = |i: usize| need.get(i).copied().unwrap_or(false);
    let one = |m: Mat| Ok(vec![Some(m)]);
    match op {
        Op::MatMul => Ok(vec![
            if want(0) { Some(gemm(g, false, x[1], true)?) } else { None },
            if want(1) { Some(gemm(x[0], true, g, false)?) } else { None },
        ]),
        Op::Linear(act) => {
            // The kind fixed in each arm, so that each loop vectorises.
            let gz = match *act {
                Act::None => g.clone(),
                Act::Relu => g.zip(out, |g, y| g * Act::Relu.grad_from_out(y)),
                Act::Sigmoid => g.zip(out, |g, y| g * Act::Sigmoid.grad_from_out(y)),
                Act::Tanh => g.zip(out, |g, y| g * Act::Tanh.grad_from_out(y)),
            };
            Ok(vec![
                if want(0) { Some(gemm(&gz, false, x[1], true)?) } else { None },
                if want(1) { Some(gemm(x[0], true, &gz, false)?) } else { None },
                want(2).then(|| gz.row_sums()),
            ])
        }
        Op::Add | Op::Sub => {
            let ga = want(0).then(|| reduce_to(g.clone(), x[0].rows, x[0].cols));
            let gb = want(1).then(|| {
                let gg = if matches!(op, Op::Sub) { g.map(|v| -v) } else { g.clone() };
                reduce_to(gg, x[1].rows, x[1].cols)
            });
            Ok(vec![ga, gb])
        }
        Op::Mul => {
            let ga = want(0).then(|| reduce_to(broadcast(g, x[1], g.rows, g.cols, |a, b| a * b), x[0].rows, x[0].cols));
            let gb = want(1).then(|| reduce_to(broadcast(g, x[0], g.rows, g.cols, |a, b| a * b), x[1].rows, x[1].cols));
            Ok(vec![ga, gb])
        }
        Op::Div => {
            let ga = want(0).then(|| reduce_to(broadcast(g, x[1], g.rows, g.cols, |a, b| a / b), x[0].rows, x[0].cols));
            let gb = want(1).then(|| {
                // d(a/b)/db = -(a/b)/b = -out/b
                let mut t = Mat::zeros(g.rows, g.cols);
                for j in 0..g.cols {
                    for i in 0..g.rows {
                        let k = i + j * g.rows;
                        t.data[k] = -g.data[k] * out.data[k] / x[1].data[bidx(x[1], i, j)];
                    }
                }
                reduce_to(t, x[1].rows, x[1].cols)
            });
            Ok(vec![ga, gb])
        }
        Op::Scale(s) => {
            let s = *s;
            one(g.map(|v| v * s))
        }
        Op::Relu => one(g.zip(x[0], |g, x| if x > 0.0 { g } else { 0.0 })),
        Op::Sigmoid => one(g.zip(out, |g, s| g * s * (1.0 - s))),
        Op::Tanh => one(g.zip(out, |g, t| g * (1.0 - t * t))),
        Op::Softmax => {
            let mut r = Mat::zeros(out.rows, out.cols);
            for j in 0..out.cols {
                let (p, gc) = (out.col(j), g.col(j));
                let dot: f64 = p.iter().zip(gc).map(|(a, b)| a * b).sum();
                for i in 0..out.rows {
                    r.data[i + j * out.rows] = p[i] * (gc[i] - dot);
                }
            }
            one(r)
        }
        Op::Log => one(g.zip(x[0], |g, x| g / x)),
        Op::Exp => one(g.zip(out, |g, e| g * e)),
        Op::Pow(p) => {
            let p = *p;
            one(g.zip(x[0], |g, x| g * p * super::ops::r_pow(x, p - 1.0)))
        }
        Op::Clamp(lo, hi) => {
            let (lo, hi) = (*lo, *hi);
            one(g.zip(x[0], |g, x| if x > lo && x < hi { g } else { 0.0 }))
        }
        Op::Sum(a) | Op::Mean(a) => {
            let m = x[0];
            let n = match (op, a) {
                (Op::Sum(_), _) => 1.0,
                (_, Axis::All) => m.len() as f64,
                (_, Axis::Rows) => m.cols as f64,
                (_, Axis::Cols) => m.rows as f64,
            };
            let mut r = Mat::zeros(m.rows, m.cols);
            for j in 0..m.cols {
                for i in 0..m.rows {
                    r.data[i + j * m.rows] = g.data[bidx(g, i, j)] / n;
                }
            }
            one(r)
        }
        Op::Reshape(..) => one(Mat { rows: x[0].rows, cols: x[0].cols, data: g.data.clone() }),
        Op::Transpose => one(g.transpose()),
        Op::MseLoss => {
            let c = 2.0 * scalar_of(g) / x[0].len() as f64;
            let d = x[0].zip(x[1], |p, t| c * (p - t));
            let gt = want(1).then(|| d.map(|v| -v));
            Ok(vec![want(0).then_some(d), gt])
        }
        Op::CrossEntropyLoss => {
            let c = scalar_of(g) / x[0].cols as f64;
            let clamp = |p: f64| p.clamp(CE_EPS, 1.0 - CE_EPS);
            let gp = want(0).then(|| x[0].zip(x[1], |p, t| -t / clamp(p) * c));
            let gt = want(1).then(|| x[0].map(|p| -clamp(p).ln() * c));
            Ok(vec![gp, gt])
        }
        Op::SoftmaxCrossEntropyLoss => {
            let (l, t, p) = (x[0], x[1], &saved[0]);
            let c = scalar_of(g) / l.cols as f64;
            let gl = want(0).then(|| {
                let mut r = Mat::zeros(l.rows, l.cols);
                for j in 0..l.cols {
                    let tsum: f64 = t.col(j).iter().sum();
                    for i in 0..l.rows {
                        let k = i + j * l.rows;
                        r.data[k] = (p.data[k] * tsum - t.data[k]) * c;
                    }
                }
                r
            });
            // d/dt of -sum(t * log p) / n is -log(p) / n.
            let gt = want(1).then(|| p.map(|v| -v.ln() * c));
            Ok(vec![gl, gt])
        }
        Op::BatchNorm { training, .. } => {
            let (m, gamma) = (x[0], x[1]);
            let (xhat, std) = (&saved[0], &saved[1]);
            let (f, n) = (m.rows, m.cols);
            let mut gsum = vec![0.0; f];
            let mut gxh = vec![0.0; f];
            for j in 0..n {
                for i in 0..f {
                    let k = i + j * f;
                    gsum[i] += g.data[k];
                    gxh[i] += g.data[k] * xhat.data[k];
                }
            }
            let gx = want(0).then(|| {
                let mut r = Mat::zeros(f, n);
                let nf = n as f64;
                for j in 0..n {
                    for i in 0..f {
                        let k = i + j * f;
                        let s = gamma.data[i] / std.data[i];
                        r.data[k] = if *training {
                            s * (g.data[k] - gsum[i] / nf - xhat.data[k] * gxh[i] / nf)
                        } else {
                            s * g.data[k]
                        };
                    }
                }
                r
            });
            let mut v = vec![gx, want(1).then_some(Mat { rows: f, cols: 1, data: gxh }), want(2).then_some(Mat { rows: f, cols: 1, data: gsum })];
            v.resize(x.len(), None);
            Ok(v)
        }
        Op::Gather(idx) => {
            let w = x[0];
            let mut r = Mat::zeros(w.rows, w.cols);
            for (k, &c) in idx.iter().enumerate() {
                for (o, v) in r.data[c * w.rows..(c + 1) * w.rows].iter_mut().zip(g.col(k)) {
                    *o += *v;
                }
            }
            one(r)
        }
        Op::SliceRows(from, to) => {
            let m = x[0];
            let mut r = Mat::zeros(m.rows, m.cols);
            let h = to - from;
            for j in 0..m.cols {
                r.data[j * m.rows + from..j * m.rows + to].copy_from_slice(&g.data[j * h..(j + 1) * h]);
            }
            one(r)
        }
        Op::ConcatRows => {
            let mut res = Vec::with_capacity(x.len());
            let mut off = 0;
            for (i, m) in x.iter().enumerate() {
                if want(i) {
                    let mut d = Vec::with_capacity(m.len());
                    for j in 0..m.cols {
                        d.extend_from_slice(&g.col(j)[off..off + m.rows]);
                    }
                    res.push(Some(Mat { rows: m.rows, cols: m.cols, data: d }));
                } else {
                    res.push(None);
                }
                off += m.rows;
            }
            Ok(res)
        }
    }
}
