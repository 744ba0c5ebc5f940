//! The reader against files written by the `gguf` Python package
//! (tools/gguf-fixtures.py), the writer byte for byte against the same
//! files, and damaged files: every failure an error, never a panic.

use super::*;
use crate::base::dtype::DType;
use crate::base::quant::QType;

fn fixture(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/testthat/fixtures/gguf").join(name);
    std::fs::read(p).unwrap()
}

fn open(name: &str) -> GgufFile {
    GgufFile::from_vec(name, fixture(name)).unwrap()
}

#[test]
fn every_value_type_reads_as_written() {
    let f = open("all-types.gguf");
    assert_eq!(f.header.version, 3);
    assert_eq!(f.header.alignment, 32);
    let v = |k: &str| f.value(k).unwrap().clone();
    assert_eq!(v("general.architecture"), GgufValue::Str("ggmlr-test".into()));
    assert_eq!(v("t.u8"), GgufValue::U8(200));
    assert_eq!(v("t.i8"), GgufValue::I8(-100));
    assert_eq!(v("t.u16"), GgufValue::U16(60000));
    assert_eq!(v("t.i16"), GgufValue::I16(-30000));
    assert_eq!(v("t.u32"), GgufValue::U32(4_000_000_000));
    assert_eq!(v("t.i32"), GgufValue::I32(-2_000_000_000));
    assert_eq!(v("t.f32"), GgufValue::F32(0.1));
    assert_eq!(v("t.u64"), GgufValue::U64((1 << 53) + 2));
    assert_eq!(v("t.i64"), GgufValue::I64(-(1 << 40) - 3));
    assert_eq!(v("t.f64"), GgufValue::F64(1.0 / 3.0));
    assert_eq!((v("t.bool"), v("t.false")), (GgufValue::Bool(true), GgufValue::Bool(false)));
    assert_eq!(v("t.str"), GgufValue::Str("hello, GGUF \u{e9}\u{4e2d}".into()));
    assert_eq!(v("t.empty"), GgufValue::Str(String::new()));
    assert_eq!(v("a.u64"), GgufValue::Array(ValueType::U64, vec![GgufValue::U64(0), GgufValue::U64(u64::MAX)]));
    assert_eq!(v("a.i64"), GgufValue::Array(ValueType::I64, vec![GgufValue::I64(i64::MIN), GgufValue::I64(i64::MAX)]));
    assert_eq!(v("a.f32"), GgufValue::Array(ValueType::F32, vec![GgufValue::F32(0.5), GgufValue::F32(-1.25), GgufValue::F32(3.0e38)]));
    assert_eq!(v("a.str").type_name(), "array[string]");
    assert_eq!(v("a.nested").type_name(), "array[array[int32]]");
    let GgufValue::Array(ValueType::Array, rows) = v("a.nested") else { panic!() };
    assert_eq!(rows[2], GgufValue::Array(ValueType::I32, vec![GgufValue::I32(5), GgufValue::I32(6)]));
    assert_eq!(v("a.nested_str").type_name(), "array[array[string]]");
}

#[test]
fn every_tensor_type_reads_as_the_gguf_package_dequantizes() {
    let f = open("all-types.gguf");
    let want: Vec<f32> = fixture("all-types.f32").chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    let mut at = 0;
    let mut types = Vec::new();
    for t in &f.header.tensors {
        assert_eq!((t.n_dims, t.ne), (2, [256, 2, 1, 1]), "{}", t.name);
        let got = f.tensor_values(t).unwrap();
        for (i, (g, w)) in got.iter().zip(&want[at..at + 512]).enumerate() {
            let g = *g as f32;
            assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()), "{} value {i}: {g} vs {w}", t.name);
        }
        at += 512;
        types.push(t.ty);
    }
    assert_eq!(at, want.len());
    // Every quantized type the gguf package has, and the plain ones.
    assert!(types.contains(&TensorType::Engine(DType::Quant(QType::IQ1_M))));
    assert!(types.contains(&TensorType::Engine(DType::BF16)) && types.contains(&TensorType::I64));
    assert_eq!(types.len(), 7 + 24);
}

