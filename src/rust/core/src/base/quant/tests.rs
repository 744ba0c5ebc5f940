//! Round trips, layouts checked by hand, ggml's NaN rules, and the error
//! bounds of the types the `gguf` package cannot quantize.

use super::*;

fn data(n: usize, seed: u64) -> Vec<f32> {
    // ggml's test data: 0.1 + 2 cos(i + offset), with some pseudo-random noise.
    let mut s = seed;
    (0..n)
        .map(|i| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            0.1 + 2.0 * ((i as f32) + seed as f32).cos() + ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2
        })
        .collect()
}

/// ggml's test metric: sqrt(sum of squared differences) / n.
fn rmse(a: &[f32], b: &[f32]) -> f32 {
    let s: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
    (s.sqrt() / a.len() as f64) as f32
}

fn round_trip(q: QType, x: &[f32], imatrix: Option<&[f32]>) -> Vec<f32> {
    let bytes = quantize_chunk(q, x, 1, x.len(), imatrix).unwrap();
    assert_eq!(bytes.len(), q.row_size(x.len()).unwrap());
    let mut y = vec![0f32; x.len()];
    dequantize_row(q, &bytes, &mut y).unwrap();
    y
}

/// ggml's own bounds (test-quantize-fns) for every type, without and with
/// an importance matrix.
#[test]
fn every_type_round_trips_within_ggml_bounds() {
    use QType::*;
    let x = data(4096, 0);
    let ones = vec![1f32; 4096];
    let bound = |q: QType| match q {
        Q2_K | IQ2_S | IQ2_XXS | IQ2_XS => 0.0075,
        Q3_K | IQ3_S => 0.0040,
        IQ3_XXS => 0.0050,
        TQ1_0 | TQ2_0 => 0.01,
        IQ1_S | IQ1_M => 0.0135,
        Q1_0 => 0.025,
        MXFP4 | NVFP4 => 0.0030,
        _ => 0.002,
    };
    for q in QType::ALL {
        let err_w = rmse(&x, &round_trip(q, &x, Some(&ones)));
        assert!(err_w < bound(q), "{} with imatrix: rmse {err_w}", q.name());
        if !q.requires_imatrix() {
            let err = rmse(&x, &round_trip(q, &x, None));
            assert!(err < bound(q), "{}: rmse {err}", q.name());
        }
    }
}

#[test]
fn sizes_are_ggmls() {
    // Sizes are also the oracle's (GGML_QUANT_SIZES), except Q8_1 whose
    // block holds two f16 (36 bytes).
    let want = [(QType::Q4_0, 32, 18), (QType::Q8_1, 32, 36), (QType::Q4_K, 256, 144), (QType::Q1_0, 128, 18), (QType::NVFP4, 64, 36)];
    for (q, bs, ts) in want {
        assert_eq!(q.block(), (bs, ts), "{}", q.name());
    }
    assert!(QType::Q4_0.row_size(33).is_err());
    assert_eq!(QType::from_code(12), Some(QType::Q4_K));
    assert_eq!(QType::from_code(4), None);
    for q in QType::ALL {
        assert_eq!(QType::from_code(q.code() as i64), Some(q));
    }
}

#[test]
fn q8_0_layout_by_hand() {
    let mut x = vec![0f32; 32];
    x[0] = 1.27;
    x[1] = -0.635;
    x[2] = 0.005; // 0.5 after scaling: rounds away from zero
    let mut y = vec![0u8; 34];
    quantize_row_ref(QType::Q8_0, &x, &mut y).unwrap();
    assert_eq!(u16::from_le_bytes([y[0], y[1]]), f32_to_f16_bits(0.01));
    assert_eq!(y[2] as i8, 127);
    assert_eq!(y[3] as i8, -64);
    assert_eq!(y[4] as i8, 1);
}

#[test]
fn q4_0_nibble_order_by_hand() {
    // Value j in the low nibble of byte j, value j + 16 in its high nibble.
    let mut x = vec![0f32; 32];
    x[0] = -8.0; // the extreme: d = 1, q = 0
    x[16] = 7.0; // q = 15
    x[1] = 1.0; // q = 9 (value = (q - 8) * d)
    let mut y = vec![0u8; 18];
    quantize_row_ref(QType::Q4_0, &x, &mut y).unwrap();
    assert_eq!(f16_bits_to_f32(u16::from_le_bytes([y[0], y[1]])), 1.0);
    assert_eq!(y[2], 0x00 | (15 << 4));
    assert_eq!(y[3], 9 | (8 << 4)); // 1.0 is q = 9, value 17 (zero) is q = 8
}

#[test]
fn q1_0_stores_signs_and_mean_magnitude() {
    let x: Vec<f32> = (0..128).map(|i| if i % 3 == 0 { -0.5 } else { 0.25 }).collect();
    let mut y = vec![0u8; 18];
    quantize_row_ref(QType::Q1_0, &x, &mut y).unwrap();
    assert_eq!(y[2], 0b1011_0110);
    let mut back = vec![0f32; 128];
    dequantize_row(QType::Q1_0, &y, &mut back).unwrap();
    let mean = x.iter().map(|v| v.abs()).sum::<f32>() / 128.0;
    for (a, b) in x.iter().zip(&back) {
        assert_eq!(a.signum(), b.signum());
        assert!((b.abs() - mean).abs() < 1e-3);
    }
}

