//! The byte ledger: every buffer on every backend is allocated through it.
//!
//! [`super::buffer::Buffer::allocate`] asks [`before_alloc`] first (the budget
//! check: all live bytes plus the request must stay within the limit, else a
//! refusal with a message the user can act on, before anything is allocated),
//! reports [`after_alloc`] once the memory exists, and [`released`] when it is
//! freed. Uploads (host to buffer), downloads and copies between buffers
//! (a scheduler moving a tensor between backends) are counted too. Every figure
//! is kept per [`BufferTag`], so residency pools can be told apart.
//!
//! Buffers of [`BufferTag::Cpu`] (values and gradients of autograd tensors
//! on device "cpu") are host memory that R's users see as ordinary heap
//! memory: they are counted under their own tag but stay out of the totals,
//! the peak and the budget ([`Stats::total_bytes`], [`before_alloc`]).

use super::tag::BufferTag;
use std::sync::Mutex;

/// Number of tags the ledger keeps apart.
pub const N_TAGS: usize = 5;

pub fn tag_index(tag: BufferTag) -> usize {
    match tag {
        BufferTag::Context => 0,
        BufferTag::User => 1,
        BufferTag::Pass => 2,
        BufferTag::Persistent => 3,
        BufferTag::Cpu => 4,
    }
}

/// A snapshot of the ledger's figures; arrays are indexed by [`tag_index`].
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    pub bytes: [u64; N_TAGS],
    pub buffers: [u64; N_TAGS],
    /// Highest total of live bytes since the process started (or the last
    /// [`reset_peak`]).
    pub peak_bytes: u64,
    pub upload_bytes: [u64; N_TAGS],
    pub upload_calls: [u64; N_TAGS],
    pub download_bytes: [u64; N_TAGS],
    pub download_calls: [u64; N_TAGS],
    /// Copies from one buffer into another, by the destination's tag.
    pub copy_bytes: [u64; N_TAGS],
    pub copy_calls: [u64; N_TAGS],
    /// Allocations granted and refused since the process started.
    pub allocations: u64,
    pub refusals: u64,
    /// Budget in bytes; `f64::INFINITY` when unlimited.
    pub limit: f64,
}

impl Stats {
    /// Live bytes of every tag but [`BufferTag::Cpu`].
    pub fn total_bytes(&self) -> u64 {
        counted(&self.bytes)
    }

    /// Live buffers of every tag but [`BufferTag::Cpu`].
    pub fn total_buffers(&self) -> u64 {
        counted(&self.buffers)
    }

    /// Live bytes of one tag.
    // BOUNDS-FN: the arrays have N_TAGS entries and tag_index gives 0..N_TAGS.
    pub fn bytes_of(&self, tag: BufferTag) -> u64 {
        self.bytes[tag_index(tag)]
    }

    /// Live buffers of one tag.
    // BOUNDS-FN: the arrays have N_TAGS entries and tag_index gives 0..N_TAGS.
    pub fn buffers_of(&self, tag: BufferTag) -> u64 {
        self.buffers[tag_index(tag)]
    }
}

/// The sum of a per-tag figure over the tags in the totals (all but
/// [`BufferTag::Cpu`]).
pub fn counted(a: &[u64; N_TAGS]) -> u64 {
    a.iter().enumerate().filter(|&(i, _)| i != tag_index(BufferTag::Cpu)).map(|(_, v)| v).sum()
}

static STATE: Mutex<Stats> = Mutex::new(Stats {
    bytes: [0; N_TAGS],
    buffers: [0; N_TAGS],
    peak_bytes: 0,
    upload_bytes: [0; N_TAGS],
    upload_calls: [0; N_TAGS],
    download_bytes: [0; N_TAGS],
    download_calls: [0; N_TAGS],
    copy_bytes: [0; N_TAGS],
    copy_calls: [0; N_TAGS],
    allocations: 0,
    refusals: 0,
    limit: f64::INFINITY,
});

