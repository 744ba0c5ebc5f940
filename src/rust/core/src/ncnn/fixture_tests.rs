//! Every fixture case of the R tests (outputs of the real ncnn), run by the
//! engine on the fast kernels and on the portable ones; and ncnn's benchmark
//! networks with random weights (tools/ncnn_bench_fixtures.py): the small
//! ones shipped with the tests, all 35 from `GGMLR_NCNN_BENCH_DIR` when set.

use super::{DataReader, Mat, Net};
use crate::base::simd;

fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/testthat/fixtures/ncnn")
}

/// (name, extents in R order) of "name:w,h,c;..." lists.
fn blobs(s: &str) -> Vec<(String, Vec<usize>)> {
    s.split(';')
        .map(|b| {
            let (n, d) = b.rsplit_once(':').unwrap();
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

/// Runs `case` (files `case.param`, `case.bin`, `case.<i>.in`) and returns
/// the largest error relative to the reference's scale over its outputs.
fn case_error(d: &std::path::Path, case: &str, ins: &[(String, Vec<usize>)], outs: &[(String, Vec<usize>)], threads: usize) -> anyhow::Result<(f32, String)> {
    let mut net = Net::new(threads, true)?;
    net.load_param_text(&std::fs::read_to_string(d.join(format!("{case}.param")))?)?;
    let model = std::fs::read(d.join(format!("{case}.bin")))?;
    net.load_model(&DataReader::from_bytes(model))?;
    let mut ex = crate::ncnn::Extractor::new(&net)?;
    ex.set_light_mode(false);
    for (i, (name, shape)) in ins.iter().enumerate() {
        let m = read_blob(&d.join(format!("{case}.{i}.in")), shape);
        ex.input(&net, net.find_blob(name)?, m)?;
    }
    let mut worst = (0.0f32, String::new());
    for (i, (name, shape)) in outs.iter().enumerate() {
        let want = read_blob(&d.join(format!("{case}.{i}.out")), shape);
        let got = ex.extract(&net, net.find_blob(name)?)?;
        if got.shape() != want.shape() {
            anyhow::bail!("{case}: shape of {name} is {:?}, real ncnn gives {:?}", got.shape(), want.shape());
        }
        let scale = want.data.iter().fold(1e-6f32, |m, v| if v.is_finite() { m.max(v.abs()) } else { m });
        for (i, (g, w)) in got.data.iter().zip(want.data.iter()).enumerate() {
            let e = if g == w || (g.is_nan() && w.is_nan()) { 0.0 } else { (g - w).abs() / scale };
            if !(e <= worst.0) {
                worst = (e, format!("{case}/{name} (at {i}: {g} vs {w})"));
            }
        }
    }
    Ok(worst)
}

/// (case, inputs, outputs) of a manifest (a header line, then tab-separated rows).
fn manifest(path: &std::path::Path) -> Vec<(String, Vec<(String, Vec<usize>)>, Vec<(String, Vec<usize>)>)> {
    let table = std::fs::read_to_string(path).unwrap();
    table
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            (f[0].to_string(), blobs(f[1]), blobs(f[2]))
        })
        .collect()
}

/// The largest error of any case relative to its reference's scale.
fn worst_error(threads: usize) -> (f32, String) {
    let d = dir();
    let mut worst = (0.0f32, String::new());
    for (case, ins, outs) in manifest(&d.join("cases.tsv")) {
        let e = case_error(&d, &case, &ins, &outs, threads).unwrap();
        if !(e.0 <= worst.0) {
            worst = e;
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

/// Every case of the layer fixtures (tools/ncnn_layer_fixtures.py) that
/// fails or differs from the real ncnn by 1e-4 of its scale or more.
fn layer_failures(threads: usize) -> Vec<String> {
    let d = std::env::var("GGMLR_NCNN_LAYER_FIXTURES").map(std::path::PathBuf::from).unwrap_or_else(|_| dir().join("../ncnn-layers"));
    let only = std::env::var("GGMLR_NCNN_CASES").unwrap_or_default();
    let mut bad = Vec::new();
    for (case, ins, outs) in manifest(&d.join("cases.tsv")) {
        if !only.is_empty() && !only.split(',').any(|o| case.starts_with(o)) {
            continue;
        }
        match case_error(&d, &case, &ins, &outs, threads) {
            Ok((e, _)) if e < 1e-4 => {}
            Ok((e, at)) => bad.push(format!("{case}: relative error {e:.3e} at {at}")),
            Err(e) => bad.push(format!("{case}: {e:#}")),
        }
    }
    bad
}

#[test]
fn layer_fixtures_match_real_ncnn_on_fast_and_portable_kernels() {
    for threads in [1, 2] {
        let bad = layer_failures(threads);
        assert!(bad.is_empty(), "{threads} threads:\n{}", bad.join("\n"));
        let bad = simd::portable(|| layer_failures(threads));
        assert!(bad.is_empty(), "portable kernels, {threads} threads:\n{}", bad.join("\n"));
    }
}

/// Every net of a benchmark manifest: (net, loads and runs, error).
fn bench_report(d: &std::path::Path, threads: usize) -> Vec<(String, Result<(f32, String), String>)> {
    let only = std::env::var("GGMLR_NCNN_BENCH_NETS").unwrap_or_default();
    manifest(&d.join("bench.tsv"))
        .into_iter()
        .filter(|(n, ..)| only.is_empty() || only.split(',').any(|o| o == n))
        .map(|(net, ins, outs)| {
            let r = case_error(d, &net, &ins, &outs, threads).map_err(|e| format!("{e:#}"));
            (net, r)
        })
        .collect()
}

fn check_bench(d: &std::path::Path) {
    let mut bad = Vec::new();
    for threads in [1, 2] {
        for (net, r) in bench_report(d, threads) {
            match r {
                Ok((e, at)) => {
                    println!("{net:<22} {threads} threads: matches, worst relative error {e:.2e} at {at}");
                    if !(e < 1e-4) {
                        bad.push(format!("{net} ({threads} threads): error {e} at {at}"));
                    }
                }
                Err(m) => {
                    println!("{net:<22} {threads} threads: FAILS: {m}");
                    bad.push(format!("{net}: {m}"));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn shipped_benchmark_nets_match_real_ncnn() {
    check_bench(&dir().join("../ncnn-bench"));
}

#[test]
fn all_benchmark_nets_match_real_ncnn_when_generated() {
    match std::env::var("GGMLR_NCNN_BENCH_DIR") {
        Ok(d) => check_bench(std::path::Path::new(&d)),
        Err(_) => println!("GGMLR_NCNN_BENCH_DIR is not set: run tools/ncnn_bench_fixtures.py and set it to check all 35 nets"),
    }
}

/// A debugging aid, not a check: with `GGMLR_NCNN_DUMP` (a folder of every
/// blob of the real ncnn, `list.tsv` naming them) and `GGMLR_NCNN_DUMP_NET`
/// (the net's path without extension), prints how far each blob is from
/// the real ncnn's, in layer order.
#[test]
#[ignore]
fn compare_blob_dump() {
    let (Ok(dump), Ok(base)) = (std::env::var("GGMLR_NCNN_DUMP"), std::env::var("GGMLR_NCNN_DUMP_NET")) else {
        return;
    };
    let dump = std::path::Path::new(&dump);
    let mut net = Net::new(1, false).unwrap();
    net.load_param_text(&std::fs::read_to_string(format!("{base}.param")).unwrap()).unwrap();
    net.load_model(&DataReader::from_bytes(std::fs::read(format!("{base}.bin")).unwrap())).unwrap();
    let list = std::fs::read_to_string(dump.join("list.tsv")).unwrap();
    let rows: Vec<Vec<String>> = list.lines().map(|l| l.split('\t').map(String::from).collect()).collect();
    let mut ex = crate::ncnn::Extractor::new(&net).unwrap();
    let input = &rows[0];
    let shape: Vec<usize> = input[4].split(',').map(|v| v.parse().unwrap()).collect();
    ex.input(&net, net.find_blob(&input[1]).unwrap(), read_blob(&dump.join(format!("{}.blob", input[0])), &shape)).unwrap();
    let only = std::env::var("GGMLR_NCNN_DUMP_ONLY").unwrap_or_default();
    for r in rows[1..].iter().filter(|r| only.is_empty() || r[1] == only) {
        let shape: Vec<usize> = r[4].split(',').map(|v| v.parse().unwrap()).collect();
        let want = read_blob(&dump.join(format!("{}.blob", r[0])), &shape);
        match ex.extract(&net, net.find_blob(&r[1]).unwrap()) {
            Ok(got) => {
                let scale = want.data.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
                let e = got.data.iter().zip(want.data.iter()).fold(0.0f32, |m, (g, w)| m.max((g - w).abs() / scale));
                let same = got.shape() == want.shape();
                let bad: Vec<(usize, f32, f32)> = got.data.iter().zip(want.data.iter()).enumerate()
                    .filter(|(_, (g, w))| (*g - *w).abs() > 1e-5 * scale).map(|(i, (g, w))| (i, *g, *w)).collect();
                println!("{:<40} {:<22} {:?}{} err {e:.2e}, {} of {} differ {:?}", r[1], r[2], got.shape(), if same { "" } else { " SHAPE DIFFERS" },
                    bad.len(), got.data.len(), &bad[..bad.len().min(3)]);
            }
            Err(e) => println!("{:<40} {:<22} fails: {e:#}", r[1], r[2]),
        }
    }
}
