//! Quantized products against dequantize-then-f64, within the error the
//! activations' 8-bit quantization allows, on every CPU path.

use super::dispatch::{dot_rows, path, without_avx512, ColumnActs, QuantRows};
use super::dot::partner;
use super::matmul::mul_mat;
use crate::backend::cpu::access::Src;
use crate::backend::cpu::par::CpuPool;
use crate::base::dtype::DType;
use crate::base::quant::{self, QType};
use crate::base::simd;
use crate::layout::Layout;
use crate::memory::{Buffer, BufferTag, HostMemory};
use crate::tensor::DataRef;
use std::borrow::Cow;
use std::sync::Arc;

pub(super) fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32
        })
        .collect()
}

/// Weights of `q` [k, m] as bytes and as dequantized values.
fn weights(q: QType, k: usize, m: usize) -> (Vec<u8>, Vec<f32>) {
    let x = noise(k * m, q.code() as u64);
    let bytes = quant::quantize_chunk(q, &x, m, k, Some(&vec![1.0; k])).unwrap();
    let mut deq = vec![0f32; k * m];
    for r in 0..m {
        let rs = q.row_size(k).unwrap();
        quant::dequantize_row(q, &bytes[r * rs..(r + 1) * rs], &mut deq[r * k..(r + 1) * k]).unwrap();
    }
    (bytes, deq)
}

/// The bound on |quantized product - exact product of the dequantized
/// weights|: half a step of each activation block's 8-bit scale, times the
/// weights' magnitudes, plus f32 rounding.
fn bound(q: QType, w: &[f32], b: &[f32]) -> f64 {
    let bs = match partner(q).qtype() {
        Some(pq) => pq.block_size(),
        None => return 1e-5 * w.iter().zip(b).map(|(x, y)| (x * y).abs() as f64).sum::<f64>() + 1e-6,
    };
    let mut e = 0f64;
    for (wb, bb) in w.chunks(bs).zip(b.chunks(bs)) {
        let amax = bb.iter().fold(0f32, |a, v| a.max(v.abs())) as f64;
        e += wb.iter().map(|v| v.abs() as f64).sum::<f64>() * (amax / 254.0 * 1.001);
    }
    e + 1e-5 * w.iter().zip(b).map(|(x, y)| (x * y).abs() as f64).sum::<f64>() + 1e-6
}

fn data_ref(q: QType, bytes: &[u8], k: usize, m: usize) -> DataRef {
    let buf = Arc::new(Buffer::allocate(&HostMemory, bytes.len(), BufferTag::User).unwrap());
    buf.write_bytes(0, bytes, "weights").unwrap();
    DataRef { buf, offset: 0, layout: Layout::contiguous(DType::Quant(q), [k, m, 1, 1]) }
}

#[test]
fn products_match_dequantized_f64_within_activation_rounding() {
    let (k, m) = (512, 37);
    for q in QType::ALL {
        let (bytes, deq) = weights(q, k, m);
        let a = data_ref(q, &bytes, k, m);
        for n in [1, 3, 40] {
            let b = noise(k * n, 99 + n as u64);
            let src = Src::new(Cow::Borrowed(&b), [k, n, 1, 1]);
            let mut out = vec![0f32; m * n];
            for (threads, portable) in [(1, false), (2, false), (2, true)] {
                let pool = CpuPool::new(threads).unwrap();
                let mut run = || mul_mat(q, &a, &bytes, &src, &mut out, &pool).unwrap();
                if portable { simd::portable(&mut run) } else { run() }
                for j in 0..n {
                    for i in 0..m {
                        let (w, x) = (&deq[i * k..(i + 1) * k], &b[j * k..(j + 1) * k]);
                        let exact: f64 = w.iter().zip(x).map(|(p, r)| *p as f64 * *r as f64).sum();
                        let got = out[j * m + i] as f64;
                        // With 40 columns the weights are dequantized: only f32 rounding remains.
                        let tol = if n >= 32 { 1e-4 * w.iter().zip(x).map(|(p, r)| (p * r).abs() as f64).sum::<f64>() + 1e-6 } else { bound(q, w, x) };
                        assert!((got - exact).abs() <= tol, "{} n={n} [{i},{j}]: {got} vs {exact} (tolerance {tol})", q.name());
                    }
                }
            }
        }
    }
}

