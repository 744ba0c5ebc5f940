//! What the Vulkan kernels compute: the ops that have a kernel (the arms of
//! `encode::encode`; keep the two in step), the element types the shaders
//! read and write, the quantized types the shaders dequantize, and the sizes
//! one dispatch can address.

use super::device::DeviceLimits;
use crate::backend::node;
use crate::base::dtype::DType;
use crate::base::quant::QType;
use crate::layout::Layout;
use crate::op::Op;

/// Ops that tests pretend have no kernel (by name), to exercise fallbacks.
#[cfg(test)]
pub(crate) static REFUSED_FOR_TESTS: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());

/// Whether `op` has a Vulkan kernel (views and leaves need none).
pub fn has_kernel(op: &Op) -> bool {
    #[cfg(test)]
    if REFUSED_FOR_TESTS.lock().unwrap_or_else(|e| e.into_inner()).contains(&op.name()) {
        return false;
    }
    matches!(
        op,
        Op::None
            | Op::Reshape
            | Op::View
            | Op::Transpose
            | Op::Permute { .. }
            | Op::Dup
            | Op::Cont
            | Op::Cpy
            | Op::Unary(_)
            | Op::Scale { .. }
            | Op::LeakyRelu { .. }
            | Op::Clamp { .. }
            | Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Add1
            | Op::Repeat
            | Op::Concat { .. }
            | Op::GetRows
            | Op::DiagMaskInf { .. }
            | Op::Pad { .. }
            | Op::Upscale { .. }
            | Op::Im2Col { .. }
            | Op::Pool2d { .. }
            | Op::MulMat
            | Op::OutProd
            | Op::SumRows
            | Op::Mean
            | Op::Sum
            | Op::Argmax
            | Op::Norm { .. }
            | Op::RmsNorm { .. }
            | Op::SoftMax { .. }
            | Op::Map { .. }
            | Op::Binary { .. }
            | Op::GatherAxis { .. }
            | Op::PadEx { .. }
            | Op::ScatterFlat { .. }
            | Op::ReduceRows { .. }
            | Op::ScanRows { .. }
            | Op::Glu(_)
            | Op::SiluBack
            | Op::Rope(_)
            | Op::Attn(_)
            | Op::Conv(_)
            | Op::Rows(_)
            | Op::Index(_)
            | Op::MulMatId
    )
}

/// Element types the shaders read and write.
pub fn has_dtype(t: DType) -> bool {
    matches!(t, DType::F32 | DType::F16 | DType::BF16 | DType::I32)
}

/// The quantized types `shaders/matmul_q.wgsl` dequantizes (its variants,
/// one per type, are listed by ggml type code in build.rs): every type of
/// `QType::ALL`, the IQ types of lattice grids (IQ1_*, IQ2_*, IQ3_*) reading
/// their grid from a table (`encode_q::lattice_table`).
pub const SHADER_QTYPES: [QType; 26] = QType::ALL;

/// Whether the shaders dequantize `q`.
pub fn has_qtype(q: QType) -> bool {
    SHADER_QTYPES.contains(&q)
}

/// Why a node with quantized tensors cannot run on Vulkan, or None when it
/// can: quantized weights are read by mul_mat and get_rows as their first
/// source, in a type the shaders dequantize; views of them need no kernel.
pub fn quant_refusal(op: &Op, srcs: &[DType], dst: DType) -> Option<String> {
    let q = srcs.iter().chain(std::iter::once(&dst)).find_map(|t| t.quant())?;
    if op.is_view() || matches!(op, Op::None) {
        return None;
    }
    let first_only = srcs.first().is_some_and(|t| t.quant().is_some())
        && srcs.iter().skip(1).chain(std::iter::once(&dst)).all(|t| t.quant().is_none());
    if !matches!(op, Op::MulMat | Op::GetRows) || !first_only {
        return Some(format!(
            "the Vulkan backend computes quantized ({}) tensors only as the weights (first source) of \
             mul_mat and get_rows, not in {}",
            q.name(),
            op.name()
        ));
    }
    if !has_qtype(q) {
        return Some(format!(
            "the Vulkan backend has no shader for {} weights (it dequantizes {})",
            q.name(),
            SHADER_QTYPES.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
        ));
    }
    None
}

/// Whether a dispatch on a device with `limits` can address `l`: its span
/// within one storage-buffer binding, sizes and element strides in 32 bits
/// (quantized tensors are addressed in bytes).
pub fn addressable(l: &Layout, limits: &DeviceLimits) -> bool {
    let es = if l.dtype.quant().is_some() { 1 } else { l.dtype.size() };
    l.span_bytes() <= limits.max_storage_buffer_range as usize
        && l.ne.iter().all(|&n| u32::try_from(n).is_ok())
        && l.nb.iter().all(|&b| u32::try_from(b / es.max(1)).is_ok())
}

/// Whether a node computing `op` from `srcs` into `dst` runs on the device
/// (a node over five dimensions runs as one dispatch per slice of the fifth).
pub fn supports(op: &Op, srcs: &[Layout], dst: &Layout, limits: &DeviceLimits) -> bool {
    let types: Vec<DType> = srcs.iter().map(|l| l.dtype).collect();
    let quant_ok = quant_refusal(op, &types, dst.dtype).is_none();
    has_kernel(op)
        && quant_ok
        && srcs.iter().chain(std::iter::once(dst)).all(|l| (has_dtype(l.dtype) || l.dtype.quant().is_some()) && addressable(l, limits))
        && (op.is_view() || matches!(op, Op::None) || !node::is_five_d(srcs, dst) || node::sliceable(op, srcs, dst))
}
