//! Operators the kernel library computes whole, with no loop nest (TVM's extern tensors):
//! the recurrences ([`recurrence`]), an attention's two products and softmax in cache
//! ([`attention`]), `float32` softmax over the last axis ([`softmax`]), functions of one
//! variable with `erf`, `tanh`, `exp` or `sigmoid` in them, a GELU ([`pointwise`]),
//! matrix products with `?` dimensions ([`matmul`]), reshapes with `?` dimensions, which
//! the VM makes views ([`view`]), transposes, slices and concatenations with `?`
//! dimensions, strided copies ([`copy`]), `strided_set`, in place when the VM can
//! ([`strided_set`]), blocked (NCHWc) convolutions with their epilogues ([`conv_nchwc`])
//! and blocked pooling ([`pool_nchwc`]).
//!
//! Such a primitive compiles to a [`PackedFunc`] whose entry is the library function
//! ([`compile`]) instead of JIT code. A `?` dimension of a parameter or the result stays `-1` in
//! its [`KernelSpec`]: the kernel takes any extent there, its output shapes given by the
//! operator's shape function ([`HostOp::output_shapes`], TVM's `shape_func`) before the call,
//! so one kernel serves every shape and nothing is compiled per shape. Its arguments are
//! checked against the spec and the shape function as a JIT'd entry checks them.

mod attention;
mod conv_nchwc;
mod copy;
mod dynamic;
mod masked_softmax;
mod matmul;
mod memo;
mod pointwise;
mod pool_nchwc;
mod recurrence;
mod reduce;
mod softmax;
mod strided_set;
mod view;

use relay_ir::{Dim, ExprKind, Function, Type, TypeKind};
use relay_linalg::KernelContext;
use relay_ops::support::scalar_f32_constant as scalar_constant;

use crate::KernelError;
use crate::abi::{ArgSpec, DLDataType, DLTensor, KernelSpec, dtype_name, dtype_of};
use crate::packed::PackedFunc;

pub use attention::AttentionOp;
pub use conv_nchwc::ConvNchwc;
pub use copy::CopyOp;
pub use dynamic::{DynamicOp, Inputs};
pub use masked_softmax::MaskedSoftmax;
pub use matmul::{MatmulOp, Product};
pub(crate) use memo::ShapeMemo;
pub use pointwise::PointwiseOp;
pub use pool_nchwc::PoolNchwc;
pub use recurrence::Recurrence;
pub use reduce::ReduceOp;
pub use softmax::{Scale, SoftmaxOp};
pub use strided_set::StridedSet;
pub use view::ViewOp;

/// A host operator with its attributes.
#[derive(Clone, Debug)]
pub enum HostOp {
    /// `nn.lstm_recurrence` or `nn.gru_recurrence`.
    Recurrence(Recurrence),
    /// `nn.softmax` or `nn.log_softmax`, with the scaling in front of it.
    Softmax(SoftmaxOp),
    /// `nn.dense` or `nn.batch_matmul` with `?` dimensions.
    Matmul(MatmulOp),
    /// A reshape-only primitive with `?` dimensions: a view.
    View(ViewOp),
    /// A primitive with `?` dimensions that only moves elements: strided copies.
    Copy(CopyOp),
    /// A float reduction over adjacent axes with `?` dimensions.
    Reduce(ReduceOp),
    /// An operator whose result shape depends on its inputs' values (`dyn.*`, `arange`,
    /// `argwhere`).
    Dynamic(DynamicOp),
    /// An attention's masked softmax as PyTorch exports it.
    MaskedSoftmax(MaskedSoftmax),
    /// An attention's products and softmax, computed in cache.
    Attention(AttentionOp),
    /// A function of one variable over every element (`gelu(x + bias)`).
    Pointwise(PointwiseOp),
    /// `strided_set`: the data with a region replaced, in place when the VM passes the data
    /// as the output.
    StridedSet(StridedSet),
    /// A blocked (NCHWc) convolution and its epilogue.
    ConvNchwc(ConvNchwc),
    /// A blocked (NCHWc) max or average pooling.
    PoolNchwc(PoolNchwc),
}

