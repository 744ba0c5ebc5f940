//! Compiles the WGSL compute shaders in `shaders/` to SPIR-V with naga, so
//! building the package needs no shader compiler on the system. Each shader
//! is `common.wgsl` followed by its own file; the SPIR-V words land in
//! `$OUT_DIR/<name>.spv` and are embedded by `src/vulkan/shaders.rs`.

use std::path::Path;

const SHADERS: [&str; 3] = ["eltwise", "matmul", "reduce"];

fn compile(name: &str, src: &str) -> Result<Vec<u32>, String> {
    let module = naga::front::wgsl::parse_str(src)
        .map_err(|e| format!("{name}.wgsl: {}", e.emit_to_string(src)))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32,
    )
    .validate(&module)
    .map_err(|e| format!("{name}.wgsl: validation failed: {}", e.emit_to_string(src)))?;
    let options = naga::back::spv::Options {
        lang_version: (1, 0),
        bounds_check_policies: naga::proc::BoundsCheckPolicies::default(),
        ..Default::default()
    };
    let pipeline = naga::back::spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: "main".to_string(),
    };
    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline))
        .map_err(|e| format!("{name}.wgsl: SPIR-V output failed: {e}"))
}

fn main() {
    let dir = Path::new("shaders");
    let out = std::env::var("OUT_DIR").expect("OUT_DIR is set by cargo");
    let common = std::fs::read_to_string(dir.join("common.wgsl")).expect("shaders/common.wgsl");
    println!("cargo:rerun-if-changed=shaders/common.wgsl");
    for name in SHADERS {
        let file = dir.join(format!("{name}.wgsl"));
        println!("cargo:rerun-if-changed={}", file.display());
        let body = std::fs::read_to_string(&file).expect("shader source");
        let src = format!("{common}\n{body}");
        let words = compile(name, &src).unwrap_or_else(|e| panic!("{e}"));
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        std::fs::write(Path::new(&out).join(format!("{name}.spv")), bytes).expect("write SPIR-V");
    }
}
