//! Dot products of one quantized weight row with one activation row, as
//! ggml computes them: the activations are quantized once to the weight
//! type's partner format (Q8_0, Q8_1 or Q8_K), block products are summed in
//! integers and scaled in f32. Types without an integer kernel dequantize
//! the weight row and take an f32 dot product.
//!
//! Every kernel is a plain loop written to vectorise; [`super::dispatch`]
//! compiles the row loops for AVX2 or AVX-512 when the CPU has them.

use crate::base::quant::{self, QType, QK_K};

/// The activation format a weight type is multiplied with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Partner {
    Q8_0,
    Q8_1,
    Q8K,
    /// Plain f32 (weights dequantized first).
    F32,
}

pub fn partner(q: QType) -> Partner {
    use QType::*;
    match q {
        Q4_0 | Q5_0 | Q8_0 | IQ4_NL | MXFP4 => Partner::Q8_0,
        Q4_1 | Q5_1 => Partner::Q8_1,
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | IQ4_XS => Partner::Q8K,
        _ => Partner::F32,
    }
}

impl Partner {
    pub fn qtype(self) -> Option<QType> {
        match self {
            Partner::Q8_0 => Some(QType::Q8_0),
            Partner::Q8_1 => Some(QType::Q8_1),
            Partner::Q8K => Some(QType::Q8_K),
            Partner::F32 => None,
        }
    }
}

/// f16 bits to f32, quickly for normal numbers (exactly as IEEE conversion).
#[inline(always)]
pub fn h2f(lo: u8, hi: u8) -> f32 {
    let h = u16::from_le_bytes([lo, hi]) as u32;
    let exp = (h >> 10) & 0x1F;
    if exp == 0 || exp == 31 {
        return quant::f16_bits_to_f32(h as u16);
    }
    f32::from_bits(((h & 0x8000) << 16) | ((exp + 112) << 23) | ((h & 0x3FF) << 13))
}

/// The blocks of a weight row and of an activation row, as fixed-size
/// arrays (so that the loops over them vectorise without bounds checks).
#[inline(always)]
fn blocks<'a, const X: usize, const Y: usize>(x: &'a [u8], y: &'a [u8], nb: usize) -> impl Iterator<Item = (&'a [u8; X], &'a [u8; Y])> {
    x.chunks_exact(X).zip(y.chunks_exact(Y)).take(nb).filter_map(|(a, b)| Some((a.try_into().ok()?, b.try_into().ok()?)))
}

/// sum w[j] * y[o + j] over 32 values.
// BOUNDS-FN: `w` is an [i8; 32] and `y` a [u8; 32] (taken by `get` above),
// j < 32.
#[inline(always)]
fn dot32(w: &[i8; 32], y: &[u8], o: usize) -> i32 {
    let y: &[u8; 32] = match y.get(o..o + 32).and_then(|s| s.try_into().ok()) {
        Some(v) => v,
        None => return 0,
    };
    let mut s = 0i32;
    for j in 0..32 {
        s += w[j] as i32 * (y[j] as i8 as i32);
    }
    s
}

/// The 32 weights of a nibble block at `qs[o..o + 16]` (value j low, j + 16 high) minus `off`.
// BOUNDS-FN: j < 16 indexes the [i8; 32] `w` at j and j + 16; the callers'
// blocks hold 16 bytes from `o` (o + 16 <= X): q4_0 and iq4_nl 2 of
// [u8; 18], q4_1 4 of [u8; 20].
#[inline(always)]
fn nibbles<const X: usize>(b: &[u8; X], o: usize, off: i8) -> [i8; 32] {
    let mut w = [0i8; 32];
    for j in 0..16 {
        w[j] = (b[o + j] & 0x0F) as i8 - off;
        w[j + 16] = (b[o + j] >> 4) as i8 - off;
    }
    w
}

