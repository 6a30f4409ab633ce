//! `float32` softmax and log-softmax over the last axis on [`relay_linalg::softmax`] (one memory
//! pass on 16 lanes where a loop nest makes three on 4): a primitive whose body is the softmax
//! of its first parameter, seen through reshapes (which do not move data) and at most one
//! `multiply` or `divide` by a one-element `float32` constant or second parameter — the
//! scaling fusion puts in front of it (an attention score's `divide`). With `?` dimensions the
//! same kernel serves every shape (its rows and columns read from the argument), when no
//! reshape is in the way. Every other softmax is lowered to loops like any reduction.

use relay_ir::{Attrs, Binding, DType, Expr, ExprKind, Function, Type, TypeKind, VarId};
use relay_linalg::KernelContext;
use relay_linalg::softmax::{Prologue, Softmax};
use relay_ops::support::attr_int;

/// A softmax the kernel library computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftmaxOp {
    /// `nn.log_softmax` rather than `nn.softmax`.
    pub log: bool,
    /// The scaling of its input.
    pub scale: Scale,
}

/// The scaling a softmax's input gets first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// None.
    None,
    /// `x · c` (`divide`: `false`) or `x / c` (`true`) by a constant.
    Constant { value: f32, divide: bool },
    /// The same by the one element of the second parameter.
    Parameter { divide: bool },
}

/// The softmax `func` computes when its body (after `bindings`) is `name(args)` with `attrs`.
pub(super) fn recognize(
    func: &Function,
    bindings: &[Binding],
    name: &str,
    args: &[Expr],
    attrs: &Attrs,
) -> Option<SoftmaxOp> {
    let log = match name {
        "nn.softmax" => false,
        "nn.log_softmax" => true,
        _ => return None,
    };
    let [x] = args else { return None };
    let rank = f32_dims(x.checked_type()?)?.len() as i64;
    let axis = attr_int(attrs, "axis").ok()?;
    if axis != rank - 1 && axis != -1 {
        return None;
    }
    let path = scaled_parameter(x, bindings)?;
    let params: Vec<VarId> = func.params.iter().map(|p| p.id()).collect();
    let want = if path.factor.is_some() { 2 } else { 1 };
    let types: Option<Vec<Vec<Option<i64>>>> = func
        .params
        .iter()
        .map(|p| f32_dims(p.checked_type()?))
        .collect();
    let result = f32_dims(func.body.checked_type()?)?;
    let types = types?;
    let fits = params.len() == want
        && params[0] == path.data
        && path.factor.is_none_or(|f| params.get(1) == Some(&f))
        && types.get(1).is_none_or(|t| t.iter().all(|d| *d == Some(1)));
    // With `?` dimensions, the result is the data's shape: no reshape between them.
    let dynamic = types.iter().flatten().chain(&result).any(Option::is_none);
    let shaped = !dynamic || !path.reshaped && types.first() == Some(&result);
    (fits && shaped).then_some(SoftmaxOp {
        log,
        scale: path.scale,
    })
}

/// What a softmax reads: the data parameter, its scaling, the parameter holding the scaling's
/// factor if one does, and whether a reshape is on the way.
struct Path {
    data: VarId,
    scale: Scale,
    factor: Option<VarId>,
    reshaped: bool,
}

/// The parameter a softmax reads through reshapes (which keep the flat order) and at most one
/// `multiply` or `divide` by a one-element `float32` constant or parameter, the variables of
/// `bindings` (the function body's, each used on this path) looked through.
fn scaled_parameter(e: &Expr, bindings: &[Binding]) -> Option<Path> {
    let mut e = e;
    let mut scaled = None;
    let mut reshaped = false;
    let mut followed = 0;
    loop {
        match e.kind() {
            ExprKind::Var(v) => match bindings.iter().find(|b| b.var.id() == v.id()) {
                Some(b) => {
                    followed += 1;
                    e = &b.value;
                }
                None if followed == bindings.len() => {
                    let (scale, factor) = scaled.unwrap_or((Scale::None, None));
                    return Some(Path {
                        data: v.id(),
                        scale,
                        factor,
                        reshaped,
                    });
                }
                None => return None,
            },
            ExprKind::Call { .. } => {
                let (op, args, _) = e.op_call()?;
                f32_dims(e.checked_type()?)?;
                match (op.name, args) {
                    ("reshape" | "squeeze" | "expand_dims" | "nn.batch_flatten", [a])
                    | ("reshape_like", [a, _]) => {
                        reshaped = true;
                        e = a;
                    }
                    ("multiply" | "divide", [a, b]) if scaled.is_none() => {
                        let divide = op.name == "divide";
                        let (data, factor) = match (factor(b), factor(a)) {
                            (Some(k), _) => (a, k),
                            (None, Some(k)) if !divide => (b, k),
                            _ => return None,
                        };
                        scaled = Some(match factor {
                            Factor::Constant(value) => (Scale::Constant { value, divide }, None),
                            Factor::Parameter(id) => (Scale::Parameter { divide }, Some(id)),
                        });
                        e = data;
                    }
                    _ => return None,
                }
            }
            _ => return None,
        }
    }
}

