//! `const_pool_layout`: deduplicates constants structurally and assigns constant pool indices.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/const_pool_layout/`.

use relay_ir::Module;

use crate::{Pass, PassContext, PassError};

/// The `const_pool_layout` pass.
pub struct ConstPoolLayout;

impl Pass for ConstPoolLayout {
    fn name(&self) -> &'static str {
        "const_pool_layout"
    }

    fn description(&self) -> &'static str {
        "deduplicates constants structurally and assigns constant pool indices"
    }

    fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
        // Not implemented yet: the module passes through unchanged.
        Ok(module)
    }
}
