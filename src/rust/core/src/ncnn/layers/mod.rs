//! Builtin layers, one file per type.

use crate::ncnn::layer::Builtin;
use crate::ncnn::ParamDict;

pub mod activations;
pub mod batchnorm;
pub mod cast;
pub mod bias;
pub mod binaryop;
pub mod concat;
pub mod conv1d;
pub mod conv3d;
pub mod convolution;
pub mod convolution_depthwise;
pub mod copyto;
pub mod crop;
pub mod deconv3d;
pub mod deconvolution;
pub mod deconvolution_depthwise;
pub mod detectionoutput;
pub mod dropout;
pub mod einsum;
pub mod eltwise;
pub mod embed;
pub mod expanddims;
pub mod flatten;
pub mod flip;
pub mod fold;
pub mod gemm;
pub mod gridsample;
pub mod groupnorm;
pub mod innerproduct;
pub mod input;
pub mod interp;
pub mod kernels;
pub mod layernorm;
pub mod lrn;
pub mod matmul;
pub mod memorydata;
pub mod multiheadattention;
pub mod noop;
pub mod normalize;
pub mod padding;
pub mod permute;
pub mod pixelshuffle;
pub mod pooling;
pub mod pooling3d;
pub mod prelu;
pub mod quantize;
pub mod priorbox;
pub mod reduction;
pub mod reorg;
pub mod reshape;
pub mod rnn;
pub mod scale;
pub mod shufflechannel;
pub mod slice;
pub mod softmax;
pub mod split;
pub mod squeeze;
pub mod tile;
pub mod unaryop;
pub mod yolodetectionoutput;
pub mod yolov3detectionoutput;

fn boxed<L: crate::ncnn::Layer + Send + Sync + 'static>(
    r: anyhow::Result<L>,
) -> anyhow::Result<Builtin> {
    r.map(|l| Box::new(l) as Builtin)
}

