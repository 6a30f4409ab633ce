//! `eliminate_dead_code`: drops unused pure bindings and functions unreachable from the entry.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/eliminate_dead_code/`.

use relay_ir::Module;

use crate::{Pass, PassContext, PassError};

/// The `eliminate_dead_code` pass.
pub struct EliminateDeadCode;

impl Pass for EliminateDeadCode {
    fn name(&self) -> &'static str {
        "eliminate_dead_code"
    }

    fn description(&self) -> &'static str {
        "drops unused pure bindings and functions unreachable from the entry"
    }

    fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
        // Not implemented yet: the module passes through unchanged.
        Ok(module)
    }
}