/// The host operator primitive function `func` computes, when it is one (see each kind's
/// module for the forms); `None` for every other function (compiled to JIT code), and an error
/// for a recurrence whose call is malformed.
pub fn host_op(func: &Function) -> Option<Result<HostOp, KernelError>> {
    let (bindings, body) = match func.body.kind() {
        ExprKind::Let { bindings, body } => (bindings.as_slice(), body),
        _ => (&[][..], &func.body),
    };
    let (op, args, attrs) = body.op_call()?;
    if let Some(d) = dynamic::recognize(func) {
        return Some(Ok(HostOp::Dynamic(d)));
    }
    if let Some(s) = strided_set::recognize(func) {
        return Some(Ok(HostOp::StridedSet(s)));
    }
    if let Some(c) = conv_nchwc::recognize(func) {
        return Some(Ok(HostOp::ConvNchwc(c)));
    }
    if let Some(p) = pool_nchwc::recognize(func) {
        return Some(Ok(HostOp::PoolNchwc(p)));
    }
    if let Some(a) = attention::recognize(func) {
        return Some(Ok(HostOp::Attention(a)));
    }
    if let Some(v) = view::recognize(func) {
        return Some(Ok(HostOp::View(v)));
    }
    if let Some(c) = copy::recognize(func) {
        return Some(Ok(HostOp::Copy(c)));
    }
    if let Some(r) = reduce::recognize(func) {
        return Some(Ok(HostOp::Reduce(r)));
    }
    if let Some(p) = pointwise::recognize(func) {
        return Some(Ok(HostOp::Pointwise(p)));
    }
    if let Some(s) = softmax::recognize(func, bindings, op.name, args, attrs) {
        return Some(Ok(HostOp::Softmax(s)));
    }
    if let Some(m) = masked_softmax::recognize(func, bindings, body) {
        return Some(Ok(HostOp::MaskedSoftmax(m)));
    }
    let in_order = bindings.is_empty()
        && args.len() == func.params.len()
        && args.iter().zip(&func.params).all(|(a, p)| match a.kind() {
            ExprKind::Var(v) => v.id() == p.id(),
            _ => false,
        });
    if let Some(m) = matmul::recognize(func, bindings, body) {
        return Some(Ok(HostOp::Matmul(m)));
    }
    let parsed = recurrence::recognize(op.name, attrs)?;
    if !in_order {
        return Some(Err(KernelError::Lower {
            message: format!(
                "`{}` is computed by the kernel library: its kernel must call it on the \
                 kernel's parameters in order",
                op.name
            ),
        }));
    }
    Some(
        parsed
            .map(HostOp::Recurrence)
            .map_err(|message| KernelError::Lower {
                message: format!("`{}`: {message}", op.name),
            }),
    )
}

/// `e`, or the value its variable is bound to in `bindings` (repeatedly): a primitive body's
/// let-bound variables looked through.
pub(super) fn resolve<'a>(
    bindings: &'a [relay_ir::Binding],
    mut e: &'a relay_ir::Expr,
) -> &'a relay_ir::Expr {
    while let ExprKind::Var(v) = e.kind() {
        match bindings.iter().find(|b| b.var.id() == v.id()) {
            Some(b) => e = &b.value,
            None => break,
        }
    }
    e
}

impl HostOp {
    /// Whether its output shapes depend on its inputs' values, not only their shapes: its
    /// shape function needs their bytes.
    pub fn reads_values(&self) -> bool {
        matches!(self, HostOp::Dynamic(d) if d.reads_values())
    }

