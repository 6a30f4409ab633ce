//! `fuse_ops`: groups operator calls into Primitive=1 functions (TVM's post-dominator fusion).
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/fuse_ops/`.

use relay_ir::Module;

use crate::{Pass, PassContext, PassError};

/// The `fuse_ops` pass.
pub struct FuseOps;

impl Pass for FuseOps {
    fn name(&self) -> &'static str {
        "fuse_ops"
    }

    fn description(&self) -> &'static str {
        "groups operator calls into Primitive=1 functions (TVM's post-dominator fusion)"
    }

    fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
        // Not implemented yet: the module passes through unchanged.
        Ok(module)
    }
}
