//! `plan_memory`: reuses storage among allocations whose lifetimes do not overlap.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/plan_memory/`.

use relay_ir::Module;

use crate::{Pass, PassContext, PassError};

/// The `plan_memory` pass.
pub struct PlanMemory;

impl Pass for PlanMemory {
    fn name(&self) -> &'static str {
        "plan_memory"
    }

    fn description(&self) -> &'static str {
        "reuses storage among allocations whose lifetimes do not overlap"
    }

    fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
        // Not implemented yet: the module passes through unchanged.
        Ok(module)
    }
}
