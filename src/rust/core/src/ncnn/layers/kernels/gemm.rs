//! The convolution GEMM: out[m][y][x] = act(bias[m] + sum_k A[m][k] * B_k(y, x))
//! where B_k(y, x) = base[offs[k] + y * rs + x]. With shifted offsets into a
//! padded input (or into its stride phases), B is the im2col matrix of a
//! convolution without building it. A (the weights) is packed once into
//! blocks of 6 or 4 rows; bias and the common activations are applied while the
//! result is still in registers.

use crate::base::simd;
use crate::ncnn::layer::Activation;
use crate::ncnn::par;

/// The most rows of one block (the kernels take blocks of 6 or 4 rows).
pub const MR: usize = 6;
pub const NR: usize = 16;
/// Output columns per task (a task is a run of whole output rows).
const TASK_COLS: usize = 2048;
/// Multiply-adds below which a product runs on one thread.
const PARALLEL_MACS: usize = 1 << 18;

/// One block of packed rows: first row, rows in the kernel (4 or 6), rows
/// that are real (the rest are zero), and where its [k][mr] values start.
#[derive(Clone, Copy, Debug, Default)]
struct Block {
    r0: usize,
    mr: usize,
    rows: usize,
    at: usize,
}

/// Weights packed in blocks of 6 or 4 rows, each stored [k][mr].
#[derive(Clone, Debug, Default)]
pub struct PackedA {
    pub m: usize,
    pub k: usize,
    blocks: Vec<Block>,
    data: Vec<f32>,
}

/// Block heights covering `m` rows: 6s and at most two 4s when that is
/// exact, otherwise 6s and one partial block.
fn block_heights(m: usize) -> Vec<(usize, usize)> {
    if let Some(b4) = (0..=2).find(|&b| m >= 4 * b && (m - 4 * b) % 6 == 0) {
        let mut v = vec![(6, 6); (m - 4 * b4) / 6];
        v.extend(std::iter::repeat((4, 4)).take(b4));
        return v;
    }
    let mut v = vec![(6, 6); m / 6];
    let r = m % 6;
    v.push((if r <= 4 { 4 } else { 6 }, r));
    v
}

impl PackedA {
    /// Pack a row-major m x k matrix.
    // BOUNDS-FN: a holds m * k values (asserted); rows r0 + r < m (the block
    // heights sum to m).
    pub fn new(a: &[f32], m: usize, k: usize) -> PackedA {
        assert!(a.len() >= m * k, "PackedA: fewer values than m x k");
        let mut blocks = Vec::new();
        let mut data = Vec::new();
        let mut r0 = 0;
        for (mr, rows) in block_heights(m) {
            blocks.push(Block { r0, mr, rows, at: data.len() });
            for kk in 0..k {
                for r in 0..mr {
                    data.push(if r < rows { a[(r0 + r) * k + kk] } else { 0.0 });
                }
            }
            r0 += rows;
        }
        PackedA { m, k, blocks, data }
    }
    /// y = A x (y has `m` values, x has `k`).
    // BOUNDS-FN: each block packs k columns of mr values at `at` (so
    // kk < k stays in data) and rows r0..r0 + rows below m <= y.len() (asserted).
    pub fn gemv(&self, x: &[f32], y: &mut [f32]) {
        assert!(y.len() >= self.m, "PackedA::gemv: output shorter than m");
        for bl in &self.blocks {
            let mut acc = [0.0f32; MR];
            for (kk, xv) in x.iter().enumerate().take(self.k) {
                let a = &self.data[bl.at + kk * bl.mr..bl.at + (kk + 1) * bl.mr];
                for (s, av) in acc.iter_mut().zip(a) {
                    *s += av * xv;
                }
            }
            y[bl.r0..bl.r0 + bl.rows].copy_from_slice(&acc[..bl.rows]);
        }
    }
    // BOUNDS-FN: a block packs k columns of mr values from `at` (PackedA::new).
    fn values(&self, b: &Block) -> &[f32] {
        &self.data[b.at..b.at + self.k * b.mr]
    }
}

/// The B operand: row k, output position (y, x) is `base[offs[k] + y * rs + x]`.
pub struct BView<'a> {
    pub base: &'a [f32],
    pub offs: &'a [usize],
    pub rs: usize,
}