    /// The shapes of the outputs for inputs of shapes `inputs` and, for an operator that
    /// [reads values](Self::reads_values), bytes `bytes` (the operator's shape function),
    /// checked against each other and against `spec`'s static output shapes.
    pub fn output_shapes(
        &self,
        spec: &KernelSpec,
        inputs: &[&[i64]],
        bytes: &[&[u8]],
    ) -> Result<Vec<Vec<i64>>, String> {
        let out = match self {
            HostOp::Recurrence(r) => r.output_shapes(inputs)?,
            HostOp::Softmax(s) => {
                let fixed = spec.args[inputs.len().min(spec.args.len())..]
                    .first()
                    .map(|a| a.shape.as_slice())
                    .filter(|s| s.iter().all(|&d| d >= 0));
                s.output_shapes(inputs, fixed)?
            }
            HostOp::Matmul(m) => m.output_shapes(inputs)?,
            HostOp::View(v) => v.output_shapes(inputs)?,
            HostOp::Copy(c) => c.output_shapes(inputs)?,
            HostOp::Reduce(r) => r.output_shapes(inputs)?,
            HostOp::MaskedSoftmax(m) => m.output_shapes(inputs)?,
            HostOp::Attention(a) => a.output_shapes(inputs)?,
            HostOp::Pointwise(p) => p.output_shapes(inputs)?,
            HostOp::StridedSet(s) => s.output_shapes(inputs)?,
            HostOp::ConvNchwc(c) => c.output_shapes(inputs)?,
            HostOp::PoolNchwc(p) => p.output_shapes(inputs)?,
            HostOp::Dynamic(d) => {
                let dtypes = input_dtypes(spec, inputs.len())?;
                let inputs = Inputs {
                    dtypes: &dtypes,
                    shapes: inputs,
                    bytes,
                };
                vec![d.output_shape(&inputs)?]
            }
        };
        Self::declared(spec, inputs, out)
    }

    /// Output shapes `out` for inputs of shapes `inputs` when they fit `spec`'s static output
    /// shapes.
    pub(crate) fn declared(
        spec: &KernelSpec,
        inputs: &[&[i64]],
        out: Vec<Vec<i64>>,
    ) -> Result<Vec<Vec<i64>>, String> {
        let declared = &spec.args[inputs.len().min(spec.args.len())..];
        let fits =
            out.len() == declared.len() && out.iter().zip(declared).all(|(o, d)| fits(o, &d.shape));
        if !fits {
            return Err(format!(
                "outputs of shapes {out:?} for inputs {inputs:?}, declared {:?}",
                declared.iter().map(|a| &a.shape).collect::<Vec<_>>()
            ));
        }
        Ok(out)
    }
}

/// The element types of the first `n` arguments of `spec`.
fn input_dtypes(spec: &KernelSpec, n: usize) -> Result<Vec<relay_ir::DType>, String> {
    spec.args
        .iter()
        .take(n)
        .map(|a| {
            dtype_of(a.dtype).ok_or_else(|| format!("argument {} of an unknown dtype", a.name))
        })
        .collect()
}

/// Whether `shape` fits the spec shape `declared` (`-1` takes any extent).
fn fits(shape: &[i64], declared: &[i64]) -> bool {
    shape.len() == declared.len()
        && shape
            .iter()
            .zip(declared)
            .all(|(&s, &d)| s >= 0 && (d < 0 || s == d))
}

/// The packed function of host operator `op`, the body of primitive `func` named `name`: its
/// arguments are the parameters, then the fields of the result.
pub fn compile(func: &Function, name: &str, op: HostOp) -> Result<PackedFunc, KernelError> {
    let malformed = |message: String| KernelError::Malformed {
        kernel: name.to_owned(),
        message,
    };
    let any_dtype = matches!(
        op,
        HostOp::View(_)
            | HostOp::Copy(_)
            | HostOp::Reduce(_)
            | HostOp::Dynamic(_)
            | HostOp::MaskedSoftmax(_)
            | HostOp::StridedSet(_)
    );
    let (spec, inputs) = kernel_spec(func, name, any_dtype)?;
    let outputs = spec.args.len() - inputs;
    if outputs != 1
        && !matches!(
            op,
            HostOp::Recurrence(_) | HostOp::Copy(CopyOp::Split { .. })
        )
    {
        return Err(malformed(format!("{outputs} results, expected one tensor")));
    }
    let shapes: Vec<&[i64]> = spec.args[..inputs]
        .iter()
        .map(|a| a.shape.as_slice())
        .collect();
    if shapes.iter().all(|s| s.iter().all(|&d| d >= 0)) && !op.reads_values() {
        op.output_shapes(&spec, &shapes, &[]).map_err(malformed)?;
    }
    Ok(PackedFunc::host(name.to_owned(), spec, inputs, op))
}

