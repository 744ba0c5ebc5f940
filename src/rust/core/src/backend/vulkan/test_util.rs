//! Helpers of the Vulkan tests: a device (or a skip message), uploads of
//! logical f32 data in any storage type and layout, and comparisons.

use super::{VkBuffer, VkContext, VkNode, VkTensorRef};
use crate::base::dtype::DType;
use crate::layout::Layout;
use crate::op::Op;
use half::{bf16, f16};
use std::sync::Arc;

/// Device 0, or None (with a message) where no Vulkan device exists.
pub fn ctx() -> Option<Arc<VkContext>> {
    match VkContext::get(0) {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("skipping Vulkan test: {e:#}");
            None
        }
    }
}

/// Deterministic values in [lo, hi).
pub fn values(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

/// The value `v` stored as `dt` and read back (what a kernel sees).
pub fn quant(v: f32, dt: DType) -> f32 {
    match dt {
        DType::Quant(_) => unreachable!("the Vulkan tests use element types"),
        DType::F32 => v,
        DType::F16 => f16::from_f32(v).to_f32(),
        DType::BF16 => bf16::from_f32(v).to_f32(),
        DType::I32 => v as i32 as f32,
        DType::F64 => v,
    }
}

fn put(bytes: &mut [u8], at: usize, v: f32, dt: DType) {
    match dt {
        DType::Quant(_) => unreachable!("the Vulkan tests use element types"),
        DType::F32 => bytes[at..at + 4].copy_from_slice(&v.to_le_bytes()),
        DType::I32 => bytes[at..at + 4].copy_from_slice(&(v as i32).to_le_bytes()),
        DType::F16 => bytes[at..at + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes()),
        DType::BF16 => bytes[at..at + 2].copy_from_slice(&bf16::from_f32(v).to_le_bytes()),
        DType::F64 => bytes[at..at + 8].copy_from_slice(&(v as f64).to_le_bytes()),
    }
}

fn get(bytes: &[u8], at: usize, dt: DType) -> f32 {
    match dt {
        DType::Quant(_) => unreachable!("the Vulkan tests use element types"),
        DType::F32 => f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()),
        DType::I32 => i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as f32,
        DType::F16 => f16::from_le_bytes(bytes[at..at + 2].try_into().unwrap()).to_f32(),
        DType::BF16 => bf16::from_le_bytes(bytes[at..at + 2].try_into().unwrap()).to_f32(),
        DType::F64 => f64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as f32,
    }
}

/// A tensor on the device: its buffer, byte offset and layout.
pub struct DevT {
    pub buf: VkBuffer,
    pub offset: usize,
    pub layout: Layout,
}

impl DevT {
    pub fn r(&self) -> VkTensorRef<'_> {
        VkTensorRef { buf: &self.buf, offset: self.offset, layout: self.layout }
    }
}

/// Logical element i (ne0 fastest) -> coordinates.
pub fn coords(ne: [usize; 4], i: usize) -> [usize; 4] {
    [i % ne[0], (i / ne[0]) % ne[1], (i / (ne[0] * ne[1])) % ne[2], i / (ne[0] * ne[1] * ne[2])]
}

/// Upload logical values `v` of shape `ne` as `dt`. With `transposed`, the
/// memory holds dims 0 and 1 swapped and the layout has swapped strides (a
/// non-contiguous view); the tensor starts `pad` elements into the buffer.
pub fn upload(c: &Arc<VkContext>, v: &[f32], ne: [usize; 4], dt: DType, transposed: bool, pad: usize) -> DevT {
    let es = dt.size();
    let n: usize = ne.iter().product();
    assert_eq!(v.len(), n);
    let phys = if transposed { [ne[1], ne[0], ne[2], ne[3]] } else { ne };
    let pl = Layout::contiguous(dt, phys);
    let layout = if transposed {
        Layout { dtype: dt, ne: [ne[0], ne[1], ne[2], ne[3], 1], nb: [pl.nb[1], pl.nb[0], pl.nb[2], pl.nb[3], pl.nb[4]] }
    } else {
        pl
    };
    let offset = pad * es;
    let mut bytes = vec![0u8; offset + n * es + 8];
    for (i, &x) in v.iter().enumerate() {
        let q = coords(ne, i);
        let at = offset + (0..4).map(|d| q[d] * layout.nb[d]).sum::<usize>();
        put(&mut bytes, at, x, dt);
    }
    let buf = c.alloc(bytes.len()).unwrap();
    c.write(&buf, 0, &bytes).unwrap();
    DevT { buf, offset, layout }
}

/// A zeroed contiguous result tensor.
pub fn output(c: &Arc<VkContext>, ne: [usize; 4], dt: DType) -> DevT {
    let layout = Layout::contiguous(dt, ne);
    let bytes = layout.nelements() * dt.size();
    let buf = c.alloc(bytes).unwrap();
    c.write(&buf, 0, &vec![0u8; bytes]).unwrap();
    DevT { buf, offset: 0, layout }
}

/// The logical values of `t` (any layout) as f32.
pub fn download(c: &Arc<VkContext>, t: &DevT) -> Vec<f32> {
    let mut bytes = vec![0u8; t.buf.size()];
    c.read(&t.buf, 0, &mut bytes).unwrap();
    let n = t.layout.nelements();
    (0..n)
        .map(|i| {
            let q = coords(t.layout.ne4(), i);
            let at = t.offset + (0..4).map(|d| q[d] * t.layout.nb[d]).sum::<usize>();
            get(&bytes, at, t.layout.dtype)
        })
        .collect()
}

/// Run one node and return its result's values.
pub fn run1(c: &Arc<VkContext>, op: &Op, srcs: &[&DevT], dst: &DevT) -> Vec<f32> {
    let node = VkNode { op, srcs: srcs.iter().map(|s| s.r()).collect(), dst: dst.r() };
    c.run_graph(&[node]).unwrap_or_else(|e| panic!("{}: {e:#}", op.name()));
    download(c, dst)
}

/// Element-wise |got - want| <= atol + rtol * |want| (NaN matches NaN, inf matches inf).
pub fn assert_close(got: &[f32], want: &[f32], atol: f32, rtol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= atol + rtol * w.abs();
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// Linear index of coordinates `c` in a contiguous tensor of sizes `ne`.
pub fn lin(ne: [usize; 4], c: [usize; 4]) -> usize {
    c[0] + ne[0] * (c[1] + ne[1] * (c[2] + ne[2] * c[3]))
}

pub fn n_of(ne: [usize; 4]) -> usize {
    ne.iter().product()
}
