//! Allocations whose size comes from input (an argument, a param or model
//! file, a saved model): checked before they are made.
//!
//! Rust's infallible allocation aborts the whole process when the system
//! refuses it, taking the R session with it. Every vector sized by input is
//! made here instead: the size is computed without overflow, refused above
//! an explicit limit (this machine's physical memory: more could only be
//! granted by overcommit and then killed when touched), and reserved
//! fallibly, so a refusal is an ordinary error naming what asked.

use std::sync::OnceLock;

fn fmt_bytes(n: u64) -> String {
    super::fmt::fmt_bytes(n.min(usize::MAX as u64) as usize)
}

/// Total physical memory of this machine in bytes, when the OS says.
pub fn physical_memory() -> Option<u64> {
    static MEM: OnceLock<Option<u64>> = OnceLock::new();
    *MEM.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kb.checked_mul(1024)
    })
}

static LIMIT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The largest single allocation granted: the machine's physical memory
/// (unknown: no limit beyond the address space), or a lower limit set with
/// [`set_limit`].
pub fn limit() -> u64 {
    let machine = physical_memory().unwrap_or(isize::MAX as u64);
    match LIMIT.load(std::sync::atomic::Ordering::Relaxed) {
        0 => machine,
        l => l.min(machine),
    }
}

/// Lower the single-allocation limit to `bytes` (0: back to the machine's
/// memory). For fuzzing and tests, which must not take gigabytes.
pub fn set_limit(bytes: u64) {
    LIMIT.store(bytes, std::sync::atomic::Ordering::Relaxed);
}

/// `n` elements of `elem` bytes, checked against overflow and [`limit`].
/// `what` names what the memory is for, in the message.
pub fn check(n: usize, elem: usize, what: &str) -> crate::Result<usize> {
    let bytes = (n as u128) * (elem as u128);
    let lim = limit();
    if bytes > lim as u128 || bytes > isize::MAX as u128 {
        let size = if bytes > u64::MAX as u128 {
            format!("more than {}", fmt_bytes(u64::MAX))
        } else {
            fmt_bytes(bytes as u64)
        };
        let whose = if LIMIT.load(std::sync::atomic::Ordering::Relaxed) == 0 { "this machine's memory" } else { "the allocation limit" };
        anyhow::bail!("cannot allocate {size} for {what}: more than {whose} ({}); use smaller sizes", fmt_bytes(lim));
    }
    Ok(bytes as usize)
}

fn refused(bytes: usize, what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "cannot allocate {} for {what}: the system refused the memory; free memory or use smaller sizes",
        fmt_bytes(bytes as u64)
    )
}

/// An empty vector with room for exactly `n` elements.
pub fn try_with_capacity<T>(n: usize, what: &str) -> crate::Result<Vec<T>> {
    let bytes = check(n, std::mem::size_of::<T>(), what)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| refused(bytes, what))?;
    Ok(v)
}

/// `n` copies of `value`.
pub fn try_vec<T: Clone>(n: usize, value: T, what: &str) -> crate::Result<Vec<T>> {
    let mut v = try_with_capacity(n, what)?;
    v.resize(n, value);
    Ok(v)
}

/// `words` zeroed words, None when the memory is not there (the caller
/// has checked the size with [`check`] and names what it was for). Asked of
/// the allocator as zeroed memory: fresh pages from the system come zeroed
/// and are not written a second time (a filled vector wrote every byte of
/// every buffer, a tenth of a training step's time on the CPU backend).
pub fn zeroed_words(words: usize) -> Option<Box<[u32]>> {
    if words == 0 {
        return Some(Box::new([]));
    }
    let layout = std::alloc::Layout::array::<u32>(words).ok()?;
    // SAFETY: the layout is not zero-sized (words > 0).
    let p = unsafe { std::alloc::alloc_zeroed(layout) } as *mut u32;
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is a live allocation of `layout` (an array of `words`
    // u32, all zero: valid values), owned by nothing else; a boxed slice of
    // that length frees it with the same layout.
    Some(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, words)) })
}

/// Reserve room for `extra` more elements in `v`.
pub fn try_reserve<T>(v: &mut Vec<T>, extra: usize, what: &str) -> crate::Result<()> {
    let n = v.len().checked_add(extra).ok_or_else(|| refused(usize::MAX, what))?;
    let bytes = check(n, std::mem::size_of::<T>(), what)?;
    v.try_reserve(extra).map_err(|_| refused(bytes, what))
}

/// The product of `dims`, or an error naming `what` when it overflows.
pub fn product(dims: &[usize], what: &str) -> crate::Result<usize> {
    dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| {
        anyhow::anyhow!(
            "{what} has {} elements, more than can be addressed; use smaller sizes",
            dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" x ")
        )
    })
}

/// A refused allocation in code that cannot return an error (a blob
/// constructor deep in a kernel): it unwinds with this payload, and
/// [`catch_refusal`] at the boundary of the step (an ncnn layer) turns it
/// back into an error. Any other panic keeps unwinding.
pub struct Refused(pub String);

/// Unwind with `e` as a [`Refused`] payload.
pub fn unwind(e: anyhow::Error) -> ! {
    std::panic::panic_any(Refused(format!("{e:#}")))
}

/// `v`, or unwind with its error (see [`Refused`]).
pub fn or_unwind<T>(v: crate::Result<T>) -> T {
    v.unwrap_or_else(|e| unwind(e))
}

/// Run `f`; a [`Refused`] unwind inside it becomes its error.
pub fn catch_refusal<R>(f: impl FnOnce() -> crate::Result<R>) -> crate::Result<R> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => match payload.downcast::<Refused>() {
            Ok(r) => Err(anyhow::anyhow!(r.0)),
            Err(other) => std::panic::resume_unwind(other),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_requests_are_errors() {
        let e = try_vec(usize::MAX / 2, 0f32, "a test blob").unwrap_err().to_string();
        assert!(e.contains("a test blob") && e.contains("cannot allocate"), "{e}");
        let e = try_with_capacity::<f64>((limit() / 8 + 1) as usize, "weights").unwrap_err().to_string();
        assert!(e.contains("machine's memory"), "{e}");
        assert_eq!(try_vec(3, 1u8, "x").unwrap(), vec![1, 1, 1]);
        assert!(product(&[usize::MAX, 2], "a blob").is_err());
        assert_eq!(product(&[2, 3, 4], "a blob").unwrap(), 24);
    }

    #[test]
    fn zeroed_words_are_zero_or_refused() {
        assert_eq!(zeroed_words(0).map(|b| b.len()), Some(0));
        let b = zeroed_words(1000).unwrap();
        assert_eq!(b.len(), 1000);
        assert!(b.iter().all(|&w| w == 0));
        // More words than a layout can describe: refused, not an abort.
        assert!(zeroed_words(usize::MAX / 2).is_none());
    }

    #[test]
    fn refusals_unwind_to_the_boundary() {
        let r: crate::Result<()> = catch_refusal(|| {
            let _v: Vec<f32> = or_unwind(try_vec(usize::MAX / 8, 0f32, "a deep blob"));
            Ok(())
        });
        assert!(r.unwrap_err().to_string().contains("a deep blob"));
        let other = std::panic::catch_unwind(|| catch_refusal::<()>(|| panic!("a real bug")));
        assert!(other.is_err(), "other panics keep unwinding");
    }
}
