//! `dynamic_to_static`: TVM's `DynamicToStatic`. A value-shaped operator whose shape-like
//! inputs are constants (written so, or made so by `fold_constant`, which runs before it)
//! becomes its static twin:
//!
//! ```text
//! dyn.reshape(%x, meta[relay.Constant][0] /* [2, -1] */)  ==>  reshape(%x, newshape=[2, -1])
//! dyn.zeros(meta[..] /* [3, 4] */, dtype="int8")           ==>  zeros(shape=[3, 4], dtype="int8")
//! arange(0i64, 10i64, 2i64, dtype="int64")                 ==>  arange(0i64, 10i64, 2i64, start=0, stop=10, step=2, dtype="int64")
//! ```
//!
//! (`arange` keeps its inputs; numbers in its attributes make its length static, TVM's
//! `ArangeAttrs`.) Its result type is then static where the dynamic one had `?`, so the
//! kernels around it are compiled for known shapes. A `reshape_like` whose result shape is
//! static becomes that `reshape`, so its shape source is not read. A call whose values do not
//! fit its data (a reshape to the wrong element count) stays as it is: its error stays a
//! run-time error.
//! Primitive functions are not entered. Statistics: `calls made static`.

use relay_ir::visit::{is_primitive, map_children};
use relay_ir::{AttrValue, Dim, Expr, ExprKind, Module, Span, TypeKind, ensure_sufficient_stack};
use relay_ops::dynamic::{resolve, value_inputs};

use crate::eliminate_dead_code::Purity;
use crate::{Pass, PassContext, PassError};

/// The `dynamic_to_static` pass.
pub struct DynamicToStatic;

impl Pass for DynamicToStatic {
    fn name(&self) -> &'static str {
        "dynamic_to_static"
    }

    fn description(&self) -> &'static str {
        "value-shaped operators with constant shapes become their static twins"
    }

    fn opt_level(&self) -> u32 {
        2
    }

    fn needs_types(&self) -> bool {
        true
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let mut count = 0i64;
        for g in &mut module.functions {
            if is_primitive(&g.func) {
                continue;
            }
            g.func.body = rewrite(&g.func.body, &mut count);
        }
        cx.stat("calls made static", count);
        Ok(module)
    }
}

/// `e` with its value-shaped calls of constant shapes made static, bottom-up.
fn rewrite(e: &Expr, count: &mut i64) -> Expr {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Function(f) if is_primitive(f) => e.clone(),
        ExprKind::Call { .. } => {
            let call = map_children(e, |c| rewrite(c, count));
            match made_static(&call) {
                Some(s) => {
                    *count += 1;
                    s
                }
                None => call,
            }
        }
        _ => map_children(e, |c| rewrite(c, count)),
    })
}

/// The static form of `call`, when it is a value-shaped call whose shape-like inputs are
/// integer constants that fit its data.
fn made_static(call: &Expr) -> Option<Expr> {
    let ExprKind::Call {
        callee,
        args,
        attrs,
    } = call.kind()
    else {
        return None;
    };
    let ExprKind::Op(op) = callee.kind() else {
        return None;
    };
    match op.name {
        "arange" => return arange_bounds(call, args, attrs),
        "reshape_like" => return static_reshape_like(call, args, attrs),
        _ => {}
    }
    let inputs = value_inputs(op.name);
    if inputs.is_empty() {
        return None;
    }
    let constant = |i: usize| match args.get(i).map(Expr::kind) {
        Some(ExprKind::Constant(c)) if c.dtype().is_int() => Some(c.clone()),
        _ => None,
    };
    if !inputs.iter().all(|&i| constant(i).is_some()) {
        return None;
    }
    let values = |i: usize| {
        let c = constant(i).ok_or_else(|| relay_ir::OpError::value("not a constant"))?;
        c.to_i128_vec()
            .into_iter()
            .map(|v| i64::try_from(v).map_err(|_| relay_ir::OpError::value("out of range")))
            .collect()
    };
    let r = resolve(op.name, attrs, &values).ok()?;
    let data: Vec<Expr> = r
        .data
        .iter()
        .map(|&i| args.get(i).cloned())
        .collect::<Option<_>>()?;
    // The twin must accept the data (a mismatch stays the run-time error it is).
    let types = data
        .iter()
        .map(|d| d.checked_type().cloned())
        .collect::<Option<Vec<_>>>();
    if let Some(types) = types {
        r.output_shape(&types).ok()?;
    }
    Some(Expr::new(
        ExprKind::Call {
            callee: Expr::new(ExprKind::Op(r.op), Span::DUMMY),
            args: data,
            attrs: r.attrs,
        },
        call.span(),
    ))
}

