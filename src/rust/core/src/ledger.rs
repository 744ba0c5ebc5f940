//! The byte ledger: every buffer on every backend is allocated through it.
//!
//! Before an allocation the ledger checks the budget (all tracked bytes plus
//! the request must stay within the limit) and refuses with a message a user
//! can act on; after it, the bytes are recorded against the buffer's pool and
//! held by a [`Reservation`], whose drop releases them. The ledger also counts
//! the bytes and calls of uploads (host to buffer) and downloads, per pool.

use std::fmt;
use std::sync::Mutex;

/// Which lifetime a buffer belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pool {
    /// Buffers the user allocated directly (contexts, `ggml_backend_alloc_ctx_tensors`).
    User,
    /// Activations and gradients: freed wholesale at every tape reset.
    Pass,
    /// Resident weights and optimizer state: survive pass resets.
    Persistent,
}

impl Pool {
    pub const ALL: [Pool; 3] = [Pool::User, Pool::Pass, Pool::Persistent];

    pub fn index(self) -> usize {
        match self {
            Pool::User => 0,
            Pool::Pass => 1,
            Pool::Persistent => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Pool::User => "user",
            Pool::Pass => "pass",
            Pool::Persistent => "persistent",
        }
    }

    pub fn from_name(name: &str) -> crate::Result<Pool> {
        match name {
            "user" => Ok(Pool::User),
            "pass" => Ok(Pool::Pass),
            "persistent" => Ok(Pool::Persistent),
            other => anyhow::bail!(
                "unknown memory pool \"{other}\": use \"pass\" or \"persistent\""
            ),
        }
    }
}

impl fmt::Display for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A snapshot of the ledger's figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Live bytes per pool (indexed by [`Pool::index`]).
    pub bytes: [u64; 3],
    /// Live buffers per pool.
    pub buffers: [u64; 3],
    /// Highest total of live bytes since the last peak reset.
    pub peak_bytes: u64,
    pub upload_bytes: [u64; 3],
    pub upload_calls: [u64; 3],
    pub download_bytes: [u64; 3],
    pub download_calls: [u64; 3],
    /// Allocations granted and refused since the process started.
    pub allocations: u64,
    pub refusals: u64,
    /// Budget in bytes; `f64::INFINITY` when unlimited.
    pub limit: f64,
}

impl Stats {
    pub fn total_bytes(&self) -> u64 {
        self.bytes.iter().sum()
    }
}

/// The ledger. One per process: see [`ledger`].
pub struct Ledger {
    state: Mutex<Stats>,
}

static LEDGER: Ledger = Ledger {
    state: Mutex::new(Stats {
        bytes: [0; 3],
        buffers: [0; 3],
        peak_bytes: 0,
        upload_bytes: [0; 3],
        upload_calls: [0; 3],
        download_bytes: [0; 3],
        download_calls: [0; 3],
        allocations: 0,
        refusals: 0,
        limit: f64::INFINITY,
    }),
};

/// The process-wide ledger.
pub fn ledger() -> &'static Ledger {
    &LEDGER
}

const MB: f64 = 1024.0 * 1024.0;

/// Bytes held for one live buffer; dropping it releases them.
#[derive(Debug)]
pub struct Reservation {
    pool: Pool,
    bytes: u64,
}

impl Reservation {
    pub fn pool(&self) -> Pool {
        self.pool
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        ledger().release(self.pool, self.bytes);
    }
}

impl Ledger {
    fn lock(&self) -> std::sync::MutexGuard<'_, Stats> {
        // A panic while holding the lock cannot leave the counters half
        // updated (each update is a few integer stores), so poisoning is
        // safe to ignore.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Check that `extra` more bytes fit in the budget.
    pub fn check_budget(&self, extra: u64) -> crate::Result<()> {
        let s = self.lock();
        Self::check_locked(&s, extra)
    }

    fn check_locked(s: &Stats, extra: u64) -> crate::Result<()> {
        let used = s.total_bytes();
        if (used as f64 + extra as f64) > s.limit {
            anyhow::bail!(
                "ggmlR: autograd tape memory budget exceeded ({:.1} MB used + {:.1} MB requested > {:.1} MB limit). \
                 Reset the tape, shorten it, or raise the limit with .ag_tape_mem_limit().",
                used as f64 / MB,
                extra as f64 / MB,
                s.limit / MB
            );
        }
        Ok(())
    }