/// The spec of a kernel for primitive `func` named `name` that is not a loop nest: its
/// parameters' tensors (a tuple parameter's fields in order), then its result's (a tuple's
/// fields), `-1` for each `?` dimension; `float32` only unless `any_dtype`. With it, the
/// number of inputs (the arguments before the result's).
pub(crate) fn kernel_spec(
    func: &Function,
    name: &str,
    any_dtype: bool,
) -> Result<(KernelSpec, usize), KernelError> {
    let malformed = |message: String| KernelError::Malformed {
        kernel: name.to_owned(),
        message,
    };
    let mut args = Vec::new();
    let result = func
        .body
        .checked_type()
        .or(func.ret_type.as_ref())
        .ok_or_else(|| malformed("the call has no type".into()))?;
    let params = func.params.iter().map(|p| p.checked_type().or(p.ty()));
    let mut inputs = 0;
    for (i, ty) in params.chain([Some(result)]).enumerate() {
        let ty = ty.ok_or_else(|| malformed(format!("parameter {i} has no type")))?;
        let is_result = i == func.params.len();
        if is_result {
            inputs = args.len();
        }
        // A tuple is passed as its fields (as to a loop-nest kernel).
        let fields = match ty.kind() {
            TypeKind::Tuple(fields) => fields.as_slice(),
            _ => std::slice::from_ref(ty),
        };
        for (k, f) in fields.iter().enumerate() {
            let name = match is_result {
                true => format!("T_out{k}"),
                false => format!("p{}", args.len()),
            };
            args.push(arg_spec(name, f, any_dtype).map_err(malformed)?);
        }
    }
    let spec = KernelSpec {
        name: name.to_owned(),
        args,
        scratch: Vec::new(),
        alignment: crate::abi::DATA_ALIGNMENT,
    };
    Ok((spec, inputs))
}

/// The argument spec of a tensor type, `-1` for each `?` dimension: `float32` unless
/// `any_dtype`.
fn arg_spec(name: String, ty: &Type, any_dtype: bool) -> Result<ArgSpec, String> {
    let TypeKind::Tensor { dtype, shape } = ty.kind() else {
        return Err(format!("{name}: a tensor, got `{ty}`"));
    };
    if *dtype != relay_ir::DType::F32 && !any_dtype {
        return Err(format!("{name}: float32, got `{ty}`"));
    }
    let shape = spec_dims(shape);
    Ok(ArgSpec {
        name,
        dtype: DLDataType {
            code: dtype.code as u8,
            bits: dtype.bits,
            lanes: dtype.lanes,
        },
        shape,
    })
}

/// The extents of `dims` as a spec writes them, `-1` for each `?`.
fn spec_dims(dims: &[Dim]) -> Vec<i64> {
    dims.iter()
        .map(|d| match d {
            Dim::Known(n) => *n,
            Dim::Any => -1,
        })
        .collect()
}

/// Checks `t` against `a` (dtype, rank, shape — `-1` any extent — and data) and returns its
/// shape.
///
/// # Safety
///
/// `t`'s shape is valid for `ndim` elements.
unsafe fn check<'t>(t: &'t DLTensor, a: &ArgSpec) -> Result<&'t [i64], String> {
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
    if !fits(shape, &a.shape) {
        return Err(format!(
            "argument {}: expected shape {:?}, got rank {} {shape:?}",
            a.name, a.shape, t.ndim
        ));
    }
    let n = count(shape).ok_or_else(|| format!("argument {}: too large", a.name))?;
    if n > 0 && t.data.is_null() {
        return Err(format!("argument {}: null data", a.name));
    }
    Ok(shape)
}

/// The elements of a tensor of `shape`, if they can be addressed.
fn count(shape: &[i64]) -> Option<usize> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
}

