//! Quantized weights on Vulkan: mul_mat and get_rows of every type the
//! shaders dequantize, against the engine's dequantizer (then an f64
//! product), on several shapes, strides and byte offsets; and the ops other
//! than mul_mat and get_rows refused on quantized tensors by name.

use super::support::SHADER_QTYPES;
use super::test_util::{ctx, download, output, upload, values, DevT};
use super::VkContext;
use super::VkNode;
use crate::base::dtype::DType;
use crate::base::quant::{self, QType};
use crate::layout::Layout;
use crate::op::Op;
use std::sync::Arc;

/// `rows` rows of `k` quantized values (`pad` bytes into the buffer): the
/// device tensor and the dequantized values.
fn weights(c: &Arc<VkContext>, q: QType, k: usize, rows: usize, pad: usize, seed: u64) -> (DevT, Vec<f32>) {
    let x = values(k * rows, seed, -1.0, 1.0);
    let bytes = quant::quantize_chunk(q, &x, rows, k, Some(&vec![1.0; k])).unwrap();
    let rs = q.row_size(k).unwrap();
    let mut deq = vec![0f32; k * rows];
    for r in 0..rows {
        quant::dequantize_row(q, &bytes[r * rs..(r + 1) * rs], &mut deq[r * k..(r + 1) * k]).unwrap();
    }
    let mut all = vec![0u8; pad + bytes.len() + 8];
    all[pad..pad + bytes.len()].copy_from_slice(&bytes);
    let buf = c.alloc(all.len()).unwrap();
    c.write(&buf, 0, &all).unwrap();
    (DevT { buf, offset: pad, layout: Layout::contiguous(DType::Quant(q), [k, rows, 1, 1]) }, deq)
}

fn run(c: &Arc<VkContext>, op: &Op, srcs: &[&DevT], dst: &DevT) -> crate::Result<Vec<f32>> {
    let node = VkNode { op, srcs: srcs.iter().map(|s| s.r()).collect(), dst: dst.r() };
    c.run_graph(&[node])?;
    Ok(download(c, dst))
}

#[test]
fn quantized_mul_mat_matches_dequantized_product() {
    let Some(c) = ctx() else { return };
    for (t, &q) in SHADER_QTYPES.iter().enumerate() {
        let bs = q.block_size();
        // (K, M, N, B in f16, B transposed, byte offset of the weights)
        let shapes = [(bs, 3, 1, false, false, 0), (512, 37, 1, false, false, 2), (512, 37, 3, true, false, 0), (2 * bs.max(128), 9, 10, false, true, 6)];
        for (s, &(k, m, n, b16, bt, pad)) in shapes.iter().enumerate() {
            let seed = 100 * t as u64 + s as u64;
            let (w, deq) = weights(&c, q, k, m, pad, seed);
            let bv = values(k * n, seed + 7, -1.0, 1.0);
            let bdt = if b16 { DType::F16 } else { DType::F32 };
            let b = upload(&c, &bv, [k, n, 1, 1], bdt, bt, 1);
            let bq: Vec<f32> = bv.iter().map(|&v| super::test_util::quant(v, bdt)).collect();
            let d = output(&c, [m, n, 1, 1], DType::F32);
            let got = run(&c, &Op::MulMat, &[&w, &b], &d).unwrap_or_else(|e| panic!("{}: {e:#}", q.name()));
            for j in 0..n {
                for i in 0..m {
                    let (wr, br) = (&deq[i * k..(i + 1) * k], &bq[j * k..(j + 1) * k]);
                    let want: f64 = wr.iter().zip(br).map(|(&x, &y)| x as f64 * y as f64).sum();
                    let mag: f64 = wr.iter().zip(br).map(|(&x, &y)| (x as f64 * y as f64).abs()).sum();
                    let g = got[i + m * j] as f64;
                    assert!(
                        (g - want).abs() <= 1e-5 * mag + 1e-6,
                        "{} K={k} M={m} N={n}: [{i}, {j}] got {g}, want {want}",
                        q.name()
                    );
                }
            }
        }
    }
}

