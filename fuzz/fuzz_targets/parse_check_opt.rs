//! Arbitrary text through the front of the compiler: `relay_syntax::parse`, then
//! `relay_types::check_module`, then, for a module that type-checks, the default pass pipeline
//! at opt level 2 (what `relayc opt FILE` runs). Every step returns its result or its typed
//! errors, and never panics.
//!
//! Start from the seed corpus of the repository's Relay programs (see `fuzz/README.md`):
//! random bytes seldom parse, mutations of real programs reach the type checker and the passes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use relay_passes::{PassManager, PipelineConfig};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(module) = relay_syntax::parse(text, "fuzz.relay") else {
        return;
    };
    if relay_types::check_module(&module).is_err() {
        return;
    }
    let mut config = PipelineConfig::default_pipeline();
    config.opt_level = 2;
    let manager = PassManager::from_config(&config);
    // The passes' debugging output (none by default) is discarded.
    let _ = manager.run_with_output(module, &mut std::io::sink());
});
