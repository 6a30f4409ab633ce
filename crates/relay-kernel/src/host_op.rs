//! Operators the kernel library computes whole, with no loop nest (TVM's extern tensors):
//! - the LSTM and GRU recurrences (`nn.lstm_recurrence`, `nn.gru_recurrence`, computed by
//!   [`relay_linalg::rnn`]): sequential over their steps, which a tensor expression cannot
//!   say; the operators are opaque, so fusion leaves each alone in its primitive function,
//!   a primitive of one call of the operator on its parameters in order;
//! - `float32` softmax and log-softmax over the last axis ([`relay_linalg::softmax`]: one
//!   memory pass on 16 lanes where a loop nest makes three on 4), of a parameter seen through
//!   reshapes (which do not move data) and at most one scaling by a scalar — a constant or a
//!   parameter — that fusion put in front of it (an attention score's `divide`).
//!
//! Such a primitive compiles to a [`PackedFunc`] whose entry is the library function
//! ([`compile`]) instead of JIT code; its arguments are checked against its [`KernelSpec`] as
//! a JIT'd entry checks them. Every other softmax (another axis, dtype or prologue) is lowered
//! to loops like any reduction.

use relay_ir::OpError;
use relay_ir::{Attrs, Binding, DType, Expr, ExprKind, Function, Type, TypeKind, VarId};
use relay_linalg::KernelContext;
use relay_linalg::softmax::{Prologue, Softmax};
use relay_ops::support::{attr_bool, attr_int};

use crate::KernelError;
use crate::abi::{ArgSpec, DLDataType, DLTensor, KernelSpec, dtype_name};
use crate::packed::PackedFunc;
use relay_linalg::rnn::{Gru, Lstm, Sizes};

