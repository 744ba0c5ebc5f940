//! Events (ggml's `ggml_backend_event`): marks in a backend's stream of work
//! that another stream can wait for. Every computation and transfer of the
//! engine has finished when its call returns, so an event is reached as
//! soon as it is recorded: synchronizing or waiting on it checks that the
//! objects are usable and returns.

use super::device::Device;
use super::Backend;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub struct Event {
    device: Device,
    records: AtomicU64,
}

impl Event {
    pub fn new(device: Device) -> Event {
        Event { device, records: AtomicU64::new(0) }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// How often the event was recorded.
    pub fn records(&self) -> u64 {
        self.records.load(Ordering::SeqCst)
    }

    /// Mark the current point of `backend`'s work (a backend on the event's device).
    pub fn record(&self, backend: &Backend) -> crate::Result<()> {
        backend.check_live()?;
        anyhow::ensure!(
            backend.device().same_as(&self.device),
            "the event belongs to device '{}', not to backend '{}' on '{}'",
            self.device.name,
            backend.name(),
            backend.device().name
        );
        self.records.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Wait until the recorded work is done (it is).
    pub fn synchronize(&self) -> crate::Result<()> {
        Ok(())
    }

    /// Make `backend` wait for the event before its next work (nothing is pending).
    pub fn wait(&self, backend: &Backend) -> crate::Result<()> {
        backend.check_live()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::device::cpu_device;

    #[test]
    fn events_are_reached_once_recorded() {
        let e = Event::new(cpu_device());
        let b = Backend::cpu();
        e.record(&b).unwrap();
        e.synchronize().unwrap();
        e.wait(&b).unwrap();
        assert_eq!(e.records(), 1);
        b.free();
        assert!(e.record(&b).is_err() && e.wait(&b).is_err());
    }
}
