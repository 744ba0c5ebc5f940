//! The recurrent layers RNN, LSTM and GRU over a 2-d blob (w = features,
//! h = time steps). 2=direction: 0 forward, 1 reverse, 2 both (outputs side
//! by side in each row, forward first). Optional bottoms give the initial
//! hidden state (and LSTM's cell state) per direction, and as many extra
//! tops receive the final ones. LSTM gates are I, F, O, G, with 3=hidden_size
//! below num_output projecting the hidden state; GRU gates are R, U, N with
//! the reset gate applied to the recurrent part of N.
//!
//! With 8=int8_scale_term the input and recurrent weights are int8, with
//! one scale per gate row each (read after the other weights); each time
//! step's input row and the hidden state are quantized with `127 / absmax`
//! and the integer sums scaled back per row, as ncnn's int8 cells do.

use super::kernels::quant::float2int8;
use crate::ncnn::mat::take_vec;
use crate::ncnn::modelbin::Stored;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    Rnn,
    Lstm,
    Gru,
}

impl Cell {
    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Cell::Rnn => "RNN",
            Cell::Lstm => "LSTM",
            Cell::Gru => "GRU",
        }
    }
}

pub struct Recurrent {
    cell: Cell,
    num_output: usize,
    hidden: usize,
    size: usize,
    dirs: usize,
    reverse: bool,
    /// Per direction: input weights (gates * hidden rows of `size`),
    /// biases, recurrent weights (gates * hidden rows of num_output) and the
    /// LSTM projection (num_output rows of hidden).
    wx: Vec<Vec<f32>>,
    b: Vec<Vec<f32>>,
    wh: Vec<Vec<f32>>,
    wr: Vec<Vec<f32>>,
    int8: bool,
    /// Per direction and gate row: the factor back from an int8 sum of the
    /// input and of the recurrent weights (1 in fp32).
    dx: Vec<Vec<f32>>,
    dh: Vec<Vec<f32>>,
}

/// `v` quantized with `127 / absmax` into `q`; returns the factor back
/// (`1 / scale`, 1 where `v` is all zeros).
fn quantize_dynamic(v: &[f32], q: &mut Vec<f32>) -> f32 {
    let m = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let s = if m == 0.0 { 1.0 } else { 127.0 / m };
    q.clear();
    q.extend(v.iter().map(|x| float2int8(x * s)));
    1.0 / s
}

