//! Compiles the WGSL compute shaders in `shaders/` to SPIR-V with naga, so
//! building the package needs no shader compiler on the system.
//!
//! Each shader is compiled in variants: the source is prefixed with the
//! constants OPC (operation code), SUBC (sub-operation) and ALL_F32 (every
//! tensor is f32), then `common.wgsl`, then the shader's own file. Constant
//! operation codes let a driver drop the code a dispatch cannot reach. The
//! words land in `$OUT_DIR/<shader>_<op>_<sub>_<f>.spv`, and
//! `$OUT_DIR/variants.rs` maps a variant to its embedded bytes.

use std::fmt::Write as _;
use std::path::Path;

fn compile(name: &str, src: &str) -> Result<Vec<u32>, String> {
    let module = naga::front::wgsl::parse_str(src)
        .map_err(|e| format!("{name}: {}", e.emit_to_string(src)))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32,
    )
    .validate(&module)
    .map_err(|e| format!("{name}: validation failed: {}", e.emit_to_string(src)))?;
    let options = naga::back::spv::Options { lang_version: (1, 0), ..Default::default() };
    let pipeline = naga::back::spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: "main".to_string(),
    };
    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline))
        .map_err(|e| format!("{name}: SPIR-V output failed: {e}"))
}

/// (shader, [(op, number of sub-operations)])
fn variants() -> Vec<(&'static str, Vec<(u32, u32)>)> {
    let eltwise = (0..17u32)
        .map(|op| match op {
            1 => (op, 24),       // unary functions
            5 => (op, 4),        // add, sub, mul, div
            13 => (op, 2),       // max and average pooling
            14 | 15 => (op, 6),  // the GLU kinds
            _ => (op, 1),
        })
        .collect();
    vec![
        ("eltwise", eltwise),
        // sub 1: register blocks without shared memory (CPU-type devices)
        ("matmul", vec![(0, 2)]),
        // sub 1: one invocation per row (short rows); the sum of all has one row
        ("reduce", (0..7).map(|op| (op, if op == 6 { 1 } else { 2 })).collect()),
        // map, binary, gather_axis, pad_ex, scatter_flat, reduce_rows, scan_rows
        ("extended", (0..7).map(|op| (op, 1)).collect()),
        ("rope", vec![(0, 1)]),
        // flash_attn_ext, flash_attn_back
        ("attn", vec![(0, 1), (1, 1)]),
        // sub 1 of op 10: bicubic upscale
        ("index", (0..13).map(|op| (op, if op == 10 { 2 } else { 1 })).collect()),
        // sub 1 of op 4: average pooling
        ("conv_direct", (0..6).map(|op| (op, if op == 4 { 2 } else { 1 })).collect()),
        ("rows", (0..7).map(|op| (op, 1)).collect()),
        // op: the weights' ggml type code (vulkan::support::SHADER_QTYPES);
        // sub 0 mul_mat, sub 1 get_rows
        ("matmul_q", [2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 29, 34, 35, 39, 40, 41].map(|op| (op, 2)).to_vec()),
    ]
}

fn main() {
    let dir = Path::new("shaders");
    let out = std::env::var("OUT_DIR").expect("OUT_DIR is set by cargo");
    let common = std::fs::read_to_string(dir.join("common.wgsl")).expect("shaders/common.wgsl");
    println!("cargo:rerun-if-changed=shaders/common.wgsl");
    let mut table = String::from(
        "/// The SPIR-V of a shader variant: (shader, op, sub, all_f32).\n\
         pub(crate) fn variant_spirv(shader: &str, op: u32, sub: u32, all_f32: bool) -> Option<&'static [u8]> {\n\
         \x20   match (shader, op, sub, all_f32) {\n",
    );
    for (name, ops) in variants() {
        let file = dir.join(format!("{name}.wgsl"));
        println!("cargo:rerun-if-changed={}", file.display());
        let body = std::fs::read_to_string(&file).expect("shader source");
        for (op, subs) in ops {
            for sub in 0..subs {
                // quantized weights are never f32
                let f32s: &[bool] = if name == "matmul_q" { &[false] } else { &[false, true] };
                for &f32 in f32s {
                    let prefix = format!(
                        "const OPC: u32 = {op}u;\nconst SUBC: u32 = {sub}u;\nconst ALL_F32: bool = {f32};\n"
                    );
                    let src = format!("{prefix}{common}\n{body}");
                    let vname = format!("{name}_{op}_{sub}_{}", f32 as u8);
                    let words = compile(&vname, &src).unwrap_or_else(|e| panic!("{e}"));
                    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
                    std::fs::write(Path::new(&out).join(format!("{vname}.spv")), bytes).expect("write SPIR-V");
                    writeln!(
                        table,
                        "        ({name:?}, {op}, {sub}, {f32}) => Some(include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{vname}.spv\"))),"
                    )
                    .unwrap();
                }
            }
        }
    }
    table.push_str("        _ => None,\n    }\n}\n");
    std::fs::write(Path::new(&out).join("variants.rs"), table).expect("write variants.rs");
}
