//! The row loops of the quantized dot products, chosen at run time: the
//! AVX-512 VNNI kernels of [`super::avx512`] for Q8_0 and Q4_0 and of
//! [`super::avx512k`] for Q4_K where the CPU has them (four rows a pass,
//! against a column laid out for them once per product), the
//! AVX2 kernels of [`super::avx2`] (with the portable ones compiled for
//! AVX2 for the other types) where it has AVX2 and FMA, the portable
//! kernels of [`super::dot`] elsewhere.

use super::dot;
#[cfg(target_arch = "x86_64")]
use super::prep::{Q4Win, Q8KWin, Q8Pairs, Q8Prep};
use crate::base::quant::{self, QType};
use crate::base::simd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// How far ahead of the weights in use the AVX-512 kernels prefetch, in
/// bytes: for Q4_0 and Q4_K, and for Q8_0 (four rows a pass as well, each
/// pair of blocks 68 bytes where the others' steps are 54 and 144). A
/// matrix-vector product is limited by how fast its weights arrive, and the
/// hardware's prefetcher does not run far enough ahead of four interleaved
/// rows: with these hints 4096 x 4096 products over 256 MB of weights on 2
/// threads read 1.4x (Q4_0, Q4_K) and 1.5x (Q8_0) as fast as without (the
/// ignored test `speed`; 16 KiB beat 1, 4, 8 and 64 for all three: Q8_0
/// 20.6 GB/s without, 26.7 at 8 KiB, 30.9 at 16 KiB, 29.1 at 64 KiB).
pub const AHEAD_FOUR: usize = 16 << 10;
pub const AHEAD_ONE: usize = 16 << 10;
/// The distances in use (the ignored test `speed` varies them).
pub static AHEAD: [AtomicUsize; 2] = [AtomicUsize::new(AHEAD_FOUR), AtomicUsize::new(AHEAD_ONE)];

/// Set by tests to run the AVX2 kernels on a CPU that has AVX-512.
static NO_AVX512: AtomicBool = AtomicBool::new(false);

/// Runs `f` with the AVX-512 kernels off (tests of the AVX2 ones).
#[cfg(test)]
pub fn without_avx512<R>(f: impl FnOnce() -> R) -> R {
    NO_AVX512.store(true, Ordering::SeqCst);
    let r = f();
    NO_AVX512.store(false, Ordering::SeqCst);
    r
}

/// Activations of one column: quantized to the partner format, or f32.
#[derive(Clone, Copy)]
pub enum ColumnActs<'a> {
    Q(&'a [u8]),
    F(&'a [f32]),
}

/// The weight rows of one product: `n` rows of `k` values, `stride` bytes apart.
#[derive(Clone, Copy)]
pub struct QuantRows<'a> {
    pub q: QType,
    pub data: &'a [u8],
    pub stride: usize,
    pub k: usize,
}

/// Bytes of one row of `w`: its whole blocks.
#[inline(always)]
fn row_len(w: &QuantRows<'_>) -> usize {
    w.k / w.q.block_size() * w.q.type_size()
}

/// Whether `w.data` holds `n` rows of [`row_len`] bytes, `stride` apart
/// (the last one may end the data): what the row loops below slice.
fn holds(w: &QuantRows<'_>, n: usize) -> bool {
    n == 0 || (n - 1).checked_mul(w.stride).and_then(|o| o.checked_add(row_len(w))).is_some_and(|end| end <= w.data.len())
}

/// `out[r] = row r . act` for every row.
// BOUNDS-FN: `dot_rows_col` checked `holds(w, out.len())`: row r < out.len()
// spans r * stride .. r * stride + rs inside w.data (rs = row_len).
#[inline(always)]
fn rows_generic(w: QuantRows<'_>, act: ColumnActs<'_>, out: &mut [f32], scratch: &mut Vec<f32>) {
    let nb = w.k / w.q.block_size();
    let rs = row_len(&w);
    let row = |r: usize| &w.data[r * w.stride..r * w.stride + rs];
    macro_rules! each {
        ($f:path, $y:expr) => {
            for (r, o) in out.iter_mut().enumerate() {
                *o = $f(row(r), $y, nb);
            }
        };
    }
    use QType::*;
    match act {
        ColumnActs::Q(y) => match w.q {
            Q4_0 => each!(dot::q4_0, y),
            Q4_1 => each!(dot::q4_1, y),
            Q5_0 => each!(dot::q5_0, y),
            Q5_1 => each!(dot::q5_1, y),
            Q8_0 => each!(dot::q8_0, y),
            IQ4_NL => each!(dot::iq4_nl, y),
            MXFP4 => each!(dot::mxfp4, y),
            Q2_K => each!(dot::q2_k, y),
            Q3_K => each!(dot::q3_k, y),
            Q4_K => each!(dot::q4_k, y),
            Q5_K => each!(dot::q5_k, y),
            Q6_K => each!(dot::q6_k, y),
            IQ4_XS => each!(dot::iq4_xs, y),
            _ => out.fill(f32::NAN),
        },
        ColumnActs::F(y) => {
            scratch.resize(w.k, 0.0);
            for (r, o) in out.iter_mut().enumerate() {
                *o = match quant::dequantize_row(w.q, row(r), scratch) {
                    Ok(()) => dot::f32_dot(scratch, y),
                    Err(_) => f32::NAN,
                };
            }
        }
    }
}

