//! `tail_call`: marks self, mutual and closure calls in tail position.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/tail_call/`.

use relay_ir::Module;

use crate::{Pass, PassContext, PassError};

/// The `tail_call` pass.
pub struct TailCall;

impl Pass for TailCall {
    fn name(&self) -> &'static str {
        "tail_call"
    }

    fn description(&self) -> &'static str {
        "marks self, mutual and closure calls in tail position"
    }

    fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
        // Not implemented yet: the module passes through unchanged.
        Ok(module)
    }
}
