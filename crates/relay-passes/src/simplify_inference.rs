//! `simplify_inference`: nn.batch_norm, nn.layer_norm and nn.dropout become elementwise arithmetic.
//!
//! The rewrites are TVM's `SimplifyInference` (`BatchNormToInferUnpack`,
//! `LayerNormToInferUnpack`, dropout as the identity), written with ordinary operators so that
//! `fuse_ops` fuses them with their neighbours and `fold_constant` folds the parameter
//! arithmetic when the parameters are constants. With `n` the data's rank, `a` the normalized
//! axis and `expand(v)` = `expand_dims(v, axis=1, num_newaxis=n-a-1)` (a `[C]` vector shaped to
//! broadcast along axis `a`; nothing when `a` is the last axis):
//!
//! ```text
//! nn.batch_norm(x, gamma, beta, mean, var)
//!   ==> (add(multiply(x, expand(s)), expand(shift)), mean, var)
//!       where s = multiply(rsqrt(add(var, eps)), gamma)      (without `multiply` if !scale)
//!             shift = add(multiply(negative(mean), s), beta)  (without `add` if !center)
//! nn.layer_norm(x, gamma, beta)
//!   ==> add(multiply(divide(subtract(x, m), sqrt(add(variance(x, m, axis=[a],
//!       keepdims=True), eps))), expand(gamma)), expand(beta))
//!       where m = mean(x, axis=[a], keepdims=True)
//! nn.dropout(x)  ==>  (x, ones_like(x))
//! ```
//!
//! `nn.batch_norm` and `nn.dropout` return tuples, so the call becomes a tuple with the same
//! fields (projections of it keep working); a projection written directly on the call
//! (`nn.batch_norm(...).0`) becomes just the field. Arguments that are not atoms are let-bound
//! first, in order, so each is evaluated once and in the original order. Only `float32` and
//! `float64` normalizations are rewritten: per-operator rounding in narrower types would stray
//! from the reference evaluation (computed in `f64`) by more than SPEC §4's tolerance.
//! Primitive functions are not entered. Statistics: `batch_norm rewritten`,
//! `layer_norm rewritten`, `dropout rewritten`.

use relay_ir::visit::{is_atom, is_primitive, map_children};
use relay_ir::{
    AttrValue, Attrs, Binding, BindingKind, DType, Expr, ExprKind, Module, NDArray, Span, TypeKind,
    ensure_sufficient_stack,
};

use crate::util::fresh_var;
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

    fn needs_types(&self) -> bool {
        true
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let mut s = Simplifier::default();
        for g in &mut module.functions {
            if is_primitive(&g.func) {
                continue;
            }
            g.func.body = s.expr(&g.func.body);
        }
        cx.stat("batch_norm rewritten", s.batch_norms);
        cx.stat("layer_norm rewritten", s.layer_norms);
        cx.stat("dropout rewritten", s.dropouts);
        Ok(module)
    }
}

/// The walk's counters.
#[derive(Default)]
struct Simplifier {
    batch_norms: i64,
    layer_norms: i64,
    dropouts: i64,
}

/// A rewritten call: bindings of its non-atomic arguments, then its result (the fields of a
/// tuple for `nn.batch_norm` and `nn.dropout`, the single value for `nn.layer_norm`).
struct Rewrite {
    bindings: Vec<Binding>,
    fields: Vec<Expr>,
    tuple: bool,
}

impl Rewrite {
    /// The whole result.
    fn whole(mut self, span: Span) -> Expr {
        let value = if self.tuple {
            Expr::new(ExprKind::Tuple(self.fields), span)
        } else {
            self.fields.swap_remove(0)
        };
        wrap(self.bindings, value, span)
    }

    /// Whether the result is a tuple with a field `index`.
    fn has_field(&self, index: usize) -> bool {
        self.tuple && index < self.fields.len()
    }

    /// Field `index` of a tuple result (see [`Rewrite::has_field`]). The other fields are atoms
    /// or effect-free calls of atoms, so leaving them out changes nothing.
    fn project(mut self, index: usize, span: Span) -> Expr {
        let field = self.fields.swap_remove(index);
        wrap(self.bindings, field, span)
    }
}

