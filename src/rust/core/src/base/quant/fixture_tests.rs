//! Bit-exact agreement with the `gguf` Python package's quantizers and
//! dequantizers, through the fixtures written by tools/quant-fixtures.py.

use super::{dequantize_row, quantize_row_ref, QType};

fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/testthat/fixtures/quant")
}

pub struct Fixture {
    pub q: QType,
    pub quant: Vec<(Vec<f32>, Vec<u8>)>,
    pub deq: Vec<(Vec<u8>, Vec<f32>)>,
}

struct Reader<'a>(&'a [u8], usize);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let s = &self.0[self.1..self.1 + n];
        self.1 += n;
        s
    }
    fn u32(&mut self) -> usize {
        u32::from_le_bytes(self.take(4).try_into().unwrap()) as usize
    }
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        self.take(4 * n).chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    }
}

pub fn load(name: &str) -> Fixture {
    let bytes = std::fs::read(dir().join(format!("{name}.qf"))).unwrap();
    let mut r = Reader(&bytes, 0);
    assert_eq!(r.take(8), b"GGMLRQF1");
    let q = QType::from_code(r.u32() as i64).unwrap();
    let mut quant = Vec::new();
    for _ in 0..r.u32() {
        let n = r.u32();
        let x = r.f32s(n);
        let b = r.take(q.row_size(n).unwrap()).to_vec();
        quant.push((x, b));
    }
    let mut deq = Vec::new();
    for _ in 0..r.u32() {
        let n = r.u32();
        let b = r.take(q.row_size(n).unwrap()).to_vec();
        deq.push((b, r.f32s(n)));
    }
    assert_eq!(r.1, bytes.len(), "{name}: trailing bytes");
    Fixture { q, quant, deq }
}

/// Equal bits, or both NaN (NaN payloads carry no meaning).
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

const ALL: [&str; 23] = [
    "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s",
    "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "iq1_m", "tq1_0", "tq2_0", "mxfp4", "nvfp4",
];

#[test]
fn quantizers_match_gguf_py_bit_for_bit() {
    let mut checked = 0;
    for name in ALL {
        let f = load(name);
        for (i, (x, want)) in f.quant.iter().enumerate() {
            let mut got = vec![0u8; want.len()];
            quantize_row_ref(f.q, x, &mut got).unwrap();
            if let Some(p) = got.iter().zip(want).position(|(a, b)| a != b) {
                panic!("{name} quantize case {i}: first difference at byte {p}: {} vs gguf {}", got[p], want[p]);
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 8 * 13, "every quantizable type's cases ran");
}

#[test]
fn dequantizers_match_gguf_py_bit_for_bit() {
    for name in ALL {
        let f = load(name);
        assert!(f.deq.len() >= 6, "{name}");
        for (i, (b, want)) in f.deq.iter().enumerate() {
            let mut got = vec![0f32; want.len()];
            dequantize_row(f.q, b, &mut got).unwrap();
            if let Some(p) = (0..want.len()).find(|&p| !same(got[p], want[p])) {
                panic!("{name} dequantize case {i}: value {p} is {} (gguf {})", got[p], want[p]);
            }
        }
    }
}
