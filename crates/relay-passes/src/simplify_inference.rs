//! `simplify_inference`: nn.batch_norm, nn.layer_norm and nn.dropout become elementwise arithmetic.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/simplify_inference/`.

use relay_ir::Module;

use crate::{Pass, PassContext, PassError};

/// The `simplify_inference` pass.
pub struct SimplifyInference;

impl Pass for SimplifyInference {
    fn name(&self) -> &'static str {
        "simplify_inference"
    }

    fn description(&self) -> &'static str {
        "nn.batch_norm, nn.layer_norm and nn.dropout become elementwise arithmetic"
    }

    fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
        // Not implemented yet: the module passes through unchanged.
        Ok(module)
    }
}