/// `out[r] = kernel(row r, y, blocks per row)` for every row (inlined, so
/// that a closure over an AVX-512 kernel is compiled with its caller's
/// features).
// BOUNDS-FN: `dot_rows_col` checked `holds(w, out.len())`: row r < out.len()
// spans r * stride .. r * stride + rs inside w.data (rs = row_len).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn each_row(w: QuantRows<'_>, y: &[u8], out: &mut [f32], kernel: impl Fn(&[u8], &[u8], usize) -> f32) {
    let nb = w.k / w.q.block_size();
    let rs = row_len(&w);
    for (r, o) in out.iter_mut().enumerate() {
        *o = kernel(&w.data[r * w.stride..r * w.stride + rs], y, nb);
    }
}

/// `out[r] = kernel(row r, prepared y)` for Q4_0 rows against a Q8_0 column
/// prepared once for all rows.
// BOUNDS-FN: `dot_rows_col` checked `holds(w, out.len())`: row r < out.len()
// spans r * stride .. r * stride + rs inside w.data (rs = row_len).
#[cfg(target_arch = "x86_64")]
fn each_row_q4_0(w: QuantRows<'_>, p: &Q8Prep, out: &mut [f32], kernel: fn(&[u8], &Q8Prep) -> f32) {
    let rs = row_len(&w);
    for (r, o) in out.iter_mut().enumerate() {
        *o = kernel(&w.data[r * w.stride..r * w.stride + rs], p);
    }
}

/// `out[r]` for every row, four rows a pass through `four` (given the rows'
/// bytes), the rest one at a time through `one`.
// BOUNDS-FN: `dot_rows_col` checked `holds(w, out.len())`, so row r spans
// r * stride .. r * stride + rs inside w.data for r < out.len(); r counts the
// outputs (r + 3 < out.len() in a chunk of 4); `one` returns a [f32; 1].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn by_fours(w: QuantRows<'_>, out: &mut [f32], four: impl Fn([&[u8]; 4]) -> [f32; 4], one: impl Fn([&[u8]; 1]) -> [f32; 1]) {
    let rs = row_len(&w);
    let row = |r: usize| &w.data[r * w.stride..r * w.stride + rs];
    let mut quads = out.chunks_exact_mut(4);
    let mut r = 0;
    for o in &mut quads {
        o.copy_from_slice(&four([row(r), row(r + 1), row(r + 2), row(r + 3)]));
        r += 4;
    }
    for o in quads.into_remainder() {
        *o = one([row(r)])[0];
        r += 1;
    }
}

/// One column of activations made ready for all the rows of a product
/// (shared by the threads that split the rows): for Q4_0 weights, the
/// Q8_0 column prepared for the SIMD kernels (windowed for the AVX-512
/// ones).
pub struct Column<'a> {
    act: ColumnActs<'a>,
    #[cfg(target_arch = "x86_64")]
    q4_0: Option<Q8Prep>,
    #[cfg(target_arch = "x86_64")]
    q4_0_win: Option<Q4Win>,
    #[cfg(target_arch = "x86_64")]
    q4_k_win: Option<Q8KWin>,
    #[cfg(target_arch = "x86_64")]
    q8_0_pairs: Option<Q8Pairs>,
}

