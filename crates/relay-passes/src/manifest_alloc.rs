//! `manifest_alloc`: explicit storage and tensor allocation and destination-passing kernel calls.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/manifest_alloc/`.

use relay_ir::Module;

use crate::{Pass, PassContext, PassError};

/// The `manifest_alloc` pass.
pub struct ManifestAlloc;

impl Pass for ManifestAlloc {
    fn name(&self) -> &'static str {
        "manifest_alloc"
    }

    fn description(&self) -> &'static str {
        "explicit storage and tensor allocation and destination-passing kernel calls"
    }

    fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
        // Not implemented yet: the module passes through unchanged.
        Ok(module)
    }
}