fn lock() -> std::sync::MutexGuard<'static, Stats> {
    // Each update is a few integer stores that cannot panic half-way, so a
    // poisoned lock still guards consistent figures.
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// What asks for memory of a tag, for refusal messages.
pub fn subsystem(tag: BufferTag) -> &'static str {
    match tag {
        BufferTag::Context => "context memory (ggml_init())",
        BufferTag::User => "a backend buffer",
        BufferTag::Pass => "the autograd pass pool (activations of one step)",
        BufferTag::Persistent => "the autograd persistent pool (parameters and optimizer state)",
        BufferTag::Cpu => "autograd tensors on device \"cpu\"",
    }
}

fn check_locked(s: &Stats, extra: u64, what: &str) -> crate::Result<()> {
    let used = s.total_bytes();
    if (used as f64 + extra as f64) > s.limit {
        let fmt = crate::base::fmt::fmt_bytes;
        let limit = if s.limit >= usize::MAX as f64 { usize::MAX } else { s.limit as usize };
        anyhow::bail!(
            "memory budget exceeded: {} requested for {what}, {} in use, limit {}. \
             Free tensors, buffers or contexts you no longer need, or raise the limit with \
             ag_memory_limit() (Inf for none).",
            fmt(extra.min(usize::MAX as u64) as usize),
            fmt(used as usize),
            fmt(limit)
        );
    }
    Ok(())
}

/// Check that `extra` more bytes for `what` (named in the refusal) fit in the
/// budget; a refusal is counted.
pub fn check_budget(extra: u64, what: &str) -> crate::Result<()> {
    let mut s = lock();
    let r = check_locked(&s, extra, what);
    if r.is_err() {
        s.refusals += 1;
    }
    r
}

/// Called before memory is taken; an error refuses the allocation.
pub fn before_alloc(bytes: usize, tag: BufferTag) -> crate::Result<()> {
    if tag == BufferTag::Cpu {
        // Host memory outside the budget (see the module notes).
        return Ok(());
    }
    check_budget(bytes as u64, subsystem(tag))
}

/// Called once the memory of a buffer exists.
// BOUNDS-FN: the arrays have N_TAGS entries and tag_index gives 0..N_TAGS.
pub fn after_alloc(bytes: usize, tag: BufferTag) {
    let mut s = lock();
    let i = tag_index(tag);
    s.bytes[i] += bytes as u64;
    s.buffers[i] += 1;
    if tag != BufferTag::Cpu {
        s.allocations += 1;
    }
    s.peak_bytes = s.peak_bytes.max(s.total_bytes());
}

/// Called when a buffer's memory is released.
// BOUNDS-FN: the arrays have N_TAGS entries and tag_index gives 0..N_TAGS.
pub fn released(bytes: usize, tag: BufferTag) {
    let mut s = lock();
    let i = tag_index(tag);
    s.bytes[i] = s.bytes[i].saturating_sub(bytes as u64);
    s.buffers[i] = s.buffers[i].saturating_sub(1);
}

// BOUNDS-FN: the arrays have N_TAGS entries and tag_index gives 0..N_TAGS.
pub fn uploaded(bytes: usize, tag: BufferTag) {
    let mut s = lock();
    s.upload_bytes[tag_index(tag)] += bytes as u64;
    s.upload_calls[tag_index(tag)] += 1;
}

// BOUNDS-FN: the arrays have N_TAGS entries and tag_index gives 0..N_TAGS.
pub fn downloaded(bytes: usize, tag: BufferTag) {
    let mut s = lock();
    s.download_bytes[tag_index(tag)] += bytes as u64;
    s.download_calls[tag_index(tag)] += 1;
}

/// A copy of `bytes` from one buffer into a buffer tagged `tag`.
// BOUNDS-FN: the arrays have N_TAGS entries and tag_index gives 0..N_TAGS.
pub fn copied(bytes: usize, tag: BufferTag) {
    let mut s = lock();
    s.copy_bytes[tag_index(tag)] += bytes as u64;
    s.copy_calls[tag_index(tag)] += 1;
}