/// What happens to each result: `act(x + bias[row])` (no bias when empty).
#[derive(Clone, Copy)]
pub struct Epi<'a> {
    pub bias: &'a [f32],
    pub act: &'a Activation,
}

impl Epi<'_> {
    fn bias_of(&self, r0: usize) -> [f32; MR] {
        let mut b = [0.0; MR];
        for (i, v) in b.iter_mut().enumerate() {
            *v = self.bias.get(r0 + i).copied().unwrap_or(0.0);
        }
        b
    }
    /// (lower, upper) bounds when the activation is a clamp (ReLU, Clip).
    fn clamp(&self) -> Option<(f32, f32)> {
        match self.act.kind {
            1 => Some((0.0, f32::INFINITY)),
            3 => Some((self.act.params.first().copied().unwrap_or(f32::NEG_INFINITY), self.act.params.get(1).copied().unwrap_or(f32::INFINITY))),
            _ => None,
        }
    }
    /// Whether the activation still has to run after bias and clamp.
    fn post(&self) -> bool {
        !matches!(self.act.kind, 0 | 1 | 3)
    }
}

/// An output pointer shared by tasks that write disjoint parts of it.
#[derive(Clone, Copy)]
pub struct SendPtr(pub *mut f32);
// SAFETY: the tasks sharing it write disjoint elements.
unsafe impl Send for SendPtr {}
// SAFETY: as for Send: shared references only hand out the pointer, and the
// tasks write disjoint elements through it.
unsafe impl Sync for SendPtr {}

impl SendPtr {
    /// The pointer `i` elements on.
    ///
    /// # Safety
    /// As for `pointer::add`.
    pub unsafe fn at(&self, i: usize) -> *mut f32 {
        self.0.add(i)
    }
}

/// Compute all `a.m` output channels over an `outw` x `outh` grid into `out`
/// (channel r at `out[r * outw * outh..]`), threaded over runs of output rows.
pub fn conv_gemm(a: &PackedA, b: &BView, outw: usize, outh: usize, out: &mut [f32], ep: &Epi) {
    conv_gemm_with(a, b, outw, outh, out, ep, simd::avx2_fma())
}

fn conv_gemm_with(
    a: &PackedA,
    b: &BView,
    outw: usize,
    outh: usize,
    out: &mut [f32],
    ep: &Epi,
    fast: bool,
) {
    let n = outw * outh;
    assert!(out.len() >= a.m * n, "convolution output buffer too small");
    if n == 0 || a.m == 0 {
        return;
    }
    let biases = biases(a, ep);
    let job = Rows::new(a, b, outw, outh, n, out.as_mut_ptr(), ep, &biases);
    if outh == 1 {
        // One long row (a 1x1 convolution over a whole plane): tasks are
        // runs of columns.
        let cols = task_cols(a.m * a.k * n, outw);
        let tasks = outw.div_ceil(cols);
        par::range(tasks, |t| job.go_cols(t * cols, ((t + 1) * cols).min(outw), fast));
        return;
    }
    let rows = task_rows(a.m * a.k * n, outw, outh);
    let tasks = (outh + rows - 1) / rows;
    par::range(tasks, |t| job.go(t * rows, ((t + 1) * rows).min(outh), fast));
}

/// Output rows per task of a product over an `outw` x `outh` grid with
/// `macs` multiply-adds: runs of about TASK_COLS columns, a few tasks per
/// thread when the work is worth threading, one task when it is not.
pub fn task_rows(macs: usize, outw: usize, outh: usize) -> usize {
    let threads = par::threads();
    let rows = ((TASK_COLS + outw - 1) / outw.max(1)).max(1);
    if threads > 1 && macs >= PARALLEL_MACS {
        rows.min((outh + 3 * threads - 1) / (3 * threads)).max(1)
    } else if threads > 1 {
        // Too little work to be worth waking another thread.
        outh.max(1)
    } else {
        rows
    }
}

/// Columns per task of a one-row product of `macs` multiply-adds over `n`
/// columns: whole tiles, a few tasks per thread when the work is worth
/// threading, one task when it is not.
fn task_cols(macs: usize, n: usize) -> usize {
    let threads = par::threads();
    if threads > 1 && macs >= PARALLEL_MACS {
        n.div_ceil(3 * threads).div_ceil(NR).max(1) * NR
    } else {
        n.max(1)
    }
}