/// A builtin layer of type `name` configured by `pd`; None when the type is not implemented.
pub fn create(name: &str, pd: &ParamDict) -> Option<anyhow::Result<Builtin>> {
    use activations::{ActivationLayer, ActKind};
    Some(match name {
        "Input" => boxed(input::Input::new(pd)),
        "Convolution" => boxed(convolution::Convolution::new(pd)),
        "ConvolutionDepthWise" => boxed(convolution_depthwise::ConvolutionDepthWise::new(pd)),
        "Pooling" => boxed(pooling::Pooling::new(pd)),
        "InnerProduct" => boxed(innerproduct::InnerProduct::new(pd)),
        "ReLU" => boxed(ActivationLayer::new(ActKind::Relu, pd)),
        "Sigmoid" => boxed(ActivationLayer::new(ActKind::Sigmoid, pd)),
        "TanH" => boxed(ActivationLayer::new(ActKind::Tanh, pd)),
        "Swish" => boxed(ActivationLayer::new(ActKind::Swish, pd)),
        "HardSigmoid" => boxed(ActivationLayer::new(ActKind::HardSigmoid, pd)),
        "HardSwish" => boxed(ActivationLayer::new(ActKind::HardSwish, pd)),
        "Clip" => boxed(ActivationLayer::new(ActKind::Clip, pd)),
        "Softmax" => boxed(softmax::Softmax::new(pd)),
        "Split" => boxed(split::SplitLayer::new(pd)),
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
        "AbsVal" => boxed(ActivationLayer::new(ActKind::AbsVal, pd)),
        "BNLL" => boxed(ActivationLayer::new(ActKind::Bnll, pd)),
        "ELU" => boxed(ActivationLayer::new(ActKind::Elu, pd)),
        "SELU" => boxed(ActivationLayer::new(ActKind::Selu, pd)),
        "CELU" => boxed(ActivationLayer::new(ActKind::Celu, pd)),
        "Mish" => boxed(ActivationLayer::new(ActKind::Mish, pd)),
        "Softplus" => boxed(ActivationLayer::new(ActKind::Softplus, pd)),
        "GELU" => boxed(ActivationLayer::new(ActKind::Gelu, pd)),
        "Erf" => boxed(ActivationLayer::new(ActKind::Erf, pd)),
        "Exp" => boxed(ActivationLayer::new(ActKind::Exp, pd)),
        "Log" => boxed(ActivationLayer::new(ActKind::Log, pd)),
        "Power" => boxed(ActivationLayer::new(ActKind::Power, pd)),
        "Threshold" => boxed(ActivationLayer::new(ActKind::Threshold, pd)),
        "Shrink" => boxed(ActivationLayer::new(ActKind::Shrink, pd)),
        "UnaryOp" => boxed(unaryop::UnaryOpLayer::new(pd)),
        "Noop" => boxed(noop::Noop::new(pd)),
        "MemoryData" => boxed(memorydata::MemoryData::new(pd)),
        "Permute" => boxed(permute::Permute::new(pd)),
        "Crop" => boxed(crop::Crop::new(pd)),
        "CopyTo" => boxed(copyto::CopyTo::new(pd)),
        "LayerNorm" => boxed(layernorm::LayerNorm::new(pd)),
        "Reduction" => boxed(reduction::Reduction::new(pd)),
        "PixelShuffle" => boxed(pixelshuffle::PixelShuffle::new(pd)),
        "Reorg" => boxed(reorg::Reorg::new(pd)),
        "PriorBox" => boxed(priorbox::PriorBox::new(pd)),
        "DetectionOutput" => boxed(detectionoutput::DetectionOutput::new(pd)),
        "YoloDetectionOutput" => boxed(yolodetectionoutput::YoloDetectionOutput::new(pd)),
        "Yolov3DetectionOutput" => boxed(yolov3detectionoutput::Yolov3DetectionOutput::new(pd)),
        "Deconvolution" => boxed(deconvolution::Deconvolution::new(pd)),
        "DeconvolutionDepthWise" => boxed(deconvolution_depthwise::new(pd)),
        "MultiHeadAttention" => boxed(multiheadattention::MultiHeadAttention::new(pd)),
        "Bias" => boxed(bias::Bias::new(pd)),
        "Squeeze" => boxed(squeeze::Squeeze::new(pd)),
        "ExpandDims" => boxed(expanddims::ExpandDims::new(pd)),
        "Flip" => boxed(flip::Flip::new(pd)),
        "Tile" => boxed(tile::Tile::new(pd)),
        "GroupNorm" => boxed(groupnorm::GroupNorm::new(pd)),
        "InstanceNorm" => boxed(groupnorm::GroupNorm::instance(pd)),
        "Gemm" => boxed(gemm::GemmLayer::new(pd)),
        "MatMul" => boxed(matmul::MatMul::new(pd)),
        "Normalize" => boxed(normalize::Normalize::new(pd)),
        "Embed" => boxed(embed::Embed::new(pd)),
        "Convolution1D" => boxed(conv1d::OneD::new(pd, conv1d::Conv1dKind::Conv)),
        "ConvolutionDepthWise1D" => boxed(conv1d::OneD::new(pd, conv1d::Conv1dKind::ConvDepthWise)),
        "Deconvolution1D" => boxed(conv1d::OneD::new(pd, conv1d::Conv1dKind::Deconv)),
        "DeconvolutionDepthWise1D" => boxed(conv1d::OneD::new(pd, conv1d::Conv1dKind::DeconvDepthWise)),
        "Pooling1D" => boxed(conv1d::OneD::new(pd, conv1d::Conv1dKind::Pool)),
        "Convolution3D" => boxed(conv3d::Conv3d::new(pd, false)),
        "ConvolutionDepthWise3D" => boxed(conv3d::Conv3d::new(pd, true)),
        "Deconvolution3D" => boxed(deconv3d::Deconv3d::new(pd, false)),
        "DeconvolutionDepthWise3D" => boxed(deconv3d::Deconv3d::new(pd, true)),
        "Pooling3D" => boxed(pooling3d::Pooling3d::new(pd)),
        "RNN" => boxed(rnn::Recurrent::new(pd, rnn::Cell::Rnn)),
        "LSTM" => boxed(rnn::Recurrent::new(pd, rnn::Cell::Lstm)),
        "GRU" => boxed(rnn::Recurrent::new(pd, rnn::Cell::Gru)),
        "Cast" => boxed(cast::Cast::new(pd)),
        "Quantize" => boxed(quantize::Quant::new(pd, quantize::QuantizeKind::Quantize)),
        "Dequantize" => boxed(quantize::Quant::new(pd, quantize::QuantizeKind::Dequantize)),
        "Requantize" => boxed(quantize::Quant::new(pd, quantize::QuantizeKind::Requantize)),
        "Fold" => boxed(fold::FoldLayer::new(pd, true)),
        "Unfold" => boxed(fold::FoldLayer::new(pd, false)),
        "GridSample" => boxed(gridsample::GridSample::new(pd)),
        "Einsum" => boxed(einsum::Einsum::new(pd)),
        _ => return None,
    })
}
