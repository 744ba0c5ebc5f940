//! Fuzz the saved-model reader: any bytes must decode to values or give an
//! error, never a panic or an allocation larger than the input; what decodes
//! encodes back to the same bytes.
#![no_main]

use ggmlr_core::savefile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Also reach the payload behind a valid header: byte 0 odd wraps the
    // rest in one (correct length and checksum).
    let wrapped;
    let bytes = if data.first().is_some_and(|b| b % 2 == 1) {
        let p = &data[1..];
        let mut f = savefile::MAGIC.to_vec();
        f.extend_from_slice(&savefile::VERSION.to_le_bytes());
        f.extend_from_slice(&(p.len() as u64).to_le_bytes());
        f.extend_from_slice(&savefile::checksum(p).to_le_bytes());
        f.extend_from_slice(p);
        wrapped = f;
        &wrapped[..]
    } else {
        data
    };
    if let Ok(v) = savefile::decode(bytes) {
        let again = savefile::encode(&v);
        assert_eq!(again, bytes, "a decoded file must encode to the same bytes");
    }
});