#[test]
fn cpu_paths_agree() {
    let wide = path();
    // 1056 values: an odd number of 32-value blocks (the two-block kernels' tail)
    for (q, k) in QType::ALL.into_iter().flat_map(|q| [(q, 1024), (q, 1056)]).filter(|(q, k)| k % q.block_size() == 0) {
        let (bytes, _) = weights(q, k, 4);
        let b = noise(k, 5);
        let acts = match partner(q).qtype() {
            Some(pq) => quant::quantize_chunk(pq, &b, 1, k, None).unwrap(),
            None => Vec::new(),
        };
        let act = if acts.is_empty() { ColumnActs::F(&b) } else { ColumnActs::Q(&acts) };
        let rows = QuantRows { q, data: &bytes, stride: q.row_size(k).unwrap(), k };
        let (mut fast, mut mid, mut port) = (vec![0f32; 4], vec![0f32; 4], vec![0f32; 4]);
        dot_rows(rows, act, &mut fast, &mut Vec::new());
        without_avx512(|| dot_rows(rows, act, &mut mid, &mut Vec::new()));
        simd::portable(|| {
            assert_eq!(path(), "portable");
            dot_rows(rows, act, &mut port, &mut Vec::new())
        });
        for ((f, m), p) in fast.iter().zip(&mid).zip(&port) {
            // The SIMD kernels sum blocks in lanes: equal up to f32 rounding.
            let tol = 2e-6 * (1.0 + p.abs()) * (k as f32).sqrt();
            assert!((f - p).abs() <= tol && (m - p).abs() <= tol, "{} on {wide}: {f}, {m} (AVX2) vs {p}", q.name());
        }
    }
}

#[test]
fn strided_weights_are_refused_not_misread() {
    let (bytes, _) = weights(QType::Q4_0, 64, 2);
    let mut a = data_ref(QType::Q4_0, &bytes, 64, 2);
    a.layout.nb = [36, 18, 72, 72, 72];
    a.layout.ne = [64, 2, 1, 1, 1];
    let b = vec![1f32; 128];
    let src = Src::new(Cow::Borrowed(&b), [64, 2, 1, 1]);
    let e = mul_mat(QType::Q4_0, &a, &bytes, &src, &mut [0f32; 4], &CpuPool::new(1).unwrap()).unwrap_err();
    assert!(e.to_string().contains("blocks together"), "{e}");
}