/// The factors back from int8 sums for weight `scales` (0 where a scale is 0).
fn descales(scales: Vec<f32>) -> Vec<f32> {
    scales.into_iter().map(|s| if s == 0.0 { 0.0 } else { 1.0 / s }).collect()
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl Recurrent {
    pub fn new(pd: &ParamDict, cell: Cell) -> anyhow::Result<Recurrent> {
        let what = cell.name();
        let (n, wsize, dir) = (pd.int(0, 0), pd.int(1, 0), pd.int(2, 0));
        let hidden = if cell == Cell::Lstm { pd.int(3, n) } else { n };
        if n <= 0 || hidden <= 0 || hidden > n || !(0..=2).contains(&dir) {
            ncnn_bail!("{what} needs num_output > 0 (got {n}), hidden_size from 1 to num_output (got {hidden}) and direction 0, 1 or 2 (got {dir})");
        }
        let dirs = if dir == 2 { 2 } else { 1 };
        let per = dirs * hidden as usize * cell.gates();
        if wsize <= 0 || wsize as usize % per != 0 {
            ncnn_bail!("{what} weight_data_size {wsize} is not a positive multiple of directions x gates x hidden size ({per})");
        }
        Ok(Recurrent {
            cell,
            num_output: n as usize,
            hidden: hidden as usize,
            size: wsize as usize / per,
            dirs,
            reverse: dir == 1,
            wx: vec![],
            b: vec![],
            wh: vec![],
            wr: vec![],
            int8: pd.int(8, 0) != 0,
            dx: vec![],
            dh: vec![],
        })
    }

    /// One direction over `x` (T rows of `size`): writes rows of `out`
    /// (stride `ostride`, from column `col`); `h` and `c` carry the state.
    // Bounds: forward checks d < dirs weight sets of the sizes load_model
    // splits (wx g * hs rows of size, b nb, wh g * hs rows of no, dx and dh g *
    // hs, wr no rows of hs), x rows of size, out x.h rows of ostride >= col +
    // no, h no and c hs values (hs == no for RNN and GRU); gate rows k, r < g * hs.
    // BOUNDS-FN: every index is in range as said just above.
    #[allow(clippy::too_many_arguments)]
    fn run(&self, d: usize, x: &Mat, reverse: bool, out: &mut [f32], ostride: usize, col: usize, h: &mut [f32], c: &mut [f32]) {
        let (hs, no, sz) = (self.hidden, self.num_output, self.size);
        let (wx, b, wh) = (&self.wx[d], &self.b[d], &self.wh[d]);
        let (dx, dh) = (&self.dx[d], &self.dh[d]);
        let g = self.cell.gates();
        let mut gates = vec![0.0f32; g * hs];
        let mut hcell = vec![0.0f32; hs];
        let (mut xq, mut hq) = (Vec::new(), Vec::new());
        for step in 0..x.h {
            let t = if reverse { x.h - 1 - step } else { step };
            let mut xt = &x.data[t * x.w..t * x.w + sz];
            let (mut fx, mut fh) = (1.0f32, 1.0f32);
            if self.int8 {
                fx = quantize_dynamic(xt, &mut xq);
                fh = quantize_dynamic(h, &mut hq);
                xt = &xq;
            }
            for (k, gv) in gates.iter_mut().enumerate() {
                *gv = dot(&wx[k * sz..(k + 1) * sz], xt) * (fx * dx[k]);
            }
            let hv: &[f32] = if self.int8 { &hq } else { h };
            // the recurrent sum of gate row r
            let rec = |r: usize| dot(&wh[r * no..(r + 1) * no], hv) * (fh * dh[r]);
            match self.cell {
                Cell::Rnn => {
                    for q in 0..hs {
                        hcell[q] = (gates[q] + b[q] + rec(q)).tanh();
                    }
                    h.copy_from_slice(&hcell);
                }
                Cell::Lstm => {
                    for q in 0..hs {
                        let at = |k: usize| gates[k * hs + q] + b[k * hs + q] + rec(k * hs + q);
                        let (i, f, o, gg) = (sigmoid(at(0)), sigmoid(at(1)), sigmoid(at(2)), at(3).tanh());
                        c[q] = f * c[q] + i * gg;
                        hcell[q] = o * c[q].tanh();
                    }
                    if hs == no {
                        h.copy_from_slice(&hcell);
                    } else {
                        let wr = &self.wr[d];
                        for (q, hv) in h.iter_mut().enumerate() {
                            *hv = dot(&wr[q * hs..(q + 1) * hs], &hcell);
                        }
                    }
                }
                Cell::Gru => {
                    for q in 0..hs {
                        let r = sigmoid(gates[q] + b[q] + rec(q));
                        let u = sigmoid(gates[hs + q] + b[hs + q] + rec(hs + q));
                        let n = (gates[2 * hs + q] + b[2 * hs + q] + r * (b[3 * hs + q] + rec(2 * hs + q))).tanh();
                        hcell[q] = (1.0 - u) * n + u * h[q];
                    }
                    h.copy_from_slice(&hcell);
                }
            }
            out[t * ostride + col..t * ostride + col + no].copy_from_slice(h);
        }
    }
}

impl Layer for Recurrent {
    fn one_blob_only(&self) -> bool {
        false
    }

    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        let (hs, no, g, dirs) = (self.hidden, self.num_output, self.cell.gates(), self.dirs);
        let nb = if self.cell == Cell::Gru { 4 * hs } else { g * hs };
        let split = |v: Vec<f32>, n: usize| v.chunks(n.max(1)).map(|c| c.to_vec()).collect::<Vec<_>>();
        let int8 = self.int8;
        let what = self.cell.name();
        // weights that are int8 exactly when int8_scale_term says so
        let weights = |mb: &mut ModelBin, n: usize, part: &str| -> anyhow::Result<Vec<f32>> {
            let at = mb.pos;
            let w = mb.tagged_any(n, part)?;
            if int8 != (w.stored == Stored::Int8) {
                ncnn_bail!("{what} {part} at byte {at}: int8_scale_term (8) is {} but the weights are {}stored as int8", i32::from(int8), if int8 { "not " } else { "" });
            }
            Ok(w.data)
        };
        self.wx = split(weights(mb, self.size * g * hs * dirs, "input weights")?, self.size * g * hs);
        self.b = split(mb.tagged(nb * dirs, "recurrent biases")?, nb);
        self.wh = split(weights(mb, no * g * hs * dirs, "hidden weights")?, no * g * hs);
        if self.cell == Cell::Lstm && hs != no {
            self.wr = split(mb.tagged(hs * no * dirs, "LSTM projection weights")?, hs * no);
        }
        let rows = g * hs;
        if int8 {
            self.dx = split(descales(mb.raw(rows * dirs, "recurrent input weight int8 scales")?), rows);
            self.dh = split(descales(mb.raw(rows * dirs, "recurrent hidden weight int8 scales")?), rows);
        } else {
            (self.dx, self.dh) = (vec![vec![1.0; rows]; dirs], vec![vec![1.0; rows]; dirs]);
        }
        Ok(())
    }

    // BOUNDS-FN: bottoms holds 1 or 1 + nstate blobs (checked), the state
    // blobs no * dirs and hs * dirs values (checked); d < dirs.
    fn forward(&self, bottoms: Vec<Mat>, ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let what = self.cell.name();
        let lstm = self.cell == Cell::Lstm;
        let nstate = if lstm { 2 } else { 1 };
        if bottoms.is_empty() || (bottoms.len() != 1 && bottoms.len() != 1 + nstate) || (ntop != 1 && ntop != 1 + nstate) {
            ncnn_bail!("{what} takes 1 or {} bottoms and gives 1 or {} tops, got {} and {ntop}", 1 + nstate, 1 + nstate, bottoms.len());
        }
        let x = &bottoms[0];
        if x.dims != 2 || x.w != self.size {
            ncnn_bail!("{what} takes a 2-d blob of {} features per time step, got {}", self.size, x.describe());
        }
        let (no, hs, dirs) = (self.num_output, self.hidden, self.dirs);
        let sets = [self.wx.len(), self.b.len(), self.wh.len(), self.dx.len(), self.dh.len()];
        if sets.iter().any(|&n| n != dirs) || (lstm && hs != no && self.wr.len() != dirs) {
            ncnn_bail!("{what}: the weights are not loaded (load_model first)");
        }
        let mut hstate = vec![0.0f32; no * dirs];
        let mut cstate = vec![0.0f32; hs * dirs];
        if bottoms.len() > 1 {
            if bottoms[1].total() != no * dirs || (lstm && bottoms[2].total() != hs * dirs) {
                ncnn_bail!("{what}: the initial state blobs must hold {} hidden values{}", no * dirs, if lstm { format!(" and {} cell values", hs * dirs) } else { String::new() });
            }
            hstate.copy_from_slice(&bottoms[1].data);
            if lstm {
                cstate.copy_from_slice(&bottoms[2].data);
            }
        }
        let ow = no * dirs;
        let mut out = take_vec(ow * x.h);
        out.resize(ow * x.h, 0.0);
        for d in 0..dirs {
            let reverse = self.reverse || d == 1;
            let (h, c) = (&mut hstate[d * no..(d + 1) * no], &mut cstate[d * hs..(d + 1) * hs]);
            self.run(d, x, reverse, &mut out, ow, d * no, h, c);
        }
        let mut tops = vec![Mat::from_shape(&[ow, x.h], out)?];
        if ntop > 1 {
            let shape = |n: usize| vec![n, dirs];
            tops.push(Mat::from_shape(&shape(no), hstate)?);
            if lstm {
                tops.push(Mat::from_shape(&shape(hs), cstate)?);
            }
        }
        Ok(tops)
    }
}