/// Five-bit values of a Q5 block (`qh` at `h`, nibbles at `o`) minus `off`.
// BOUNDS-FN: j < 16 indexes the [i8; 32] `w` at j and j + 16; the callers'
// blocks hold qh at h..h + 4 and 16 bytes from `o` (o + 16 <= X): q5_0
// h 2, o 6 of [u8; 22], q5_1 h 4, o 8 of [u8; 24].
#[inline(always)]
fn five_bits<const X: usize>(b: &[u8; X], h: usize, o: usize, off: i8) -> [i8; 32] {
    let qh = u32::from_le_bytes([b[h], b[h + 1], b[h + 2], b[h + 3]]);
    let mut w = [0i8; 32];
    for j in 0..16 {
        w[j] = ((b[o + j] & 0x0F) | ((((qh >> j) & 1) as u8) << 4)) as i8 - off;
        w[j + 16] = ((b[o + j] >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4)) as i8 - off;
    }
    w
}

/// Table lookups of a nibble block (IQ4_NL, MXFP4 codes).
// BOUNDS-FN: the table index is a nibble (< 16, `table` is [i8; 16]); j < 16
// indexes the [i8; 32] `w` at j and j + 16; the callers' blocks hold 16
// bytes from `o`: iq4_nl 2 of [u8; 18], mxfp4 1 of [u8; 17], iq4_xs
// 8 + 16 ib (ib < 8: at most 120 + 16 = 136) of [u8; 136].
#[inline(always)]
fn looked_up<const X: usize>(b: &[u8; X], o: usize, table: &[i8; 16]) -> [i8; 32] {
    let mut w = [0i8; 32];
    for j in 0..16 {
        w[j] = table[(b[o + j] & 0x0F) as usize];
        w[j + 16] = table[(b[o + j] >> 4) as usize];
    }
    w
}

// BOUNDS-FN: xb is [u8; 18], yb [u8; 34] (blocks::<18, 34>); literal indexes 0, 1.
#[inline(always)]
pub fn q4_0(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in blocks::<18, 34>(x, y, nb) {
        let s = dot32(&nibbles(xb, 2, 8), yb, 2);
        sum += s as f32 * (h2f(xb[0], xb[1]) * h2f(yb[0], yb[1]));
    }
    sum
}

// BOUNDS-FN: xb is [u8; 20], yb [u8; 36] (blocks::<20, 36>); literal indexes 0..4.
#[inline(always)]
pub fn q4_1(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in blocks::<20, 36>(x, y, nb) {
        let s = dot32(&nibbles(xb, 4, 0), yb, 4);
        sum += s as f32 * (h2f(xb[0], xb[1]) * h2f(yb[0], yb[1])) + h2f(xb[2], xb[3]) * h2f(yb[2], yb[3]);
    }
    sum
}

// BOUNDS-FN: xb is [u8; 22], yb [u8; 34] (blocks::<22, 34>); literal indexes 0, 1.
#[inline(always)]
pub fn q5_0(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in blocks::<22, 34>(x, y, nb) {
        let s = dot32(&five_bits(xb, 2, 6, 16), yb, 2);
        sum += s as f32 * (h2f(xb[0], xb[1]) * h2f(yb[0], yb[1]));
    }
    sum
}

// BOUNDS-FN: xb is [u8; 24], yb [u8; 36] (blocks::<24, 36>); literal indexes 0..4.
#[inline(always)]
pub fn q5_1(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in blocks::<24, 36>(x, y, nb) {
        let s = dot32(&five_bits(xb, 4, 8, 0), yb, 4);
        sum += s as f32 * (h2f(xb[0], xb[1]) * h2f(yb[0], yb[1])) + h2f(xb[2], xb[3]) * h2f(yb[2], yb[3]);
    }
    sum
}

