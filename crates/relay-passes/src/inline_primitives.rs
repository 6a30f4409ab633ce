//! `inline_primitives`: let-bound primitive functions are substituted at their call sites.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/inline_primitives/`.

use relay_ir::Module;

use crate::{Pass, PassContext, PassError};

/// The `inline_primitives` pass.
pub struct InlinePrimitives;

impl Pass for InlinePrimitives {
    fn name(&self) -> &'static str {
        "inline_primitives"
    }

    fn description(&self) -> &'static str {
        "let-bound primitive functions are substituted at their call sites"
    }

    fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
        // Not implemented yet: the module passes through unchanged.
        Ok(module)
    }
}
