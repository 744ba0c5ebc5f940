//! The CPU's instruction set extensions, as ggml's `ggml_cpu_has_*` names
//! them, detected at run time on the machine the engine runs on. Features of
//! other architectures are reported absent. (The engine's kernels use AVX2
//! and FMA where present, see [`super::simd`].)

/// A feature: its ggml name and value (`Flag` for the `has_` queries,
/// `Count` for the vector-length queries `sve_cnt` and `rvv_vlen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureValue {
    Flag(bool),
    Count(i32),
}

/// ggml's feature names, in the order `ggml_cpu_features()` lists them.
pub const NAMES: [&str; 28] = [
    "sse3", "ssse3", "avx", "avx_vnni", "avx2", "bmi2", "f16c", "fma", "avx512", "avx512_vbmi",
    "avx512_vnni", "avx512_bf16", "amx_int8", "neon", "arm_fma", "fp16_va", "dotprod", "matmul_int8",
    "sve", "sve_cnt", "sme", "riscv_v", "rvv_vlen", "vsx", "vxe", "nnpa", "wasm_simd", "llamafile",
];

#[cfg(target_arch = "x86_64")]
fn x86(name: &str) -> bool {
    use std::arch::is_x86_feature_detected as has;
    match name {
        "sse3" => has!("sse3"),
        "ssse3" => has!("ssse3"),
        "avx" => has!("avx"),
        "avx_vnni" => has!("avxvnni"),
        "avx2" => has!("avx2"),
        "bmi2" => has!("bmi2"),
        "f16c" => has!("f16c"),
        "fma" => has!("fma"),
        // ggml's AVX512 means the F, CD, VL, DQ and BW subsets together.
        "avx512" => {
            has!("avx512f") && has!("avx512cd") && has!("avx512vl") && has!("avx512dq") && has!("avx512bw")
        }
        "avx512_vbmi" => has!("avx512vbmi"),
        "avx512_vnni" => has!("avx512vnni"),
        "avx512_bf16" => has!("avx512bf16"),
        "amx_int8" => amx_int8(),
        _ => false,
    }
}

/// AMX-INT8 (CPUID leaf 7, EDX bit 25) with the tile state enabled by the
/// operating system (XCR0 bits 17 and 18).
#[cfg(target_arch = "x86_64")]
fn amx_int8() -> bool {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    if __cpuid(0).eax < 7 || __cpuid_count(7, 0).edx & (1 << 25) == 0 {
        return false;
    }
    if !std::arch::is_x86_feature_detected!("xsave") || __cpuid(1).ecx & (1 << 27) == 0 {
        return false;
    }
    // SAFETY: XSAVE is supported and enabled by the OS (OSXSAVE), so XGETBV
    // may be executed.
    let xcr0 = unsafe { xgetbv0() };
    (xcr0 >> 17) & 3 == 3
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "xsave")]
unsafe fn xgetbv0() -> u64 {
    std::arch::x86_64::_xgetbv(0)
}

#[cfg(not(target_arch = "x86_64"))]
fn x86(_name: &str) -> bool {
    false
}

#[cfg(target_arch = "aarch64")]
fn arm(name: &str) -> bool {
    use std::arch::is_aarch64_feature_detected as has;
    match name {
        "neon" => has!("neon"),
        "arm_fma" => has!("neon"),
        "fp16_va" => has!("fp16"),
        "dotprod" => has!("dotprod"),
        "matmul_int8" => has!("i8mm"),
        "sve" => has!("sve"),
        "sme" => has!("sme"),
        _ => false,
    }
}

#[cfg(not(target_arch = "aarch64"))]
fn arm(_name: &str) -> bool {
    false
}

/// The value of feature `name`, or None for a name ggml does not have.
pub fn feature(name: &str) -> Option<FeatureValue> {
    if !NAMES.contains(&name) {
        return None;
    }
    Some(match name {
        "sve_cnt" | "rvv_vlen" => FeatureValue::Count(0),
        _ => FeatureValue::Flag(x86(name) || arm(name)),
    })
}

/// Every feature, in [`NAMES`] order.
pub fn all() -> Vec<(&'static str, FeatureValue)> {
    NAMES.iter().map(|&n| (n, feature(n).unwrap_or(FeatureValue::Flag(false)))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_are_reported_for_every_name() {
        assert_eq!(all().len(), 28);
        assert_eq!(feature("sve_cnt"), Some(FeatureValue::Count(0)));
        assert_eq!(feature("llamafile"), Some(FeatureValue::Flag(false)));
        assert_eq!(feature("nonsense"), None);
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(feature("avx2"), Some(FeatureValue::Flag(std::arch::is_x86_feature_detected!("avx2"))));
            assert_eq!(feature("neon"), Some(FeatureValue::Flag(false)));
        }
    }
}
