#![cfg(target_arch = "x86_64")]

//! A column of Q8_0 activations prepared once for all the weight rows of a
//! Q4_0 product: its block scales as f32, each block's correction for the
//! weights' offset of 8 (`8 * d * sum of the block's quants`) and the quants
//! packed without their scales, so the SIMD kernels load eight scales at a
//! time and 64 bytes of quants at once, and take the weights' nibbles
//! unsigned (0..15), the offset subtracted once per block in f32.

use crate::base::quant::f16_bits_to_f32;

/// Bytes of a Q8_0 block (an f16 scale and 32 signed bytes).
const Q8_0_BYTES: usize = 34;

pub struct Q8Prep {
    /// Scale of each block, then zeros up to a multiple of 8.
    pub d: Vec<f32>,
    /// `8 * d * sum(qs)` of each block, then zeros up to a multiple of 8.
    pub c: Vec<f32>,
    /// The blocks' quants, 32 bytes each, one after the other.
    pub qs: Vec<i8>,
    /// Number of blocks.
    pub nb: usize,
}

impl Q8Prep {
    /// The first `nb` blocks of `y` (Q8_0), or None when `y` holds fewer.
    // BOUNDS-FN: `y` is cut to nb blocks, so b < nb <= padded = d.len() = c.len();
    // blk is a chunks_exact piece of 34 bytes (0, 1, 2..).
    pub fn new(y: &[u8], nb: usize) -> Option<Q8Prep> {
        let y = y.get(..nb * Q8_0_BYTES)?;
        let padded = nb.div_ceil(8) * 8;
        let (mut d, mut c) = (vec![0f32; padded], vec![0f32; padded]);
        let mut qs = Vec::with_capacity(32 * nb);
        for (b, blk) in y.chunks_exact(Q8_0_BYTES).enumerate() {
            d[b] = f16_bits_to_f32(u16::from_le_bytes([blk[0], blk[1]]));
            let q = blk[2..].iter().map(|&v| v as i8);
            c[b] = 8.0 * d[b] * q.clone().map(i32::from).sum::<i32>() as f32;
            qs.extend(q);
        }
        Some(Q8Prep { d, c, qs, nb })
    }

    /// Whether the Q4_0 row `x` holds the blocks of this column (and the
    /// padded scales the kernels load eight at a time are there).
    pub fn fits(&self, x: &[u8]) -> bool {
        x.len() >= 18 * self.nb && self.qs.len() >= 32 * self.nb && self.d.len() >= self.nb.div_ceil(8) * 8 && self.c.len() == self.d.len()
    }

    /// The Q4_0 row `x` (18-byte blocks) against blocks `from..nb`, one
    /// block at a time (the kernels' tail).
    // BOUNDS-FN: the caller, avx2::q4_0, checked `self.fits(x)`: x.len() >= 18 nb,
    // qs.len() >= 32 nb, d.len() >= nb and c.len() == d.len(); b < nb, and j < 16
    // so 2 + j < 18 (xb) and j + 16 < 32 (y).
    pub fn q4_0_tail(&self, x: &[u8], from: usize) -> f32 {
        let mut s = 0f32;
        for b in from..self.nb {
            let xb = &x[18 * b..18 * b + 18];
            let dx = f16_bits_to_f32(u16::from_le_bytes([xb[0], xb[1]]));
            let y = &self.qs[32 * b..32 * b + 32];
            let mut i = 0i32;
            for j in 0..16 {
                i += i32::from(xb[2 + j] & 15) * i32::from(y[j]) + i32::from(xb[2 + j] >> 4) * i32::from(y[j + 16]);
            }
            s += dx * self.d[b] * i as f32 - dx * self.c[b];
        }
        s
    }
}

/// Bytes of weights that one 64-byte register of a [`Q4Win`] kernel
/// covers: three Q4_0 blocks (18 bytes each).
pub const WIN_BYTES: usize = 54;

