//! Importing arbitrary bytes as an ONNX model returns an imported module or an
//! `ImportError`, and never panics, aborts or allocates without bound: tensor buffers are
//! sized by their data, constants computed at import are capped, shapes are bounded.
//!
//! Start from the seed corpus of valid models (see `fuzz/README.md`): protobuf mutations of a
//! real model reach the operators' conversions, random bytes rarely get past the decoder.

#![no_main]

use libfuzzer_sys::fuzz_target;
use relay_onnx::{ImportOptions, import};

fuzz_target!(|data: &[u8]| {
    let _ = import(data, &ImportOptions::default());
});