/// A host operator with its attributes.
#[derive(Clone, Copy, Debug)]
pub enum HostOp {
    /// `nn.lstm_recurrence`.
    Lstm {
        reverse: bool,
        clip: Option<f32>,
        input_forget: bool,
    },
    /// `nn.gru_recurrence`.
    Gru {
        reverse: bool,
        clip: Option<f32>,
        linear_before_reset: bool,
    },
    /// `nn.softmax` (or `nn.log_softmax` when `log`) over rows of `cols` elements of the first
    /// parameter, after `scale`.
    Softmax {
        log: bool,
        cols: usize,
        scale: Scale,
    },
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

/// The host operator primitive function `func` calls, when its body is one call of one on
/// its parameters in order; `None` for every other function (compiled to JIT code).
pub fn host_op(func: &Function) -> Option<Result<HostOp, KernelError>> {
    let (bindings, body) = match func.body.kind() {
        ExprKind::Let { bindings, body } => (bindings.as_slice(), body),
        _ => (&[][..], &func.body),
    };
    let ExprKind::Call {
        callee,
        args,
        attrs,
    } = body.kind()
    else {
        return None;
    };
    let ExprKind::Op(op) = callee.kind() else {
        return None;
    };
    if matches!(op.name, "nn.softmax" | "nn.log_softmax") {
        let log = op.name == "nn.log_softmax";
        return softmax(func, bindings, log, args, attrs).map(Ok);
    }
    if !bindings.is_empty() {
        return None;
    }
    let parsed = match op.name {
        "nn.lstm_recurrence" => lstm_attrs(attrs),
        "nn.gru_recurrence" => gru_attrs(attrs),
        _ => return None,
    };
    let in_order = args.len() == func.params.len()
        && args.iter().zip(&func.params).all(|(a, p)| match a.kind() {
            ExprKind::Var(v) => v.id() == p.id(),
            _ => false,
        });
    if !in_order {
        return Some(Err(KernelError::Lower {
            message: format!(
                "`{}` is computed by the kernel library: its kernel must call it on the \
                 kernel's parameters in order",
                op.name
            ),
        }));
    }
    Some(parsed.map_err(|message| KernelError::Lower {
        message: format!("`{}`: {message}", op.name),
    }))
}

/// The host softmax a primitive whose body is `nn.softmax(x, axis)` (or `nn.log_softmax`)
/// computes, if it is one: `float32` throughout, `axis` the last, `x` the first parameter seen
/// through reshapes and at most one scaling by a `float32` scalar (a constant, or the second
/// and last parameter).
fn softmax(
    func: &Function,
    bindings: &[Binding],
    log: bool,
    args: &[Expr],
    attrs: &Attrs,
) -> Option<HostOp> {
    let [x] = args else { return None };
    let shape = f32_shape(x.checked_type()?)?;
    let axis = attr_int(attrs, "axis").ok()?;
    if axis != shape.len() as i64 - 1 && axis != -1
        || f32_shape(func.body.checked_type()?).is_none()
    {
        return None;
    }
    let cols = usize::try_from(*shape.last()?).ok()?;
    let (data, scale, factor) = scaled_parameter(x, bindings)?;
    let params: Vec<VarId> = func.params.iter().map(|p| p.id()).collect();
    let scale = match factor {
        None => scale,
        Some(id) if params.get(1) == Some(&id) => scale,
        Some(_) => return None,
    };
    let want = if factor.is_some() { 2 } else { 1 };
    let static_params = func
        .params
        .iter()
        .all(|p| p.checked_type().and_then(f32_shape).is_some());
    (params.len() == want && params[0] == data && static_params).then_some(HostOp::Softmax {
        log,
        cols,
        scale,
    })
}

/// The parameter a softmax reads, its scaling, and the parameter holding the scaling's factor
/// if one does: `e` through reshapes (which keep the flat order) and at most one `multiply` or
/// `divide` by a one-element `float32` constant or parameter, the variables of `bindings`
/// (the function body's, each used on this path) looked through.
fn scaled_parameter(e: &Expr, bindings: &[Binding]) -> Option<(VarId, Scale, Option<VarId>)> {
    let mut e = e;
    let mut scaled = None;
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
                    return Some((v.id(), scale, factor));
                }
                None => return None,
            },
            ExprKind::Call { callee, args, .. } => {
                let ExprKind::Op(op) = callee.kind() else {
                    return None;
                };
                f32_shape(e.checked_type()?)?;
                match (op.name, args.as_slice()) {
                    ("reshape" | "squeeze" | "expand_dims" | "nn.batch_flatten", [a])
                    | ("reshape_like", [a, _]) => e = a,
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
    match e.kind() {
        ExprKind::Constant(c)
            if c.dtype() == DType::F32 && c.shape().iter().product::<i64>() == 1 =>
        {
            Some(Factor::Constant(*c.to_f64_vec().first()? as f32))
        }
        ExprKind::Var(v) => {
            let shape = f32_shape(e.checked_type().or(v.ty())?)?;
            (shape.iter().product::<i64>() == 1).then_some(Factor::Parameter(v.id()))
        }
        _ => None,
    }
}

/// The static shape of a `float32` tensor type.
fn f32_shape(ty: &Type) -> Option<Vec<i64>> {
    match ty.kind() {
        TypeKind::Tensor { dtype, .. } if *dtype == DType::F32 => crate::static_shape(ty),
        _ => None,
    }
}

/// The `clip` attribute as float32.
fn clip(attrs: &Attrs) -> Result<Option<f32>, OpError> {
    Ok(relay_ops::recurrence_clip(attrs)?.map(|c| c as f32))
}

fn lstm_attrs(attrs: &Attrs) -> Result<HostOp, OpError> {
    Ok(HostOp::Lstm {
        reverse: attr_bool(attrs, "reverse")?,
        clip: clip(attrs)?,
        input_forget: attr_bool(attrs, "input_forget")?,
    })
}

fn gru_attrs(attrs: &Attrs) -> Result<HostOp, OpError> {
    Ok(HostOp::Gru {
        reverse: attr_bool(attrs, "reverse")?,
        clip: clip(attrs)?,
        linear_before_reset: attr_bool(attrs, "linear_before_reset")?,
    })
}

/// The packed function of host operator `op`, the body of primitive `func` named `name`: its
/// arguments are the parameters, then the fields of the result.
pub fn compile(func: &Function, name: &str, op: HostOp) -> Result<PackedFunc, KernelError> {
    let malformed = |message: String| KernelError::Malformed {
        kernel: name.to_owned(),
        message,
    };
    let mut args = Vec::new();
    for (i, p) in func.params.iter().enumerate() {
        let ty = p
            .checked_type()
            .or(p.ty())
            .ok_or_else(|| malformed(format!("parameter {i} has no type")))?;
        args.push(arg_spec(format!("p{i}"), ty).map_err(malformed)?);
    }
    let inputs = args.len();
    let result = func
        .body
        .checked_type()
        .or(func.ret_type.as_ref())
        .ok_or_else(|| malformed("the call has no type".into()))?;
    let fields = match (result.kind(), op) {
        (TypeKind::Tuple(fields), HostOp::Lstm { .. } | HostOp::Gru { .. }) => fields.as_slice(),
        (TypeKind::Tensor { .. }, HostOp::Softmax { .. }) => std::slice::from_ref(result),
        _ => return Err(malformed(format!("an unexpected result type `{result}`"))),
    };
    for (i, f) in fields.iter().enumerate() {
        args.push(arg_spec(format!("T_out{i}"), f).map_err(malformed)?);
    }
    let spec = KernelSpec {
        name: name.to_owned(),
        args,
        scratch: Vec::new(),
    };
    match op {
        HostOp::Softmax { cols, .. } => softmax_shape(&spec, cols).map(|_| ()),
        _ => sizes(&spec, op).map(|_| ()),
    }
    .map_err(malformed)?;
    Ok(PackedFunc::host(name.to_owned(), spec, inputs, op))
}

/// The argument spec of a static float32 tensor type.
fn arg_spec(name: String, ty: &Type) -> Result<ArgSpec, String> {
    let shape =
        crate::static_shape(ty).ok_or_else(|| format!("{name}: a static tensor, got `{ty}`"))?;
    if !matches!(ty.kind(), TypeKind::Tensor { dtype, .. } if *dtype == DType::F32) {
        return Err(format!("{name}: float32, got `{ty}`"));
    }
    Ok(ArgSpec {
        name,
        dtype: DLDataType {
            code: DType::F32.code as u8,
            bits: 32,
            lanes: 1,
        },
        shape,
    })
}

/// A softmax's rows: the data and the result have one element count, a multiple of `cols`
/// (their flat order is the softmax input's), and a scaling parameter one element.
fn softmax_shape(spec: &KernelSpec, cols: usize) -> Result<usize, String> {
    let count = |a: &ArgSpec| usize::try_from(a.shape.iter().product::<i64>()).ok();
    let counts: Vec<Option<usize>> = spec.args.iter().map(count).collect();
    let (data, result) = (
        counts.first().copied().flatten(),
        counts.last().copied().flatten(),
    );
    let scale_ok = counts.len() == 2 || counts.len() == 3 && counts[1] == Some(1);
    match (data, result) {
        (Some(n), Some(m)) if n == m && scale_ok && (cols == 0 || n % cols == 0) => {
            Ok(if cols == 0 { 0 } else { n / cols })
        }
        _ => Err(format!(
            "softmax over rows of {cols}: argument shapes {:?}",
            spec.args.iter().map(|a| &a.shape).collect::<Vec<_>>()
        )),
    }
}

/// The sizes of `op`'s recurrence from its arguments' shapes, checked against each other.
fn sizes(spec: &KernelSpec, op: HostOp) -> Result<Sizes, String> {
    let (gates, count) = match op {
        HostOp::Lstm { .. } => (4, 8),
        HostOp::Gru { .. } => (3, 6),
        HostOp::Softmax { .. } => return Err("a softmax is not a recurrence".into()),
    };
    let shapes: Vec<&[i64]> = spec.args.iter().map(|a| a.shape.as_slice()).collect();
    let (&[seq, batch, cols], &[hidden, rcols]) = (
        shapes.first().copied().unwrap_or_default(),
        shapes.get(1).copied().unwrap_or_default(),
    ) else {
        return Err("xw [seq, batch, gates·hidden] and r [hidden, gates·hidden]".into());
    };
    let state = [batch, hidden];
    let mut want: Vec<Vec<i64>> = vec![vec![seq, batch, cols], vec![hidden, rcols], state.to_vec()];
    match op {
        HostOp::Lstm { .. } => want.extend([state.to_vec(), vec![3 * hidden]]),
        HostOp::Gru { .. } => want.push(vec![hidden]),
        HostOp::Softmax { .. } => {}
    }
    want.push(vec![seq, batch, hidden]);
    want.extend(std::iter::repeat_n(state.to_vec(), count - want.len()));
    let fits = shapes.len() == count
        && cols == gates * hidden
        && rcols == cols
        && shapes.iter().zip(&want).all(|(s, w)| *s == w.as_slice());
    if !fits {
        return Err(format!("argument shapes {shapes:?}, want {want:?}"));
    }
    let size = |n: i64| usize::try_from(n).map_err(|_| format!("a negative size {n}"));
    Ok(Sizes {
        seq: size(seq)?,
        batch: size(batch)?,
        hidden: size(hidden)?,
    })
}

/// Checks `t` against `a`: dtype, rank, shape and data.
///
/// # Safety
///
/// `t`'s shape is valid for `ndim` elements.
unsafe fn check(t: &DLTensor, a: &ArgSpec) -> Result<usize, String> {
    let same_dtype =
        (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (a.dtype.code, a.dtype.bits, a.dtype.lanes);
    if !same_dtype {
        return Err(format!(
            "argument {}: expected {}, got {}",
            a.name,
            dtype_name(a.dtype),
            dtype_name(t.dtype)
        ));
    }
    let ndim = usize::try_from(t.ndim).unwrap_or(usize::MAX);
    // SAFETY: by this function's contract.
    let shape = match ndim == a.shape.len() && !t.shape.is_null() {
        true => unsafe { std::slice::from_raw_parts(t.shape, ndim) },
        false => &[],
    };
    if shape != a.shape.as_slice() {
        return Err(format!(
            "argument {}: expected shape {:?}, got rank {} {shape:?}",
            a.name, a.shape, t.ndim
        ));
    }
    let n = a.shape.iter().product::<i64>() as usize;
    if n > 0 && t.data.is_null() {
        return Err(format!("argument {}: null data", a.name));
    }
    Ok(n)
}

/// Runs host operator `op` with the kernels and threads of `ctx` on `tensors` (the arguments
/// of `spec`, inputs first, the outputs last).
///
/// # Safety
///
/// Each tensor that passes the checks against `spec` has data valid for reads (inputs) or
/// writes (outputs) of its whole size, with no overlap between outputs and other arguments.
pub(crate) unsafe fn call(
    op: HostOp,
    ctx: &KernelContext,
    spec: &KernelSpec,
    tensors: &[&DLTensor],
) -> Result<(), String> {
    if tensors.len() != spec.args.len() {
        return Err(format!(
            "expected {} arguments, got {}",
            spec.args.len(),
            tensors.len()
        ));
    }
    let mut args: Vec<&mut [f32]> = Vec::with_capacity(tensors.len());
    for (t, a) in tensors.iter().zip(&spec.args) {
        // SAFETY: the caller passes DLTensors whose shapes are valid for `ndim` elements.
        let n = unsafe { check(t, a) }?;
        // SAFETY: checked, each argument has its spec's shape and float32 data, valid for its
        // length by the caller's contract; inputs are only read and the outputs are disjoint
        // from every other argument.
        args.push(unsafe { slice(t, n) });
    }
    match op {
        HostOp::Lstm {
            reverse,
            clip,
            input_forget,
        } => {
            let s = sizes(spec, op)?;
            let [xw, r, h0, c0, peephole, y, h, c] = args.as_mut_slice() else {
                return Err("an LSTM takes 8 arguments".into());
            };
            let args = Lstm {
                xw,
                r,
                h0,
                c0,
                peephole,
                reverse,
                clip,
                input_forget,
            };
            (ctx.ops().lstm)(s, &args, y, h, c);
        }
        HostOp::Gru {
            reverse,
            clip,
            linear_before_reset,
        } => {
            let s = sizes(spec, op)?;
            let [xw, r, h0, rbh, y, h] = args.as_mut_slice() else {
                return Err("a GRU takes 6 arguments".into());
            };
            let args = Gru {
                xw,
                r,
                h0,
                rbh,
                reverse,
                clip,
                linear_before_reset,
            };
            (ctx.ops().gru)(s, &args, y, h);
        }
        HostOp::Softmax { log, cols, scale } => {
            let rows = softmax_shape(spec, cols)?;
            let (y, inputs) = args.split_last_mut().ok_or("a softmax has an output")?;
            let factor = |i: usize| inputs.get(i).and_then(|a| a.first()).copied();
            let prologue = match scale {
                Scale::None => Prologue::None,
                Scale::Constant { value, divide } => Prologue::scale(value, divide),
                Scale::Parameter { divide } => {
                    Prologue::scale(factor(1).ok_or("no scaling factor")?, divide)
                }
            };
            let s = Softmax {
                rows,
                cols,
                prologue,
                log,
            };
            relay_linalg::softmax::softmax(ctx, &s, &inputs[0], y)?;
        }
    }
    Ok(())
}

/// The `n` float32 elements of `t`.
///
/// # Safety
///
/// `t`'s data plus its byte offset is valid for `n` float32 elements for as long as the slice
/// lives, with no other access meanwhile if it is written.
unsafe fn slice<'a>(t: &DLTensor, n: usize) -> &'a mut [f32] {
    let data = t
        .data
        .cast::<u8>()
        .wrapping_add(t.byte_offset as usize)
        .cast::<f32>();
    if n == 0 {
        return &mut [];
    }
    // SAFETY: by this function's contract.
    unsafe { std::slice::from_raw_parts_mut(data, n) }
}

#[cfg(test)]
mod tests {
    use relay_ir::{DType, NDArray};

    use crate::compose::tests::primitive;

    /// A GRU recurrence of 3 steps, batch 2, hidden 4 as a primitive function.
    const GRU: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(3, 2, 12), float32], %r: Tensor[(4, 12), float32], %h: Tensor[(2, 4), float32], %b: Tensor[(4), float32]) {
  %0 = fn (%p0: Tensor[(3, 2, 12), float32], %p1: Tensor[(4, 12), float32], %p2: Tensor[(2, 4), float32], %p3: Tensor[(4), float32], Primitive=1) {
    nn.gru_recurrence(%p0, %p1, %p2, %p3, reverse=True, linear_before_reset=True)
  };
  %0(%x, %r, %h, %b)
}"#;

    fn zeros(shape: &[i64]) -> NDArray {
        NDArray::zeros(DType::F32, shape).unwrap()
    }

    #[test]
    fn a_recurrence_primitive_runs_on_the_library_and_checks_its_arguments() {
        let f = primitive(GRU);
        let k = crate::compile_primitive(&f, "fused_nn_gru_recurrence").unwrap();
        assert!(k.entry().is_none());
        let (x, r, h, b) = (
            zeros(&[3, 2, 12]),
            zeros(&[4, 12]),
            zeros(&[2, 4]),
            zeros(&[4]),
        );
        let (mut y, mut hn) = (zeros(&[3, 2, 4]), zeros(&[2, 4]));
        // Zero inputs: z = r = 1/2, the candidate 0, so every state halves from h0 = 1.
        let mut h = h;
        h.as_bytes_mut()
            .chunks_exact_mut(4)
            .for_each(|c| c.copy_from_slice(&1f32.to_le_bytes()));
        k.call(&[&x, &r, &h, &b], &mut [&mut y, &mut hn]).unwrap();
        let last = f32::from_le_bytes(hn.as_bytes()[..4].try_into().unwrap());
        assert_eq!(last, 0.125);
        // reverse: step 0 is the last computed.
        let first = f32::from_le_bytes(y.as_bytes()[..4].try_into().unwrap());
        assert_eq!(first, 0.125);
        // An argument of another shape is an error naming it, nothing is written.
        let bad = zeros(&[2, 12]);
        let e = k
            .call(&[&x, &bad, &h, &b], &mut [&mut y, &mut hn])
            .unwrap_err();
        assert!(e.to_string().contains("p1"), "{e}");
        assert!(crate::verify_primitive(&f, "k").is_ok());
        let listing =
            crate::print_kernels(&[("k".into(), f)], crate::KernelText::LoopNest).unwrap();
        assert!(listing.contains(crate::listing::HOST_NOTE), "{listing}");
    }

    /// A module whose one primitive has body `body` over parameters `params`.
    fn softmax_primitive(params: &str, body: &str) -> relay_ir::Function {
        primitive(&format!(
            "#[version = \"0.0.5\"]\ndef @main() {{\n  fn ({params}, Primitive=1) {{ {body} }}\n}}"
        ))
    }

    fn floats(shape: &[i64], f: impl Fn(usize) -> f32) -> NDArray {
        let n = shape.iter().product::<i64>() as usize;
        let v: Vec<f64> = (0..n).map(|i| f64::from(f(i))).collect();
        NDArray::from_f64_slice(DType::F32, shape, &v).unwrap()
    }

    #[test]
    fn softmax_primitives_the_library_computes_and_those_it_leaves_to_loops() {
        use super::{HostOp, Scale, host_op};
        let x = "%p0: Tensor[(2, 3, 5), float32]";
        let host = |params: &str, body: &str| match host_op(&softmax_primitive(params, body)) {
            Some(Ok(op)) => Some(op),
            Some(Err(e)) => panic!("{body}: {e}"),
            None => None,
        };
        let op = host(x, "nn.softmax(%p0, axis=-1)").unwrap();
        assert!(matches!(
            op,
            HostOp::Softmax {
                log: false,
                cols: 5,
                scale: Scale::None
            }
        ));
        let op = host(x, "%0 = divide(%p0, 4f); nn.log_softmax(%0, axis=2)").unwrap();
        let want = Scale::Constant {
            value: 4.0,
            divide: true,
        };
        assert!(matches!(op, HostOp::Softmax { log: true, cols: 5, scale } if scale == want));
        let op = host(
            &format!("{x}, %p1: float32"),
            "nn.softmax(reshape(multiply(%p1, %p0), newshape=[6, 5]), axis=1)",
        )
        .unwrap();
        let want = Scale::Parameter { divide: false };
        assert!(matches!(op, HostOp::Softmax { scale, .. } if scale == want));
        for (params, body) in [
            (x, "nn.softmax(%p0, axis=1)"),
            (x, "nn.softmax(exp(%p0), axis=-1)"),
            (x, "nn.softmax(multiply(multiply(%p0, 2f), 2f), axis=-1)"),
            (x, "nn.softmax(add(%p0, 2f), axis=-1)"),
            ("%p0: Tensor[(2, 5), float64]", "nn.softmax(%p0, axis=-1)"),
            (
                &format!("{x}, %p1: Tensor[(5), float32]"),
                "nn.softmax(multiply(%p0, %p1), axis=-1)",
            ),
            (
                &format!("{x}, %p1: float32"),
                "nn.softmax(divide(%p1, %p0), axis=-1)",
            ),
        ] {
            assert!(host(params, body).is_none(), "{body}");
        }
    }

    #[test]
    fn a_scaled_softmax_runs_on_the_library_with_its_factor_as_an_argument() {
        let f = softmax_primitive(
            "%p0: Tensor[(3, 4), float32], %p1: float32",
            "nn.softmax(divide(%p0, %p1), axis=-1)",
        );
        let k = crate::compile_primitive(&f, "fused_divide_nn_softmax").unwrap();
        assert!(k.entry().is_none());
        let x = floats(&[3, 4], |i| i as f32);
        let scale = floats(&[], |_| 2.0);
        let mut y = zeros(&[3, 4]);
        k.call(&[&x, &scale], &mut [&mut y]).unwrap();
        let y = y.to_f64_vec();
        for row in 0..3 {
            let e: Vec<f64> = (0..4).map(|j| (f64::from(j as u8) / 2.0).exp()).collect();
            let sum: f64 = e.iter().sum();
            for j in 0..4 {
                let got = y[row * 4 + j];
                assert!((got - e[j] / sum).abs() < 1e-6, "{row} {j}: {got}");
            }
        }
        let mut wrong = zeros(&[4, 3]);
        assert!(k.call(&[&x, &scale], &mut [&mut wrong]).is_err());
    }
}