impl<'a> Column<'a> {
    /// `act` ready for rows of `q` of `k` values.
    pub fn new(q: QType, k: usize, act: ColumnActs<'a>) -> Column<'a> {
        #[cfg(target_arch = "x86_64")]
        let (q4_0, q4_0_win) = match (q, act, path()) {
            (QType::Q4_0, ColumnActs::Q(y), "avx512") => (None, Q4Win::new(y, k / q.block_size())),
            (QType::Q4_0, ColumnActs::Q(y), "avx2") => (Q8Prep::new(y, k / q.block_size()), None),
            _ => (None, None),
        };
        #[cfg(target_arch = "x86_64")]
        let q4_k_win = match (q, act, path()) {
            (QType::Q4_K, ColumnActs::Q(y), "avx512") => Q8KWin::new(y, k / q.block_size()),
            _ => None,
        };
        #[cfg(target_arch = "x86_64")]
        let q8_0_pairs = match (q, act, path()) {
            (QType::Q8_0, ColumnActs::Q(y), "avx512") => Q8Pairs::new(y, k / q.block_size()),
            _ => None,
        };
        Column {
            act,
            #[cfg(target_arch = "x86_64")]
            q4_0,
            #[cfg(target_arch = "x86_64")]
            q4_0_win,
            #[cfg(target_arch = "x86_64")]
            q4_k_win,
            #[cfg(target_arch = "x86_64")]
            q8_0_pairs,
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
// SAFETY: (for callers) only called when the CPU has AVX2, FMA and F16C.
unsafe fn rows_avx2(w: QuantRows<'_>, col: &Column<'_>, out: &mut [f32], scratch: &mut Vec<f32>) {
    use super::avx2;
    let act = col.act;
    if let (QType::Q4_0, Some(p)) = (w.q, &col.q4_0) {
        return each_row_q4_0(w, p, out, avx2::q4_0);
    }
    let kernel: fn(&[u8], &[u8], usize) -> f32 = match (w.q, act) {
        (QType::Q4_1, ColumnActs::Q(_)) => avx2::q4_1,
        (QType::Q5_0, ColumnActs::Q(_)) => avx2::q5_0,
        (QType::Q5_1, ColumnActs::Q(_)) => avx2::q5_1,
        (QType::Q8_0, ColumnActs::Q(_)) => avx2::q8_0,
        (QType::IQ4_NL, ColumnActs::Q(_)) => avx2::iq4_nl,
        (QType::Q4_K, ColumnActs::Q(_)) => avx2::q4_k,
        (QType::Q5_K, ColumnActs::Q(_)) => avx2::q5_k,
        (QType::Q6_K, ColumnActs::Q(_)) => avx2::q6_k,
        _ => return rows_generic(w, act, out, scratch),
    };
    if let ColumnActs::Q(y) = act {
        each_row(w, y, out, kernel);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
// SAFETY: (for callers) only called when the CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C.
unsafe fn rows_avx512(w: QuantRows<'_>, col: &Column<'_>, out: &mut [f32], scratch: &mut Vec<f32>) {
    use super::avx512;
    let act = col.act;
    use super::avx512k;
    // BOUNDS: AHEAD is a [AtomicUsize; 2].
    let (ahead, ahead_one) = (AHEAD[0].load(Ordering::Relaxed), AHEAD[1].load(Ordering::Relaxed));
    if let (QType::Q4_0, Some(p)) = (w.q, &col.q4_0_win) {
        return by_fours(w, out, |x| avx512::q4_0_rows(x, p, ahead), |x| avx512::q4_0_rows(x, p, 0));
    }
    if let (QType::Q4_K, Some(p)) = (w.q, &col.q4_k_win) {
        return by_fours(w, out, |x| avx512k::q4_k_rows4(x, p, ahead), |x| avx512k::q4_k_rows(x, p));
    }
    if let (QType::Q8_0, Some(p)) = (w.q, &col.q8_0_pairs) {
        return by_fours(w, out, |x| avx512::q8_0_rows(x, p, ahead_one), |x| avx512::q8_0_rows(x, p, 0));
    }
    match (w.q, act) {
        (QType::Q8_0, ColumnActs::Q(y)) => each_row(w, y, out, |x, y, nb| avx512::q8_0(x, y, nb, ahead_one)),
        // SAFETY: the CPU has AVX2, FMA and F16C (implied by this path).
        _ => unsafe { rows_avx2(w, col, out, scratch) },
    }
}

/// Which kernels run: "avx512", "avx2" or "portable".
pub fn path() -> &'static str {
    if !(simd::avx2_fma() && f16c()) {
        "portable"
    } else if avx512() && !NO_AVX512.load(Ordering::Relaxed) {
        "avx512"
    } else {
        "avx2"
    }
}

fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn f16c() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `out[r] = row r . act` with the kernels of this CPU (the portable ones
/// when tests ask for them through `simd::portable`).
pub fn dot_rows(w: QuantRows<'_>, act: ColumnActs<'_>, out: &mut [f32], scratch: &mut Vec<f32>) {
    dot_rows_col(w, &Column::new(w.q, w.k, act), out, scratch)
}

/// As [`dot_rows`], with a column made ready once for many calls. When
/// `w.data` does not hold `out.len()` rows, every result is NaN.
pub fn dot_rows_col(w: QuantRows<'_>, col: &Column<'_>, out: &mut [f32], scratch: &mut Vec<f32>) {
    if !holds(&w, out.len()) {
        out.fill(f32::NAN);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    match path() {
        // SAFETY: the CPU has AVX-512 F, BW and VNNI, AVX2, FMA and F16C.
        "avx512" => return unsafe { rows_avx512(w, col, out, scratch) },
        // SAFETY: the CPU has AVX2, FMA and F16C.
        "avx2" => return unsafe { rows_avx2(w, col, out, scratch) },
        _ => {}
    }
    rows_generic(w, col.act, out, scratch)
}
