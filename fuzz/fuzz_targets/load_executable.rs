//! Loading arbitrary bytes as an executable file (`.ro`) returns an executable or an
//! `ExeFileError`, and never panics, aborts or allocates without bound.
//!
//! Each input is loaded twice: as it is, and "resealed" — its header's file-length field and
//! its trailing checksum recomputed — since blind mutations of a valid file otherwise stop at
//! the checksum and never reach the sections' decoders. Start from the seed corpus (valid
//! files, see `fuzz/README.md`). A file that decodes is also loaded with its kernels
//! JIT-compiled, which must agree with the decoding.

#![no_main]

use libfuzzer_sys::fuzz_target;
use relay_vm::file::{CHECKSUM_LEN, HEADER_LEN, xxh64};
use relay_vm::{ExeFileError, Executable};

/// Decodes `bytes`; when that succeeds, `from_bytes` must too, or fail only on a kernel.
fn load(bytes: &[u8]) {
    if Executable::decode(bytes).is_ok() {
        match Executable::from_bytes(bytes) {
            Ok(_) | Err(ExeFileError::Kernel { .. }) => {}
            Err(e) => panic!("decodes but does not load: {e}"),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    load(data);
    if data.len() >= HEADER_LEN + CHECKSUM_LEN {
        let mut sealed = data.to_vec();
        let len = sealed.len() as u64;
        sealed[16..24].copy_from_slice(&len.to_le_bytes());
        let body = sealed.len() - CHECKSUM_LEN;
        let sum = xxh64(&sealed[..body]);
        sealed[body..].copy_from_slice(&sum.to_le_bytes());
        load(&sealed);
    }
});
