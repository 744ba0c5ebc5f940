//! Fuzz ncnn forward passes: one builtin layer of a type picked by the input,
//! with parameters and a small input blob made from the input's bytes, its
//! weights either zeros or the input's remaining bytes. Every input must
//! give a blob or an error, never a panic, an abort or a hang. Allocations
//! are limited to 256 MiB, so a size that a param makes too large is an
//! error (as on a real machine, above its memory), not an out-of-memory.
#![no_main]

use ggmlr_core::ncnn::{types, DataReader, Mat, Net};
use libfuzzer_sys::fuzz_target;

/// Parameter values: small ones mostly, and the extremes a hostile file uses.
const INTS: [i32; 16] = [0, 1, 2, 3, 4, 5, 7, 8, 16, -1, -2, -233, 65535, 1 << 20, i32::MAX, i32::MIN];
const FLOATS: [&str; 12] = ["0", "1", "0.5", "2", "-1", "1e-3", "3.5", "1e30", "-1e30", "nan", "inf", "65536"];

struct Bytes<'a>(&'a [u8], usize);

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        let b = self.0.get(self.1).copied().unwrap_or(0);
        self.1 += 1;
        b
    }
}

fuzz_target!(|data: &[u8]| {
    ggmlr_core::base::alloc::set_limit(256 << 20);
    let mut b = Bytes(data, 0);
    let name = types::BUILTIN[b.next() as usize % types::BUILTIN.len()];
    if name == "Input" {
        return;
    }
    let mut params = Vec::new();
    for _ in 0..(b.next() % 8) {
        let key = b.next() % 30;
        let v = b.next();
        match v % 4 {
            0 | 1 => params.push(format!("{key}={}", INTS[(v / 4) as usize % INTS.len()])),
            2 => params.push(format!("{key}={}", FLOATS[(v / 4) as usize % FLOATS.len()])),
            _ => {
                let n = 1 + v as usize / 64;
                let vals: Vec<String> = (0..n).map(|_| INTS[b.next() as usize % 9].to_string()).collect();
                params.push(format!("{}={n},{}", -23300 - key as i32, vals.join(",")));
            }
        }
    }
    let bottoms = 1 + (b.next() % 2) as usize;
    let tops = 1 + (b.next() % 2) as usize;
    // Two bottoms are the same blob twice (a hostile param's favourite).
    let bnames = vec!["x".to_string(); bottoms];
    let tnames: Vec<String> = (0..tops).map(|i| format!("t{i}")).collect();
    let param = format!(
        "7767517\n2 {}\nInput in 0 1 x\n{name} l {bottoms} {tops} {} {} {}\n",
        1 + tops,
        bnames.join(" "),
        tnames.join(" "),
        params.join(" ")
    );
    let dims = 1 + (b.next() % 4) as usize;
    let shape: Vec<usize> = (0..dims).map(|_| 1 + (b.next() % 6) as usize).collect();
    let light = b.next() % 2 == 0;
    let threads = 1 + (b.next() % 2) as usize;
    let zeros = b.next() % 2 == 0;
    let rest = data.get(b.1..).unwrap_or(&[]);
    let Ok(mut net) = Net::new(threads, light) else { return };
    if net.load_param_text(&param).is_err() {
        return;
    }
    let reader = if zeros { DataReader::Empty } else { DataReader::Bytes(rest.to_vec().into()) };
    if net.load_model(&reader).is_err() {
        return;
    }
    let n: usize = shape.iter().product();
    let x: Vec<f32> = (0..n).map(|i| rest.get(i).map_or(0.5, |&v| v as f32 / 32.0 - 4.0)).collect();
    let Ok(m) = Mat::from_shape(&shape, x) else { return };
    let Ok(mut ex) = ggmlr_core::ncnn::Extractor::new(&net) else { return };
    let Ok(xi) = net.find_blob("x") else { return };
    if ex.input(&net, xi, m).is_err() {
        return;
    }
    for t in &tnames {
        if let Ok(ti) = net.find_blob(t) {
            let _ = ex.extract(&net, ti);
        }
    }
});
