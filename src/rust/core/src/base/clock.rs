//! A monotonic clock from the first time it is read (ggml's `ggml_time_*`).

use std::sync::OnceLock;
use std::time::Instant;

static START: OnceLock<Instant> = OnceLock::new();

/// Start the clock (later calls keep the first start).
pub fn init() {
    START.get_or_init(Instant::now);
}

/// Microseconds since the clock started.
pub fn micros() -> u64 {
    START.get_or_init(Instant::now).elapsed().as_micros() as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn clock_moves_forward() {
        super::init();
        let a = super::micros();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(super::micros() >= a + 1000);
    }
}