#[test]
fn quantized_mul_mat_broadcasts_batches() {
    let Some(c) = ctx() else { return };
    let q = QType::Q4_K;
    let (k, m, n) = (256, 5, 2);
    // weights [k, m, 1, 3] broadcast over b's and the result's dim 2 of 2
    let (w1, deq) = weights(&c, q, k, m * 3, 0, 5);
    let w = DevT { buf: w1.buf, offset: 0, layout: Layout::contiguous(DType::Quant(q), [k, m, 1, 3]) };
    let bv = values(k * n * 6, 9, -1.0, 1.0);
    let b = upload(&c, &bv, [k, n, 2, 3], DType::F32, false, 0);
    let d = output(&c, [m, n, 2, 3], DType::F32);
    let got = run(&c, &Op::MulMat, &[&w, &b], &d).unwrap();
    for i3 in 0..3 {
        for i2 in 0..2 {
            for j in 0..n {
                for i in 0..m {
                    let wr = &deq[(i3 * m + i) * k..][..k];
                    let br = &bv[((i3 * 2 + i2) * n + j) * k..][..k];
                    let want: f64 = wr.iter().zip(br).map(|(&x, &y)| x as f64 * y as f64).sum();
                    let g = got[i + m * (j + n * (i2 + 2 * i3))] as f64;
                    assert!((g - want).abs() <= 1e-4, "[{i}, {j}, {i2}, {i3}] got {g}, want {want}");
                }
            }
        }
    }
}

#[test]
fn quantized_get_rows_dequantizes_the_rows_picked() {
    let Some(c) = ctx() else { return };
    for (t, &q) in SHADER_QTYPES.iter().enumerate() {
        let k = q.block_size().max(128) * 2;
        let (w, deq) = weights(&c, q, k, 6, 4, 300 + t as u64);
        let picks = [4.0, 0.0, 5.0, 4.0];
        let idx = upload(&c, &picks, [4, 1, 1, 1], DType::I32, false, 0);
        let d = output(&c, [k, 4, 1, 1], DType::F32);
        let got = run(&c, &Op::GetRows, &[&w, &idx], &d).unwrap();
        for (p, &r) in picks.iter().enumerate() {
            let want = &deq[r as usize * k..][..k];
            for (i, (&g, &x)) in got[p * k..][..k].iter().zip(want).enumerate() {
                assert!((g - x).abs() <= 1e-6 * x.abs(), "{}: row {r}, value {i}: got {g}, want {x}", q.name());
            }
        }
    }
}

#[test]
fn every_quantized_type_runs_and_other_ops_are_refused_by_name() {
    use super::support::quant_refusal;
    use crate::backend::Backend;
    use crate::graph::Graph;
    use crate::memory::BufferTag;
    use crate::tensor::{Context, TENSOR_OVERHEAD};
    let vk = match VkContext::get(0) {
        Ok(c) => Backend::on_vulkan_context(0, c),
        Err(e) => return eprintln!("skipping Vulkan test: {e:#}"),
    };
    for q in QType::ALL {
        assert!(SHADER_QTYPES.contains(&q), "{}", q.name());
        let ctx = Context::new(8 * TENSOR_OVERHEAD, true).unwrap();
        let a = ctx.new_tensor(DType::Quant(q), &[256, 4]).unwrap();
        let b = ctx.new_tensor(DType::F32, &[256, 2]).unwrap();
        let y = ctx.op(Op::MulMat, &[a.clone(), b]).unwrap();
        let _buf = ctx.alloc_tensors(&vk, BufferTag::User).unwrap();
        let l = [*a.layout(), Layout::contiguous(DType::F32, [256, 2, 1, 1])];
        assert!(vk.supports_node(&Op::MulMat, &l, y.layout()), "{}", q.name());
        Graph::build(&y).unwrap().compute(&vk).unwrap_or_else(|e| panic!("{}: {e:#}", q.name()));
        // ops other than mul_mat and get_rows refuse quantized tensors, by name
        assert!(!vk.supports_node(&Op::Cont, &l[..1], &l[0]));
        assert!(!vk.supports_node(&Op::Cpy, &l[1..], &l[0]));
        assert!(!vk.supports_node(&Op::OutProd, &l, y.layout()));
        let why = quant_refusal(&Op::Cont, &[l[0].dtype], DType::F32).unwrap_or_default();
        assert!(why.contains(q.name()) && why.contains("only as the weights"), "{why}");
        // as the second operand of a product they are refused too
        assert!(quant_refusal(&Op::MulMat, &[DType::F32, l[0].dtype], DType::F32).is_some());
    }
}
