//! `liveness`: alias elimination, then memory.kill after the last use of every variable.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/liveness/`.

use relay_ir::Module;

use crate::{Pass, PassContext, PassError};

/// The `liveness` pass.
pub struct Liveness;

impl Pass for Liveness {
    fn name(&self) -> &'static str {
        "liveness"
    }

    fn description(&self) -> &'static str {
        "alias elimination, then memory.kill after the last use of every variable"
    }

    fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
        // Not implemented yet: the module passes through unchanged.
        Ok(module)
    }
}
