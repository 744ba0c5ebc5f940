//! Engine tests of the param readers, the registry and a small net.

use super::registry::{RegKey, TypeKey};
use super::*;
use std::cell::Cell;
use std::rc::Rc;

struct AddOne;
impl Layer for AddOne {
    fn forward(&self, b: Vec<Mat>, _n: usize, _o: &Opt) -> anyhow::Result<Vec<Mat>> {
        let mut m = b.into_iter().next().unwrap();
        m.data.iter_mut().for_each(|x| *x += 1.0);
        Ok(vec![m])
    }
}

#[derive(Default)]
struct Factory {
    destroyed: Cell<usize>,
}
impl CustomFactory for Factory {
    fn create(&self) -> anyhow::Result<Box<dyn Layer>> {
        Ok(Box::new(AddOne))
    }
    fn destroy(&self, _l: Box<dyn Layer>) {
        self.destroyed.set(self.destroyed.get() + 1);
    }
}

fn class(e: &anyhow::Error) -> Option<&'static str> {
    crate::base::error::class_of(e)
}

#[test]
fn text_param_blobs_and_values() {
    let spec = param::parse_text(
        "7767517\n3 3\nInput data 0 1 data 0=4 1=1.5\nReLU r 1 1 data x 0=0.1e0\nSoftmax s 1 1 x y -23300=2,1,2 1=1\n",
    )
    .unwrap();
    assert_eq!(spec.layers.len(), 3);
    assert_eq!(spec.blobs.len(), 3);
    assert_eq!(spec.layers[1].bottoms, vec![0]);
    assert_eq!(spec.layers[0].params.int(0, 0), 4);
    // an int key written as a float keeps its default
    assert_eq!(spec.layers[0].params.int(1, 7), 7);
    assert_eq!(spec.layers[1].params.float(0, 0.0), 0.1);
    assert_eq!(spec.layers[2].params.ints(0), vec![1, 2]);
}

#[test]
fn text_param_errors_are_classed() {
    for bad in [
        "1\n1 1\nInput a 0 1 a\n",
        "7767517\n1 0\n",
        "7767517\n2 1\nInput a 0 1 a\nReLU r 1 1 a b\n",
        "7767517\n1 1\nInput a 0 1 a 40=1\n",
        "7767517\n1 1\nInput a 0 1 a -23300=3,1\n",
        "7767517\n2 2\nInput a 0 1 a\n",
    ] {
        let e = param::parse_text(bad).unwrap_err();
        assert_eq!(class(&e), Some("ncnn_error"), "{bad}: {e}");
    }
}

#[test]
fn binary_param_reads_indices() {
    let v: Vec<i32> = vec![7767517, 2, 2, 16, 0, 1, 0, -233, 26, 1, 1, 0, 1, 0, 0, -233];
    let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let spec = param::parse_binary(&b).unwrap();
    assert_eq!(spec.layers[1].type_index, Some(26));
    assert_eq!(spec.layers[1].bottoms, vec![0]);
    for cut in 0..b.len() {
        assert!(param::parse_binary(&b[..cut]).is_err());
    }
}

#[test]
fn registry_follows_slot_rules() {
    let mut r = Registry::default();
    let f = || Rc::new(Factory::default()) as Rc<dyn CustomFactory>;
    assert_eq!(
        r.register(TypeKey::Name("A"), f()).unwrap(),
        RegKey::Slot(0)
    );
    assert_eq!(
        r.register(TypeKey::Index(256), f()).unwrap(),
        RegKey::Slot(0)
    );
    assert_eq!(
        r.register(TypeKey::Name("Input"), f()).unwrap(),
        RegKey::Override(16)
    );
    assert_eq!(
        r.register(TypeKey::Index(16), f()).unwrap(),
        RegKey::Override(16)
    );
    assert!(r.register(TypeKey::Index(-1), f()).is_err());
    assert!(r.register(TypeKey::Index(1_000_256), f()).is_err());
    for i in 1..256 {
        r.register(TypeKey::Name(&format!("N{i}")), f()).unwrap();
    }
    assert!(r.register(TypeKey::Name("Overflow"), f()).is_err());
    // replacing an existing name never needs a slot
    assert_eq!(
        r.register(TypeKey::Name("N255"), f()).unwrap(),
        RegKey::Slot(255)
    );
    let mut r = Registry::default();
    r.register(TypeKey::Index(768), f()).unwrap();
    assert_eq!(
        r.register(TypeKey::Name("B"), f()).unwrap(),
        RegKey::Slot(513)
    );
}

