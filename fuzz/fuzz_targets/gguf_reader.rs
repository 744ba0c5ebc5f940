//! Fuzz the GGUF reader: any bytes must give a file or an error, never a
//! panic or a crash; a file that reads must give its tensors' values and
//! write back to bytes that read again.
#![no_main]

use ggmlr_core::gguf::{to_bytes, GgufFile, WriteTensor};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(f) = GgufFile::from_vec("fuzz", data.to_vec()) else { return };
    let mut tensors = Vec::new();
    for t in &f.header.tensors {
        if t.nbytes <= 1 << 20 {
            let _ = f.tensor_values(t);
        }
        tensors.push(WriteTensor { name: t.name.clone(), ty: t.ty, ne: t.ne[..t.n_dims].to_vec(), data: f.tensor_bytes(t).into() });
    }
    if let Ok(bytes) = to_bytes(&f.header.kv, &tensors, f.header.alignment) {
        assert!(GgufFile::from_vec("again", bytes).is_ok(), "a file written from a read one does not read");
    }
});
