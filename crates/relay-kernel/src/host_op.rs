//! Operators the kernel library computes whole, with no loop nest (TVM's extern tensors): the
//! LSTM and GRU recurrences (`nn.lstm_recurrence`, `nn.gru_recurrence`, computed by
//! [`relay_linalg::rnn`]). A recurrence is sequential over its steps, which a tensor expression
//! cannot say; the operators are opaque, so fusion leaves each alone in its primitive function,
//! and such a primitive — one call of the operator on its parameters — compiles to a
//! [`PackedFunc`] whose entry is the library function ([`compile`]) instead of JIT code. Its
//! arguments are checked against its [`KernelSpec`] as a JIT'd entry checks them.

use relay_ir::OpError;
use relay_ir::{Attrs, DType, ExprKind, Function, Type, TypeKind};
use relay_ops::support::attr_bool;

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
}

/// The host operator primitive function `func` calls, when its body is one call of one on
/// its parameters in order; `None` for every other function (compiled to JIT code).
pub fn host_op(func: &Function) -> Option<Result<HostOp, KernelError>> {
    let ExprKind::Call {
        callee,
        args,
        attrs,
    } = func.body.kind()
    else {
        return None;
    };
    let ExprKind::Op(op) = callee.kind() else {
        return None;
    };
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
    let TypeKind::Tuple(fields) = result.kind() else {
        return Err(malformed(format!("a tuple result, got `{result}`")));
    };
    for (i, f) in fields.iter().enumerate() {
        args.push(arg_spec(format!("T_out{i}"), f).map_err(malformed)?);
    }
    let spec = KernelSpec {
        name: name.to_owned(),
        args,
        scratch: Vec::new(),
    };
    sizes(&spec, op).map_err(malformed)?;
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

/// The sizes of `op`'s recurrence from its arguments' shapes, checked against each other.
fn sizes(spec: &KernelSpec, op: HostOp) -> Result<Sizes, String> {
    let (gates, count) = match op {
        HostOp::Lstm { .. } => (4, 8),
        HostOp::Gru { .. } => (3, 6),
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

/// Runs host operator `op` with the kernels of `ops` on `tensors` (the arguments of `spec`,
/// inputs first).
///
/// # Safety
///
/// Each tensor that passes the checks against `spec` has data valid for reads (inputs) or
/// writes (outputs) of its whole size, with no overlap between outputs and other arguments.
pub(crate) unsafe fn call(
    op: HostOp,
    ops: &relay_linalg::Ops,
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
    let mut lens = Vec::with_capacity(tensors.len());
    for (t, a) in tensors.iter().zip(&spec.args) {
        // SAFETY: the caller passes DLTensors whose shapes are valid for `ndim` elements.
        lens.push(unsafe { check(t, a) }?);
    }
    let s = sizes(spec, op)?;
    // SAFETY (every `slice` below): checked above, each argument has its spec's shape and
    // float32 data, valid for its length by the caller's contract; inputs are only read and
    // the outputs are disjoint from every other argument.
    let input = |i: usize| -> &[f32] { unsafe { slice(tensors[i], lens[i]) } };
    let output = |i: usize| unsafe { slice(tensors[i], lens[i]) };
    match op {
        HostOp::Lstm {
            reverse,
            clip,
            input_forget,
        } => {
            let args = Lstm {
                xw: input(0),
                r: input(1),
                h0: input(2),
                c0: input(3),
                peephole: input(4),
                reverse,
                clip,
                input_forget,
            };
            (ops.lstm)(s, &args, output(5), output(6), output(7));
        }
        HostOp::Gru {
            reverse,
            clip,
            linear_before_reset,
        } => {
            let args = Gru {
                xw: input(0),
                r: input(1),
                h0: input(2),
                rbh: input(3),
                reverse,
                clip,
                linear_before_reset,
            };
            (ops.gru)(s, &args, output(4), output(5));
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
}
