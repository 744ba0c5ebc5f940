//! Mat: a dense fp32 blob of 1 to 4 dimensions, stored c, d, h, w with w fastest.
//! Blob memory is shared between copies of a blob until one is written, and
//! recycled through a small process-wide cache, so that a forward pass reuses
//! warm buffers instead of faulting in fresh pages.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

/// Freed buffers kept for reuse, oldest first, and their total size in floats.
static CACHE: Mutex<(Vec<Vec<f32>>, usize)> = Mutex::new((Vec::new(), 0));
const CACHE_FLOATS: usize = 64 << 20; // 256 MiB
const CACHE_ENTRIES: usize = 64;
/// Buffers smaller than this go straight to the allocator.
const CACHE_MIN: usize = 4096;

/// Bytes of freed blob memory held for reuse (reported by `ag_memory_stats()`).
pub fn cache_bytes() -> usize {
    CACHE.lock().map(|c| c.1 * std::mem::size_of::<f32>()).unwrap_or(0)
}

/// Free every buffer held for reuse; returns the bytes released.
pub fn release_cache() -> usize {
    match CACHE.lock() {
        Ok(mut c) => {
            let bytes = c.1 * std::mem::size_of::<f32>();
            c.0 = Vec::new();
            c.1 = 0;
            bytes
        }
        Err(_) => 0,
    }
}

/// An empty vector with room for at least `n` floats, reused when possible.
pub fn take_vec(n: usize) -> Vec<f32> {
    if n >= CACHE_MIN {
        if let Ok(mut c) = CACHE.lock() {
            let best = c
                .0
                .iter()
                .enumerate()
                .filter(|(_, v)| v.capacity() >= n && v.capacity() <= 2 * n)
                .min_by_key(|(_, v)| v.capacity())
                .map(|(i, _)| i);
            if let Some(i) = best {
                let v = c.0.remove(i);
                c.1 -= v.capacity();
                return v;
            }
        }
    }
    // Sizes come from params and inputs: a refusal unwinds to the layer
    // that asked (see `alloc::Refused`), never aborts.
    crate::base::alloc::or_unwind(crate::base::alloc::try_with_capacity(n, "a blob"))
}

/// Elements of a blob of these extents; a product that overflows unwinds as
/// a refused allocation.
fn elements(dims: &[usize]) -> usize {
    crate::base::alloc::or_unwind(crate::base::alloc::product(dims, "a blob"))
}

/// `s` rounded to f32, in a vector from the reuse cache (vectorised: an
/// input image is converted on every inference).
pub fn f32_from_f64(s: &[f64]) -> Vec<f32> {
    let mut v = take_vec(s.len());
    v.clear();
    // BOUNDS: take_vec(n) has room for at least n values.
    let spare = &mut v.spare_capacity_mut()[..s.len()];
    crate::base::simd::wide(|| {
        for (d, x) in spare.iter_mut().zip(s) {
            d.write(*x as f32);
        }
    });
    // SAFETY: the first s.len() values were written just above.
    unsafe { v.set_len(s.len()) };
    v
}

/// `s` widened into `d` (the same length), vectorised: every extracted
/// blob goes to R this way.
pub fn f64_from_f32(s: &[f32], d: &mut [f64]) {
    crate::base::simd::wide(|| d.iter_mut().zip(s).for_each(|(d, x)| *d = *x as f64));
}

fn give_back(mut v: Vec<f32>) {
    let cap = v.capacity();
    if cap < CACHE_MIN {
        return;
    }
    if cap > CACHE_FLOATS {
        return;
    }
    if let Ok(mut c) = CACHE.lock() {
        // Make room by dropping the buffers returned longest ago: sizes that
        // a net no longer asks for (another net's, an earlier input size's)
        // leave the cache instead of keeping the current ones out.
        while !c.0.is_empty() && (c.0.len() >= CACHE_ENTRIES || c.1 + cap > CACHE_FLOATS) {
            let old = c.0.remove(0);
            c.1 -= old.capacity();
        }
        v.clear();
        c.1 += cap;
        c.0.push(v);
    }
}

/// Blob storage: a shared, copy-on-write `Vec<f32>` whose memory returns to
/// the cache when its last user drops it. Cloning a blob (Split, extracting
/// a kept blob) shares the data; writing to shared data copies it first.
#[derive(Debug, Default, PartialEq)]
pub struct Buf(Arc<Vec<f32>>);

impl Buf {
    pub fn filled(n: usize, v: f32) -> Buf {
        let mut b = take_vec(n);
        b.resize(n, v);
        Buf(Arc::new(b))
    }
    /// The vector (copied when the data is shared), leaving nothing to recycle.
    pub fn into_vec(mut self) -> Vec<f32> {
        let a = std::mem::take(&mut self.0);
        Arc::try_unwrap(a).unwrap_or_else(|a| a.as_ref().clone())
    }
    /// Whether another blob shares this data.
    pub fn is_shared(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        if let Ok(v) = Arc::try_unwrap(std::mem::take(&mut self.0)) {
            give_back(v);
        }
    }
}

impl Clone for Buf {
    fn clone(&self) -> Buf {
        Buf(Arc::clone(&self.0))
    }
}