/// The output rows 0..outh of one band of a product, on this thread:
/// channel r of the band at `out + r * ldc` (rows of `outw`).
///
/// # Safety
/// `out + r * ldc + (0..outh * outw)` must be valid for writes, and written
/// by no one else meanwhile, for every row r < `a.m`.
pub unsafe fn conv_gemm_band(a: &PackedA, b: &BView, outw: usize, outh: usize, ldc: usize, out: *mut f32, ep: &Epi) {
    if outw == 0 || outh == 0 || a.m == 0 {
        return;
    }
    let biases = biases(a, ep);
    Rows::new(a, b, outw, outh, ldc, out, ep, &biases).go(0, outh, simd::avx2_fma());
}

fn biases(a: &PackedA, ep: &Epi) -> Vec<[f32; MR]> {
    a.blocks.iter().map(|bl| ep.bias_of(bl.r0)).collect()
}

/// One product's output rows, shared by the tasks that compute them.
struct Rows<'a> {
    a: &'a PackedA,
    b: &'a BView<'a>,
    outw: usize,
    n: usize,
    out: SendPtr,
    clamp: Option<(f32, f32)>,
    post: bool,
    ep: &'a Epi<'a>,
    biases: &'a [[f32; MR]],
    maxoff: usize,
    /// Runs of blocks whose packed weights stay in cache together: each is
    /// swept over all the columns before the next (weights larger than
    /// the cache are then read once per run, not once per column tile).
    chunks: Vec<(usize, usize)>,
}

/// Bytes of packed weights swept over the columns together.
const CHUNK_BYTES: usize = 192 << 10;

/// Consecutive runs of `a`'s blocks of at most CHUNK_BYTES packed weights.
fn chunks_of(a: &PackedA) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let (mut b0, mut bytes) = (0, 0);
    for (i, bl) in a.blocks.iter().enumerate() {
        let sz = a.k * bl.mr * 4;
        if i > b0 && bytes + sz > CHUNK_BYTES {
            out.push((b0, i));
            (b0, bytes) = (i, 0);
        }
        bytes += sz;
    }
    if b0 < a.blocks.len() {
        out.push((b0, a.blocks.len()));
    }
    out
}