#[test]
fn the_writer_writes_what_the_gguf_package_writes() {
    for name in ["all-types.gguf", "aligned.gguf"] {
        let bytes = fixture(name);
        let f = GgufFile::from_vec(name, bytes.clone()).unwrap();
        let tensors: Vec<WriteTensor<'_>> = f
            .header
            .tensors
            .iter()
            .map(|t| WriteTensor { name: t.name.clone(), ty: t.ty, ne: t.ne[..t.n_dims].to_vec(), data: f.tensor_bytes(t).into() })
            .collect();
        let ours = to_bytes(&f.header.kv, &tensors, f.header.alignment).unwrap();
        assert_eq!(ours.len(), bytes.len(), "{name}");
        assert!(ours == bytes, "{name}: first difference at byte {:?}", ours.iter().zip(&bytes).position(|(a, b)| a != b));
    }
}

#[test]
fn custom_alignment_is_honoured() {
    let f = open("aligned.gguf");
    assert_eq!(f.header.alignment, 64);
    assert_eq!(f.header.data_start % 64, 0);
    let odd = f.tensor("odd").unwrap();
    assert_eq!((odd.n_dims, odd.ne[0], odd.offset), (1, 7, 0));
    assert_eq!(f.tensor_values(odd).unwrap(), (0..7).map(|v| v as f64).collect::<Vec<_>>());
    let m = f.tensor("matrix").unwrap();
    assert_eq!((m.ne, m.offset), ([4, 3, 1, 1], 64));
    assert_eq!(f.tensor("q").unwrap().ty, TensorType::Engine(DType::Quant(QType::Q8_0)));
    assert!(f.tensor("nope").unwrap_err().to_string().contains("no tensor named 'nope'"));
}

/// A tiny deterministic generator for the damage tests.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn truncated_and_mangled_files_are_errors_not_panics() {
    let bytes = fixture("all-types.gguf");
    let header_end = GgufFile::from_vec("x", bytes.clone()).unwrap().header.data_start;
    for len in (0..header_end).chain([bytes.len() - 1]) {
        let e = reader::parse(&bytes[..len]).err().map(|e| e.to_string());
        assert!(e.is_some(), "a file cut at {len} bytes was accepted");
    }
    let mut seed = 0x5EED_u64;
    let mut errors = 0;
    for _ in 0..3000 {
        let mut b = bytes[..header_end + 64].to_vec();
        for _ in 0..1 + rng(&mut seed) % 4 {
            let at = (rng(&mut seed) as usize) % header_end;
            b[at] = rng(&mut seed) as u8;
        }
        if let Err(e) = reader::parse(&b) {
            errors += 1;
            assert!(!e.to_string().is_empty());
        }
    }
    assert!(errors > 1000, "{errors}");
}

fn header(n_tensors: u64, n_kv: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&n_tensors.to_le_bytes());
    b.extend_from_slice(&n_kv.to_le_bytes());
    b
}

fn err(b: &[u8]) -> String {
    format!("{:#}", reader::parse(b).unwrap_err())
}

