//! `fold_constant`: evaluates constant subexpressions with the reference operators.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/fold_constant/`.

use relay_ir::Module;

use crate::{Pass, PassContext, PassError};

/// The `fold_constant` pass.
pub struct FoldConstant;

impl Pass for FoldConstant {
    fn name(&self) -> &'static str {
        "fold_constant"
    }

    fn description(&self) -> &'static str {
        "evaluates constant subexpressions with the reference operators"
    }

    fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
        // Not implemented yet: the module passes through unchanged.
        Ok(module)
    }
}
