//! The compute shaders (SPIR-V compiled from `shaders/*.wgsl` by build.rs,
//! in variants per operation) and their pipelines, created on first use and
//! cached per variant.
//!
//! Every shader has the same interface: binding 0 is the parameter block,
//! bindings 1 and 2 the first two sources, binding 3 the result, bindings 4
//! and 5 the third and fourth sources, all storage buffers.

use ash::vk;
use std::collections::HashMap;
use std::sync::Mutex;

/// The compiled shaders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shader {
    /// One invocation per result element: copies, conversions, unary and
    /// binary element-wise ops, repeat, concat, get_rows, pad, upscale,
    /// diag_mask_inf, im2col, pool_2d.
    Eltwise,
    /// Tiled matrix product (mul_mat, out_prod).
    Matmul,
    /// mul_mat and get_rows of quantized weights, dequantized in the shader
    /// (one variant per type).
    MatmulQ,
    /// One workgroup per row: sums, means, softmax, norms, argmax.
    Reduce,
    /// The extended ops (`op::extended`): maps, broadcasting binaries,
    /// gathers, padding, scatters (per element), row reductions and scans
    /// (per row).
    Extended,
    /// Rotary position embedding, one invocation per rotated pair.
    Rope,
    /// flash_attn_ext and flash_attn_back, one invocation per result element.
    Attn,
    /// roll, reflection padding, windows, relative positions, diagonals,
    /// arange, timestep embeddings, interpolated upscales, the gradients of
    /// get_rows and repeat.
    Index,
    /// Transposed, depthwise and direct convolutions, pool_1d, mul_mat_id.
    ConvDirect,
    /// l2 and group norms, the rms_norm and softmax gradients, argsort,
    /// top_k, count_equal.
    Rows,
}

include!(concat!(env!("OUT_DIR"), "/variants.rs"));

/// One compiled variant of a shader: the operation and sub-operation codes
/// are constants in it, and `all_f32` fixes every tensor's type to f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Variant {
    pub shader: Shader,
    pub op: u32,
    pub sub: u32,
    pub all_f32: bool,
}

impl Shader {
    fn file(self) -> &'static str {
        match self {
            Shader::Eltwise => "eltwise",
            Shader::Matmul => "matmul",
            Shader::MatmulQ => "matmul_q",
            Shader::Reduce => "reduce",
            Shader::Extended => "extended",
            Shader::Rope => "rope",
            Shader::Attn => "attn",
            Shader::Index => "index",
            Shader::ConvDirect => "conv_direct",
            Shader::Rows => "rows",
        }
    }

    /// Invocations per workgroup (the shaders' workgroup_size, 16 x 16 for matmul).
    pub fn local_size(self) -> u32 {
        256
    }
}

/// Number of storage-buffer bindings of every shader: the parameters, four
/// sources and the result.
pub const BINDINGS: u32 = 6;

#[derive(Default)]
struct Cache {
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    pipelines: HashMap<Variant, vk::Pipeline>,
}

pub(crate) struct Pipelines {
    cache: Mutex<Cache>,
    /// Pipelines are made with DISPATCH_BASE (Vulkan 1.1), so a dispatch
    /// can run in pieces (`vkCmdDispatchBase`).
    dispatch_base: bool,
}

impl Pipelines {
    pub fn new(dispatch_base: bool) -> Pipelines {
        Pipelines { cache: Mutex::new(Cache::default()), dispatch_base }
    }

    /// Whether dispatches may run in pieces from a base workgroup.
    pub fn dispatch_base(&self) -> bool {
        self.dispatch_base
    }

    /// The descriptor set layout and pipeline layout shared by all shaders.
    pub fn layouts(&self, dev: &ash::Device) -> Result<(vk::DescriptorSetLayout, vk::PipelineLayout), vk::Result> {
        let mut c = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        Self::ensure_layouts(&mut c, dev)?;
        Ok((c.set_layout, c.layout))
    }

    fn ensure_layouts(c: &mut Cache, dev: &ash::Device) -> Result<(), vk::Result> {
        if c.layout != vk::PipelineLayout::null() {
            return Ok(());
        }
        let binds: Vec<_> = (0..BINDINGS)
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&binds);
        // SAFETY: valid device; destroyed in `destroy`.
        let set_layout = unsafe { dev.create_descriptor_set_layout(&info, None) }?;
        let sets = [set_layout];
        let pinfo = vk::PipelineLayoutCreateInfo::default().set_layouts(&sets);
        // SAFETY: a valid device; `sets` outlives the call; the layout is destroyed in `destroy`.
        let layout = match unsafe { dev.create_pipeline_layout(&pinfo, None) } {
            Ok(l) => l,
            Err(e) => {
                // SAFETY: the set layout was created just above and no pipeline uses it yet.
                unsafe { dev.destroy_descriptor_set_layout(set_layout, None) };
                return Err(e);
            }
        };
        c.set_layout = set_layout;
        c.layout = layout;
        Ok(())
    }

    /// The pipeline of variant `v`, created the first time it is asked for.
    pub fn get(&self, dev: &ash::Device, v: Variant) -> Result<vk::Pipeline, vk::Result> {
        let mut c = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        Self::ensure_layouts(&mut c, dev)?;
        if let Some(&p) = c.pipelines.get(&v) {
            return Ok(p);
        }
        let code = variant_spirv(v.shader.file(), v.op, v.sub, v.all_f32)
            .ok_or(vk::Result::ERROR_INVALID_SHADER_NV)?;
        let words = ash::util::read_spv(&mut std::io::Cursor::new(code))
            .map_err(|_| vk::Result::ERROR_INVALID_SHADER_NV)?;
        let minfo = vk::ShaderModuleCreateInfo::default().code(&words);
        // SAFETY: the SPIR-V was produced and validated by naga at build time.
        let module = unsafe { dev.create_shader_module(&minfo, None) }?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let flags = if self.dispatch_base { vk::PipelineCreateFlags::DISPATCH_BASE } else { vk::PipelineCreateFlags::empty() };
        let info = [vk::ComputePipelineCreateInfo::default().flags(flags).stage(stage).layout(c.layout)];
        // SAFETY: a valid device; the shader module and layout are alive for the call.
        let made = unsafe { dev.create_compute_pipelines(vk::PipelineCache::null(), &info, None) };
        unsafe { dev.destroy_shader_module(module, None) };
        let p = made.map_err(|(_, e)| e)?[0];
        c.pipelines.insert(v, p);
        Ok(p)
    }

    /// Number of pipelines created so far.
    pub fn count(&self) -> usize {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).pipelines.len()
    }

    /// Destroy everything (the device must be idle).
    // SAFETY: (for callers) the device must be idle and the pipelines unused afterwards.
    pub unsafe fn destroy(&self, dev: &ash::Device) {
        let mut c = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        for (_, p) in c.pipelines.drain() {
            dev.destroy_pipeline(p, None);
        }
        if c.layout != vk::PipelineLayout::null() {
            dev.destroy_pipeline_layout(c.layout, None);
            dev.destroy_descriptor_set_layout(c.set_layout, None);
        }
        c.layout = vk::PipelineLayout::null();
    }
}