/// Runs host operator `op` with the kernels and threads of `ctx` on `tensors` (the arguments
/// of `spec`, inputs first, the outputs last), the outputs checked to have the shapes
/// [`HostOp::output_shapes`] gives.
///
/// # Safety
///
/// Each tensor that passes the checks against `spec` has data valid for reads (inputs) or
/// writes (outputs) of its whole size, with no overlap between outputs and other arguments
/// (but a `strided_set`'s output, which may be its data exactly).
pub(crate) unsafe fn call(
    op: &HostOp,
    memo: &ShapeMemo,
    ctx: &KernelContext,
    spec: &KernelSpec,
    inputs: usize,
    tensors: &[&DLTensor],
) -> Result<(), String> {
    if tensors.len() != spec.args.len() || inputs > tensors.len() {
        return Err(format!(
            "expected {} arguments, got {}",
            spec.args.len(),
            tensors.len()
        ));
    }
    let mut shapes = Vec::with_capacity(tensors.len());
    for (t, a) in tensors.iter().zip(&spec.args) {
        // SAFETY: the caller passes DLTensors whose shapes are valid for `ndim` elements.
        shapes.push(unsafe { check(t, a) }?);
    }
    let mut bytes: Vec<&[u8]> = Vec::new();
    if op.reads_values() {
        for (t, (s, a)) in tensors
            .iter()
            .zip(shapes.iter().zip(&spec.args))
            .take(inputs)
        {
            let n = count(s).and_then(|n| n.checked_mul(usize::from(a.dtype.bits).div_ceil(8)));
            // SAFETY: checked against the spec, valid for reads of its size by the contract;
            // only read while the outputs (disjoint from it) are written.
            bytes.push(unsafe { slice::<u8>(t, n.unwrap_or(0)) });
        }
    }
    let want = memo.output_shapes(op, spec, &shapes[..inputs], &bytes)?;
    if want
        .iter()
        .zip(&shapes[inputs..])
        .any(|(w, s)| w.as_slice() != *s)
    {
        return Err(format!(
            "outputs of shapes {:?}, want {want:?}",
            &shapes[inputs..]
        ));
    }
    if let HostOp::StridedSet(s) = op {
        // SAFETY: checked against the spec; the caller passes the data itself as the output
        // or an output disjoint from every input (`run` checks which).
        return unsafe { s.run(spec, tensors, &shapes) };
    }
    if let HostOp::View(v) = op {
        let mut bytes: Vec<&mut [u8]> = Vec::with_capacity(tensors.len());
        for (t, (s, a)) in tensors.iter().zip(shapes.iter().zip(&spec.args)) {
            let n = count(s).and_then(|n| n.checked_mul(usize::from(a.dtype.bits).div_ceil(8)));
            // SAFETY: as below, for bytes.
            bytes.push(unsafe { slice(t, n.unwrap_or(0)) });
        }
        return v.run(&mut bytes);
    }
    if let HostOp::Dynamic(d) = op {
        let (out, shape) = (
            tensors.last().ok_or("no output")?,
            want.first().ok_or("no output")?,
        );
        let a = spec.args.last().ok_or("no output")?;
        let dtype = dtype_of(a.dtype).ok_or("an output of an unknown dtype")?;
        let n = count(shape).and_then(|n| n.checked_mul(usize::from(a.dtype.bits).div_ceil(8)));
        // SAFETY: the output, checked against `want`, valid for writes of its size and
        // disjoint from the inputs by the contract.
        let out_bytes = unsafe { slice::<u8>(out, n.ok_or("an output too large")?) };
        let dtypes = input_dtypes(spec, inputs)?;
        let inputs = Inputs {
            dtypes: &dtypes,
            shapes: &shapes[..inputs],
            bytes: &bytes,
        };
        return d.run(&inputs, out_bytes, shape, dtype);
    }
    if let HostOp::MaskedSoftmax(m) = op {
        let mask = match m.has_mask() {
            true => {
                let i = m.bias_arg();
                let (t, s) = (
                    tensors.get(i).ok_or("no mask")?,
                    shapes.get(i).ok_or("no mask")?,
                );
                // SAFETY: checked against the spec (a boolean: a byte per element), valid for
                // reads of its size by the contract, and only read.
                Some(unsafe { slice::<u8>(t, count(s).unwrap_or(0)) })
            }
            false => None,
        };
        // SAFETY: as below; the mask (8-bit) is passed empty.
        let mut args = unsafe { typed_args::<f32>(spec, tensors, &shapes) }?;
        return m.run(ctx, &mut args, mask.as_deref(), &shapes);
    }
    if let HostOp::Copy(c) = op {
        // SAFETY: as below, for elements of the arguments' width.
        return unsafe { copy_elements(c, memo, spec, tensors, &shapes) };
    }
    if let HostOp::Reduce(r) = op {
        let data = shapes.first().copied().unwrap_or_default();
        // SAFETY: as below, for floats of the arguments' width (the recognizer took
        // float32 or float64 only).
        return unsafe {
            match spec.args.first().map(|a| a.dtype.bits) {
                Some(64) => r.run(&mut typed_args::<f64>(spec, tensors, &shapes)?, data),
                _ => r.run(&mut typed_args::<f32>(spec, tensors, &shapes)?, data),
            }
        };
    }
    let mut args: Vec<&mut [f32]> = Vec::with_capacity(tensors.len());
    for (t, s) in tensors.iter().zip(&shapes) {
        let n = count(s).unwrap_or(0);
        // SAFETY: checked, each argument has its shape and float32 data, valid for its length
        // by the caller's contract; inputs are only read and the outputs are disjoint from
        // every other argument.
        args.push(unsafe { slice(t, n) });
    }
    match op {
        HostOp::Recurrence(r) => r.run(ctx, &mut args, &shapes),
        HostOp::Softmax(s) => s.run(ctx, &mut args, want.first().ok_or("no output")?),
        HostOp::Matmul(m) => m.run(ctx, &mut args, &shapes[..inputs]),
        HostOp::Attention(a) => a.run(ctx, memo, &mut args, &shapes[..inputs]),
        HostOp::Pointwise(p) => p.run(ctx, &mut args),
        HostOp::ConvNchwc(c) => c.run(ctx, &mut args),
        HostOp::PoolNchwc(p) => p.run(ctx, &mut args),
        HostOp::View(_)
        | HostOp::Copy(_)
        | HostOp::Reduce(_)
        | HostOp::Dynamic(_)
        | HostOp::MaskedSoftmax(_)
        | HostOp::StridedSet(_) => Ok(()),
    }
}

