//! `simplify_expr`: TVM's `SimplifyExpr`, with the rewrite relayc has: a `transpose` that
//! only swaps the matrix axes of a product's operand is folded into the product, which reads
//! the operand the other way round instead (ONNX Runtime's `MatMulTransposeFusion`):
//!
//! ```text
//! nn.dense(%x, transpose(%w, axes=[1, 0]))                   ==>  nn.matmul(%x, %w)
//! nn.matmul(%x, transpose(%w, axes=[1, 0]), transpose_b=T)    ==>  nn.matmul(%x, %w, transpose_b=!T)
//! nn.batch_matmul(transpose(%a, axes=[0, 2, 1]), %b, transpose_a=T)
//!                                                        ==>  nn.batch_matmul(%a, %b, transpose_a=!T)
//! ```
//!
//! (and the second operand of `nn.batch_matmul` likewise). The transposed copy is then never
//! made: a product reads either layout, and a row-major operand packs faster than a transposed
//! one. The transpose may be nested in the call or bound by a `let` to a variable of an atom
//! (a variable or constant), which the product then reads, so nothing is computed twice; the
//! binding, if nothing else reads it, is left to `eliminate_dead_code`. `nn.matmul`'s first
//! operand stays (the kernel library has no product of a transposed `nn.matmul` operand), and
//! so does a transpose of a constant, which `fold_constant` has already made a constant.
//! Primitive functions are not entered. Statistics: `transposes folded`.

use std::collections::HashMap;

use relay_ir::visit::{is_atom, is_primitive, map_children};
use relay_ir::{
    AttrValue, Attrs, Binding, Expr, ExprKind, Module, Span, TypeKind, VarId,
    ensure_sufficient_stack,
};
use relay_ops::support::attr_bool;

use crate::{Pass, PassContext, PassError};

/// The `simplify_expr` pass.
pub struct SimplifyExpr;

impl Pass for SimplifyExpr {
    fn name(&self) -> &'static str {
        "simplify_expr"
    }

    fn description(&self) -> &'static str {
        "transposes of a matrix product's operands folded into the product"
    }

    fn opt_level(&self) -> u32 {
        2
    }

    fn needs_types(&self) -> bool {
        true
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let mut s = Simplify::default();
        for g in &mut module.functions {
            if is_primitive(&g.func) {
                continue;
            }
            g.func.body = s.expr(&g.func.body);
        }
        cx.stat("transposes folded", s.folded);
        Ok(module)
    }
}

/// Which axes a transpose swaps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Swap {
    /// The two of a matrix (`axes=[1, 0]`).
    Matrix,
    /// The last two of a stack of matrices (`axes=[0, 2, 1]`).
    Batch,
}

/// The walk: the variables bound to transposes of atoms so far, and the folds made.
#[derive(Default)]
struct Simplify {
    transposes: HashMap<VarId, (Expr, Swap)>,
    folded: i64,
}

impl Simplify {
    /// `e` with the transposes of its products' operands folded, bottom-up.
    fn expr(&mut self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Function(f) if is_primitive(f) => e.clone(),
            ExprKind::Let { bindings, body } => {
                let bindings = bindings
                    .iter()
                    .map(|b| {
                        let value = self.expr(&b.value);
                        if let Some((source, swap)) = swapped(&value)
                            && is_atom(&source)
                        {
                            self.transposes.insert(b.var.id(), (source, swap));
                        }
                        Binding { value, ..b.clone() }
                    })
                    .collect();
                let body = self.expr(body);
                Expr::new(ExprKind::Let { bindings, body }, e.span())
            }
            ExprKind::Call { .. } => {
                let call = map_children(e, |c| self.expr(c));
                match self.fold(&call) {
                    Some(folded) => {
                        self.folded += 1;
                        folded
                    }
                    None => call,
                }
            }
            _ => map_children(e, |c| self.expr(c)),
        })
    }

    /// What operand `e` transposes and how, when it is a transpose or a variable bound to one.
    fn operand(&self, e: &Expr, swap: Swap) -> Option<Expr> {
        let (source, s) = match e.kind() {
            ExprKind::Var(v) => self.transposes.get(&v.id()).cloned()?,
            _ => swapped(e)?,
        };
        (s == swap).then_some(source)
    }

    /// `call`, a matrix product, reading the operands its transposes transpose.
    fn fold(&self, call: &Expr) -> Option<Expr> {
        let (op, args, attrs) = call.op_call()?;
        let flag = |name| attr_bool(attrs, name).ok();
        let (name, args, attrs) = match (op.name, args) {
            ("nn.dense", [x, w]) => {
                let w = self.operand(w, Swap::Matrix)?;
                let attrs = attrs
                    .with("transpose_a", AttrValue::Bool(false))
                    .with("transpose_b", AttrValue::Bool(false));
                ("nn.matmul", vec![x.clone(), w], attrs)
            }
            ("nn.matmul", [x, w]) if !flag("transpose_a")? => {
                let w = self.operand(w, Swap::Matrix)?;
                let attrs = attrs.with("transpose_b", AttrValue::Bool(!flag("transpose_b")?));
                ("nn.matmul", vec![x.clone(), w], attrs)
            }
            ("nn.batch_matmul", [a, b]) => {
                let (ta, tb) = (self.operand(a, Swap::Batch), self.operand(b, Swap::Batch));
                if ta.is_none() && tb.is_none() {
                    return None;
                }
                let mut attrs: Attrs = attrs.clone();
                for (side, t) in [("transpose_a", &ta), ("transpose_b", &tb)] {
                    if t.is_some() {
                        attrs = attrs.with(side, AttrValue::Bool(!flag(side)?));
                    }
                }
                let args = vec![
                    ta.unwrap_or_else(|| a.clone()),
                    tb.unwrap_or_else(|| b.clone()),
                ];
                ("nn.batch_matmul", args, attrs)
            }
            _ => return None,
        };
        let op = relay_ops::lookup(name)?;
        let callee = Expr::new(ExprKind::Op(op), Span::DUMMY);
        Some(Expr::new(
            ExprKind::Call {
                callee,
                args,
                attrs,
            },
            call.span(),
        ))
    }
}

/// The operand of `e` and the axes it swaps, when `e` is a `transpose` that swaps the two
/// axes of a matrix or the last two of a stack of them. Its rank is its `axes`' length, or
/// its operand's when `axes` is absent (all axes reversed).
fn swapped(e: &Expr) -> Option<(Expr, Swap)> {
    let (op, [x], attrs) = e.op_call()? else {
        return None;
    };
    if op.name != "transpose" {
        return None;
    }
    let axes: Vec<i64> = match attrs.get("axes") {
        Some(AttrValue::Array(axes)) => {
            axes.iter().map(AttrValue::as_int).collect::<Option<_>>()?
        }
        None | Some(AttrValue::Null) => match x.checked_type()?.kind() {
            TypeKind::Tensor { shape, .. } => (0..shape.len() as i64).rev().collect(),
            _ => return None,
        },
        Some(_) => return None,
    };
    let rank = axes.len() as i64;
    let axes: Vec<i64> = axes
        .iter()
        .map(|&a| if a < 0 { a + rank } else { a })
        .collect();
    let swap = match axes.as_slice() {
        [1, 0] => Swap::Matrix,
        [0, 2, 1] => Swap::Batch,
        _ => return None,
    };
    Some((x.clone(), swap))
}
