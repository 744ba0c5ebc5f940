//! Buffer tags (who a buffer belongs to) and the generations of the pool
//! tags: a residency pool bumps its tag's generation at every reset, so that
//! messages about freed memory can name the reset. Generations live here,
//! below buffers and tensors, and outside any lock, so that error messages
//! built while other locks are held can read them.

use std::sync::atomic::{AtomicI32, Ordering};

/// Who a buffer belongs to (for the ledger and for messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufferTag {
    /// Data of a context created with `no_alloc = FALSE`.
    Context,
    /// A buffer the user asked for (`ggml_backend_alloc_ctx_tensors`).
    User,
    /// Autograd pass pool.
    Pass,
    /// Autograd persistent pool.
    Persistent,
    /// Values and gradients of autograd tensors on device "cpu" (f64 on the
    /// host CPU backend), one buffer per tensor, freed with the tensor.
    Cpu,
}

impl BufferTag {
    pub const ALL: [BufferTag; 5] =
        [BufferTag::Context, BufferTag::User, BufferTag::Pass, BufferTag::Persistent, BufferTag::Cpu];

    /// The tag called `name` ("context", "user", "pass", "persistent", "cpu").
    pub fn from_name(name: &str) -> crate::Result<BufferTag> {
        BufferTag::ALL.into_iter().find(|t| t.name() == name).ok_or_else(|| {
            anyhow::anyhow!("unknown buffer tag '{name}': use user, pass, persistent, context or cpu")
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            BufferTag::Context => "context",
            BufferTag::User => "user",
            BufferTag::Pass => "pass",
            BufferTag::Persistent => "persistent",
            BufferTag::Cpu => "cpu",
        }
    }

    /// Whether buffers of this tag belong to a residency pool (and so have
    /// a generation).
    pub fn is_pool(self) -> bool {
        matches!(self, BufferTag::Pass | BufferTag::Persistent)
    }
}

static GENERATIONS: [AtomicI32; 2] = [AtomicI32::new(0), AtomicI32::new(0)];

// BOUNDS-FN: GENERATIONS is a [AtomicI32; 2] indexed by the literals 0 and 1.
fn slot(tag: BufferTag) -> Option<&'static AtomicI32> {
    match tag {
        BufferTag::Pass => Some(&GENERATIONS[0]),
        BufferTag::Persistent => Some(&GENERATIONS[1]),
        BufferTag::Context | BufferTag::User | BufferTag::Cpu => None,
    }
}

/// The current generation of a pool tag (0 for tags that are not pools).
pub fn generation(tag: BufferTag) -> i32 {
    slot(tag).map_or(0, |g| g.load(Ordering::SeqCst))
}

/// Start the next generation of a pool tag (a reset of that pool).
pub fn bump_generation(tag: BufferTag) {
    if let Some(g) = slot(tag) {
        g.fetch_add(1, Ordering::SeqCst);
    }
}