#[test]
fn sizes_from_the_file_are_checked_before_allocating() {
    assert!(err(&header(u64::MAX, 0)).contains("at byte 8: the number of tensors is 18446744073709551615"));
    assert!(err(&header(0, 1 << 60)).contains("at byte 16"));
    // A key whose length runs past the end.
    let mut b = header(0, 1);
    b.extend_from_slice(&(1u64 << 62).to_le_bytes());
    b.extend_from_slice(&[0u8; 16]);
    assert!(err(&b).contains("at byte 24: the length of metadata key 1"), "{}", err(&b));
    // An array of a billion strings in a few bytes.
    let mut b = header(0, 1);
    b.extend_from_slice(&1u64.to_le_bytes());
    b.push(b'k');
    b.extend_from_slice(&9u32.to_le_bytes());
    b.extend_from_slice(&8u32.to_le_bytes());
    b.extend_from_slice(&1_000_000_000u64.to_le_bytes());
    b.extend_from_slice(&[0u8; 16]);
    assert!(err(&b).contains("the length of the value of 'k' is 1000000000"), "{}", err(&b));
    // Arrays nested 100 deep.
    let mut b = header(0, 1);
    b.extend_from_slice(&1u64.to_le_bytes());
    b.push(b'k');
    b.extend_from_slice(&9u32.to_le_bytes());
    for _ in 0..100 {
        b.extend_from_slice(&9u32.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
    }
    assert!(err(&b).contains("nests arrays more than"), "{}", err(&b));
}

#[test]
fn bad_headers_say_what_is_wrong() {
    assert!(err(b"GGML\x03\0\0\0").contains("does not start with \"GGUF\""));
    let mut b = header(0, 0);
    b[4] = 1;
    assert!(err(&b).contains("version 1"));
    b[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(err(&b).contains("big-endian"));
    // Tensor data past the end, and a bad alignment.
    let kv = [("general.alignment".to_string(), GgufValue::U32(48))];
    assert!(to_bytes(&kv, &[], 48).unwrap_err().to_string().contains("power of 2"));
    let t = WriteTensor { name: "w".into(), ty: TensorType::Engine(DType::F32), ne: vec![4], data: vec![0u8; 16].into() };
    let good = to_bytes(&[], &[t.clone()], 32).unwrap();
    assert!(err(&good[..good.len() - 20]).contains("past the end of the file"));
    let short = WriteTensor { data: vec![0u8; 12].into(), ..t };
    assert!(to_bytes(&[], &[short], 32).unwrap_err().to_string().contains("needs 16 bytes"));
    // A stored alignment that is not a power of 2, or not a uint32: where and what.
    for (payload, is) in [(&[4u8, 0, 0, 0, 48, 0, 0, 0][..], "is 48;"), (&[6, 0, 0, 0, 0, 0, 0, 66], "is the float32 32;")] {
        let mut b = header(0, 1);
        b.extend_from_slice(&17u64.to_le_bytes());
        b.extend_from_slice(b"general.alignment");
        b.extend_from_slice(payload);
        let e = err(&b);
        assert!(e.contains(&format!("at byte 53: general.alignment {is} it must be a uint32 power of 2")), "{e}");
    }
}

#[test]
fn tensor_sizes_that_overflow_are_errors() {
    // Found by the fuzz target: a row size times the other sizes past 2^64.
    let mut b = header(1, 0);
    b.extend_from_slice(&1u64.to_le_bytes());
    b.push(b'w');
    b.extend_from_slice(&2u32.to_le_bytes());
    b.extend_from_slice(&(1u64 << 62).to_le_bytes());
    b.extend_from_slice(&(1u64 << 40).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&[0u8; 64]);
    assert!(err(&b).contains("too large to address"), "{}", err(&b));
    // The writer too (also found by the fuzz target): one row of 2^62
    // float32 values needs more bytes than a usize holds.
    let t = WriteTensor { name: "w".into(), ty: TensorType::Engine(DType::F32), ne: vec![1 << 62], data: vec![0u8; 16].into() };
    let e = to_bytes(&[], &[t], 32).unwrap_err().to_string();
    assert!(e.contains("needs too many bytes"), "{e}");
}

/// Quantized blocks come straight from the file: every type decodes any
/// bytes without a panic, each byte of a block taking each of its 256
/// values in turn (so every table index and shift a block can hold is
/// reached), and from blocks of random bytes; a short or ragged row is an
/// error.
#[test]
fn quantized_blocks_of_any_bytes_decode_without_panicking() {
    let mut s = 0x9e3779b97f4a7c15u64;
    let mut rnd = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 24) as u8
    };
    for q in QType::ALL {
        let (bs, ts) = (q.block_size(), q.type_size());
        let mut y = vec![0f32; bs];
        for fill in [0x00u8, 0x55, 0xaa, 0xff] {
            let mut block = vec![fill; ts];
            for k in 0..ts {
                for v in 0..=255u8 {
                    block[k] = v;
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| quant::dequantize_row(q, &block, &mut y)));
                    assert!(matches!(r, Ok(Ok(()))), "{}: byte {k} = {v} over {fill:#x}", q.name());
                }
                block[k] = fill;
            }
        }
        let many: Vec<u8> = (0..ts * 64).map(|_| rnd()).collect();
        let mut ys = vec![0f32; bs * 64];
        assert!(quant::dequantize_row(q, &many, &mut ys).is_ok(), "{}: random blocks", q.name());
        assert!(quant::dequantize_row(q, &many[..ts - 1], &mut y).is_err(), "{}: a short block", q.name());
        if bs > 1 {
            assert!(quant::dequantize_row(q, &many, &mut ys[..bs + 1]).is_err(), "{}: a ragged row", q.name());
        }
    }
}
