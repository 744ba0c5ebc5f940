//! The 3-d layers on random parameters (sentinels, sizes that do not fit,
//! mixed pads) and random 4-d inputs: each gives a blob of the size its
//! parameters say or an error, never a panic.

use crate::ncnn::{DataReader, Extractor, Mat, Net};

struct Lcg(u64);

impl Lcg {
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        v[(self.0 >> 33) as usize % v.len()]
    }
}

const TYPES: [&str; 5] = ["Convolution3D", "ConvolutionDepthWise3D", "Deconvolution3D", "DeconvolutionDepthWise3D", "Pooling3D"];

/// One random case: Ok(None) when the net refuses it, the output otherwise.
fn run(r: &mut Lcg) -> anyhow::Result<Option<Mat>> {
    let ty = r.pick(&TYPES);
    let c = r.pick(&[1usize, 2, 4]);
    let cout = r.pick(&[1usize, 2, 4]);
    let group = r.pick(&[1usize, 2, 4]);
    let k = [r.pick(&[1usize, 2, 3]), r.pick(&[1usize, 2, 3]), r.pick(&[1usize, 2, 3])];
    let cin_g = if ty.contains("DepthWise") { c / group.min(c) } else { c };
    let wds = cout * cin_g.max(1) * k.iter().product::<usize>();
    let mut p = vec![format!("0={cout} 1={} 11={} 21={} 5=1 6={wds} 7={group}", k[0], k[1], k[2])];
    let vals = [0, 1, 2, 3, -1, -233, -234];
    for key in [2, 3, 4, 12, 13, 14, 15, 16, 17, 18, 19, 20, 22, 23, 24, 25, 26, 27, 28, 5, 6, 7, 8, 9] {
        if r.pick(&[false, false, true]) {
            let v = if ty == "Pooling3D" && key <= 8 { r.pick(&[0, 1, 2, 3]) } else { r.pick(&vals) };
            p.push(format!("{key}={v}"));
        }
    }
    let param = format!("7767517\n2 2\nInput in 0 1 x\n{ty} l 1 1 x out {}\n", p.join(" "));
    let mut net = Net::new(r.pick(&[1, 2]), true)?;
    if net.load_param_text(&param).is_err() {
        return Ok(None);
    }
    let mut bytes = vec![0u8; 4];
    bytes.extend((0..4 * (wds + cout)).map(|i| if i % 4 == 3 { 0x3f } else { 0 }));
    if net.load_model(&DataReader::from_bytes(bytes)).is_err() {
        return Ok(None);
    }
    let shape = [r.pick(&[1usize, 2, 5]), r.pick(&[1usize, 3, 4]), r.pick(&[1usize, 2, 3]), c];
    let x = Mat::from_shape(&shape, vec![0.5f32; shape.iter().product()])?;
    let mut ex = Extractor::new(&net)?;
    let xi = net.find_blob("x")?;
    ex.input(&net, xi, x)?;
    let out = net.find_blob("out")?;
    Ok(ex.extract(&net, out).ok())
}

#[test]
fn random_parameters_give_a_blob_or_an_error() {
    let mut r = Lcg(20261201);
    let mut ran = 0;
    for i in 0..3000 {
        let before = r.0;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut r))) {
            Ok(Ok(Some(m))) => {
                ran += 1;
                assert!(m.total() > 0 && m.data.iter().all(|v| v.is_finite() || v.is_nan()), "case {i}");
            }
            Ok(_) => {}
            Err(_) => panic!("case {i} (generator state {before}) panicked"),
        }
    }
    assert!(ran > 150, "only {ran} of the random cases ran");
}
