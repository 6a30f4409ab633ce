//! `lambda_lift`: nested functions become globals; closures become Closure=1 globals.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/lambda_lift/`.

use relay_ir::Module;

use crate::{Pass, PassContext, PassError};

/// The `lambda_lift` pass.
pub struct LambdaLift;

impl Pass for LambdaLift {
    fn name(&self) -> &'static str {
        "lambda_lift"
    }

    fn description(&self) -> &'static str {
        "nested functions become globals; closures become Closure=1 globals"
    }

    fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
        // Not implemented yet: the module passes through unchanged.
        Ok(module)
    }
}
