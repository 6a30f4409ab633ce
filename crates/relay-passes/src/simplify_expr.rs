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
//! (and the second operand of `nn.batch_matmul` likewise), and the keys of an attention as
//! PyTorch's exporters write it, transposed per head, scaled by a constant and their leading
//! axes merged:
//!
//! ```text
//! nn.batch_matmul(%q, reshape(multiply(transpose(%k, axes=[0, 1, 3, 2]), c), newshape=[-3, 0, 0]), transpose_b=F)
//!     ==>  multiply(nn.batch_matmul(%q, reshape(%k, newshape=[-3, 0, 0]), transpose_b=T), c)
//! ```
//!
//! (the product scaled rather than the keys: a decoder step's scores are `[heads, 1, length]`,
//! its keys `[heads, length, 64]`). The transposed copy is then never
//! made: a product reads either layout, and a row-major operand packs faster than a transposed
//! one. The transpose may be nested in the call or bound by a `let` to a variable of an atom
//! (a variable or constant), which the product then reads, so nothing is computed twice; the
//! binding, if nothing else reads it, is left to `eliminate_dead_code`. `nn.matmul`'s first
//! operand stays (the kernel library has no product of a transposed `nn.matmul` operand), and
//! so does a transpose of a constant, which `fold_constant` has already made a constant.
//! Primitive functions are not entered. Statistics: `transposes folded`.

use std::collections::HashMap;

use relay_ir::visit::{for_each_child, is_atom, is_primitive, map_children};
use relay_ir::{
    AttrValue, Attrs, Binding, Expr, ExprKind, Module, TypeKind, VarId, ensure_sufficient_stack,
};
use relay_ops::support::{attr_bool, scalar_f32_constant};

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
    /// The last two of a batch of stacks (`axes=[0, 1, 3, 2]`: an attention's heads), which
    /// only [`Simplify::batch_operand`] folds.
    Heads,
}

/// The walk: the variables bound to transposes of atoms so far, and the folds made.
#[derive(Default)]
struct Simplify {
    transposes: HashMap<VarId, (Expr, Swap)>,
    /// Variables bound to an attention's transposed keys ([`Simplify::batch_operand`]).
    keys: HashMap<VarId, (Expr, Option<Expr>)>,
    /// Variables bound to a scaled transpose of the last two axes of a rank-4 atom.
    heads: HashMap<VarId, (Expr, Option<Expr>)>,
    folded: i64,
}

impl Simplify {
    /// `e` with the transposes of its products' operands folded, bottom-up.
    fn expr(&mut self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Function(f) if is_primitive(f) => e.clone(),
            ExprKind::Let { bindings, body } => {
                let bindings: Vec<Binding> = bindings
                    .iter()
                    .map(|b| {
                        let value = self.expr(&b.value);
                        if let Some((source, swap)) = swapped(&value)
                            && is_atom(&source)
                        {
                            self.transposes.insert(b.var.id(), (source, swap));
                        } else if let Some(keys) = self.keys_of(&value) {
                            self.keys.insert(b.var.id(), keys);
                        } else if let Some(heads) = self.scaled_heads(&value) {
                            self.heads.insert(b.var.id(), heads);
                        }
                        Binding { value, ..b.clone() }
                    })
                    .collect();
                let body = self.expr(body);
                let bindings = self.without_folded_keys(bindings, &body);
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

    /// `bindings` without those of an attention's keys that a fold left unread: the
    /// transpose, its scaling and the merging reshape of each. `eliminate_dead_code` keeps a
    /// reshape whose shape could fail to fit; this one fits whenever the product's reshape of
    /// the untransposed keys, which replaced it, does.
    fn without_folded_keys(&self, mut bindings: Vec<Binding>, body: &Expr) -> Vec<Binding> {
        let folded = |b: &Binding| {
            let id = b.var.id();
            self.keys.contains_key(&id)
                || self.heads.contains_key(&id)
                || matches!(self.transposes.get(&id), Some((_, Swap::Heads)))
        };
        // Most chains hold none: they are not walked.
        if !bindings.iter().any(folded) {
            return bindings;
        }
        loop {
            let mut uses: HashMap<VarId, usize> = HashMap::new();
            let mut count = |e: &Expr| count_uses(e, &mut uses);
            bindings.iter().for_each(|b| count(&b.value));
            count(body);
            let before = bindings.len();
            bindings.retain(|b| !folded(b) || uses.get(&b.var.id()).is_some_and(|&n| n > 0));
            if bindings.len() == before {
                return bindings;
            }
        }
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
                let (ta, tb) = (self.batch_operand(a), self.batch_operand(b));
                if ta.is_none() && tb.is_none() {
                    return None;
                }
                let mut attrs: Attrs = attrs.clone();
                for (side, t) in [("transpose_a", &ta), ("transpose_b", &tb)] {
                    if t.is_some() {
                        attrs = attrs.with(side, AttrValue::Bool(!flag(side)?));
                    }
                }
                let mut scales = Vec::new();
                let mut read = |x: &Expr, t: Option<(Expr, Option<Expr>)>| match t {
                    Some((source, scale)) => {
                        scales.extend(scale);
                        source
                    }
                    None => x.clone(),
                };
                let args = vec![read(a, ta), read(b, tb)];
                let product = relay_ops::call("nn.batch_matmul", args, attrs, call.span())?;
                // A scalar factor of an operand scales the (smaller) product instead.
                return scales.into_iter().try_fold(product, |p, c| {
                    relay_ops::call("multiply", vec![p, c], Attrs::default(), call.span())
                });
            }
            _ => return None,
        };
        relay_ops::call(name, args, attrs, call.span())
    }

