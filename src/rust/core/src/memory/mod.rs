//! Memory: buffers (the one place tensor memory is allocated), their tags and
//! pool generations, and the byte ledger every allocation goes through.
//! Backends supply the memory through [`buffer::Allocator`]; this layer knows
//! none of them.

pub mod buffer;
pub mod ledger;
pub mod tag;

pub use buffer::{align_up, host_memory, Allocator, Buffer, BufferLocks, BufferMem, DeviceMemory, HostMemory, Mapped, ALIGN};
pub use tag::BufferTag;