/// Development timing (cargo test --release -- --ignored bench_matvec --nocapture).
#[test]
#[ignore]
fn bench_matvec() {
    let (k, m) = (4096, 4096);
    let threads: usize = std::env::var("BENCH_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let pool = CpuPool::new(threads).unwrap();
    let b = noise(k, 1);
    let src = Src::new(Cow::Borrowed(&b), [k, 1, 1, 1]);
    for q in [QType::Q4_0, QType::Q8_0, QType::Q4_K, QType::Q6_K] {
        let x = noise(k * m, 2);
        let bytes = quant::quantize_chunk(q, &x, m, k, None).unwrap();
        let a = data_ref(q, &bytes, k, m);
        let mut out = vec![0f32; m];
        let mut copy = vec![0u8; bytes.len()];
        let min_time = |f: &mut dyn FnMut()| {
            (0..50)
                .map(|_| {
                    let t = std::time::Instant::now();
                    f();
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::MAX, f64::min)
        };
        let dt = min_time(&mut || mul_mat(q, &a, &bytes, &src, &mut out, &pool).unwrap());
        let d2 = min_time(&mut || without_avx512(|| mul_mat(q, &a, &bytes, &src, &mut out, &pool).unwrap()));
        let dc = min_time(&mut || {
            copy.copy_from_slice(&bytes);
            std::hint::black_box(&copy);
        });
        let gbs = |t: f64| bytes.len() as f64 / t / 1e9;
        println!("{} ({}): {:.3} ms, {:.1} GB/s; avx2 {:.1} GB/s; memcpy {:.1} GB/s", q.name(), path(), dt * 1e3, gbs(dt), gbs(d2), gbs(dc));
    }
}

#[test]
#[ignore]
fn bench_dot_rows() {
    let k = 4096;
    for q in [QType::Q4_0, QType::Q8_0, QType::Q4_K, QType::Q6_K] {
        let (bytes, _) = weights(q, k, 256);
        let b = noise(k, 5);
        let acts = quant::quantize_chunk(partner(q).qtype().unwrap(), &b, 1, k, None).unwrap();
        let rows = QuantRows { q, data: &bytes, stride: q.row_size(k).unwrap(), k };
        let mut out = vec![0f32; 256];
        let min_time = |f: &mut dyn FnMut()| {
            (0..30)
                .map(|_| {
                    let t = std::time::Instant::now();
                    f();
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::MAX, f64::min)
        };
        let dt = min_time(&mut || dot_rows(rows, ColumnActs::Q(&acts), &mut out, &mut Vec::new()));
        let d2 = min_time(&mut || without_avx512(|| dot_rows(rows, ColumnActs::Q(&acts), &mut out, &mut Vec::new())));
        let dp = min_time(&mut || simd::portable(|| dot_rows(rows, ColumnActs::Q(&acts), &mut out, &mut Vec::new())));
        let ns = |t: f64| t * 1e9 / (k * 256) as f64;
        println!("{}: {:.3} ns/value {}, {:.3} avx2, {:.3} portable", q.name(), ns(dt), path(), ns(d2), ns(dp));
    }
}

/// Q8_0 weights as a file may hold them, with quants of -128 (which ggml's
/// quantizer never writes) and extreme scales: the AVX-512 rows (four at a
/// time, then one) agree with the portable kernel.
#[test]
fn q8_0_rows_with_every_byte_agree_with_portable() {
    let k = 1056; // 33 blocks: an odd last block
    let nb = k / 32;
    let m = 7;
    let mut bytes = vec![0u8; 34 * nb * m];
    for (i, blk) in bytes.chunks_exact_mut(34).enumerate() {
        let d: u16 = [0x3c00, 0x0001, 0x7bff, 0xbc00][i % 4]; // 1, a subnormal, the largest, -1
        blk[..2].copy_from_slice(&d.to_le_bytes());
        for (t, b) in blk[2..].iter_mut().enumerate() {
            *b = if (i + t) % 3 == 0 { 0x80 } else { ((i * 31 + t * 7) % 256) as u8 };
        }
    }
    let acts = quant::quantize_chunk(QType::Q8_0, &noise(k, 8), 1, k, None).unwrap();
    let rows = QuantRows { q: QType::Q8_0, data: &bytes, stride: 34 * nb, k };
    let (mut fast, mut port) = (vec![0f32; m], vec![0f32; m]);
    dot_rows(rows, ColumnActs::Q(&acts), &mut fast, &mut Vec::new());
    simd::portable(|| dot_rows(rows, ColumnActs::Q(&acts), &mut port, &mut Vec::new()));
    let h = |b: &[u8]| quant::f16_bits_to_f32(u16::from_le_bytes([b[0], b[1]])) as f64;
    for (r, (f, p)) in fast.iter().zip(&port).enumerate() {
        // the sum of the blocks' magnitudes bounds the rounding of any order of summing
        let size: f64 = (0..nb)
            .map(|b| {
                let (x, y) = (&bytes[34 * (r * nb + b)..][..34], &acts[34 * b..][..34]);
                let i: f64 = x[2..].iter().zip(&y[2..]).map(|(&u, &v)| (u as i8 as f64 * v as i8 as f64).abs()).sum();
                (h(x) * h(y)).abs() * i
            })
            .sum();
        let tol = (1e-6 * size) as f32;
        assert!((f - p).abs() <= tol, "Q8_0 row {r} on {}: {f} vs {p} (portable; tolerance {tol})", path());
    }
}