/// `let bindings; body`, or `body` alone without bindings.
fn wrap(bindings: Vec<Binding>, body: Expr, span: Span) -> Expr {
    if bindings.is_empty() {
        body
    } else {
        Expr::new(ExprKind::Let { bindings, body }, span)
    }
}

impl Simplifier {
    fn expr(&mut self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Function(f) if is_primitive(f) => e.clone(),
            ExprKind::Proj { tuple, index } if matches!(tuple.kind(), ExprKind::Call { .. }) => {
                let call = map_children(tuple, |c| self.expr(c));
                let call = match self.rewrite(tuple, &call) {
                    Some(r) if r.has_field(*index as usize) => {
                        return r.project(*index as usize, e.span());
                    }
                    Some(r) => r.whole(tuple.span()),
                    None => call,
                };
                if Expr::ptr_eq(&call, tuple) {
                    return e.clone();
                }
                Expr::new(
                    ExprKind::Proj {
                        tuple: call,
                        index: *index,
                    },
                    e.span(),
                )
            }
            ExprKind::Call { .. } => {
                let call = map_children(e, |c| self.expr(c));
                match self.rewrite(e, &call) {
                    Some(r) => r.whole(e.span()),
                    None => call,
                }
            }
            _ => map_children(e, |c| self.expr(c)),
        })
    }

    /// The rewrite of `call` (the original, for checked types), whose arguments are already
    /// simplified in `new_call`; `None` for any other call and for calls left alone.
    fn rewrite(&mut self, call: &Expr, new_call: &Expr) -> Option<Rewrite> {
        let ExprKind::Call {
            callee,
            args: old_args,
            attrs,
        } = call.kind()
        else {
            return None;
        };
        let ExprKind::Call { args, .. } = new_call.kind() else {
            return None;
        };
        let ExprKind::Op(op) = callee.kind() else {
            return None;
        };
        let expected = match op.name {
            "nn.batch_norm" => 5,
            "nn.layer_norm" => 3,
            "nn.dropout" => 1,
            _ => return None,
        };
        if args.len() != expected || old_args.len() != expected {
            return None;
        }
        // The data's rank and dtype; normalizations only in float32 and float64.
        let (rank, dtype) = match old_args[0].checked_type()?.kind() {
            TypeKind::Tensor { shape, dtype } => (shape.len(), *dtype),
            _ => return None,
        };
        if op.name != "nn.dropout" && dtype != DType::F32 && dtype != DType::F64 {
            return None;
        }
        let norm = if op.name == "nn.dropout" {
            None
        } else {
            Some(NormAttrs::of(attrs, rank)?)
        };
        // Bind the arguments that are not atoms, in order.
        let mut bindings = Vec::new();
        let mut atoms = Vec::with_capacity(args.len());
        for (new, old) in args.iter().zip(old_args) {
            if is_atom(new) {
                atoms.push(new.clone());
            } else {
                let var = fresh_var("x", Some(old.checked_type()?.clone()));
                bindings.push(Binding {
                    var: var.clone(),
                    value: new.clone(),
                    kind: BindingKind::Let,
                });
                atoms.push(Expr::var(&var));
            }
        }
        let (fields, tuple) = match (op.name, norm) {
            ("nn.batch_norm", Some(a)) => {
                let [x, gamma, beta, mean, var] = <[Expr; 5]>::try_from(atoms).ok()?;
                let out = batch_norm(&x, &gamma, &beta, &mean, &var, &a, dtype, rank)?;
                self.batch_norms += 1;
                (vec![out, mean, var], true)
            }
            ("nn.layer_norm", Some(a)) => {
                let [x, gamma, beta] = <[Expr; 3]>::try_from(atoms).ok()?;
                let out = layer_norm(&x, &gamma, &beta, &a, dtype, rank)?;
                self.layer_norms += 1;
                (vec![out], false)
            }
            ("nn.dropout", None) => {
                let x = atoms.into_iter().next()?;
                let ones = op_call("ones_like", vec![x.clone()], &[])?;
                self.dropouts += 1;
                (vec![x, ones], true)
            }
            _ => return None,
        };
        Some(Rewrite {
            bindings,
            fields,
            tuple,
        })
    }
}

