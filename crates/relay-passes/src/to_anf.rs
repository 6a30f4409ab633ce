//! `to_anf`: A-normal form: every non-atomic subexpression is let-bound.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/to_anf/`.

use relay_ir::Module;

use crate::{Pass, PassContext, PassError};

/// The `to_anf` pass.
pub struct ToAnf;

impl Pass for ToAnf {
    fn name(&self) -> &'static str {
        "to_anf"
    }

    fn description(&self) -> &'static str {
        "A-normal form: every non-atomic subexpression is let-bound"
    }

    fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
        // Not implemented yet: the module passes through unchanged.
        Ok(module)
    }
}
