//! Run-time discovery of Vulkan devices (kept as the foundation's entry
//! point; the implementation lives in `vulkan::device`).

pub use crate::vulkan::{device_type_name, discovery, DeviceInfo, Discovery};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_never_panics_and_is_cached() {
        let a = discovery();
        let b = discovery();
        assert!(std::ptr::eq(a, b));
        assert!(!a.status.is_empty());
        for (i, d) in a.devices.iter().enumerate() {
            assert_eq!(d.index, i);
            assert!(!d.name.is_empty());
        }
    }
}