    /// What operand `e` of `nn.batch_matmul` reads transposed, with the one-element constant
    /// it scales it by: a transpose of its last two axes (as [`Self::operand`] finds it), or
    /// the form exporters give an attention's keys,
    /// `reshape(multiply(transpose(%k, axes=[0, 1, 3, 2]), c), newshape=[-3, 0, 0])` (PyTorch's
    /// scaled dot-product attention: the keys of each head transposed and scaled, then the
    /// batch and head axes merged), which is `reshape(%k, newshape=[-3, 0, 0])` transposed,
    /// scaled by `c`.
    fn batch_operand(&self, e: &Expr) -> Option<(Expr, Option<Expr>)> {
        if let Some(source) = self.operand(e, Swap::Batch) {
            return Some((source, None));
        }
        match e.kind() {
            ExprKind::Var(v) => self.keys.get(&v.id()).cloned(),
            _ => self.keys_of(e),
        }
    }

    /// The keys `e` transposes and their scale, when `e` is the exporters' form of them (see
    /// [`Self::batch_operand`]), the transpose nested or bound to a variable of an atom.
    fn keys_of(&self, e: &Expr) -> Option<(Expr, Option<Expr>)> {
        let (op, [x], attrs) = e.op_call()? else {
            return None;
        };
        let merged = matches!(attrs.get("newshape"), Some(AttrValue::Array(s))
            if s.iter().map(AttrValue::as_int).collect::<Option<Vec<_>>>() == Some(vec![-3, 0, 0]));
        if op.name != "reshape" || !merged {
            return None;
        }
        let (k, scale) = self.scaled_heads(x)?;
        let reshaped = relay_ops::call("reshape", vec![k], attrs.clone(), e.span())?;
        Some((reshaped, scale))
    }

    /// The rank-4 atom `e` transposes the last two axes of, and the one-element constant it
    /// scales the transpose by: `transpose(%k, axes=[0, 1, 3, 2])`, times `c` or not, each
    /// nested or bound to a variable.
    fn scaled_heads(&self, e: &Expr) -> Option<(Expr, Option<Expr>)> {
        if let ExprKind::Var(v) = e.kind()
            && let Some(heads) = self.heads.get(&v.id())
        {
            return Some(heads.clone());
        }
        let (transposed, scale) = match e.op_call() {
            Some((op, [t, c], _)) if op.name == "multiply" && scalar_f32_constant(c).is_some() => {
                (t, Some(c.clone()))
            }
            Some((op, [c, t], _)) if op.name == "multiply" && scalar_f32_constant(c).is_some() => {
                (t, Some(c.clone()))
            }
            _ => (e, None),
        };
        Some((self.operand(transposed, Swap::Heads)?, scale))
    }
}

/// Adds the occurrences of each variable in `e` to `uses`.
fn count_uses(e: &Expr, uses: &mut HashMap<VarId, usize>) {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Var(v) => *uses.entry(v.id()).or_insert(0) += 1,
        _ => for_each_child(e, |c| count_uses(c, uses)),
    })
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
        [0, 1, 3, 2] => Swap::Heads,
        _ => return None,
    };
    Some((x.clone(), swap))
}