// BOUNDS-FN: xb and yb are [u8; 34] (blocks::<34, 34>): j < 32 so 2 + j < 34.
#[inline(always)]
pub fn q8_0(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in blocks::<34, 34>(x, y, nb) {
        let mut s = 0i32;
        for j in 0..32 {
            s += (xb[2 + j] as i8 as i32) * (yb[2 + j] as i8 as i32);
        }
        sum += s as f32 * (h2f(xb[0], xb[1]) * h2f(yb[0], yb[1]));
    }
    sum
}

const IQ4: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];
const FP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

// BOUNDS-FN: xb is [u8; 18], yb [u8; 34] (blocks::<18, 34>); literal indexes 0, 1.
#[inline(always)]
pub fn iq4_nl(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in blocks::<18, 34>(x, y, nb) {
        let s = dot32(&looked_up(xb, 2, &IQ4), yb, 2);
        sum += s as f32 * (h2f(xb[0], xb[1]) * h2f(yb[0], yb[1]));
    }
    sum
}

// BOUNDS-FN: xb is [u8; 17], yb [u8; 34] (blocks::<17, 34>); literal indexes 0, 1.
#[inline(always)]
pub fn mxfp4(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in blocks::<17, 34>(x, y, nb) {
        let s = dot32(&looked_up(xb, 1, &FP4), yb, 2);
        let e = xb[0];
        let d = f32::from_bits(if e < 2 { 0x0020_0000u32 << e } else { ((e - 1) as u32) << 23 });
        sum += s as f32 * (d * h2f(yb[0], yb[1]));
    }
    sum
}

/// The f32 scale and the 16 sums of 16 of a Q8_K block (quants at 4..260).
// BOUNDS-FN: yb is [u8; 292]: bytes 0..4, and j < 16 (the [i32; 16]) so
// 261 + 2 j <= 291.
#[inline(always)]
fn q8k(yb: &[u8; 292]) -> (f32, [i32; 16]) {
    let d = f32::from_le_bytes([yb[0], yb[1], yb[2], yb[3]]);
    (d, std::array::from_fn(|j| i16::from_le_bytes([yb[260 + 2 * j], yb[261 + 2 * j]]) as i32))
}

/// sum w[j] * y[4 + j] over 256 values in groups of `G`, each group's sum
/// times its scale.
// BOUNDS-FN: g < QK_K / G and j < G, so G g + j < QK_K = 256: inside the
// [i8; QK_K] `w`, and 4 + G g + j < 260 inside the [u8; 292] `yb`.
#[inline(always)]
fn scaled_dot<const G: usize>(w: &[i8; QK_K], yb: &[u8; 292], scale: impl Fn(usize) -> i32) -> i32 {
    let mut total = 0i32;
    for g in 0..QK_K / G {
        let mut s = 0i32;
        for j in 0..G {
            s += w[G * g + j] as i32 * (yb[4 + G * g + j] as i8 as i32);
        }
        total += scale(g) * s;
    }
    total
}

// BOUNDS-FN: xb is [u8; 84], yb [u8; 292] (blocks::<84, 292>); `bs` is [i32; 16]
// and j < 16; n < 2, s < 4, l < 32, so 128 n + 32 s + l < 256 = QK_K (`w`) and
// 16 + 32 n + l < 80; the scale closure gets g < QK_K / 16 = 16 from
// scaled_dot::<16>; 80..84 are literals.
#[inline(always)]
pub fn q2_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in blocks::<84, 292>(x, y, nb) {
        let (dy, bs) = q8k(yb);
        let mut mins = 0i32;
        for j in 0..16 {
            mins += (xb[j] >> 4) as i32 * bs[j];
        }
        let mut w = [0i8; QK_K];
        for n in 0..2 {
            for (s, shift) in [0, 2, 4, 6].into_iter().enumerate() {
                for l in 0..32 {
                    w[128 * n + 32 * s + l] = ((xb[16 + 32 * n + l] >> shift) & 3) as i8;
                }
            }
        }
        let sumi = scaled_dot::<16>(&w, yb, |j| (xb[j] & 0xF) as i32);
        sum += dy * h2f(xb[80], xb[81]) * sumi as f32 - dy * h2f(xb[82], xb[83]) * mins as f32;
    }
    sum
}

