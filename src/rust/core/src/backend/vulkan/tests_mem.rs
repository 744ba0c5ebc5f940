//! Contexts, buffers and transfers on a real device (skipped without one).

use super::test_util::ctx;
use super::*;
use std::sync::Arc;

#[test]
fn context_is_shared_and_describes_the_device() {
    let Some(c) = ctx() else { return };
    let again = VkContext::get(0).unwrap();
    assert!(Arc::ptr_eq(&c, &again), "a second get() must reuse the context");
    let info = c.info();
    assert!(!info.name.is_empty());
    assert!(info.memory_total > 0);
    assert!(info.limits.max_memory_allocation_count > 0);
    assert!(info.limits.max_storage_buffer_range > 0);
    assert!(info.limits.max_compute_work_group_count[0] > 0);
    let (free, total) = c.memory();
    assert!(total > 0 && free <= total, "free {free} total {total}");
    let (_, total2) = device_memory(0).unwrap();
    assert_eq!(total, total2);
    let e = VkContext::get(99).err().unwrap().to_string();
    assert!(e.contains("99"), "{e}");
}

fn round_trip(c: &Arc<VkContext>) {
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let b = c.alloc(data.len()).unwrap();
    assert!(b.size() >= data.len());
    c.write(&b, 0, &data).unwrap();
    let mut out = vec![0u8; data.len()];
    c.read(&b, 0, &mut out).unwrap();
    assert_eq!(out, data);
    // partial write and read at an offset
    c.write(&b, 1001, &[9, 8, 7]).unwrap();
    let mut part = [0u8; 5];
    c.read(&b, 1000, &mut part).unwrap();
    assert_eq!(part, [data[1000], 9, 8, 7, data[1004]]);
    // out of range is an error naming the sizes, not a crash
    let e = c.write(&b, b.size() - 1, &[1, 2]).unwrap_err().to_string();
    assert!(e.contains("offset") && e.contains(&c.info().name), "{e}");
    let mut big = vec![0u8; b.size() + 1];
    assert!(c.read(&b, 0, &mut big).is_err());
}

#[test]
fn write_read_round_trip_direct_and_staged() {
    let Some(c) = ctx() else { return };
    round_trip(&c);
    // The staging path (device-local buffers), forced here because lavapipe
    // shares memory with the host; on a context of its own so other tests
    // keep their direct buffers.
    let c2 = VkContext::unshared(0).unwrap();
    c2.set_force_staging(true);
    let before = c2.submissions();
    let b = c2.alloc(64).unwrap();
    assert!(!b.is_mapped());
    c2.write(&b, 4, &[1, 2, 3, 4]).unwrap();
    let mut out = [0u8; 8];
    c2.read(&b, 2, &mut out).unwrap();
    assert_eq!(&out[2..6], &[1, 2, 3, 4]);
    assert_eq!(c2.submissions(), before + 2, "each staged transfer submits one copy");
    // a graph over device-local buffers
    let x = super::test_util::values(300, 1, -1.0, 1.0);
    let t = super::test_util::upload(&c2, &x, [300, 1, 1, 1], crate::base::dtype::DType::F16, false, 1);
    let out = super::test_util::output(&c2, [300, 1, 1, 1], crate::base::dtype::DType::F32);
    assert!(!t.buf.is_mapped() && !out.buf.is_mapped());
    let got = super::test_util::run1(&c2, &crate::op::Op::Scale { s: 2.0 }, &[&t], &out);
    let want: Vec<f32> = x.iter().map(|&v| 2.0 * super::test_util::quant(v, crate::base::dtype::DType::F16)).collect();
    super::test_util::assert_close(&got, &want, 0.0, 0.0, "SCALE on device-local buffers");
}

#[test]
fn many_small_buffers_share_few_device_allocations() {
    if ctx().is_none() {
        return;
    }
    // A context of its own: other tests allocating on the shared one at the
    // same time would add their blocks to the count.
    let c = VkContext::unshared(0).unwrap();
    // Suballocation keeps vkAllocateMemory calls far below the driver's
    // maxMemoryAllocationCount. When that limit is small (4096 on many
    // GPUs) we exceed it; lavapipe reports a huge limit, so there we hold
    // 10,000 live buffers and check the number of device allocations.
    let limit = c.info().limits.max_memory_allocation_count as usize;
    let n = if limit <= 20_000 { limit + 1 } else { 10_000 };
    let before = c.device_allocations();
    let mut bufs = Vec::with_capacity(n);
    for i in 0..n {
        let b = c.alloc(256).unwrap_or_else(|e| panic!("buffer {i}: {e:#}"));
        bufs.push(b);
    }
    let blocks = c.device_allocations() - before;
    assert!(blocks * 100 < n, "{blocks} device allocations for {n} buffers");
    c.write(&bufs[n - 1], 0, &[42; 16]).unwrap();
    let mut out = [0u8; 16];
    c.read(&bufs[n - 1], 0, &mut out).unwrap();
    assert_eq!(out, [42; 16]);
    drop(bufs);
}

#[test]
fn impossible_allocation_is_a_clear_error() {
    let Some(c) = ctx() else { return };
    let too_big = (c.info().limits.max_memory_allocation_size.max(c.info().largest_heap) as usize).saturating_mul(2);
    let e = c.alloc(too_big).unwrap_err().to_string();
    assert!(e.contains(&c.info().name) && e.contains("cannot allocate") && e.contains("GiB"), "{e}");
    // the device stays usable
    let b = c.alloc(16).unwrap();
    c.write(&b, 0, &[1; 16]).unwrap();
}

#[test]
fn context_lives_while_buffers_do_and_is_released_after() {
    if ctx().is_none() {
        return;
    }
    let c = VkContext::unshared(0).unwrap();
    let weak = Arc::downgrade(&c);
    let b = c.alloc(1024).unwrap();
    drop(c);
    assert!(weak.upgrade().is_some(), "a live buffer keeps its device context");
    b.context().write(&b, 0, &[5; 8]).unwrap();
    drop(b);
    assert!(weak.upgrade().is_none(), "the context goes with its last holder");
}

#[test]
fn threads_share_a_context() {
    let Some(c) = ctx() else { return };
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let c = Arc::clone(&c);
            std::thread::spawn(move || {
                use super::test_util::*;
                let x = values(1000, t, -1.0, 1.0);
                for _ in 0..5 {
                    let a = upload(&c, &x, [1000, 1, 1, 1], crate::base::dtype::DType::F32, false, 0);
                    let out = output(&c, [1000, 1, 1, 1], crate::base::dtype::DType::F32);
                    let got = run1(&c, &crate::op::Op::Add, &[&a, &a], &out);
                    let want: Vec<f32> = x.iter().map(|v| v + v).collect();
                    assert_close(&got, &want, 0.0, 0.0, "ADD from several threads");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}