impl<'a> Rows<'a> {
    /// The product of `a` and `b` over `outh` rows of `outw` (not empty),
    /// channel r at `out + r * ldc`.
    #[allow(clippy::too_many_arguments)]
    fn new(
        a: &'a PackedA,
        b: &'a BView<'a>,
        outw: usize,
        outh: usize,
        ldc: usize,
        out: *mut f32,
        ep: &'a Epi<'a>,
        biases: &'a [[f32; MR]],
    ) -> Rows<'a> {
        assert_eq!(b.offs.len(), a.k);
        let maxoff = b.offs.iter().copied().max().unwrap_or(0);
        // The last element the bottom right output reads.
        assert!(maxoff + (outh - 1) * b.rs + outw <= b.base.len(), "B rows out of bounds");
        let (clamp, post) = (ep.clamp(), ep.post());
        Rows { a, b, outw, n: ldc, out: SendPtr(out), clamp, post, ep, biases, maxoff, chunks: chunks_of(a) }
    }

    /// Output rows y0..y1, on the AVX2 tiles when `fast`.
    fn go(&self, y0: usize, y1: usize, fast: bool) {
        self.go_range(y0, y1, 0, self.outw, fast)
    }

    /// Columns x0..x1 of every output row.
    fn go_cols(&self, x0: usize, x1: usize, fast: bool) {
        self.go_range(0, 1, x0, x1, fast)
    }

    fn go_range(&self, y0: usize, y1: usize, x0: usize, x1: usize, fast: bool) {
        if fast {
            // SAFETY: chosen only when the CPU has AVX2 and FMA.
            unsafe { self.run_avx2(y0, y1, x0, x1) }
        } else {
            self.run(y0, y1, x0, x1, false)
        }
    }

    /// Output rows y0..y1 with the AVX2 tiles inlined into the loops.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run_avx2(&self, y0: usize, y1: usize, x0: usize, x1: usize) {
        self.run(y0, y1, x0, x1, true)
    }

    /// # Safety
    /// None beyond `run`'s (never chosen off x86-64).
    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn run_avx2(&self, y0: usize, y1: usize, x0: usize, x1: usize) {
        self.run(y0, y1, x0, x1, false)
    }

    /// Columns x0..x1 of output rows y0..y1 (the activation after the
    /// product, when it is not fused, needs whole rows: x0..x1 = 0..outw
    /// unless there is one row).
    // BOUNDS-FN: chunks_of yields ranges c0 < c1 <= blocks.len(), and there is
    // one bias array per block (`biases`).
    #[inline(always)]
    fn run(&self, y0: usize, y1: usize, x0: usize, x1: usize, fast: bool) {
        let (a, b, outw, n, cp) = (self.a, self.b, self.outw, self.n, self.out);
        let mut tmp = [[0.0f32; NR]; MR];
        for &(c0, c1) in &self.chunks {
            let blocks = &a.blocks[c0..c1];
            let biases = &self.biases[c0..c1];
            for y in y0..y1 {
                let mut x = x0;
                while x < x1 {
                    // Two tiles side by side (AVX-512, 32 whole columns left):
                    // each weight is loaded once for both.
                    if fast && x1 - x >= 2 * NR && avx512() {
                        let col = y * b.rs + x;
                        for (bl, bias) in blocks.iter().zip(biases) {
                            let (ab, nrows) = (a.values(bl), bl.rows);
                            // SAFETY: as below; the 32 columns are inside the
                            // task's range and B's last read is at most
                            // maxoff + y * rs + x1 <= base.len() (Rows::new).
                            unsafe {
                                let dst = cp.0.add(bl.r0 * n + y * outw + x);
                                let t = Tile { ab, base: b.base.as_ptr(), offs: b.offs, col, c: dst, ldc: n, rows: nrows, bias, clamp: self.clamp, w: 2 * NR };
                                kernel_wide(bl.mr, &t);
                            }
                        }
                        x += 2 * NR;
                        continue;
                    }
                    let w = (x1 - x).min(NR);
                    // A full-width tile may read past the row (into the next
                    // row or the padding) as long as it stays inside base;
                    // otherwise the AVX2 tile reads only its `w` columns.
                    let full = fast && self.maxoff + y * b.rs + x + NR <= b.base.len();
                    let masked = fast && !full && self.maxoff + y * b.rs + x + w <= b.base.len();
                    for (bl, bias) in blocks.iter().zip(biases) {
                        let (ab, nrows) = (a.values(bl), bl.rows);
                        let col = y * b.rs + x;
                        // SAFETY: rows r0..r0+nrows, columns y*outw+x.. +w of each
                        // output channel belong to this task alone and are in
                        // bounds (checked by the caller); B reads are bounded by
                        // the check of `full`.
                        unsafe {
                            let dst = cp.0.add(bl.r0 * n + y * outw + x);
                            if full || masked {
                                let bp = b.base.as_ptr();
                                let t = Tile { ab, base: bp, offs: b.offs, col, c: dst, ldc: n, rows: nrows, bias, clamp: self.clamp, w };
                                kernel_avx2(bl.mr, masked, &t);
                            } else {
                                kernel_generic(bl.mr, ab, b.base, b.offs, col, w, &mut tmp, bias, self.clamp);
                                copy_tile(&tmp, dst, n, nrows, w);
                            }
                        }
                    }
                    x += w;
                }
                if self.post {
                    for bl in blocks {
                        for r in bl.r0..bl.r0 + bl.rows {
                            // SAFETY: row y of channel r, columns x0..x1, written
                            // above by this task.
                            let row = unsafe { std::slice::from_raw_parts_mut(cp.0.add(r * n + y * outw + x0), x1 - x0) };
                            self.ep.act.apply(row);
                        }
                    }
                }
            }
        }
    }
}

/// # Safety
/// `dst` must be valid for `rows` rows of stride `ldc` and `w` columns.
unsafe fn copy_tile(tmp: &[[f32; NR]; MR], dst: *mut f32, ldc: usize, rows: usize, w: usize) {
    for (r, t) in tmp.iter().enumerate().take(rows) {
        std::ptr::copy_nonoverlapping(t.as_ptr(), dst.add(r * ldc), w);
    }
}

