//! Builtin layers, one file per type.

use crate::ncnn::layer::Builtin;
use crate::ncnn::ParamDict;

pub mod activations;
pub mod batchnorm;
pub mod binaryop;
pub mod concat;
pub mod conv_common;
pub mod convolution;
pub mod convolution_depthwise;
pub mod depthwise_kernel;
pub mod dropout;
pub mod eltwise;
pub mod flatten;
pub mod gemm;
pub mod innerproduct;
pub mod input;
pub mod interp;
pub mod lrn;
pub mod padding;
pub mod pool_rows;
pub mod pooling;
pub mod prelu;
pub mod reshape;
pub mod scale;
pub mod shufflechannel;
pub use crate::base::simd;
pub mod slice;
pub mod softmax;
pub mod split;
pub mod winograd;

fn boxed<L: crate::ncnn::Layer + Send + Sync + 'static>(
    r: anyhow::Result<L>,
) -> anyhow::Result<Builtin> {
    r.map(|l| Box::new(l) as Builtin)
}

/// A builtin layer of type `name` configured by `pd`; None when the type is not implemented.
pub fn create(name: &str, pd: &ParamDict) -> Option<anyhow::Result<Builtin>> {
    use activations::{Act, ActKind};
    Some(match name {
        "Input" => boxed(input::Input::new(pd)),
        "Convolution" => boxed(convolution::Convolution::new(pd)),
        "ConvolutionDepthWise" => boxed(convolution_depthwise::ConvolutionDepthWise::new(pd)),
        "Pooling" => boxed(pooling::Pooling::new(pd)),
        "InnerProduct" => boxed(innerproduct::InnerProduct::new(pd)),
        "ReLU" => boxed(Act::new(ActKind::Relu, pd)),
        "Sigmoid" => boxed(Act::new(ActKind::Sigmoid, pd)),
        "TanH" => boxed(Act::new(ActKind::Tanh, pd)),
        "Swish" => boxed(Act::new(ActKind::Swish, pd)),
        "HardSigmoid" => boxed(Act::new(ActKind::HardSigmoid, pd)),
        "HardSwish" => boxed(Act::new(ActKind::HardSwish, pd)),
        "Clip" => boxed(Act::new(ActKind::Clip, pd)),
        "Softmax" => boxed(softmax::Softmax::new(pd)),
        "Split" => boxed(split::Split::new(pd)),
        "Concat" => boxed(concat::Concat::new(pd)),
        "Eltwise" => boxed(eltwise::Eltwise::new(pd)),
        "BinaryOp" => boxed(binaryop::BinaryOp::new(pd)),
        "Dropout" => boxed(dropout::Dropout::new(pd)),
        "BatchNorm" => boxed(batchnorm::BatchNorm::new(pd)),
        "Scale" => boxed(scale::Scale::new(pd)),
        "Flatten" => boxed(flatten::Flatten::new(pd)),
        "Reshape" => boxed(reshape::Reshape::new(pd)),
        "Padding" => boxed(padding::Padding::new(pd)),
        "ShuffleChannel" => boxed(shufflechannel::ShuffleChannel::new(pd)),
        "Slice" => boxed(slice::Slice::new(pd)),
        "PReLU" => boxed(prelu::PRelu::new(pd)),
        "Interp" => boxed(interp::Interp::new(pd)),
        "LRN" => boxed(lrn::Lrn::new(pd)),
        _ => return None,
    })
}
