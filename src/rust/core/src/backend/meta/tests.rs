use super::*;
use crate::backend::device::{cpu_device, MetaDevice};
use crate::backend::meta::split::*;
use crate::backend::Backend;
use std::sync::atomic::Ordering;
use crate::base::dtype::DType;
use crate::graph::Graph;
use crate::op::Op;
use crate::tensor::io::{get_values, set_values};
use crate::tensor::TENSOR_OVERHEAD;

/// Splits tensors named "w*" along dimension 1 (one column to the first
/// device), mirrors the rest; or fails every time.
#[derive(Debug)]
struct ByName {
    fail: bool,
    calls: std::sync::atomic::AtomicUsize,
}

impl SplitPolicy for ByName {
    fn split(&self, info: &SplitTensorInfo, n: usize) -> crate::Result<SplitAnswer> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            anyhow::bail!("deliberate failure");
        }
        if info.name.starts_with('w') {
            let mut ne = vec![1i64; n];
            ne[n - 1] = info.ne[1] as i64 - (n as i64 - 1);
            return Ok(SplitAnswer { axis: 1, ne });
        }
        Ok(SplitAnswer { axis: AXIS_MIRRORED, ne: vec![] })
    }
}

fn meta(fail: bool) -> (Arc<MetaDevice>, Arc<ByName>) {
    let p = Arc::new(ByName { fail, calls: Default::default() });
    (MetaDevice::new(vec![cpu_device(), cpu_device()], p.clone()).unwrap(), p)
}

#[test]
fn split_tensors_round_trip_and_compute() {
    let (dev, _) = meta(false);
    let b = Backend::meta(dev.clone()).unwrap();
    assert_eq!(b.name(), "Meta(CPU, CPU)");
    let ctx = Context::new(16 * TENSOR_OVERHEAD, true).unwrap();
    let w = ctx.new_tensor(DType::F32, &[3, 4]).unwrap();
    w.set_name("w");
    let x = ctx.new_tensor(DType::F32, &[3, 2]).unwrap();
    let y = ctx.op(Op::MulMat, &[w.clone(), x.clone()]).unwrap();
    let z = ctx.op(Op::Scale { s: 2.0 }, &[y.clone()]).unwrap();
    let buf = b.alloc_ctx_tensors(&ctx, BufferTag::User).unwrap().unwrap();
    assert_eq!(buf.backend_name(), b.name());
    let wv: Vec<f64> = (0..12).map(|v| v as f64).collect();
    set_values(&w, &wv, 0).unwrap();
    set_values(&x, &[1.0, 0.0, 0.0, 0.0, 1.0, 1.0], 0).unwrap();
    assert_eq!(get_values(&w, 0, None).unwrap(), wv);
    Graph::build(&z).unwrap().compute(&b).unwrap();
    // rows of w^T x: column 0 picks w[0, k], column 1 sums w[1, k] + w[2, k]
    let want: Vec<f64> = vec![0.0, 3.0, 6.0, 9.0, 3.0, 9.0, 15.0, 21.0].iter().map(|v| v * 2.0).collect();
    assert_eq!(get_values(&z, 0, None).unwrap(), want);
    // every device holds its share: the mirrored result on both, w's slices apart
    let crate::memory::BufferMem::Device(d) = &*buf.read("t").unwrap() else { panic!() };
    let m = d.as_any().downcast_ref::<MetaMemory>().unwrap();
    let e = m.layout.entries.iter().find(|e| e.split != DeviceSplit::Mirrored).unwrap();
    assert_eq!(e.part_layout(0).ne4(), [3, 1, 1, 1]);
    let zlast = m.layout.entries.last().unwrap();
    for p in &m.parts {
        let mut bytes = vec![0u8; 32];
        p.read_bytes(zlast.part_offsets[0], &mut bytes, "t").unwrap();
        assert_eq!(f32::from_ne_bytes(bytes[4..8].try_into().unwrap()), 6.0);
    }
}

#[test]
fn a_failing_policy_mirrors_from_then_on() {
    let (dev, p) = meta(true);
    let b = Backend::meta(dev.clone()).unwrap();
    let ctx = Context::new(8 * TENSOR_OVERHEAD, true).unwrap();
    let a = ctx.new_tensor(DType::F32, &[6]).unwrap();
    let c = ctx.new_tensor(DType::F32, &[2]).unwrap();
    b.alloc_ctx_tensors(&ctx, BufferTag::User).unwrap().unwrap();
    assert!(dev.fell_back());
    assert_eq!(p.calls.load(Ordering::SeqCst), 1, "not asked again after failing");
    set_values(&a, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 0).unwrap();
    set_values(&c, &[7.0, 8.0], 0).unwrap();
    assert_eq!(get_values(&a, 0, None).unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert!(MetaDevice::new(vec![], p.clone()).is_err());
    assert!(MetaDevice::new(vec![dev.device()], p).is_err());
}