/// The attributes the normalizations share, with the axis normalized.
struct NormAttrs {
    axis: usize,
    epsilon: f64,
    center: bool,
    scale: bool,
}

impl NormAttrs {
    fn of(attrs: &Attrs, rank: usize) -> Option<NormAttrs> {
        let axis = attrs.get("axis")?.as_int()?;
        let rank_i = i64::try_from(rank).ok()?;
        let axis = if axis < 0 { axis + rank_i } else { axis };
        if !(0..rank_i).contains(&axis) {
            return None;
        }
        Some(NormAttrs {
            axis: usize::try_from(axis).ok()?,
            epsilon: attrs.get("epsilon")?.as_float()?,
            center: attrs.get("center")?.as_bool()?,
            scale: attrs.get("scale")?.as_bool()?,
        })
    }
}

/// `BatchNormToInferUnpack`: the normalized data.
#[allow(clippy::too_many_arguments)]
fn batch_norm(
    x: &Expr,
    gamma: &Expr,
    beta: &Expr,
    mean: &Expr,
    var: &Expr,
    a: &NormAttrs,
    dtype: DType,
    rank: usize,
) -> Option<Expr> {
    let eps = scalar(dtype, a.epsilon)?;
    let mut scale = op_call(
        "rsqrt",
        vec![op_call("add", vec![var.clone(), eps], &[])?],
        &[],
    )?;
    if a.scale {
        scale = op_call("multiply", vec![scale, gamma.clone()], &[])?;
    }
    let neg_mean = op_call("negative", vec![mean.clone()], &[])?;
    let mut shift = op_call("multiply", vec![neg_mean, scale.clone()], &[])?;
    if a.center {
        shift = op_call("add", vec![shift, beta.clone()], &[])?;
    }
    let scale = expand_to_axis(scale, rank, a.axis)?;
    let shift = expand_to_axis(shift, rank, a.axis)?;
    let scaled = op_call("multiply", vec![x.clone(), scale], &[])?;
    op_call("add", vec![scaled, shift], &[])
}

/// `LayerNormToInferUnpack`: the normalized data.
fn layer_norm(
    x: &Expr,
    gamma: &Expr,
    beta: &Expr,
    a: &NormAttrs,
    dtype: DType,
    rank: usize,
) -> Option<Expr> {
    let axis = AttrValue::Array(vec![AttrValue::Int(i64::try_from(a.axis).ok()?)]);
    let keep = [("axis", axis), ("keepdims", AttrValue::Bool(true))];
    let mean = op_call("mean", vec![x.clone()], &keep)?;
    let var = op_call("variance", vec![x.clone(), mean.clone()], &keep)?;
    let eps = scalar(dtype, a.epsilon)?;
    let denom = op_call("sqrt", vec![op_call("add", vec![var, eps], &[])?], &[])?;
    let centered = op_call("subtract", vec![x.clone(), mean], &[])?;
    let mut out = op_call("divide", vec![centered, denom], &[])?;
    if a.scale {
        let g = expand_to_axis(gamma.clone(), rank, a.axis)?;
        out = op_call("multiply", vec![out, g], &[])?;
    }
    if a.center {
        let b = expand_to_axis(beta.clone(), rank, a.axis)?;
        out = op_call("add", vec![out, b], &[])?;
    }
    Some(out)
}

/// TVM's `ExpandBiasToMatchAxis` for one axis: a `[C]` vector reshaped to broadcast along
/// `axis` of a rank-`rank` tensor.
fn expand_to_axis(v: Expr, rank: usize, axis: usize) -> Option<Expr> {
    let trailing = rank.checked_sub(axis + 1)?;
    if trailing == 0 {
        return Some(v);
    }
    op_call(
        "expand_dims",
        vec![v],
        &[
            ("axis", AttrValue::Int(1)),
            ("num_newaxis", AttrValue::Int(i64::try_from(trailing).ok()?)),
        ],
    )
}

/// A scalar constant of `dtype`.
fn scalar(dtype: DType, value: f64) -> Option<Expr> {
    NDArray::scalar_f64(dtype, value).ok().map(Expr::constant)
}