// BOUNDS-FN: xb is [u8; 110], yb [u8; 292] (blocks::<110, 292>); n < 2, k < 4,
// l < 32: xb[l] < 32, 32 + 32 n + l < 96, 128 n + 32 k + l < 256 = QK_K (`w`);
// s = xb[96..108] is 12 bytes, the closure gets j < 16 from scaled_dot::<16>:
// j < 8 or j - 8 < 8, and 8 + j % 4 < 12; 108, 109 are literals.
#[inline(always)]
pub fn q3_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in blocks::<110, 292>(x, y, nb) {
        let (dy, _) = q8k(yb);
        let mut w = [0i8; QK_K];
        for n in 0..2 {
            for (k, shift) in [0, 2, 4, 6].into_iter().enumerate() {
                let bit = 4 * n + k;
                for l in 0..32 {
                    let hi = if xb[l] & (1 << bit) != 0 { 0 } else { 4 };
                    w[128 * n + 32 * k + l] = ((xb[32 + 32 * n + l] >> shift) & 3) as i8 - hi;
                }
            }
        }
        let sc = |j: usize| {
            let s = &xb[96..108];
            let lo = if j < 8 { s[j] & 0xF } else { s[j - 8] >> 4 };
            (lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) as i32 - 32
        };
        let sumi = scaled_dot::<16>(&w, yb, sc);
        sum += dy * h2f(xb[108], xb[109]) * sumi as f32;
    }
    sum
}

/// The eight (scale, min) pairs of a Q4_K / Q5_K block.
// BOUNDS-FN: the callers' blocks are [u8; 144] (Q4_K) and [u8; 176] (Q5_K);
// j < 8 (the [i32; 8] arrays), so s(i) reads 4 + i with i <= j + 4 < 12, below 16.
#[inline(always)]
fn scales_k4<const X: usize>(b: &[u8; X]) -> ([i32; 8], [i32; 8]) {
    let s = |i: usize| b[4 + i];
    let sc = std::array::from_fn(|j| if j < 4 { (s(j) & 63) as i32 } else { ((s(j + 4) & 0xF) | ((s(j - 4) >> 6) << 4)) as i32 });
    let m = std::array::from_fn(|j| if j < 4 { (s(j + 4) & 63) as i32 } else { ((s(j + 4) >> 4) | ((s(j) >> 6) << 4)) as i32 });
    (sc, m)
}

// BOUNDS-FN: xb is [u8; 144] or [u8; 176] (q4_k, q5_k); sc, m are [i32; 8] and
// the closure gets j < QK_K / 32 = 8 from scaled_dot::<32>; bs is [i32; 16]
// and 2 j + 1 < 16; xb literals 0..4.
#[inline(always)]
fn k4_sum<const X: usize>(xb: &[u8; X], w: &[i8; QK_K], yb: &[u8; 292]) -> f32 {
    let (dy, bs) = q8k(yb);
    let (sc, m) = scales_k4(xb);
    let sumi = scaled_dot::<32>(w, yb, |j| sc[j]);
    let mut mins = 0i32;
    for j in 0..8 {
        mins += m[j] * (bs[2 * j] + bs[2 * j + 1]);
    }
    dy * h2f(xb[0], xb[1]) * sumi as f32 - dy * h2f(xb[2], xb[3]) * mins as f32
}

// BOUNDS-FN: xb is [u8; 144] (blocks::<144, 292>): g < 4, l < 32, so
// 16 + 32 g + l < 144 and 64 g + 32 + l < 256 = QK_K (`w`).
#[inline(always)]
pub fn q4_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in blocks::<144, 292>(x, y, nb) {
        let mut w = [0i8; QK_K];
        for g in 0..4 {
            for l in 0..32 {
                let q = xb[16 + 32 * g + l];
                w[64 * g + l] = (q & 0xF) as i8;
                w[64 * g + 32 + l] = (q >> 4) as i8;
            }
        }
        sum += k4_sum(xb, &w, yb);
    }
    sum
}