// BOUNDS-FN: acc and bias have MR rows (r < MR); w <= NR; B reads end inside
// base (Rows::new asserts the last one); ab packs offs.len() = k columns of mr.
#[allow(clippy::too_many_arguments)]
fn kernel_generic(
    mr: usize,
    ab: &[f32],
    base: &[f32],
    offs: &[usize],
    col: usize,
    w: usize,
    acc: &mut [[f32; NR]; MR],
    bias: &[f32; MR],
    clamp: Option<(f32, f32)>,
) {
    for (r, row) in acc.iter_mut().enumerate() {
        row.iter_mut().for_each(|v| *v = bias[r]);
    }
    for (kk, &o) in offs.iter().enumerate() {
        let mut brow = [0.0f32; NR];
        brow[..w].copy_from_slice(&base[o + col..o + col + w]);
        let a = &ab[kk * mr..kk * mr + mr];
        for (row, &av) in acc.iter_mut().zip(a) {
            for (x, bv) in row.iter_mut().zip(&brow) {
                *x += av * bv;
            }
        }
    }
    if let Some((lo, hi)) = clamp {
        for row in acc.iter_mut() {
            row.iter_mut().for_each(|v| *v = v.max(lo).min(hi));
        }
    }
}

/// One output tile of the AVX2 kernel: the packed A values `ab`, B's
/// rows at `base + offs[k] + col`, the output `c` (`rows` rows of stride
/// `ldc`, first `w` columns), the rows' biases and the clamp.
struct Tile<'a> {
    ab: &'a [f32],
    base: *const f32,
    offs: &'a [usize],
    col: usize,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    bias: &'a [f32; MR],
    clamp: Option<(f32, f32)>,
    w: usize,
}

/// An `mr` (6 or 4) x 16 tile: bias + sum over k, clamped, stored to the
/// first `w` columns of `rows` rows of `c` (stride `ldc`); with `masked`
/// only the first `w` columns of B are read.
///
/// # Safety
/// The CPU must have AVX2 and FMA; `base + offs[k] + col .. + 16` (`.. + w`
/// when masked) must be readable for every k, and `c` writable for `rows`
/// rows of `w`.
#[inline(always)]
unsafe fn kernel_avx2(mr: usize, masked: bool, t: &Tile) {
    #[cfg(target_arch = "x86_64")]
    {
        match (mr, masked, avx512()) {
            (6, false, true) => tile_avx512::<6, false>(t),
            (6, true, true) => tile_avx512::<6, true>(t),
            (_, false, true) => tile_avx512::<4, false>(t),
            (_, true, true) => tile_avx512::<4, true>(t),
            (6, false, false) => tile_avx2::<6, false>(t),
            (6, true, false) => tile_avx2::<6, true>(t),
            (_, false, false) => tile_avx2::<4, false>(t),
            (_, true, false) => tile_avx2::<4, true>(t),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (mr, masked, t);
        // INVARIANT: callers reach the AVX2 kernel only after detecting AVX2,
        // which exists only on x86-64.
        unreachable!("AVX2 kernels run only on x86-64")
    }
}

/// # Safety
/// As for `kernel_avx2`, on a CPU with AVX2 and FMA.
// BOUNDS-FN: acc has R rows, bias MR >= R (R is 4 or 6), indexed by r < R.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2<const R: usize, const MASKED: bool>(t: &Tile) {
    let Tile { ab, base, offs, col, c, ldc, rows, bias, clamp, w } = *t;
    use std::arch::x86_64::*;
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    for r in 0..R {
        let v = _mm256_set1_ps(bias[r]);
        acc[r] = [v, v];
    }
    // Lanes below w: all ones in the sign bit.
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(w as i32), lane);
    let m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(w as i32 - 8), lane);
    let ap = ab.as_ptr();
    for (kk, &o) in offs.iter().enumerate() {
        let bp = base.add(o + col);
        let (b0, b1) = if MASKED {
            (_mm256_maskload_ps(bp, m0), _mm256_maskload_ps(bp.add(8), m1))
        } else {
            (_mm256_loadu_ps(bp), _mm256_loadu_ps(bp.add(8)))
        };
        let a = ap.add(kk * R);
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let av = _mm256_broadcast_ss(&*a.add(r));
            acc_r[0] = _mm256_fmadd_ps(av, b0, acc_r[0]);
            acc_r[1] = _mm256_fmadd_ps(av, b1, acc_r[1]);
        }
    }
    if let Some((lo, hi)) = clamp {
        let (l, h) = (_mm256_set1_ps(lo), _mm256_set1_ps(hi));
        for r in 0..R {
            // max(v, lo) first: a NaN becomes lo, as with f32::max.
            acc[r][0] = _mm256_min_ps(_mm256_max_ps(acc[r][0], l), h);
            acc[r][1] = _mm256_min_ps(_mm256_max_ps(acc[r][1], l), h);
        }
    }
    if w == NR && rows == R {
        // All rows: a fixed count, so the sums stay in registers.
        for r in 0..R {
            _mm256_storeu_ps(c.add(r * ldc), acc[r][0]);
            _mm256_storeu_ps(c.add(r * ldc + 8), acc[r][1]);
        }
    } else if w == NR {
        for (r, v) in acc.iter().enumerate().take(rows) {
            _mm256_storeu_ps(c.add(r * ldc), v[0]);
            _mm256_storeu_ps(c.add(r * ldc + 8), v[1]);
        }
    } else {
        for (r, v) in acc.iter().enumerate().take(rows) {
            _mm256_maskstore_ps(c.add(r * ldc), m0, v[0]);
            _mm256_maskstore_ps(c.add(r * ldc + 8), m1, v[1]);
        }
    }
}

