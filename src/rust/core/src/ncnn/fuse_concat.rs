//! A channel Concat whose every bottom is the only use of a builtin
//! Convolution's output (SqueezeNet's fire modules, Inception blocks): in
//! light mode each convolution writes straight into its channels of the
//! joined blob, so the pieces are never copied. The result is the same; the
//! convolutions' own blobs are simply never materialised (light mode would
//! release them at once anyway).

use super::layers::concat::Concat;
use super::layers::convolution::Convolution;
use super::net::Net;
use super::{err, Mat};

/// The builtin layer `li` as a `T`, if it is one.
fn builtin<T: 'static>(net: &Net, li: usize) -> Option<&T> {
    net.builtin_layer(li)?.as_any()?.downcast_ref::<T>()
}

/// The producing convolutions of Concat layer `li`, in bottom order, when
/// the fused path applies: a builtin channel Concat with one top, each
/// bottom not yet computed nor given, made by a builtin Convolution with
/// one bottom and one top, and used by this Concat alone; the convolutions'
/// own inputs all distinct.
// BOUNDS-FN: `li` is a layer of the net (the extractor's), every `b` one of
// its bottoms, which `param::link` checked against the spec's blobs (the
// count that sized `computed` and `given`), every `p` a blob's producer
// (a layer's position, set by `link`); `pl.bottoms[0]` is read after
// `pl.bottoms.len() == 1` held.
pub(super) fn convs_of_concat(net: &Net, li: usize, computed: &[Option<Mat>], given: &[bool]) -> Option<Vec<usize>> {
    let spec = net.spec();
    let l = &spec.layers[li];
    if l.tops.len() != 1 || l.bottoms.len() < 2 || !builtin::<Concat>(net, li)?.joins_channels() {
        return None;
    }
    let mut convs = Vec::with_capacity(l.bottoms.len());
    let mut inputs = Vec::with_capacity(l.bottoms.len());
    for &b in &l.bottoms {
        let p = spec.blobs[b].producer?;
        let pl = &spec.layers[p];
        let ok = computed[b].is_none()
            && !given[b]
            && spec.blobs[b].consumer == Some(li)
            && pl.bottoms.len() == 1
            && pl.tops.len() == 1
            && !inputs.contains(&pl.bottoms[0])
            && builtin::<Convolution>(net, p).is_some_and(|c| !c.int8_output());
        if !ok {
            return None;
        }
        convs.push(p);
        inputs.push(pl.bottoms[0]);
    }
    Some(convs)
}