/// Set the budget (bytes; `f64::INFINITY` for none); returns the old one.
pub fn set_limit(limit: f64) -> crate::Result<f64> {
    anyhow::ensure!(
        !limit.is_nan() && limit > 0.0,
        "the memory limit must be a positive number of bytes (or Inf for none), got {limit}"
    );
    Ok(std::mem::replace(&mut lock().limit, limit))
}

pub fn limit() -> f64 {
    lock().limit
}

pub fn stats() -> Stats {
    lock().clone()
}

/// Restart the peak from the current total and zero the transfer counters.
pub fn reset_peak() {
    let mut s = lock();
    s.peak_bytes = s.total_bytes();
    s.upload_bytes = [0; N_TAGS];
    s.upload_calls = [0; N_TAGS];
    s.download_bytes = [0; N_TAGS];
    s.download_calls = [0; N_TAGS];
    s.copy_bytes = [0; N_TAGS];
    s.copy_calls = [0; N_TAGS];
}

/// Time `n` budget-check/record/release cycles of the ledger itself (no
/// memory is allocated), for benchmarks. The allocation counter is restored,
/// so the ledger's figures are unchanged afterwards.
pub fn overhead_probe(n: usize) -> std::time::Duration {
    let allocations = lock().allocations;
    let start = std::time::Instant::now();
    for _ in 0..n {
        if before_alloc(64, BufferTag::Context).is_ok() {
            after_alloc(64, BufferTag::Context);
            released(64, BufferTag::Context);
        }
    }
    let elapsed = start.elapsed();
    lock().allocations = allocations;
    elapsed
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Tests that assert on the process-wide ledger run one at a time.
    pub(crate) static SERIAL: Mutex<()> = Mutex::new(());

    pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[test]
    fn record_release_and_peak() {
        let _g = serial();
        let before = stats();
        before_alloc(1000, BufferTag::Pass).unwrap();
        after_alloc(1000, BufferTag::Pass);
        after_alloc(500, BufferTag::Persistent);
        let mid = stats();
        assert_eq!(mid.bytes_of(BufferTag::Pass), before.bytes_of(BufferTag::Pass) + 1000);
        assert_eq!(mid.buffers_of(BufferTag::Persistent), before.buffers_of(BufferTag::Persistent) + 1);
        assert!(mid.peak_bytes >= mid.total_bytes());
        released(1000, BufferTag::Pass);
        released(500, BufferTag::Persistent);
        assert_eq!(stats().bytes, before.bytes);
        assert_eq!(stats().buffers, before.buffers);
    }

    #[test]
    fn budget_counts_every_tag() {
        // On a private snapshot: the process-wide limit is left alone so that
        // tests allocating buffers concurrently are not refused.
        let mut s = stats();
        s.bytes = [100, 200, 300, 400, 0];
        s.limit = 1100.0;
        assert!(check_locked(&s, 100, "a test").is_ok());
        let err = check_locked(&s, 101, "a test").unwrap_err().to_string();
        assert!(err.contains("budget exceeded: 101 B requested for a test"), "{err}");
        assert!(err.contains("1000 B in use, limit 1.1 KiB"), "{err}");
        assert!(err.contains("ag_memory_limit()") && !err.contains(".ag_tape"), "{err}");
        s.limit = f64::INFINITY;
        assert!(check_locked(&s, u64::MAX, "a test").is_ok());
        assert!(set_limit(-1.0).is_err());
        assert!(set_limit(f64::NAN).is_err());
        assert!(set_limit(0.0).is_err());
    }

    #[test]
    fn transfers_are_counted_per_tag() {
        let _g = serial();
        let before = stats();
        uploaded(64, BufferTag::Persistent);
        downloaded(32, BufferTag::Pass);
        let after = stats();
        let p = tag_index(BufferTag::Persistent);
        let a = tag_index(BufferTag::Pass);
        assert_eq!(after.upload_bytes[p] - before.upload_bytes[p], 64);
        assert_eq!(after.upload_calls[p] - before.upload_calls[p], 1);
        assert_eq!(after.download_bytes[a] - before.download_bytes[a], 32);
    }
}