/// A Q8_0 column laid out for Q4_0 rows read as they lie in memory, three
/// blocks (54 bytes) per 64-byte register, nothing moved: for byte `p` of a
/// window, `lo[p]` is the activation that the low nibble there multiplies
/// and `hi[p]` the one the high nibble multiplies (0 at the blocks' scale
/// bytes and past the third block), so that `vpdpbusd` of the masked
/// nibbles by `lo` and `hi` leaves in each 4-byte lane a sum from one
/// block alone (lanes 0..5: block 0, 5..9: block 1, 9..14: block 2; the
/// two-byte scales fill the gaps). Per lane, `d` is the activation block's
/// scale and `c` the block's correction for the weights' offset of 8
/// (`8 * d * sum of its quants`, on the block's first lane only).
pub struct Q4Win {
    pub lo: Vec<[i8; 64]>,
    pub hi: Vec<[i8; 64]>,
    pub d: Vec<[f32; 16]>,
    pub c: Vec<[f32; 16]>,
    /// Number of blocks.
    pub nb: usize,
}

/// The first lane of each of a window's three blocks, and the end of the last.
pub const WIN_LANES: [usize; 4] = [0, 5, 9, 14];

impl Q4Win {
    /// The first `nb` blocks of `y` (Q8_0), or None when `y` holds fewer.
    // BOUNDS-FN: `y` is cut to nb blocks, so b < nb and w = b / 3 < nb.div_ceil(3),
    // the length of lo, hi, d and c; j = b % 3 < 3: 18 j + 2 + t < 54 with t < 16
    // (of 64), WIN_LANES ([usize; 4]) at j + 1 <= 3, its values <= 14 (of 16); blk is
    // a chunks_exact piece of 34 bytes and q takes t < 32: 2 + t < 34.
    pub fn new(y: &[u8], nb: usize) -> Option<Q4Win> {
        let y = y.get(..nb * Q8_0_BYTES)?;
        let wins = nb.div_ceil(3);
        let mut p = Q4Win { lo: vec![[0; 64]; wins], hi: vec![[0; 64]; wins], d: vec![[0.0; 16]; wins], c: vec![[0.0; 16]; wins], nb };
        for (b, blk) in y.chunks_exact(Q8_0_BYTES).enumerate() {
            let (w, j) = (b / 3, b % 3);
            let d = f16_bits_to_f32(u16::from_le_bytes([blk[0], blk[1]]));
            let q = |t: usize| blk[2 + t] as i8;
            for t in 0..16 {
                p.lo[w][18 * j + 2 + t] = q(t);
                p.hi[w][18 * j + 2 + t] = q(t + 16);
            }
            p.d[w][WIN_LANES[j]..WIN_LANES[j + 1]].fill(d);
            p.c[w][WIN_LANES[j]] = 8.0 * d * (0..32).map(|t| i32::from(q(t))).sum::<i32>() as f32;
        }
        Some(p)
    }

    /// Whether the Q4_0 row `x` holds the blocks of this column.
    pub fn fits(&self, x: &[u8]) -> bool {
        let w = self.nb.div_ceil(3);
        x.len() >= 18 * self.nb && self.lo.len() == w && self.hi.len() == w && self.d.len() == w && self.c.len() == w
    }
}

/// Bytes of a Q8_K block (an f32 scale, 256 signed bytes, 16 i16 sums).
const Q8_K_BYTES: usize = 292;

/// One Q8_K block laid out for a Q4_K block read as it lies: the block's
/// 128 bytes of nibbles are two 64-byte registers, A (groups 0 and 1) and
/// B (groups 2 and 3); the low nibbles of A are the values of sub-blocks 0
/// and 2, its high nibbles those of 1 and 3 (B: 4, 6 and 5, 7). `y` holds
/// the activations in that order (A low, A high, B low, B high), `msum`
/// the sum of each sub-block's 32 activations (for the mins), `d` the scale.
#[repr(C, align(64))]
#[derive(Clone)]
pub struct KWin {
    pub y: [[i8; 64]; 4],
    pub msum: [i16; 8],
    pub d: f32,
}

/// A Q8_K column laid out for Q4_K rows (see [`KWin`]), one entry a block.
pub struct Q8KWin {
    pub blocks: Vec<KWin>,
}