/// An `mr` (6 or 4) x 32 tile on AVX-512: two 16-lane registers per row,
/// every B row read whole (32 columns), `rows` rows stored.
///
/// # Safety
/// The CPU must have AVX-512F; `base + offs[k] + col .. + 32` must be
/// readable for every k, and `c` writable for `rows` rows of 32.
#[inline(always)]
unsafe fn kernel_wide(mr: usize, t: &Tile) {
    #[cfg(target_arch = "x86_64")]
    {
        if mr == 6 {
            tile_avx512_wide::<6>(t)
        } else {
            tile_avx512_wide::<4>(t)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (mr, t);
        // INVARIANT: callers reach the AVX-512 kernel only after detecting
        // AVX-512F, which exists only on x86-64.
        unreachable!("AVX-512 kernels run only on x86-64")
    }
}

/// # Safety
/// As for `kernel_wide`.
// BOUNDS-FN: acc has R rows, bias MR >= R (R is 4 or 6), indexed by r < R;
// ab packs offs.len() columns of R values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512_wide<const R: usize>(t: &Tile) {
    use std::arch::x86_64::*;
    let Tile { ab, base, offs, col, c, ldc, rows, bias, clamp, .. } = *t;
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    for (r, a) in acc.iter_mut().enumerate() {
        let v = _mm512_set1_ps(bias[r]);
        *a = [v, v];
    }
    let ap = ab.as_ptr();
    for (kk, &o) in offs.iter().enumerate() {
        let bp = base.add(o + col);
        let (b0, b1) = (_mm512_loadu_ps(bp), _mm512_loadu_ps(bp.add(NR)));
        let a = ap.add(kk * R);
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let av = _mm512_set1_ps(*a.add(r));
            acc_r[0] = _mm512_fmadd_ps(av, b0, acc_r[0]);
            acc_r[1] = _mm512_fmadd_ps(av, b1, acc_r[1]);
        }
    }
    if let Some((lo, hi)) = clamp {
        let (l, h) = (_mm512_set1_ps(lo), _mm512_set1_ps(hi));
        for a in acc.iter_mut() {
            // max(v, lo) first: a NaN becomes lo, as with f32::max.
            a[0] = _mm512_min_ps(_mm512_max_ps(a[0], l), h);
            a[1] = _mm512_min_ps(_mm512_max_ps(a[1], l), h);
        }
    }
    if rows == R {
        for (r, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(c.add(r * ldc), a[0]);
            _mm512_storeu_ps(c.add(r * ldc + NR), a[1]);
        }
    } else {
        for (r, a) in acc.iter().enumerate().take(rows) {
            _mm512_storeu_ps(c.add(r * ldc), a[0]);
            _mm512_storeu_ps(c.add(r * ldc + NR), a[1]);
        }
    }
}