/// `reshape_like(data, like)` whose result shape is static as `reshape(data, newshape=…)`:
/// the shape source is read for its shape only, so it need not stay alive (nor in the group
/// fusion gives the call) once that shape is known. A result with an empty axis stays as it
/// is (`0` in `newshape` copies the input's extent).
fn static_reshape_like(call: &Expr, args: &[Expr], attrs: &relay_ir::Attrs) -> Option<Expr> {
    let [data, like] = args else {
        return None;
    };
    let ExprKind::Call { callee, .. } = call.kind() else {
        return None;
    };
    let ExprKind::Op(op) = callee.kind() else {
        return None;
    };
    let types = [data.checked_type()?.clone(), like.checked_type()?.clone()];
    let out = (op.relation?)(&types, attrs).ok()?;
    let TypeKind::Tensor { shape, .. } = out.kind() else {
        return None;
    };
    let dims = shape
        .iter()
        .map(|d| match d {
            Dim::Known(n) if *n > 0 => Some(AttrValue::Int(*n)),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    // Evaluating the shape source must have no effect the rewrite would drop (judged last: it
    // walks the source's whole graph).
    if !Purity::default().of(like) {
        return None;
    }
    let reshape = relay_ops::lookup("reshape")?;
    let attrs = relay_ir::Attrs::default()
        .with("newshape", AttrValue::Array(dims))
        .with("allowzero", AttrValue::Bool(false));
    Some(Expr::new(
        ExprKind::Call {
            callee: Expr::new(ExprKind::Op(reshape), Span::DUMMY),
            args: vec![data.clone()],
            attrs,
        },
        call.span(),
    ))
}

/// `arange` of constant scalars with its bounds also in its attributes, unless they are
/// there already.
fn arange_bounds(call: &Expr, args: &[Expr], attrs: &relay_ir::Attrs) -> Option<Expr> {
    let scalar = |e: &Expr| match e.kind() {
        ExprKind::Constant(c) if c.shape().is_empty() => Some(match c.dtype().is_int() {
            true => AttrValue::Int(i64::try_from(*c.to_i128_vec().first()?).ok()?),
            false => AttrValue::Float(*c.to_f64_vec().first()?),
        }),
        _ => None,
    };
    let [start, stop, step] = args else {
        return None;
    };
    let (start, stop, step) = (scalar(start)?, scalar(stop)?, scalar(step)?);
    if attrs.get("start").is_some_and(|v| !v.is_null()) {
        return None;
    }
    let attrs = attrs
        .with("start", start)
        .with("stop", stop)
        .with("step", step);
    let ExprKind::Call { callee, args, .. } = call.kind() else {
        return None;
    };
    // A length the relation refuses (a range too long) stays the run-time error it is.
    let ExprKind::Op(op) = callee.kind() else {
        return None;
    };
    let types: Vec<relay_ir::Type> = args
        .iter()
        .map(crate::fold_constant::constant_type)
        .collect();
    (op.relation?)(&types, &attrs).ok()?;
    Some(Expr::new(
        ExprKind::Call {
            callee: callee.clone(),
            args: args.clone(),
            attrs,
        },
        call.span(),
    ))
}