impl Q8KWin {
    /// The first `nb` blocks of `y` (Q8_K), or None when `y` holds fewer.
    // BOUNDS-FN: b is a chunks_exact piece of 292 bytes and q reads 4 + v with
    // v < 256: t < 64 (the arrays of 64), so s[t / 32] reads [usize; 2] below 2 and
    // v = 32 s + t % 32 with s <= 7; msum's j < 8 and t < 32; 0..4 literals.
    pub fn new(y: &[u8], nb: usize) -> Option<Q8KWin> {
        let y = y.get(..nb * Q8_K_BYTES)?;
        let blocks = y
            .chunks_exact(Q8_K_BYTES)
            .map(|b| {
                let q = |v: usize| b[4 + v] as i8;
                // sub-blocks of each half-register, in register order
                const SUBS: [[usize; 2]; 4] = [[0, 2], [1, 3], [4, 6], [5, 7]];
                let y = SUBS.map(|s| std::array::from_fn(|t| q(32 * s[t / 32] + t % 32)));
                let msum = std::array::from_fn(|j| (0..32).map(|t| i16::from(q(32 * j + t))).sum());
                KWin { y, msum, d: f32::from_le_bytes([b[0], b[1], b[2], b[3]]) }
            })
            .collect();
        Some(Q8KWin { blocks })
    }

    /// Whether the Q4_K row `x` holds the blocks of this column.
    pub fn fits(&self, x: &[u8]) -> bool {
        x.len() >= 144 * self.blocks.len()
    }
}

/// A Q8_0 column laid out for Q8_0 rows, a pair of blocks a step: the two
/// blocks' 64 quants in one register's order, and their scales (eight
/// lanes each, the lanes of the `vpdpbusd` sums of each block), so that
/// the rows' kernels load each pair once for all the rows of a pass.
pub struct Q8Pairs {
    pub y: Vec<[i8; 64]>,
    pub d: Vec<[f32; 16]>,
    /// Number of blocks (an odd last one is in `last`).
    pub nb: usize,
    /// The last block's scale and quants when `nb` is odd.
    pub last: Option<(f32, [i8; 32])>,
}

impl Q8Pairs {
    /// The first `nb` blocks of `y` (Q8_0), or None when `y` holds fewer.
    // BOUNDS-FN: each `blk` is 34 bytes: the halves of a 68-byte chunks_exact piece,
    // or the remainder checked to be 34 long; t < 32 reads 2 + t < 34; q0 and q1 are
    // [i8; 32], read at t < 32 and t - 32 for 32 <= t < 64.
    pub fn new(y: &[u8], nb: usize) -> Option<Q8Pairs> {
        let y = y.get(..nb * Q8_0_BYTES)?;
        let block = |blk: &[u8]| -> (f32, [i8; 32]) {
            let d = f16_bits_to_f32(u16::from_le_bytes([blk[0], blk[1]]));
            (d, std::array::from_fn(|t| blk[2 + t] as i8))
        };
        let mut p = Q8Pairs { y: Vec::with_capacity(nb / 2), d: Vec::with_capacity(nb / 2), nb, last: None };
        let mut pairs = y.chunks_exact(2 * Q8_0_BYTES);
        for two in &mut pairs {
            let ((d0, q0), (d1, q1)) = (block(&two[..Q8_0_BYTES]), block(&two[Q8_0_BYTES..]));
            p.y.push(std::array::from_fn(|t| if t < 32 { q0[t] } else { q1[t - 32] }));
            p.d.push(std::array::from_fn(|t| if t < 8 { d0 } else { d1 }));
        }
        let rest = pairs.remainder();
        if rest.len() == Q8_0_BYTES {
            p.last = Some(block(rest));
        }
        Some(p)
    }

    /// Whether the Q8_0 row `x` holds the blocks of this column.
    pub fn fits(&self, x: &[u8]) -> bool {
        x.len() >= Q8_0_BYTES * self.nb && self.y.len() == self.nb / 2 && self.d.len() == self.nb / 2 && self.last.is_some() == (self.nb % 2 == 1)
    }
}