#[test]
fn q8_k_sums_are_block_sums() {
    let x = data(256, 3);
    let mut y = vec![0u8; 292];
    quantize_row_ref(QType::Q8_K, &x, &mut y).unwrap();
    for j in 0..16 {
        let s: i32 = y[4 + 16 * j..20 + 16 * j].iter().map(|&v| v as i8 as i32).sum();
        assert_eq!(i16::from_le_bytes([y[260 + 2 * j], y[261 + 2 * j]]) as i32, s);
    }
}

#[test]
fn nan_follows_ggml_max() {
    // ggml's amax = MAX(amax, |v|) keeps the NaN only when it is last; a NaN
    // earlier in the block is dropped by the next comparison.
    let mut x = vec![0.5f32; 32];
    x[0] = f32::NAN;
    let mut y = vec![0u8; 34];
    quantize_row_ref(QType::Q8_0, &x, &mut y).unwrap();
    assert_eq!(f16_bits_to_f32(u16::from_le_bytes([y[0], y[1]])), via(0.5 / 127.0));
    assert_eq!(y[2], 0, "NaN * id converts to 0");
    x[0] = 0.5;
    x[31] = f32::NAN;
    quantize_row_ref(QType::Q8_0, &x, &mut y).unwrap();
    assert!(f16_bits_to_f32(u16::from_le_bytes([y[0], y[1]])).is_nan());
    // Q4_0 picks the max with `amax < |v|`, which a NaN never passes.
    let mut y4 = vec![0u8; 18];
    quantize_row_ref(QType::Q4_0, &x, &mut y4).unwrap();
    assert_eq!(f16_bits_to_f32(u16::from_le_bytes([y4[0], y4[1]])), via(0.5 / -8.0));
}

fn via(v: f32) -> f32 {
    f16_bits_to_f32(f32_to_f16_bits(v))
}

#[test]
fn degenerate_blocks_stay_finite() {
    // All zeros, one magnitude, and one sign, for every type.
    let ones = vec![1f32; 256];
    for q in QType::ALL {
        for x in [vec![0f32; 256], vec![0.25f32; 256], vec![-0.5f32; 256]] {
            let y = round_trip(q, &x, Some(&ones));
            assert!(y.iter().all(|v| v.is_finite()), "{}", q.name());
            if x[0] == 0.0 {
                assert!(y.iter().all(|&v| v == 0.0), "{} zeros", q.name());
            }
        }
    }
}

#[test]
fn imatrix_is_required_and_checked() {
    let x = data(256, 1);
    let e = quantize_chunk(QType::IQ2_XXS, &x, 1, 256, None).unwrap_err().to_string();
    assert!(e.contains("importance matrix"), "{e}");
    let e = quantize_chunk(QType::Q4_K, &x, 1, 256, Some(&[1.0; 3])).unwrap_err().to_string();
    assert!(e.contains("one per column"), "{e}");
    let e = quantize_chunk(QType::Q4_K, &x, 2, 256, None).unwrap_err().to_string();
    assert!(e.contains("n_rows * n_per_row"), "{e}");
    let e = dequantize_row(QType::Q4_K, &[0u8; 10], &mut [0f32; 256]).unwrap_err().to_string();
    assert!(e.contains("need 144 bytes"), "{e}");
}

#[test]
fn an_importance_matrix_lowers_the_weighted_error() {
    // Weights that favour the first half must lower the error there.
    let x = data(1024, 7);
    let w: Vec<f32> = (0..1024).map(|i| if i % 32 < 16 { 10.0 } else { 0.1 }).collect();
    for q in [QType::Q4_0, QType::Q4_K, QType::Q3_K, QType::IQ4_XS] {
        let plain = round_trip(q, &x, None);
        let weighted = round_trip(q, &x, Some(&w));
        let err = |y: &[f32]| -> f64 { (0..1024).map(|i| w[i] as f64 * ((x[i] - y[i]) as f64).powi(2)).sum() };
        assert!(err(&weighted) < err(&plain), "{}: {} vs {}", q.name(), err(&weighted), err(&plain));
    }
}

#[test]
fn tables_build_free_and_rebuild() {
    init(QType::IQ3_XXS);
    assert!(tables::is_built(QType::IQ3_XXS));
    free_for(QType::IQ3_XXS);
    assert!(!tables::is_built(QType::IQ3_XXS));
    let x = data(256, 9);
    let _ = round_trip(QType::IQ3_XXS, &x, None);
    assert!(tables::is_built(QType::IQ3_XXS));
    // Every off-grid key of every table has at least one neighbour.
    for q in [QType::IQ2_XXS, QType::IQ2_XS, QType::IQ2_S, QType::IQ1_S, QType::IQ3_XXS, QType::IQ3_S] {
        let lat = tables::get(tables::TableKind::of(q).unwrap());
        for &e in lat.map.iter().filter(|&&e| e < 0) {
            assert!(!lat.neighbours_of(e).is_empty());
        }
    }
}
