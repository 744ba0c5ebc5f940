//! Every fixture case of the R tests (outputs of the real ncnn), run by the
//! engine on the fast kernels and on the portable ones.

use super::{DataReader, Mat, Net};
use crate::simd;

fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/testthat/fixtures/ncnn")
}

/// (name, extents in R order) of "name:w,h,c;..." lists.
fn blobs(s: &str) -> Vec<(String, Vec<usize>)> {
    s.split(';')
        .map(|b| {
            let (n, d) = b.split_once(':').unwrap();
            (n.to_string(), d.split(',').map(|v| v.parse().unwrap()).collect())
        })
        .collect()
}

fn read_blob(path: &std::path::Path, shape: &[usize]) -> Mat {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"GGMLRF32");
    let v: Vec<f32> = b[8..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let n: usize = shape.iter().product();
    Mat::from_shape(shape, v[..n].to_vec()).unwrap()
}

/// The largest error of any case relative to its reference's scale.
fn worst_error(threads: usize) -> (f32, String) {
    let d = dir();
    let table = std::fs::read_to_string(d.join("cases.tsv")).unwrap();
    let mut worst = (0.0f32, String::new());
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let (case, ins, outs) = (f[0], blobs(f[1]), blobs(f[2]));
        let mut net = Net::new(threads, true).unwrap();
        net.load_param_text(&std::fs::read_to_string(d.join(format!("{case}.param"))).unwrap())
            .unwrap();
        let model = std::fs::read(d.join(format!("{case}.bin"))).unwrap();
        net.load_model(&DataReader::Bytes(model)).unwrap();
        let mut ex = crate::ncnn::Extractor::new(&net).unwrap();
        ex.set_light_mode(false);
        for (i, (name, shape)) in ins.iter().enumerate() {
            let m = read_blob(&d.join(format!("{case}.{i}.in")), shape);
            ex.input(&net, net.find_blob(name).unwrap(), m).unwrap();
        }
        for (i, (name, shape)) in outs.iter().enumerate() {
            let want = read_blob(&d.join(format!("{case}.{i}.out")), shape);
            let got = ex.extract(&net, net.find_blob(name).unwrap()).unwrap();
            assert_eq!(got.shape(), want.shape(), "{case}: shape of {name}");
            let scale = want.data.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
            for (g, w) in got.data.iter().zip(want.data.iter()) {
                let e = if g.is_nan() && w.is_nan() { 0.0 } else { (g - w).abs() / scale };
                if !(e <= worst.0) {
                    worst = (e, format!("{case}/{name}"));
                }
            }
        }
    }
    worst
}

#[test]
fn fixtures_match_real_ncnn_on_fast_and_portable_kernels() {
    for threads in [1, 2] {
        let (e, at) = worst_error(threads);
        println!("fast, {threads} threads: worst relative error {e} at {at}");
        assert!(e < 1e-4, "fast kernels, {threads} threads: relative error {e} at {at}");
        let (e, at) = simd::portable(|| worst_error(threads));
        assert!(e < 1e-4, "portable kernels, {threads} threads: relative error {e} at {at}");
    }
}