impl Deref for Buf {
    type Target = Vec<f32>;
    fn deref(&self) -> &Vec<f32> {
        &self.0
    }
}

impl DerefMut for Buf {
    fn deref_mut(&mut self) -> &mut Vec<f32> {
        if self.is_shared() {
            let mut v = take_vec(self.0.len());
            v.extend_from_slice(&self.0);
            self.0 = Arc::new(v);
        }
        // INVARIANT: the data was copied into a fresh Arc above when another
        // handle shared it, and blob data never has weak references.
        Arc::get_mut(&mut self.0).expect("unshared blob data")
    }
}

impl From<Vec<f32>> for Buf {
    fn from(v: Vec<f32>) -> Buf {
        Buf(Arc::new(v))
    }
}

/// A blob. `dims` is 1 (w), 2 (w, h), 3 (w, h, c) or 4 (w, h, d, c); unused
/// extents are 1. Data are contiguous: channel `q` starts at `q * cstep()`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mat {
    pub dims: usize,
    pub w: usize,
    pub h: usize,
    pub d: usize,
    pub c: usize,
    pub data: Buf,
    /// The values are int8 (whole numbers -127..127) quantized by the layer
    /// that made them, for an int8 layer to take as they are.
    pub int8: bool,
}

impl Mat {
    pub fn new(dims: usize, w: usize, h: usize, d: usize, c: usize) -> Mat {
        Mat {
            dims,
            w,
            h,
            d,
            c,
            data: Buf::filled(elements(&[w, h, d, c]), 0.0),
            int8: false,
        }
    }
    /// A 3-d Mat for a kernel that writes every value before anything reads
    /// it (no zero-filling pass over recycled memory).
    pub fn for_overwrite_3d(w: usize, h: usize, c: usize) -> Mat {
        let n = elements(&[w, h, c]);
        let mut v = take_vec(n);
        // SAFETY: f32 has no invalid bit patterns, the capacity is at least
        // n, and callers overwrite all n values before reading any.
        unsafe { v.set_len(n) };
        Mat {
            dims: 3,
            w,
            h,
            d: 1,
            c,
            data: Buf::from(v),
            int8: false,
        }
    }
    pub fn new_1d(w: usize) -> Mat {
        Mat::new(1, w, 1, 1, 1)
    }
    pub fn new_2d(w: usize, h: usize) -> Mat {
        Mat::new(2, w, h, 1, 1)
    }
    pub fn new_3d(w: usize, h: usize, c: usize) -> Mat {
        Mat::new(3, w, h, 1, c)
    }
    /// A Mat from extents in R order (w first); 1 to 4 extents.
    pub fn from_shape(shape: &[usize], data: impl Into<Buf>) -> anyhow::Result<Mat> {
        let data: Buf = data.into();
        let (w, h, d, c) = match *shape {
            [w] => (w, 1, 1, 1),
            [w, h] => (w, h, 1, 1),
            [w, h, c] => (w, h, 1, c),
            [w, h, d, c] => (w, h, d, c),
            _ => crate::ncnn_bail!("a blob has 1 to 4 dimensions (w, h, [d,] c), got {}", shape.len()),
        };
        let n = crate::base::alloc::product(shape, "a blob")?;
        if n != data.len() {
            crate::ncnn_bail!(
                "blob shape {:?} needs {} values, got {}",
                shape,
                n,
                data.len()
            );
        }
        Ok(Mat {
            dims: shape.len(),
            w,
            h,
            d,
            c,
            data,
            int8: false,
        })
    }
    /// Extents in R order (w first).
    pub fn shape(&self) -> Vec<usize> {
        match self.dims {
            1 => vec![self.w],
            2 => vec![self.w, self.h],
            3 => vec![self.w, self.h, self.c],
            _ => vec![self.w, self.h, self.d, self.c],
        }
    }
    /// Extents outermost first (c, d, h, w restricted to dims), as ncnn axes count.
    pub fn axes(&self) -> Vec<usize> {
        let mut s = self.shape();
        s.reverse();
        s
    }
    /// A Mat with the same dims from outermost-first extents.
    pub fn from_axes(axes: &[usize], data: impl Into<Buf>) -> anyhow::Result<Mat> {
        let mut s = axes.to_vec();
        s.reverse();
        Mat::from_shape(&s, data)
    }
    pub fn total(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// Elements per channel.
    pub fn cstep(&self) -> usize {
        self.w * self.h * self.d
    }
    /// Channel `q < c`.
    pub fn channel(&self, q: usize) -> &[f32] {
        let s = self.cstep();
        // BOUNDS: callers pass q < c (the layers' loops over a blob's
        // channels), and data holds c * cstep values (`from_shape` and the
        // constructors check it).
        &self.data[q * s..(q + 1) * s]
    }
    pub fn shape_eq(&self, o: &Mat) -> bool {
        self.dims == o.dims && self.w == o.w && self.h == o.h && self.d == o.d && self.c == o.c
    }
    /// A description like `3x8x8 (c x h x w)`.
    pub fn describe(&self) -> String {
        let a: Vec<String> = self.shape().iter().map(|v| v.to_string()).collect();
        format!("[{}]", a.join(", "))
    }
}