/// A one-element `float32` operand of a softmax's scaling.
enum Factor {
    Constant(f32),
    Parameter(VarId),
}

/// `e` as a [`Factor`], if it is one.
fn factor(e: &Expr) -> Option<Factor> {
    if let Some(value) = super::scalar_constant(e) {
        return Some(Factor::Constant(value));
    }
    match e.kind() {
        ExprKind::Var(v) => {
            let dims = f32_dims(e.checked_type().or(v.ty())?)?;
            dims.iter()
                .all(|d| *d == Some(1))
                .then_some(Factor::Parameter(v.id()))
        }
        _ => None,
    }
}

/// The dimensions (`None` for `?`) of a `float32` tensor type.
fn f32_dims(ty: &Type) -> Option<Vec<Option<i64>>> {
    tensor_dims(ty).and_then(|(dtype, dims)| (dtype == DType::F32).then_some(dims))
}

/// The dtype and dimensions (`None` for `?`) of a tensor type.
pub(super) fn tensor_dims(ty: &Type) -> Option<(DType, Vec<Option<i64>>)> {
    match ty.kind() {
        TypeKind::Tensor { dtype, shape } => Some((
            *dtype,
            shape
                .iter()
                .map(|d| match d {
                    relay_ir::Dim::Known(n) => Some(*n),
                    relay_ir::Dim::Any => None,
                })
                .collect(),
        )),
        _ => None,
    }
}

impl SoftmaxOp {
    /// The result's shape: the data's (the result type's when a reshape is in between, which
    /// only a static kernel allows), checked to hold whole rows.
    pub(super) fn output_shapes(
        &self,
        inputs: &[&[i64]],
        result: Option<&[i64]>,
    ) -> Result<Vec<Vec<i64>>, String> {
        let data = inputs.first().ok_or("a softmax has data")?;
        let out = result.unwrap_or(data);
        let count = |s: &[i64]| s.iter().try_fold(1i64, |n, &d| n.checked_mul(d));
        let scale_ok = match self.scale {
            Scale::Parameter { .. } => inputs.len() == 2 && count(inputs[1]) == Some(1),
            _ => inputs.len() == 1,
        };
        if !scale_ok || count(data) != count(out) || out.is_empty() && !data.is_empty() {
            return Err(format!("a softmax of {inputs:?} into {out:?}"));
        }
        Ok(vec![out.to_vec()])
    }

    /// Runs the softmax on `args` (inputs, then the output), the output of shape `out`.
    pub(super) fn run(
        &self,
        ctx: &KernelContext,
        args: &mut [&mut [f32]],
        out: &[i64],
    ) -> Result<(), String> {
        let cols = usize::try_from(out.last().copied().unwrap_or(1)).map_err(|e| e.to_string())?;
        let (y, inputs) = args.split_last_mut().ok_or("a softmax has an output")?;
        let factor = || inputs.get(1).and_then(|a| a.first()).copied();
        let prologue = match self.scale {
            Scale::None => Prologue::None,
            Scale::Constant { value, divide } => Prologue::scale(value, divide),
            Scale::Parameter { divide } => {
                Prologue::scale(factor().ok_or("no scaling factor")?, divide)
            }
        };
        let s = Softmax {
            rows: y.len().checked_div(cols).unwrap_or(0),
            cols,
            prologue,
            log: self.log,
        };
        relay_linalg::softmax::softmax(ctx, &s, inputs.first().ok_or("no data")?, y)
    }
}