#[test]
fn net_runs_custom_and_destroys_through_current_factory() {
    let mut net = Net::new(1, true).unwrap();
    let first = Rc::new(Factory::default());
    net.registry
        .register(TypeKey::Name("Plus"), first.clone())
        .unwrap();
    net.load_param_text("7767517\n2 2\nInput data 0 1 data\nPlus p 1 1 data out\n")
        .unwrap();
    net.load_model(&DataReader::Empty).unwrap();
    let second = Rc::new(Factory::default());
    net.registry
        .register(TypeKey::Name("Plus"), second.clone())
        .unwrap();
    let mut ex = crate::ncnn::Extractor::new(&net).unwrap();
    ex.input(&net, 0, Mat::from_shape(&[2], vec![1.0, 2.0]).unwrap())
        .unwrap();
    assert_eq!(*ex.extract(&net, 1).unwrap().data, vec![2.0, 3.0]);
    net.clear();
    assert_eq!((first.destroyed.get(), second.destroyed.get()), (0, 1));
    assert!(ex.extract(&net, 1).is_err());
}

#[test]
fn conv_matches_direct_sum() {
    // 2 input channels 4x3, 3 outputs, 3x3 kernel, pad 1, stride 2, bias, relu
    let param = "7767517\n2 2\nInput data 0 1 data\nConvolution c 1 1 data out 0=3 1=3 3=2 4=1 5=1 6=54 9=1\n";
    let w: Vec<f32> = (0..54)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0)
        .collect();
    let bias = [0.1f32, -0.2, 0.3];
    let mut bytes = 0u32.to_le_bytes().to_vec();
    for v in w.iter().chain(bias.iter()) {
        bytes.extend(v.to_le_bytes());
    }
    let x: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin()).collect();
    for threads in [1, 2] {
        let mut net = Net::new(threads, true).unwrap();
        net.load_param_text(param).unwrap();
        net.load_model(&DataReader::from_bytes(bytes.clone())).unwrap();
        let mut ex = crate::ncnn::Extractor::new(&net).unwrap();
        ex.input(&net, 0, Mat::from_shape(&[4, 3, 2], x.clone()).unwrap())
            .unwrap();
        let y = ex.extract(&net, 1).unwrap();
        assert_eq!(y.shape(), vec![2, 2, 3]);
        for o in 0..3 {
            for oy in 0..2i64 {
                for ox in 0..2i64 {
                    let mut s = bias[o];
                    for c in 0..2 {
                        for ky in 0..3i64 {
                            for kx in 0..3i64 {
                                let (iy, ix) = (oy * 2 + ky - 1, ox * 2 + kx - 1);
                                if iy >= 0 && iy < 3 && ix >= 0 && ix < 4 {
                                    s += x[c * 12 + (iy * 4 + ix) as usize]
                                        * w[((o * 2 + c) * 3 + ky as usize) * 3 + kx as usize];
                                }
                            }
                        }
                    }
                    let got = y.data[o * 4 + (oy * 2 + ox) as usize];
                    assert!((got - s.max(0.0)).abs() < 1e-5, "{got} vs {s}");
                }
            }
        }
    }
}

#[test]
fn weights_errors() {
    let mut net = Net::new(1, true).unwrap();
    net.load_param_text(
        "7767517\n2 2\nInput data 0 1 data\nInnerProduct fc 1 1 data out 0=2 2=4\n",
    )
    .unwrap();
    let e = net.load_model(&DataReader::from_bytes(vec![0; 8])).unwrap_err();
    assert!(format!("{e}").contains("weights end early"), "{e}");
    let mut b = modelbin::TAG_INT8.to_le_bytes().to_vec();
    b.extend([0u8; 8]);
    let e = net.load_model(&DataReader::from_bytes(b)).unwrap_err();
    assert!(format!("{e}").contains("int8"), "{e}");
    let mut b = modelbin::TAG_FP16.to_le_bytes().to_vec();
    for v in [1.0f32, 2.0, 3.0, 4.0] {
        b.extend(half::f16::from_f32(v).to_le_bytes());
    }
    net.load_model(&DataReader::from_bytes(b)).unwrap();
    let mut ex = crate::ncnn::Extractor::new(&net).unwrap();
    ex.input(&net, 0, Mat::from_shape(&[2], vec![1.0, 1.0]).unwrap())
        .unwrap();
    assert_eq!(*ex.extract(&net, 1).unwrap().data, vec![3.0, 7.0]);
}

/// A custom layer that records its lifecycle into a shared log.
struct Logged(Rc<std::cell::RefCell<Vec<String>>>);
impl Layer for Logged {
    fn load_param(&mut self, pd: &ParamDict) -> anyhow::Result<()> {
        self.0.borrow_mut().push(format!("param {}", pd.int(0, -1)));
        Ok(())
    }
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        let w = mb.raw(1, "w")?;
        self.0.borrow_mut().push(format!("model {}", w[0]));
        Ok(())
    }
    fn create_pipeline(&mut self, _opt: &Opt) -> anyhow::Result<()> {
        self.0.borrow_mut().push("create".into());
        Ok(())
    }
    fn destroy_pipeline(&mut self, _opt: &Opt) {
        self.0.borrow_mut().push("destroy".into());
    }
    fn forward(&self, b: Vec<Mat>, _n: usize, _o: &Opt) -> anyhow::Result<Vec<Mat>> {
        Ok(b)
    }
}