/// A call of operator `name` with every attribute of its schema, in declaration order: the
/// given ones, the others at their defaults (as the parser normalizes calls).
fn op_call(name: &str, args: Vec<Expr>, given: &[(&str, AttrValue)]) -> Option<Expr> {
    crate::util::op_call(name, args, given, Span::DUMMY)
}

#[cfg(test)]
mod tests {
    use relay_ir::{PrintOptions, Value, print_module};

    use super::*;

    /// Runs the pass on `text` (whose `@main` takes no parameters) and returns the printed
    /// output and the results of `@main` before and after.
    fn run(text: &str) -> (String, Value, Value) {
        let m = crate::testing::parse_checked(text);
        let opts = relay_interp::InterpOptions::default();
        let before = relay_interp::run(&m, "main", vec![], &opts).expect("runs before");
        let (m, _) = crate::testing::run_passes(vec![&SimplifyInference], 2, m, true);
        let after = relay_interp::run(&m, "main", vec![], &opts).expect("runs after");
        (print_module(&m, &PrintOptions::default()), before, after)
    }

    fn close(a: &Value, b: &Value) -> bool {
        let (a, b) = (a.tensor_leaves(), b.tensor_leaves());
        a.len() == b.len()
            && a.iter().zip(&b).all(|(x, y)| {
                x.shape() == y.shape()
                    && x.to_f64_vec()
                        .iter()
                        .zip(y.to_f64_vec())
                        .all(|(p, q)| (p - q).abs() <= 1e-6 + 1e-5 * q.abs())
            })
    }

    /// `stack((v0, v1, ...), axis=0)` with `n` values of `sin(seed + i)` as `dtype` literals.
    fn vector(n: usize, seed: f64, dtype: &str) -> String {
        let suffix = if dtype == "float32" { "f" } else { "f64" };
        let items: Vec<String> = (0..n)
            .map(|i| format!("{:.6}{suffix}", (seed + i as f64).sin()))
            .collect();
        format!("stack(({},), axis=0)", items.join(", "))
    }

    #[test]
    fn batch_norm_matches_the_reference_on_every_axis() {
        for (axis, channels) in [(1, 3), (-1, 4), (0, 2), (-3, 2), (2, 4)] {
            for dtype in ["float32", "float64"] {
                for (center, scale) in [("True", "True"), ("False", "True"), ("True", "False")] {
                    let v = |seed| vector(channels, seed, dtype);
                    let text = format!(
                        r#"#[version = "0.0.5"]
def @main() {{
  let %x = reshape({data}, newshape=[2, 3, 4]);
  let %var = exp({var});
  let %y = nn.batch_norm(%x, {gamma}, {beta}, {mean}, %var, axis={axis}, epsilon=0.001f,
    center={center}, scale={scale});
  (%y.0, %y.1, %y.2)
}}
"#,
                        data = vector(24, 0.5, dtype),
                        var = v(1.0),
                        gamma = v(2.0),
                        beta = v(3.0),
                        mean = v(4.0),
                    );
                    let (out, before, after) = run(&text);
                    assert!(!out.contains("nn.batch_norm"), "{out}");
                    assert!(close(&before, &after), "{text}\n{before:?}\n{after:?}");
                }
            }
        }
    }

    #[test]
    fn layer_norm_and_dropout_match_the_reference() {
        let text = format!(
            r#"#[version = "0.0.5"]
def @main() {{
  let %x = reshape({data}, newshape=[2, 3, 4]);
  let %g = {g3};
  let %a = nn.layer_norm(%x, %g, %g, axis=1, epsilon=0.01f);
  let %b = nn.layer_norm(%x, {g4}, {b4}, scale=False);
  (%a, %b, nn.dropout(%x).0, nn.dropout(%x, rate=0.2f))
}}
"#,
            data = vector(24, 0.1, "float32"),
            g3 = vector(3, 1.0, "float32"),
            g4 = vector(4, 2.0, "float32"),
            b4 = vector(4, 3.0, "float32"),
        );
        let (out, before, after) = run(&text);
        assert!(
            !out.contains("nn.layer_norm") && !out.contains("nn.dropout"),
            "{out}"
        );
        assert!(close(&before, &after), "{before:?}\n{after:?}");
    }
}