/// 0: not probed yet, 1: no, 2: yes.
static AVX512: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Whether the tiles run on AVX-512 (one 16-lane register per tile row)
/// rather than AVX2 (two 8-lane ones): on CPUs with AVX-512F, unless a
/// test has turned it off.
#[inline]
fn avx512() -> bool {
    use std::sync::atomic::Ordering;
    match AVX512.load(Ordering::Relaxed) {
        0 => {
            #[cfg(target_arch = "x86_64")]
            let yes = is_x86_feature_detected!("avx512f");
            #[cfg(not(target_arch = "x86_64"))]
            let yes = false;
            AVX512.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
        v => v == 2,
    }
}

/// Turn the AVX-512 tiles off (or back on where the CPU has them), for
/// timing one against the other.
#[cfg(test)]
pub fn set_avx512(on: bool) {
    AVX512.store(0, std::sync::atomic::Ordering::Relaxed);
    let yes = on && avx512();
    AVX512.store(if yes { 2 } else { 1 }, std::sync::atomic::Ordering::Relaxed);
}

/// As `tile_avx2`, with each row's 16 columns in one AVX-512 register and
/// the edge columns under a lane mask.
///
/// # Safety
/// As for `kernel_avx2`, on a CPU with AVX-512F.
// BOUNDS-FN: acc has R rows, bias MR >= R (R is 4 or 6), indexed by r < R.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512<const R: usize, const MASKED: bool>(t: &Tile) {
    use std::arch::x86_64::*;
    let Tile { ab, base, offs, col, c, ldc, rows, bias, clamp, w } = *t;
    let mut acc = [_mm512_setzero_ps(); R];
    for (r, a) in acc.iter_mut().enumerate() {
        *a = _mm512_set1_ps(bias[r]);
    }
    // Lanes below w.
    let m: __mmask16 = if w >= NR { 0xffff } else { ((1u32 << w) - 1) as __mmask16 };
    let ap = ab.as_ptr();
    for (kk, &o) in offs.iter().enumerate() {
        let bp = base.add(o + col);
        let b = if MASKED { _mm512_maskz_loadu_ps(m, bp) } else { _mm512_loadu_ps(bp) };
        let a = ap.add(kk * R);
        for (r, acc_r) in acc.iter_mut().enumerate() {
            *acc_r = _mm512_fmadd_ps(_mm512_set1_ps(*a.add(r)), b, *acc_r);
        }
    }
    if let Some((lo, hi)) = clamp {
        let (l, h) = (_mm512_set1_ps(lo), _mm512_set1_ps(hi));
        for a in acc.iter_mut() {
            // max(v, lo) first: a NaN becomes lo, as with f32::max.
            *a = _mm512_min_ps(_mm512_max_ps(*a, l), h);
        }
    }
    if w == NR && rows == R {
        for (r, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(c.add(r * ldc), *a);
        }
    } else {
        for (r, a) in acc.iter().enumerate().take(rows) {
            _mm512_mask_storeu_ps(c.add(r * ldc), m, *a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(
        a: &[f32],
        m: usize,
        b: &BView,
        outw: usize,
        outh: usize,
        ep: &Epi,
    ) -> Vec<f32> {
        let k = b.offs.len();
        let mut out = vec![0.0f32; m * outw * outh];
        for r in 0..m {
            for y in 0..outh {
                for x in 0..outw {
                    let s: f32 = (0..k)
                        .map(|i| a[r * k + i] * b.base[b.offs[i] + y * b.rs + x])
                        .sum();
                    out[(r * outh + y) * outw + x] =
                        ep.act.apply1(s + ep.bias.get(r).copied().unwrap_or(0.0));
                }
            }
        }
        out
    }

    #[test]
    fn block_heights_cover_every_row() {
        for m in 1..40 {
            let h = block_heights(m);
            assert_eq!(h.iter().map(|b| b.1).sum::<usize>(), m, "m = {m}");
            assert!(h.iter().all(|&(mr, rows)| (mr == 4 || mr == 6) && rows <= mr && rows > 0));
        }
    }

    #[test]
    fn matches_naive_product_on_both_paths() {
        let acts = [
            Activation { kind: 0, params: vec![] },
            Activation { kind: 1, params: vec![] },
            Activation { kind: 3, params: vec![-0.5, 2.0] },
            Activation { kind: 6, params: vec![0.2, 0.5] },
        ];
        // (m, k, rs, outw, outh): partial tiles, rows wider than outw, one column.
        for (ci, &(m, k, rs, outw, outh)) in [
            (1, 1, 1, 1, 1),
            (5, 7, 40, 33, 3),
            (16, 27, 300, 300, 1),
            (3, 2, 20, 16, 4),
            (9, 12, 35, 31, 7),
            (16, 8, 20, 20, 2),
            (10, 5, 17, 17, 3),
            (32, 4, 16, 16, 2),
            (2, 3, 18, 18, 2),
            (8, 6, 33, 32, 2),
        ]
        .iter()
        .enumerate()
        {
            let a: Vec<f32> = (0..m * k).map(|i| ((i * 13 % 7) as f32) - 3.0).collect();
            let offs: Vec<usize> = (0..k).map(|r| r * 3 + r % 2).collect();
            let len = offs.iter().max().unwrap() + (outh - 1) * rs + outw;
            let base: Vec<f32> = (0..len).map(|i| ((i * 5 % 11) as f32) * 0.25 - 1.0).collect();
            let bias: Vec<f32> = (0..m).map(|i| i as f32 * 0.1 - 0.2).collect();
            let b = BView { base: &base, offs: &offs, rs };
            let act = &acts[ci % acts.len()];
            let ep = Epi { bias: if ci % 2 == 0 { &bias } else { &[] }, act };
            let want = naive(&a, m, &b, outw, outh, &ep);
            let pa = PackedA::new(&a, m, k);
            // The portable tiles, the AVX2 ones, the AVX-512 ones (where
            // the CPU has them).
            let wide = avx512();
            for (fast, w512) in [(false, false), (simd::avx2_fma(), false), (simd::avx2_fma(), wide)] {
                AVX512.store(if w512 { 2 } else { 1 }, std::sync::atomic::Ordering::Relaxed);
                let mut got = vec![f32::NAN; m * outw * outh];
                conv_gemm_with(&pa, &b, outw, outh, &mut got, &ep, fast);
                AVX512.store(if wide { 2 } else { 1 }, std::sync::atomic::Ordering::Relaxed);
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!((g - w).abs() < 1e-3, "case {ci} fast={fast} avx512={w512} at {i}: {g} vs {w}");
                }
            }
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    /// Manual throughput check of the GEMM on convolution shapes:
    /// `cargo test --release gemm_speed -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn gemm_speed() {
        let act = Activation::default();
        let ep = Epi { bias: &[], act: &act };
        // (m, channels, taps, w, h): a 1x1 and a 3x3 convolution.
        for (m, c, taps, w, h) in [(24usize, 16usize, 1usize, 112usize, 112usize), (16, 16, 9, 114, 114), (48, 32, 1, 56, 56), (128, 64, 1, 56, 56), (256, 256, 1, 28, 28), (512, 512, 1, 14, 14), (1024, 1024, 1, 7, 7), (64, 64, 9, 58, 58), (256, 256, 9, 16, 16)] {
            let k = c * taps;
            let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32).collect();
            let x: Vec<f32> = (0..c * w * h + 64).map(|i| (i % 5) as f32).collect();
            let side = if taps == 9 { 3 } else { 1 };
            let offs: Vec<usize> = (0..k).map(|r| (r / taps) * w * h + ((r % taps) / side) * w + r % side).collect();
            // a 1x1 kernel runs as one long row (as the layer does)
            let (outw, outh) = if side == 1 { (w * h, 1) } else { (w - side + 1, h - side + 1) };
            let b = BView { base: &x, offs: &offs, rs: w };
            let a: Vec<f32> = a.iter().enumerate().map(|(i, v)| v * 0.01 - (i % 3) as f32 * 0.013).collect();
            let pa = PackedA::new(&a, m, k);
            let mut out = vec![0.0f32; m * outw * outh];
            let mut best = f64::INFINITY;
            for _ in 0..300 {
                let t = std::time::Instant::now();
                crate::ncnn::par::run_sequential(|| conv_gemm(&pa, &b, outw, outh, &mut out, &ep));
                best = best.min(t.elapsed().as_secs_f64());
            }
            let flop = 2.0 * (m * k * outw * outh) as f64;
            println!("m={m} k={k} n={}: {:.3} ms, {:.1} GFLOP/s", outw * outh, best * 1e3, flop / best / 1e9);
        }
    }
}
