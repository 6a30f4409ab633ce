//! `eta_expand`: constructors and global functions used as values become function literals.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/eta_expand/`.

use relay_ir::Module;

use crate::{Pass, PassContext, PassError};

/// The `eta_expand` pass.
pub struct EtaExpand;

impl Pass for EtaExpand {
    fn name(&self) -> &'static str {
        "eta_expand"
    }

    fn description(&self) -> &'static str {
        "constructors and global functions used as values become function literals"
    }

    fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
        // Not implemented yet: the module passes through unchanged.
        Ok(module)
    }
}
