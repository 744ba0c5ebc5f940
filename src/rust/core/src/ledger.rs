//! The byte ledger: every buffer allocation, release, upload and download is
//! reported here by [`crate::buffer::Buffer`]. For now it counts; a budget
//! check belongs in [`before_alloc`].

use crate::buffer::BufferTag;
use std::sync::atomic::{AtomicU64, Ordering};

static LIVE_BYTES: AtomicU64 = AtomicU64::new(0);
static LIVE_BUFFERS: AtomicU64 = AtomicU64::new(0);
static UPLOAD_BYTES: AtomicU64 = AtomicU64::new(0);
static UPLOAD_CALLS: AtomicU64 = AtomicU64::new(0);
static DOWNLOAD_BYTES: AtomicU64 = AtomicU64::new(0);
static DOWNLOAD_CALLS: AtomicU64 = AtomicU64::new(0);

/// Called before memory is taken; an error here refuses the allocation.
pub fn before_alloc(_bytes: usize, _tag: BufferTag) -> crate::Result<()> {
    Ok(())
}

pub fn after_alloc(bytes: usize, _tag: BufferTag) {
    LIVE_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
    LIVE_BUFFERS.fetch_add(1, Ordering::Relaxed);
}

pub fn released(bytes: usize, _tag: BufferTag) {
    LIVE_BYTES.fetch_sub(bytes as u64, Ordering::Relaxed);
    LIVE_BUFFERS.fetch_sub(1, Ordering::Relaxed);
}

pub fn uploaded(bytes: usize) {
    UPLOAD_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
    UPLOAD_CALLS.fetch_add(1, Ordering::Relaxed);
}

pub fn downloaded(bytes: usize) {
    DOWNLOAD_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
    DOWNLOAD_CALLS.fetch_add(1, Ordering::Relaxed);
}

/// A snapshot of the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub live_bytes: u64,
    pub live_buffers: u64,
    pub upload_bytes: u64,
    pub upload_calls: u64,
    pub download_bytes: u64,
    pub download_calls: u64,
}

pub fn stats() -> Stats {
    Stats {
        live_bytes: LIVE_BYTES.load(Ordering::Relaxed),
        live_buffers: LIVE_BUFFERS.load(Ordering::Relaxed),
        upload_bytes: UPLOAD_BYTES.load(Ordering::Relaxed),
        upload_calls: UPLOAD_CALLS.load(Ordering::Relaxed),
        download_bytes: DOWNLOAD_BYTES.load(Ordering::Relaxed),
        download_calls: DOWNLOAD_CALLS.load(Ordering::Relaxed),
    }
}