    /// Ask for `bytes` in `pool`: refused past the budget, else recorded and
    /// held until the returned reservation is dropped. Call this before the
    /// memory is allocated, and drop the reservation if the allocation fails.
    pub fn reserve(&self, pool: Pool, bytes: u64) -> crate::Result<Reservation> {
        let mut s = self.lock();
        if let Err(e) = Self::check_locked(&s, bytes) {
            s.refusals += 1;
            return Err(e);
        }
        let i = pool.index();
        s.bytes[i] += bytes;
        s.buffers[i] += 1;
        s.allocations += 1;
        s.peak_bytes = s.peak_bytes.max(s.total_bytes());
        Ok(Reservation { pool, bytes })
    }

    fn release(&self, pool: Pool, bytes: u64) {
        let mut s = self.lock();
        let i = pool.index();
        s.bytes[i] = s.bytes[i].saturating_sub(bytes);
        s.buffers[i] = s.buffers[i].saturating_sub(1);
    }

    pub fn record_upload(&self, pool: Pool, bytes: u64) {
        let mut s = self.lock();
        s.upload_bytes[pool.index()] += bytes;
        s.upload_calls[pool.index()] += 1;
    }

    pub fn record_download(&self, pool: Pool, bytes: u64) {
        let mut s = self.lock();
        s.download_bytes[pool.index()] += bytes;
        s.download_calls[pool.index()] += 1;
    }

    /// Set the budget (bytes, `f64::INFINITY` for none); returns the old one.
    pub fn set_limit(&self, limit: f64) -> crate::Result<f64> {
        anyhow::ensure!(
            !limit.is_nan() && limit > 0.0,
            "the memory limit must be a positive number of bytes (or Inf for none), got {limit}"
        );
        let mut s = self.lock();
        Ok(std::mem::replace(&mut s.limit, limit))
    }

    pub fn limit(&self) -> f64 {
        self.lock().limit
    }

    pub fn stats(&self) -> Stats {
        self.lock().clone()
    }

    /// Restart the peak from the current total and zero the transfer counters.
    pub fn reset_counters(&self) {
        let mut s = self.lock();
        s.peak_bytes = s.total_bytes();
        s.upload_bytes = [0; 3];
        s.upload_calls = [0; 3];
        s.download_bytes = [0; 3];
        s.download_calls = [0; 3];
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Tests touching the process-wide ledger run one at a time.
    pub(crate) static SERIAL: Mutex<()> = Mutex::new(());

    pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[test]
    fn reserve_release_and_peak() {
        let _g = serial();
        let l = ledger();
        let before = l.stats();
        let a = l.reserve(Pool::Pass, 1000).unwrap();
        let b = l.reserve(Pool::Persistent, 500).unwrap();
        let mid = l.stats();
        assert_eq!(mid.bytes[Pool::Pass.index()], before.bytes[1] + 1000);
        assert_eq!(mid.buffers[Pool::Persistent.index()], before.buffers[2] + 1);
        assert!(mid.peak_bytes >= mid.total_bytes());
        drop(a);
        drop(b);
        assert_eq!(l.stats().bytes, before.bytes);
        assert_eq!(l.stats().buffers, before.buffers);
    }

    #[test]
    fn budget_refuses_before_recording() {
        let _g = serial();
        let l = ledger();
        let held = l.reserve(Pool::Persistent, 4096).unwrap();
        let used = l.stats().total_bytes();
        let old = l.set_limit((used + 100) as f64).unwrap();
        let err = l.reserve(Pool::Pass, 1024).unwrap_err().to_string();
        assert!(err.contains("budget exceeded"), "{err}");
        assert!(err.contains(".ag_tape_mem_limit()"), "{err}");
        assert_eq!(l.stats().total_bytes(), used, "a refusal records nothing");
        assert!(l.check_budget(50).is_ok());
        assert!(l.check_budget(101).is_err());
        l.set_limit(old).unwrap();
        drop(held);
        assert!(l.set_limit(-1.0).is_err());
        assert!(l.set_limit(f64::NAN).is_err());
    }

    #[test]
    fn transfers_are_counted_per_pool() {
        let _g = serial();
        let l = ledger();
        let before = l.stats();
        l.record_upload(Pool::Persistent, 64);
        l.record_download(Pool::Pass, 32);
        let after = l.stats();
        assert_eq!(after.upload_bytes[2] - before.upload_bytes[2], 64);
        assert_eq!(after.upload_calls[2] - before.upload_calls[2], 1);
        assert_eq!(after.download_bytes[1] - before.download_bytes[1], 32);
        assert_eq!(Pool::from_name("pass").unwrap(), Pool::Pass);
        assert!(Pool::from_name("gpu").is_err());
    }
}