/// Runs copy `c` on `tensors` (checked against `spec`, of shapes `shapes`) as elements of
/// their width.
///
/// # Safety
///
/// As [`call`]'s.
unsafe fn copy_elements(
    c: &CopyOp,
    memo: &ShapeMemo,
    spec: &KernelSpec,
    tensors: &[&DLTensor],
    shapes: &[&[i64]],
) -> Result<(), String> {
    let bits = spec.args.last().map_or(0, |a| a.dtype.bits);
    // SAFETY: by this function's contract.
    unsafe {
        match bits {
            8 => copy_as::<u8>(c, memo, spec, tensors, shapes),
            16 => copy_as::<u16>(c, memo, spec, tensors, shapes),
            32 => copy_as::<u32>(c, memo, spec, tensors, shapes),
            64 => copy_as::<u64>(c, memo, spec, tensors, shapes),
            _ => Err(format!("a copy of {bits}-bit elements")),
        }
    }
}

/// [`copy_elements`] for elements of type `T`.
///
/// # Safety
///
/// As [`call`]'s.
unsafe fn copy_as<T: relay_linalg::copy::Bits>(
    c: &CopyOp,
    memo: &ShapeMemo,
    spec: &KernelSpec,
    tensors: &[&DLTensor],
    shapes: &[&[i64]],
) -> Result<(), String> {
    let scalars: Vec<Option<i128>> = tensors
        .iter()
        .zip(&spec.args)
        // SAFETY: checked against the spec; valid by the contract.
        .map(|(t, a)| unsafe { scalar_int(t, a) })
        .collect();
    // SAFETY: by this function's contract.
    let mut args = unsafe { typed_args::<T>(spec, tensors, shapes) }?;
    if let CopyOp::Take { .. } = c {
        let (t, a, s) = (tensors.get(1), spec.args.get(1), shapes.get(1));
        let (Some(t), Some(a), Some(s)) = (t, a, s) else {
            return Err("no indices".into());
        };
        // SAFETY: checked against the spec, of shape `s`; valid by the contract.
        let indices = unsafe { ints(t, a, count(s).unwrap_or(0)) }.ok_or("bad indices")?;
        return c.gather(&mut args, shapes, &indices);
    }
    let inputs = c.inputs(shapes.len())?;
    let moves = memo.moves(c, &shapes[..inputs], &shapes[inputs..], &scalars)?;
    c.run(&mut args, &moves)
}