/// Runs the convolutions `convs` on their inputs `xs` into one blob joined
/// along channels (the top of Concat layer `li`); `clock`, when profiling,
/// times each convolution. Outputs of different sizes (which Concat would
/// reject) take the ordinary path, so the error is the usual one.
pub(super) fn run(net: &Net, li: usize, convs: &[usize], xs: Vec<Mat>, clock: Option<fn() -> f64>, timings: &mut Vec<(usize, f64)>) -> anyhow::Result<Mat> {
    // An error names its layer, as on the ordinary path.
    let describe = |i: usize| net.spec().layers.get(i).map_or_else(|| format!("layer {i}"), |l| l.describe());
    let at = |i: usize| move |e: anyhow::Error| err(format!("{}: {e:#}", describe(i)));
    let layers = convs
        .iter()
        .map(|&p| builtin::<Convolution>(net, p).ok_or_else(|| err(format!("internal: {} is not a convolution", describe(p)))))
        .collect::<anyhow::Result<Vec<&Convolution>>>()?;
    let mut shapes = Vec::with_capacity(convs.len());
    for ((c, x), &p) in layers.iter().zip(&xs).zip(convs) {
        shapes.push(c.out_shape(x).map_err(at(p))?);
    }
    let Some(&(w, h, _)) = shapes.first() else {
        return Err(err(format!("internal: {} was to join no convolutions", describe(li))));
    };
    if shapes.iter().any(|s| (s.0, s.1) != (w, h)) {
        let mut tops = Vec::with_capacity(convs.len());
        for (&p, x) in convs.iter().zip(xs) {
            tops.extend(net.run_layer(p, vec![x], 1).map_err(at(p))?);
        }
        let out = net.run_layer(li, tops, 1).map_err(at(li))?;
        return out.into_iter().next().ok_or_else(|| err(format!("{}: produced no blob", describe(li))));
    }
    let mut out = Mat::for_overwrite_3d(w, h, shapes.iter().map(|s| s.2).sum());
    let mut rest: &mut [f32] = &mut out.data;
    for (((c, x), &p), s) in layers.iter().zip(&xs).zip(convs).zip(&shapes) {
        // The parts sum to the data's length (its channels are the sum).
        let (part, tail) = std::mem::take(&mut rest).split_at_mut(w * h * s.2);
        rest = tail;
        let t0 = clock.map(|f| f());
        net.on_pool(|| c.forward_into(x, part)).map_err(at(p))?;
        if let (Some(f), Some(t0)) = (clock, t0) {
            timings.push((p, f() - t0));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::ncnn::{DataReader, Mat, Net};

    /// A fire module: squeeze, split, 1x1 and 3x3 expands joined by Concat
    /// (and a third, padded differently, when `odd` so sizes disagree).
    fn fire(odd: bool) -> (String, Vec<u8>) {
        let e3 = if odd { "4=0" } else { "4=1" };
        let param = format!(
            "7767517\n6 7\nInput data 0 1 data\nConvolution sq 1 1 data s 0=4 1=1 5=1 6=12 9=1\nSplit sp 1 2 s s1 s2\n\
             Convolution e1 1 1 s1 e1o 0=5 1=1 5=1 6=20\nConvolution e3 1 1 s2 e3o 0=6 1=3 {e3} 5=1 6=216 9=3 -23310=2,-0.5,0.5\n\
             Concat cat 2 1 e1o e3o out 0=0\n"
        );
        let mut bytes = Vec::new();
        for (n, nb) in [(12usize, 4usize), (20, 5), (216, 6)] {
            bytes.extend(0u32.to_le_bytes());
            for i in 0..n + nb {
                bytes.extend((((i * 37 % 23) as f32 - 11.0) / 13.0).to_le_bytes());
            }
        }
        (param, bytes)
    }

    /// The joined blob, and the names of the layers that ran (in order).
    fn run_named(param: &str, bytes: &[u8], light: bool, threads: usize, first: Option<&str>) -> anyhow::Result<(Mat, Vec<String>)> {
        let mut net = Net::new(threads, light).unwrap();
        net.load_param_text(param).unwrap();
        net.load_model(&DataReader::from_bytes(bytes.to_vec())).unwrap();
        let mut ex = crate::ncnn::Extractor::new(&net).unwrap();
        ex.set_profiling(Some(|| 0.0));
        let x: Vec<f32> = (0..9 * 7 * 3).map(|i| (i as f32 * 0.31).sin()).collect();
        ex.input(&net, net.find_blob("data").unwrap(), Mat::from_shape(&[9, 7, 3], x).unwrap())?;
        if let Some(b) = first {
            ex.extract(&net, net.find_blob(b).unwrap())?;
        }
        let out = ex.extract(&net, net.find_blob("out").unwrap())?;
        let info = net.layer_info();
        Ok((out, ex.timings().iter().map(|&(li, _)| info[li].name.clone()).collect()))
    }

    fn run(param: &str, bytes: &[u8], light: bool, threads: usize, first: Option<&str>) -> anyhow::Result<Mat> {
        run_named(param, bytes, light, threads, first).map(|r| r.0)
    }

    #[test]
    fn writes_convolutions_into_the_joined_blob_with_the_same_values() {
        let (param, bytes) = fire(false);
        // Without light mode every blob is kept and nothing is fused.
        let want = run(&param, &bytes, false, 1, None).unwrap();
        assert_eq!(want.shape(), vec![9, 7, 11]);
        // Fused: the Concat does not run as a layer of its own.
        let ran = |light: bool| run_named(&param, &bytes, light, 1, None).unwrap().1.join(" ");
        assert_eq!(ran(true), "sq sp e1 e3");
        assert_eq!(ran(false), "sq sp e3 e1 cat");
        for threads in [1, 2] {
            for first in [None, Some("e1o"), Some("e3o")] {
                let got = run(&param, &bytes, true, threads, first).unwrap();
                assert_eq!(got.shape(), want.shape());
                assert_eq!(&got.data[..], &want.data[..], "threads {threads}, extracting {first:?} first");
            }
        }
    }

    #[test]
    fn sizes_that_disagree_give_the_concat_error() {
        let (param, bytes) = fire(true);
        let fused = run(&param, &bytes, true, 1, None).unwrap_err();
        let plain = run(&param, &bytes, false, 1, None).unwrap_err();
        assert_eq!(format!("{fused:#}"), format!("{plain:#}"));
        assert!(format!("{fused:#}").contains("cannot concatenate"), "{fused:#}");
        assert_eq!(crate::base::error::class_of(&fused), Some("ncnn_error"));
        assert_eq!(crate::base::error::class_of(&plain), Some("ncnn_error"));
    }
}
