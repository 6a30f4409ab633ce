//! Reading arbitrary bytes as a `.npy` file and as a `.npz` archive returns arrays or an
//! `NpyError`, and never panics, aborts or allocates out of proportion to the input: every
//! length is checked against the bytes present before anything is allocated for it, and
//! deflated entries inflate to at most their declared size.
//!
//! Start from the seed corpus of valid files (see `fuzz/README.md`): mutations of a real
//! header or zip directory get past the magic strings and signatures that random bytes rarely
//! match. `crates/relay-runtime/tests/npy_mutations.rs` runs the same property in `cargo test`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use relay_runtime::npy::{read_npy, read_npz};

fuzz_target!(|data: &[u8]| {
    let _ = read_npy(data);
    let _ = read_npz(data);
});