/// The arguments (checked against `spec`, of shapes `shapes`) as slices of elements of type
/// `T`; one of another width (a `reshape_like`'s shape source, a `take`'s index, which are
/// not read as elements) is passed empty.
///
/// # Safety
///
/// As [`call`]'s.
unsafe fn typed_args<'a, T>(
    spec: &KernelSpec,
    tensors: &[&DLTensor],
    shapes: &[&[i64]],
) -> Result<Vec<&'a mut [T]>, String> {
    let mut args: Vec<&mut [T]> = Vec::with_capacity(tensors.len());
    for ((t, s), a) in tensors.iter().zip(shapes).zip(&spec.args) {
        if usize::from(a.dtype.bits) != 8 * std::mem::size_of::<T>() {
            args.push(&mut []);
            continue;
        }
        let n = count(s).unwrap_or(0);
        let data = (t.data as usize).wrapping_add(t.byte_offset as usize);
        if n > 0 && !data.is_multiple_of(std::mem::align_of::<T>()) {
            return Err("a tensor whose data is not aligned to its elements".into());
        }
        // SAFETY: checked against the spec, aligned, valid for its length by the contract.
        args.push(unsafe { slice(t, n) });
    }
    Ok(args)
}

/// The value of `t` when `a` is an integer scalar (`int8` to `uint64`).
///
/// # Safety
///
/// `t` was checked against `a`, its data valid for reads of its size.
unsafe fn scalar_int(t: &DLTensor, a: &ArgSpec) -> Option<i128> {
    if !a.shape.is_empty() {
        return None;
    }
    // SAFETY: by this function's contract, a scalar.
    unsafe { int_at(t, a, 0) }
}

/// The `n` integers of `t` (an integer tensor of `a`'s dtype), as `i64`.
///
/// # Safety
///
/// `t` has `n` elements of `a`'s dtype, valid for reads.
unsafe fn ints(t: &DLTensor, a: &ArgSpec, n: usize) -> Option<Vec<i64>> {
    (0..n)
        // SAFETY: `k < n`, by this function's contract.
        .map(|k| unsafe { int_at(t, a, k) }.and_then(|v| i64::try_from(v).ok()))
        .collect()
}

/// Element `k` of `t`, an integer tensor of `a`'s dtype.
///
/// # Safety
///
/// `t` has more than `k` elements of `a`'s dtype, valid for reads.
unsafe fn int_at(t: &DLTensor, a: &ArgSpec, k: usize) -> Option<i128> {
    use relay_ir::DTypeCode;
    let signed = match a.dtype.code {
        c if c == DTypeCode::Int as u8 => true,
        c if c == DTypeCode::UInt as u8 => false,
        _ => return None,
    };
    if t.data.is_null() {
        return None;
    }
    let width = usize::from(a.dtype.bits / 8);
    let p = (t.data as *const u8).wrapping_add(t.byte_offset as usize + k * width);
    // SAFETY: a scalar of `a`'s width, by the contract; read unaligned.
    let v = unsafe {
        match (a.dtype.bits, signed) {
            (8, true) => i128::from(p.cast::<i8>().read_unaligned()),
            (8, false) => i128::from(p.read_unaligned()),
            (16, true) => i128::from(p.cast::<i16>().read_unaligned()),
            (16, false) => i128::from(p.cast::<u16>().read_unaligned()),
            (32, true) => i128::from(p.cast::<i32>().read_unaligned()),
            (32, false) => i128::from(p.cast::<u32>().read_unaligned()),
            (64, true) => i128::from(p.cast::<i64>().read_unaligned()),
            (64, false) => i128::from(p.cast::<u64>().read_unaligned()),
            _ => return None,
        }
    };
    Some(v)
}

/// The `n` elements of type `T` of `t`.
///
/// # Safety
///
/// `t`'s data plus its byte offset is valid for `n` elements of `T` for as long as the slice
/// lives, with no other access meanwhile if it is written.
unsafe fn slice<'a, T>(t: &DLTensor, n: usize) -> &'a mut [T] {
    let data = t
        .data
        .cast::<u8>()
        .wrapping_add(t.byte_offset as usize)
        .cast::<T>();
    if n == 0 {
        return &mut [];
    }
    // SAFETY: by this function's contract.
    unsafe { std::slice::from_raw_parts_mut(data, n) }
}

#[cfg(test)]
pub(crate) mod tests;
