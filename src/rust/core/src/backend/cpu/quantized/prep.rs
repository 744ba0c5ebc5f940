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