struct LogFactory(Rc<std::cell::RefCell<Vec<String>>>);
impl CustomFactory for LogFactory {
    fn create(&self) -> anyhow::Result<Box<dyn Layer>> {
        Ok(Box::new(Logged(self.0.clone())))
    }
    fn destroy(&self, _l: Box<dyn Layer>) {
        self.0.borrow_mut().push("destroyed".into());
    }
}

#[test]
fn custom_layers_read_params_and_weights_between_pipelines() {
    let log = Rc::new(std::cell::RefCell::new(Vec::new()));
    let mut net = Net::new(1, true).unwrap();
    net.registry.register(TypeKey::Name("L"), Rc::new(LogFactory(log.clone()))).unwrap();
    net.load_param_text("7767517\n2 2\nInput data 0 1 data\nL l 1 1 data out 0=7\n").unwrap();
    let w = |v: f32| DataReader::from_bytes(v.to_le_bytes().to_vec());
    net.load_model(&w(2.5)).unwrap();
    net.load_model(&w(3.5)).unwrap();
    net.clear();
    let want = ["param 7", "model 2.5", "create", "destroy", "model 3.5", "create", "destroy", "destroyed"];
    assert_eq!(*log.borrow(), want);
}

#[test]
fn text_arrays_keep_each_element_spelling() {
    let pd = |t: &str| param::parse_text(&format!("7767517\n1 1\nInput a 0 1 a {t}\n")).unwrap().layers[0].params.clone();
    // all ints: floats convert the values
    assert_eq!(pd("-23300=2,1,2").floats(0), vec![1.0, 2.0]);
    // last one a float: an int element keeps its bits (as in ncnn)
    assert_eq!(pd("-23300=2,1,6.0").floats(0), vec![f32::from_bits(1), 6.0]);
    // read raw, an int written as the bits of a float is that float
    assert_eq!(pd("-23300=1,1077936128").floats_raw(0), vec![3.0]);
}

#[test]
fn int8_storage_must_agree_with_int8_scale_term() {
    let load = |param: &str, bin: Vec<u8>| -> anyhow::Result<()> {
        let mut net = Net::new(1, true)?;
        net.load_param_text(&format!("7767517\n2 2\nInput data 0 1 data\n{param}\n"))?;
        net.load_model(&DataReader::from_bytes(bin))
    };
    let floats = |n: usize| vec![0u8; 4 + 4 * n];
    let int8s = |n: usize| {
        let mut b = modelbin::TAG_INT8.to_le_bytes().to_vec();
        b.extend(vec![1u8; n.div_ceil(4) * 4]);
        b
    };
    // an int8 RNN whose weights are stored as fp32
    let mut bin = floats(2 * 3);
    bin.extend(floats(2));
    bin.extend(floats(4));
    bin.extend(vec![0u8; 16]);
    let e = load("RNN r 1 1 data out 0=2 1=6 8=1", bin).unwrap_err();
    assert!(format!("{e}").contains("not stored as int8"), "{e}");
    // int8 weights without the term
    let mut bin = int8s(6);
    bin.extend(floats(2));
    bin.extend(int8s(4));
    let e = load("GRU r 1 1 data out 0=2 1=18", bin).unwrap_err();
    assert!(format!("{e}").contains("int8_scale_term (8) is 0"), "{e}");
    let e = load("Gemm g 1 1 data out 3=1 5=1 6=0 8=2 9=3", int8s(6)).unwrap_err();
    assert!(format!("{e}").contains("int8_scale_term (18) is 0"), "{e}");
    for term in [4, 100, 801] {
        let e = load(&format!("Gemm g 1 1 data out 18={term}"), vec![]).unwrap_err();
        assert!(format!("{e}").contains("quantize_term"), "{e}");
    }
}

#[test]
fn strided_convolution_of_a_row_narrower_than_the_stride() {
    // Stride 3 over a width-1 input: two of the three column phases are
    // empty (they once sliced past the row).
    let mut net = Net::new(1, true).unwrap();
    net.load_param_text("7767517\n2 2\nInput data 0 1 data\nConvolution c 1 1 data out 0=2 1=1 3=3 5=0 6=2\n").unwrap();
    let mut b = vec![0u8; 4];
    for v in [2.0f32, -1.0] {
        b.extend(v.to_le_bytes());
    }
    net.load_model(&DataReader::from_bytes(b)).unwrap();
    let mut ex = crate::ncnn::Extractor::new(&net).unwrap();
    ex.input(&net, 0, Mat::from_shape(&[1, 4, 1], vec![1.0, 2.0, 3.0, 4.0]).unwrap()).unwrap();
    let y = ex.extract(&net, 1).unwrap();
    assert_eq!((y.w, y.h, y.c), (1, 2, 2));
    assert_eq!(*y.data, vec![2.0, 8.0, -1.0, -4.0]);
}