// BOUNDS-FN: xb is [u8; 176] (blocks::<176, 292>): g < 4, l < 32, so
// 48 + 32 g + l < 176, 16 + l < 48 and 64 g + 32 + l < 256 = QK_K (`w`).
#[inline(always)]
pub fn q5_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in blocks::<176, 292>(x, y, nb) {
        let mut w = [0i8; QK_K];
        for g in 0..4 {
            for l in 0..32 {
                let (q, h) = (xb[48 + 32 * g + l], xb[16 + l]);
                w[64 * g + l] = ((q & 0xF) | (((h >> (2 * g)) & 1) << 4)) as i8;
                w[64 * g + 32 + l] = ((q >> 4) | (((h >> (2 * g + 1)) & 1) << 4)) as i8;
            }
        }
        sum += k4_sum(xb, &w, yb);
    }
    sum
}

// BOUNDS-FN: xb is [u8; 210] (blocks::<210, 292>): n < 2, l < 32, so
// 64 n + 32 + l < 128, 128 + 32 n + l < 192; o = 128 n + l < 160, o + 96 < 256
// = QK_K (`w`); the scale closure gets j < 16 (scaled_dot::<16>): 192 + j < 208;
// 208, 209 are literals.
#[inline(always)]
pub fn q6_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in blocks::<210, 292>(x, y, nb) {
        let (dy, _) = q8k(yb);
        let mut w = [0i8; QK_K];
        for n in 0..2 {
            for l in 0..32 {
                let (a, b, h) = (xb[64 * n + l], xb[64 * n + 32 + l], xb[128 + 32 * n + l]);
                let o = 128 * n + l;
                w[o] = ((a & 0xF) | ((h & 3) << 4)) as i8 - 32;
                w[o + 32] = ((b & 0xF) | (((h >> 2) & 3) << 4)) as i8 - 32;
                w[o + 64] = ((a >> 4) | (((h >> 4) & 3) << 4)) as i8 - 32;
                w[o + 96] = ((b >> 4) | (((h >> 6) & 3) << 4)) as i8 - 32;
            }
        }
        let sumi = scaled_dot::<16>(&w, yb, |j| xb[192 + j] as i8 as i32);
        sum += dy * h2f(xb[208], xb[209]) * sumi as f32;
    }
    sum
}

// BOUNDS-FN: xb is [u8; 136] (blocks::<136, 292>): ib < 8, so
// 32 ib + 32 <= 256 = QK_K (`w`) and 4 + ib / 2 < 8; literals 0..4.
#[inline(always)]
pub fn iq4_xs(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in blocks::<136, 292>(x, y, nb) {
        let (dy, _) = q8k(yb);
        let sh = u16::from_le_bytes([xb[2], xb[3]]);
        let mut w = [0i8; QK_K];
        for ib in 0..8 {
            let v = looked_up(xb, 8 + 16 * ib, &IQ4);
            w[32 * ib..32 * ib + 32].copy_from_slice(&v);
        }
        let sc = |ib: usize| ((xb[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) as i32 | ((((sh >> (2 * ib)) & 3) as i32) << 4);
        let sumi = scaled_dot::<32>(&w, yb, |ib| sc(ib) - 32);
        sum += dy * h2f(xb[0], xb[1]) * sumi as f32;
    }
    sum
}

/// f32 dot product in eight lanes (the same on every CPU for given inputs
/// only up to the order of the sums, as any vectorised dot product).
// BOUNDS-FN: x and y are chunks_exact(8) pieces (8 values each) and `acc` an
// [f32; 8]; l < 8.
#[inline(always)]
pub fn f32_dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s = acc.iter().sum::<f32>();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}
