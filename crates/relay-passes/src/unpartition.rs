//! `unpartition`: functions partitioned for an external compiler become ordinary Relay.
//!
//! TVM's `PartitionGraph` moves the regions an external codegen (DNNL, CUTLASS, TensorRT, ...)
//! takes into functions marked `Compiler="name"`, usually with `Primitive=1`, `Inline=1` and a
//! `global_symbol`, either as global functions or as function literals called in place. relayc
//! has no external codegens, so this pass, the inverse of the partitioning, drops those four
//! attributes from every function that has `Compiler=`: a global stays a global, called as any
//! other, and a literal is lifted or inlined as any other, so fusion and the kernel compiler
//! take their bodies like the rest of the program. The type checker warns once per such
//! function (`relay::type::external_compiler`).
//!
//! ```text
//! def @dnnl_0(%a, %b, Compiler="dnnl", Primitive=1,      def @dnnl_0(%a, %b) {
//!             Inline=1, global_symbol="dnnl_0") {   ==>    nn.relu(add(%a, %b))
//!   nn.relu(add(%a, %b))                                 }
//! }
//! ```
//!
//! Statistics: `functions unpartitioned`. Its tests are in `ir-tests/unpartition/`.

use relay_ir::visit::map_children;
use relay_ir::{Attrs, Expr, ExprKind, Function, Module, ensure_sufficient_stack};

use crate::{Pass, PassContext, PassError};

/// The attributes `PartitionGraph` sets on a partitioned function.
const PARTITION_ATTRS: [&str; 4] = ["Compiler", "Primitive", "Inline", "global_symbol"];

/// The `unpartition` pass.
pub struct Unpartition;

impl Pass for Unpartition {
    fn name(&self) -> &'static str {
        "unpartition"
    }

    fn description(&self) -> &'static str {
        "functions partitioned for an external compiler (`Compiler=`) become ordinary Relay"
    }

    fn required(&self) -> bool {
        true
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let mut count = 0;
        for g in &mut module.functions {
            if let Some(attrs) = unpartitioned(&g.func.attrs) {
                g.func.attrs = attrs;
                count += 1;
            }
            g.func.body = rewrite(&g.func.body, &mut count);
        }
        cx.stat("functions unpartitioned", count);
        Ok(module)
    }
}

/// `attrs` without the partitioning attributes, if they hold `Compiler`.
fn unpartitioned(attrs: &Attrs) -> Option<Attrs> {
    attrs.get("Compiler")?;
    let kept = attrs
        .iter()
        .filter(|(k, _)| !PARTITION_ATTRS.contains(&k.as_str()))
        .cloned()
        .collect();
    Some(Attrs::new(kept))
}

/// `e` with every partitioned function literal in it unpartitioned.
fn rewrite(e: &Expr, count: &mut i64) -> Expr {
    ensure_sufficient_stack(|| {
        let e = map_children(e, |c| rewrite(c, count));
        let ExprKind::Function(func) = e.kind() else {
            return e;
        };
        let Some(attrs) = unpartitioned(&func.attrs) else {
            return e;
        };
        *count += 1;
        let func = Function {
            attrs,
            ..func.clone()
        };
        Expr::new(ExprKind::Function(func), e.span())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> String {
        crate::testing::run_pass_printed(&Unpartition, text)
    }

    #[test]
    fn nested_partitioned_literals_are_unpartitioned() {
        let out = run(r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2), float32]) -> Tensor[(2), float32] {
  %0 = fn (%a: Tensor[(2), float32], Compiler="outer") -> Tensor[(2), float32] {
    %1 = fn (%b: Tensor[(2), float32], Compiler="inner", Primitive=1) -> Tensor[(2), float32] {
      exp(%b)
    };
    %1(%a)
  };
  %0(%x)
}
"#);
        assert!(!out.contains("Compiler"), "{out}");
        assert!(!out.contains("Primitive"), "{out}");
    }

    #[test]
    fn other_attributes_and_functions_stay() {
        let text = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2), float32]) -> Tensor[(2), float32] {
  %0 = fn (%a: Tensor[(2), float32], Primitive=1) -> Tensor[(2), float32] {
    exp(%a)
  };
  %0(%x)
}
"#;
        assert!(run(text).contains("Primitive=1"));
    }
}
