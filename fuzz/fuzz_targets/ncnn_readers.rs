//! Fuzz the ncnn param readers (text and binary) and the weight reader.
//!
//! Input: byte 0 picks the param format (even: text, odd: binary), bytes 1-2
//! (little-endian) the param's length; the param follows, and the rest is
//! the model. Every input must give Ok or an error, never a panic or a crash.
#![no_main]

use ggmlr_core::ncnn::{DataReader, Net};
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;

thread_local! {
    static NET: RefCell<Net> = RefCell::new(Net::new(1, true).unwrap());
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let split = u16::from_le_bytes([data[1], data[2]]) as usize;
    let rest = &data[3..];
    let (param, model) = rest.split_at(split.min(rest.len()));
    NET.with(|n| {
        let mut net = n.borrow_mut();
        let loaded = if data[0] % 2 == 0 {
            net.load_param_text(&String::from_utf8_lossy(param))
        } else {
            net.load_param_binary(param)
        };
        if loaded.is_ok() {
            let _ = net.load_model(&DataReader::Bytes(model.to_vec().into()));
            let _ = net.input_indexes();
            let _ = net.output_indexes();
            let _ = net.layer_info();
        }
    });
});
