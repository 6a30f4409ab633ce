//! Helpers shared by the compute definitions (`relay_ir::te`): static output types, numpy
//! broadcasting of reads, and constants wrapped to a dtype.
//!
//! A compute definition receives its inputs as tensors of static shape and its output type as
//! the type relation computed it; these helpers turn the output type into a shape and dtype (or
//! an error for `?` dimensions) and map an output index to the index of a broadcast input.

use relay_ir::OpError;
use relay_ir::te::{BinaryOp, CmpOp, TExpr, TExprKind, TeValue, Tensor, UnaryOp};
use relay_ir::{DType, DTypeCode, Dim, Type, TypeKind};

/// What a compute definition returns.
pub(crate) type ComputeResult = Result<TeValue, OpError>;

/// The static shape and dtype of a tensor type, or why it has none.
pub fn static_tensor(ty: &Type) -> Result<(Vec<i64>, DType), OpError> {
    match ty.kind() {
        TypeKind::Tensor { shape, dtype } => {
            let dims: Option<Vec<i64>> = shape
                .iter()
                .map(|d| match d {
                    Dim::Known(n) if *n >= 0 => Some(*n),
                    _ => None,
                })
                .collect();
            match dims {
                Some(dims) if dtype.lanes == 1 => Ok((dims, *dtype)),
                Some(_) => Err(OpError::unsupported(format!(
                    "vector dtype in `{ty}` is not supported"
                ))),
                None => Err(OpError::unsupported(format!(
                    "dynamic shape `{ty}` is not supported"
                ))),
            }
        }
        _ => Err(OpError::type_error(format!(
            "expected a tensor type, got `{ty}`"
        ))),
    }
}

/// The `i`-th input, which must be a tensor.
pub(crate) fn input(inputs: &[TeValue], i: usize) -> Result<&Tensor, OpError> {
    match inputs.get(i) {
        Some(TeValue::Tensor(t)) => Ok(t),
        Some(TeValue::Tuple(_)) => Err(OpError::type_error(format!(
            "input {i} must be a tensor, got a tuple"
        ))),
        None => Err(OpError::type_error(format!(
            "expects input {i}, got {} inputs",
            inputs.len()
        ))),
    }
}

/// Checks that a tensor of shape `from` broadcasts (numpy rules) to exactly `to`.
pub(crate) fn check_broadcast(from: &[i64], to: &[i64]) -> Result<(), OpError> {
    let ok = from.len() <= to.len()
        && from
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&f, &t)| f == t || f == 1);
    if ok {
        Ok(())
    } else {
        Err(OpError::shape(format!(
            "cannot broadcast shape {from:?} to shape {to:?}"
        )))
    }
}

/// The element of `t` that numpy broadcasting maps to the output element at `index`: leading
/// output dimensions `t` lacks are dropped and its size-1 dimensions are read at 0.
pub(crate) fn broadcast_read(t: &Tensor, index: &[TExpr]) -> Result<TExpr, OpError> {
    let out: Vec<i64> = index.iter().map(index_extent).collect();
    if t.shape.len() > index.len() {
        return Err(OpError::shape(format!(
            "cannot broadcast shape {:?} to an index of rank {}",
            t.shape,
            index.len()
        )));
    }
    let offset = index.len() - t.shape.len();
    let mut at = Vec::with_capacity(t.shape.len());
    for (d, &n) in t.shape.iter().enumerate() {
        let o = out[offset + d];
        if n == 1 {
            at.push(TExpr::index(0));
        } else if n == o || o < 0 {
            at.push(index[offset + d].clone());
        } else {
            return Err(OpError::shape(format!(
                "cannot broadcast dimension {d} of shape {:?} (extent {n}) to extent {o}",
                t.shape
            )));
        }
    }
    Ok(t.at(&at))
}

/// The extent of an index expression that is a loop variable, or -1 when unknown.
fn index_extent(e: &TExpr) -> i64 {
    match e.kind() {
        relay_ir::te::TExprKind::Var(v) => v.extent,
        _ => -1,
    }
}

/// `name[i...] = body(reads)` over `shape`, where `reads` are the inputs read at the output
/// index with numpy broadcasting.
pub(crate) fn broadcast_compute(
    name: &str,
    shape: &[i64],
    inputs: &[&Tensor],
    body: impl FnOnce(Vec<TExpr>) -> Result<TExpr, OpError>,
) -> ComputeResult {
    for t in inputs {
        check_broadcast(&t.shape, shape)?;
    }
    let mut err = None;
    let tensor = Tensor::compute(name, shape, |index| {
        let reads: Result<Vec<TExpr>, OpError> =
            inputs.iter().map(|t| broadcast_read(t, index)).collect();
        match reads.and_then(body) {
            Ok(e) => e,
            Err(e) => {
                err = Some(e);
                TExpr::index(0)
            }
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(TeValue::Tensor(tensor)),
    }
}

/// The range of values of an integer or boolean dtype.
pub(crate) fn int_range(dtype: DType) -> (i128, i128) {
    let bits = u32::from(dtype.bits).clamp(1, 127);
    match dtype.code {
        DTypeCode::Bool => (0, 1),
        DTypeCode::UInt => (0, (1i128 << bits) - 1),
        _ => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
    }
}

/// `v` wrapped to the width of an integer dtype (booleans: `v != 0`), as numpy stores it.
pub(crate) fn wrap(v: i128, dtype: DType) -> i128 {
    if dtype.code == DTypeCode::Bool {
        return i128::from(v != 0);
    }
    let bits = u32::from(dtype.bits);
    if bits == 0 || bits >= 128 {
        return v;
    }
    let m = v & ((1i128 << bits) - 1);
    if dtype.code == DTypeCode::Int && m >= (1i128 << (bits - 1)) {
        m - (1i128 << bits)
    } else {
        m
    }
}

/// The integer constant `v` of an integer or boolean dtype, wrapped to its width.
pub(crate) fn int_const(v: i128, dtype: DType) -> TExpr {
    TExpr::int(wrap(v, dtype), dtype)
}

/// The constant `v` in `dtype`: floats as given, integers truncated toward zero and saturated
/// (NaN as 0), booleans `v != 0` — numpy's `astype` of an `f64`.
pub(crate) fn const_of(v: f64, dtype: DType) -> TExpr {
    if dtype.is_float() {
        TExpr::float(v, dtype)
    } else if dtype.code == DTypeCode::Bool {
        TExpr::int(i128::from(v != 0.0), dtype)
    } else {
        let (lo, hi) = int_range(dtype);
        let i = if v.is_nan() {
            0
        } else {
            (v as i128).clamp(lo, hi)
        };
        TExpr::int(i, dtype)
    }
}

/// The constant 0 of `dtype`.
pub(crate) fn zero(dtype: DType) -> TExpr {
    const_of(0.0, dtype)
}

/// The constant 1 of `dtype`.
pub(crate) fn one(dtype: DType) -> TExpr {
    const_of(1.0, dtype)
}

/// Whether `dtype` is a boolean.
pub(crate) fn is_bool(dtype: DType) -> bool {
    dtype.code == DTypeCode::Bool
}

/// `x` is NaN (floats only; other dtypes never are).
pub(crate) fn is_nan(x: &TExpr) -> TExpr {
    x.clone().unary(UnaryOp::IsNan)
}

/// `a op b`.
pub(crate) fn bin(op: BinaryOp, a: &TExpr, b: &TExpr) -> TExpr {
    a.clone().binary(op, b.clone())
}

/// `a op b` as a boolean.
pub(crate) fn cmp(op: CmpOp, a: &TExpr, b: &TExpr) -> TExpr {
    a.clone().compare(op, b.clone())
}

/// The value of a constant index expression (an `int64` constant).
pub(crate) fn const_index(e: &TExpr) -> Option<i128> {
    match e.kind() {
        TExprKind::Int(v) if e.dtype() == DType::I64 => Some(*v),
        _ => None,
    }
}

/// `a + b` on index expressions, folded when either is the constant 0 or both are constants
/// (the kernel compiler folds the same way, so folding here only keeps the expressions short).
pub(crate) fn ix_add(a: TExpr, b: TExpr) -> TExpr {
    match (const_index(&a), const_index(&b)) {
        (Some(0), _) => b,
        (_, Some(0)) => a,
        (Some(x), Some(y)) => TExpr::int(x + y, DType::I64),
        _ => a.binary(BinaryOp::Add, b),
    }
}

/// A tensor value.
pub(crate) fn tensor_value(t: Tensor) -> ComputeResult {
    Ok(TeValue::Tensor(t))
}

/// The high half `v >> 32` of a 64-bit integer `v`, as an `int64` (signed for an `int64` `v`,
/// in `[0, 2^32)` for a `uint64` one). With [`low_half`], `v = high·2^32 + low` exactly, so
/// `int64` sums of the halves of up to 2^30 values hold their exact sum, wider than 64 bits,
/// for [`wide_quotient`].
pub(crate) fn high_half(v: &TExpr) -> TExpr {
    bin(BinaryOp::Shr, v, &int_const(32, v.dtype())).cast(DType::I64)
}

/// The low half `v & 0xffffffff` of a 64-bit integer `v`, as an `int64` in `[0, 2^32)` (see
/// [`high_half`]).
pub(crate) fn low_half(v: &TExpr) -> TExpr {
    bin(BinaryOp::BitAnd, v, &int_const(0xffff_ffff, v.dtype())).cast(DType::I64)
}

/// The quotient of the wide integer `S = Σ_k parts[k]·2^(32k)` (least significant part first)
/// by `c`, truncated toward zero (as the reference's `i128` division) and wrapped to 64 bits,
/// as an `int64`. When `modular`, `S` is first taken modulo `2^(32·n)` for `n` parts as a
/// signed two's complement integer (for `n = 4`, the reference's wrapping `i128` sum).
///
/// The parts are `int64` expressions of magnitude at most `2^63 - 2^32`, and `c` an `int64`
/// expression in `[1, 2^31)`; a zero `c` is the run-time division by zero. Every step stays
/// within 64 bits: the parts are first carried into 32-bit limbs below a signed top limb,
/// whose sign is the sign of `S`; then a long division from the top gives each limb's
/// quotient (below the top, in `[0, 2^32)`) and carries its remainder (in `[0, c)`) down, so
/// `floor(S / c) = Σ_k q_k·2^(32k)`, of which only `q_0 + q_1·2^32` survives the wrap to
/// 64 bits. Truncation then rounds a negative quotient with a non-zero remainder up.
pub(crate) fn wide_quotient(parts: &[TExpr], c: &TExpr, modular: bool) -> TExpr {
    let int = |v: i128| TExpr::int(v, DType::I64);
    let (thirty_two, two32, mask) = (int(32), int(1 << 32), int(0xffff_ffff));
    let Some((top, below)) = parts.split_last() else {
        return int(0);
    };
    let mut limbs = Vec::with_capacity(below.len());
    let mut carry: Option<TExpr> = None;
    for part in below {
        let v = match &carry {
            Some(carry) => bin(BinaryOp::Add, part, carry),
            None => part.clone(),
        };
        limbs.push(bin(BinaryOp::BitAnd, &v, &mask));
        carry = Some(bin(BinaryOp::Shr, &v, &thirty_two));
    }
    let mut top = match &carry {
        Some(carry) => bin(BinaryOp::Add, top, carry),
        None => top.clone(),
    };
    if modular {
        // The top limb's low 32 bits, sign-extended.
        top = bin(
            BinaryOp::Shr,
            &bin(BinaryOp::Shl, &top, &thirty_two),
            &thirty_two,
        );
    }
    let negative = cmp(CmpOp::Lt, &top, &int(0));
    let mut quotients = vec![bin(BinaryOp::FloorDiv, &top, c)];
    let mut rem = bin(BinaryOp::FloorMod, &top, c);
    for limb in limbs.iter().rev() {
        let cur = bin(BinaryOp::Add, &bin(BinaryOp::Mul, &rem, &two32), limb);
        quotients.push(bin(BinaryOp::Div, &cur, c));
        rem = bin(BinaryOp::Mod, &cur, c);
    }
    let mut quotients = quotients.into_iter().rev();
    let floor = match (quotients.next(), quotients.next()) {
        (Some(q0), Some(q1)) => bin(BinaryOp::Add, &bin(BinaryOp::Mul, &q1, &two32), &q0),
        (Some(q0), None) => q0,
        (None, _) => int(0),
    };
    let up = bin(
        BinaryOp::LogicalAnd,
        &negative,
        &cmp(CmpOp::Ne, &rem, &int(0)),
    );
    bin(BinaryOp::Add, &floor, &up.cast(DType::I64))
}

#[cfg(test)]
pub(crate) mod interp {
    //! A reference evaluator of tensor expressions for the compute definitions' tests: every
    //! float operation computes in `f64` and rounds to the node's dtype, every integer one in
    //! `i128` and wraps to the node's width. Where the tensor expression operators leave a case
    //! open (NaN operands of `Max`/`Min`, out-of-range shifts), it picks an answer the compute
    //! definitions must not depend on.

    use std::collections::HashMap;

    use relay_ir::te::{
        BinaryOp, CmpOp, IterVar, ReduceOp, TExpr, TExprKind, Tensor, TensorOp, UnaryOp,
    };
    use relay_ir::{DType, DTypeCode, NDArray};

    use super::wrap;

    /// A scalar value: floats as `f64`, integers and booleans as `i128`.
    #[derive(Clone, Copy, Debug)]
    enum S {
        F(f64),
        I(i128),
    }

    impl S {
        fn f(self) -> f64 {
            match self {
                S::F(v) => v,
                S::I(v) => v as f64,
            }
        }

        fn i(self) -> i128 {
            match self {
                S::F(v) => {
                    if v.is_nan() {
                        0
                    } else {
                        v as i128
                    }
                }
                S::I(v) => v,
            }
        }
    }

    /// `v` rounded to a float dtype.
    fn round(v: f64, dtype: DType) -> f64 {
        match dtype.bits {
            64 => v,
            32 => f64::from(v as f32),
            _ => NDArray::from_f64_slice(dtype, &[], &[v])
                .map(|a| a.to_f64_vec()[0])
                .unwrap_or(v),
        }
    }

    /// A value of `dtype` from an `f64` (numpy `astype`).
    fn from_f64(v: f64, dtype: DType) -> S {
        if dtype.is_float() {
            S::F(round(v, dtype))
        } else if dtype.code == DTypeCode::Bool {
            S::I(i128::from(v != 0.0))
        } else {
            let (lo, hi) = super::int_range(dtype);
            S::I(if v.is_nan() {
                0
            } else {
                (v as i128).clamp(lo, hi)
            })
        }
    }

    /// A value of `dtype` from an `i128` (wrapping).
    fn from_i128(v: i128, dtype: DType) -> S {
        if dtype.is_float() {
            S::F(round(v as f64, dtype))
        } else {
            S::I(wrap(v, dtype))
        }
    }

    /// The evaluator's state: kernel inputs and computed tensors' values by name and address.
    pub struct Interp<'a> {
        inputs: &'a [NDArray],
        cache: HashMap<usize, Vec<S>>,
    }

    impl<'a> Interp<'a> {
        /// An evaluator of tensors over the kernel inputs `inputs`.
        pub fn new(inputs: &'a [NDArray]) -> Interp<'a> {
            Interp {
                inputs,
                cache: HashMap::new(),
            }
        }

        /// Every element of `t`, as an array.
        pub fn tensor(&mut self, t: &Tensor) -> Result<NDArray, String> {
            let values = self.values(t)?;
            if t.dtype.is_float() {
                let v: Vec<f64> = values.iter().map(|s| s.f()).collect();
                NDArray::from_f64_slice(t.dtype, &t.shape, &v).map_err(|e| e.to_string())
            } else {
                let v: Vec<i128> = values.iter().map(|s| s.i()).collect();
                NDArray::from_i128_slice(t.dtype, &t.shape, &v).map_err(|e| e.to_string())
            }
        }

        fn values(&mut self, t: &Tensor) -> Result<Vec<S>, String> {
            let key = std::ptr::from_ref::<relay_ir::te::TensorNode>(t) as usize;
            if let Some(v) = self.cache.get(&key) {
                return Ok(v.clone());
            }
            let out = match &t.op {
                TensorOp::Placeholder(i) => {
                    let a = self.inputs.get(*i).ok_or("missing input")?;
                    if a.shape() != t.shape.as_slice() || a.dtype() != t.dtype {
                        return Err(format!("input {i} does not match its placeholder"));
                    }
                    if a.dtype().is_float() {
                        a.to_f64_vec().into_iter().map(S::F).collect()
                    } else {
                        a.to_i128_vec().into_iter().map(S::I).collect()
                    }
                }
                TensorOp::Compute { axes, body } => {
                    let n: i64 = t.shape.iter().product();
                    let mut out = Vec::with_capacity(n.max(0) as usize);
                    for k in 0..n {
                        let mut env = HashMap::new();
                        let mut rest = k;
                        for a in axes.iter().rev() {
                            env.insert(a.id, rest % a.extent);
                            rest /= a.extent;
                        }
                        out.push(self.expr(body, &env)?);
                    }
                    out
                }
            };
            self.cache.insert(key, out.clone());
            Ok(out)
        }

        fn expr(&mut self, e: &TExpr, env: &HashMap<u32, i64>) -> Result<S, String> {
            let d = e.dtype();
            Ok(match e.kind() {
                TExprKind::Var(v) => S::I(i128::from(*env.get(&v.id).ok_or("unbound axis")?)),
                TExprKind::Int(v) => from_i128(*v, d),
                TExprKind::Float(v) => from_f64(*v, d),
                TExprKind::Read { tensor, indices } => {
                    if indices.len() != tensor.shape.len() {
                        return Err("read with the wrong number of indices".into());
                    }
                    let mut flat = 0i64;
                    for (ix, &n) in indices.iter().zip(&tensor.shape) {
                        let i = self.expr(ix, env)?.i() as i64;
                        if i < 0 || i >= n {
                            return Err(format!("index {i} out of bounds 0..{n}"));
                        }
                        flat = flat * n + i;
                    }
                    self.values(tensor)?[flat as usize]
                }
                TExprKind::Unary(op, a) => {
                    let x = self.expr(a, env)?;
                    unary(*op, x, a.dtype(), d)?
                }
                TExprKind::Binary(op, a, b) => {
                    let (x, y) = (self.expr(a, env)?, self.expr(b, env)?);
                    if a.dtype() != b.dtype() || a.dtype() != d {
                        return Err(format!("binary {op:?} on mixed dtypes"));
                    }
                    binary(*op, x, y, d)?
                }
                TExprKind::Compare(op, a, b) => {
                    let (x, y) = (self.expr(a, env)?, self.expr(b, env)?);
                    if a.dtype() != b.dtype() {
                        return Err(format!("comparison {op:?} on mixed dtypes"));
                    }
                    let o = if a.dtype().is_float() {
                        x.f().partial_cmp(&y.f())
                    } else {
                        Some(x.i().cmp(&y.i()))
                    };
                    use std::cmp::Ordering::*;
                    let r = match op {
                        CmpOp::Eq => o == Some(Equal),
                        CmpOp::Ne => o != Some(Equal),
                        CmpOp::Lt => o == Some(Less),
                        CmpOp::Le => matches!(o, Some(Less | Equal)),
                        CmpOp::Gt => o == Some(Greater),
                        CmpOp::Ge => matches!(o, Some(Greater | Equal)),
                    };
                    S::I(i128::from(r))
                }
                TExprKind::Select(c, a, b) => {
                    if c.dtype() != DType::BOOL || a.dtype() != b.dtype() {
                        return Err("ill-typed select".into());
                    }
                    if self.expr(c, env)?.i() != 0 {
                        self.expr(a, env)?
                    } else {
                        self.expr(b, env)?
                    }
                }
                TExprKind::Cast(a) => {
                    let x = self.expr(a, env)?;
                    match x {
                        S::F(v) => from_f64(v, d),
                        S::I(v) => from_i128(v, d),
                    }
                }
                TExprKind::Reduce { op, axes, body } => self.reduce(*op, axes, body, env, d)?,
            })
        }
    }

    impl Interp<'_> {
        /// A reduction over `axes` (row-major), as [`ReduceOp`] defines it.
        fn reduce(
            &mut self,
            op: ReduceOp,
            axes: &[IterVar],
            body: &TExpr,
            env: &HashMap<u32, i64>,
            d: DType,
        ) -> Result<S, String> {
            let float = body.dtype().is_float();
            let n: i64 = axes.iter().map(|a| a.extent.max(0)).product();
            let (lo, hi) = if float {
                (S::F(f64::NEG_INFINITY), S::F(f64::INFINITY))
            } else {
                let (lo, hi) = super::int_range(body.dtype());
                (S::I(lo), S::I(hi))
            };
            let mut acc = match op {
                ReduceOp::Sum | ReduceOp::Any => from_i128(0, d),
                ReduceOp::Prod | ReduceOp::All => from_i128(1, d),
                ReduceOp::Max | ReduceOp::ArgMax { .. } => lo,
                ReduceOp::Min | ReduceOp::ArgMin { .. } => hi,
            };
            let mut pos = 0i64;
            let mut env = env.clone();
            for k in 0..n {
                let mut rest = k;
                for a in axes.iter().rev() {
                    env.insert(a.id, rest % a.extent);
                    rest /= a.extent;
                }
                let x = self.expr(body, &env)?;
                let nan = |v: S| matches!(v, S::F(f) if f.is_nan());
                let greater = |a: S, b: S| if float { a.f() > b.f() } else { a.i() > b.i() };
                let equal = |a: S, b: S| {
                    if float {
                        a.f() == b.f()
                    } else {
                        a.i() == b.i()
                    }
                };
                acc = match op {
                    ReduceOp::Sum | ReduceOp::Prod if float => {
                        let v = if op == ReduceOp::Sum {
                            acc.f() + x.f()
                        } else {
                            acc.f() * x.f()
                        };
                        from_f64(v, d)
                    }
                    ReduceOp::Sum => from_i128(acc.i().wrapping_add(x.i()), d),
                    ReduceOp::Prod => from_i128(acc.i().wrapping_mul(x.i()), d),
                    ReduceOp::All => S::I(i128::from(acc.i() != 0 && x.i() != 0)),
                    ReduceOp::Any => S::I(i128::from(acc.i() != 0 || x.i() != 0)),
                    ReduceOp::Max if greater(x, acc) || nan(x) => x,
                    ReduceOp::Min if greater(acc, x) || nan(x) => x,
                    ReduceOp::Max | ReduceOp::Min => acc,
                    ReduceOp::ArgMax { last } | ReduceOp::ArgMin { last } => {
                        let better = if matches!(op, ReduceOp::ArgMax { .. }) {
                            greater(x, acc)
                        } else {
                            greater(acc, x)
                        };
                        let take = if nan(acc) {
                            last && nan(x)
                        } else {
                            nan(x) || better || (last && equal(x, acc))
                        };
                        if take {
                            pos = k;
                            x
                        } else {
                            acc
                        }
                    }
                };
            }
            Ok(match op {
                ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. } => from_i128(i128::from(pos), d),
                _ => acc,
            })
        }
    }

    fn unary(op: UnaryOp, x: S, arg: DType, d: DType) -> Result<S, String> {
        if arg.is_float() {
            let v = x.f();
            let r = match op {
                UnaryOp::IsNan => return Ok(S::I(i128::from(v.is_nan()))),
                UnaryOp::IsInf => return Ok(S::I(i128::from(v.is_infinite()))),
                UnaryOp::IsFinite => return Ok(S::I(i128::from(v.is_finite()))),
                UnaryOp::LogicalNot | UnaryOp::BitwiseNot => {
                    return Err(format!("{op:?} on a float"));
                }
                UnaryOp::Neg => -v,
                UnaryOp::Abs => v.abs(),
                UnaryOp::Sign => v.signum(),
                UnaryOp::Exp => v.exp(),
                UnaryOp::Log => v.ln(),
                UnaryOp::Log2 => v.log2(),
                UnaryOp::Log10 => v.log10(),
                UnaryOp::Sqrt => v.sqrt(),
                UnaryOp::Rsqrt => 1.0 / v.sqrt(),
                UnaryOp::Erf => crate::elementwise::erf(v),
                UnaryOp::Sigmoid => 1.0 / (1.0 + (-v).exp()),
                UnaryOp::Tanh => v.tanh(),
                UnaryOp::Sin => v.sin(),
                UnaryOp::Cos => v.cos(),
                UnaryOp::Tan => v.tan(),
                UnaryOp::Asin => v.asin(),
                UnaryOp::Acos => v.acos(),
                UnaryOp::Atan => v.atan(),
                UnaryOp::Sinh => v.sinh(),
                UnaryOp::Cosh => v.cosh(),
                UnaryOp::Asinh => v.asinh(),
                UnaryOp::Acosh => v.acosh(),
                UnaryOp::Atanh => v.atanh(),
                UnaryOp::Ceil => v.ceil(),
                UnaryOp::Floor => v.floor(),
                UnaryOp::Round => v.round_ties_even(),
                UnaryOp::Trunc => v.trunc(),
            };
            return Ok(S::F(round(r, d)));
        }
        let v = x.i();
        let r = match op {
            UnaryOp::IsNan | UnaryOp::IsInf => 0,
            UnaryOp::IsFinite => 1,
            UnaryOp::LogicalNot => i128::from(v == 0),
            UnaryOp::BitwiseNot if arg.code == DTypeCode::Bool => i128::from(v == 0),
            UnaryOp::BitwiseNot => !v,
            UnaryOp::Neg => v.wrapping_neg(),
            UnaryOp::Abs => v.abs(),
            UnaryOp::Sign => v.signum(),
            UnaryOp::Ceil | UnaryOp::Floor | UnaryOp::Round | UnaryOp::Trunc => v,
            _ => return Err(format!("{op:?} on an integer")),
        };
        Ok(S::I(wrap(r, d)))
    }

    fn binary(op: BinaryOp, x: S, y: S, d: DType) -> Result<S, String> {
        if d.is_float() {
            let (a, b) = (x.f(), y.f());
            let r = match op {
                BinaryOp::Add => a + b,
                BinaryOp::Sub => a - b,
                BinaryOp::Mul => a * b,
                BinaryOp::Div => a / b,
                BinaryOp::Mod => a % b,
                BinaryOp::Pow => a.powf(b),
                // Deliberately neither IEEE nor NaN-propagating: definitions guard NaN.
                BinaryOp::Max => {
                    if a > b {
                        a
                    } else {
                        b
                    }
                }
                BinaryOp::Min => {
                    if a < b {
                        a
                    } else {
                        b
                    }
                }
                _ => return Err(format!("{op:?} on floats")),
            };
            return Ok(S::F(round(r, d)));
        }
        let (a, b) = (x.i(), y.i());
        let bits = u32::from(d.bits).max(1);
        let r = match op {
            BinaryOp::Add => a.wrapping_add(b),
            BinaryOp::Sub => a.wrapping_sub(b),
            BinaryOp::Mul => a.wrapping_mul(b),
            BinaryOp::Div | BinaryOp::FloorDiv | BinaryOp::Mod | BinaryOp::FloorMod if b == 0 => {
                return Err("integer division by zero".into());
            }
            BinaryOp::Div => a / b,
            BinaryOp::Mod => a % b,
            BinaryOp::FloorDiv => {
                let (q, r) = (a / b, a % b);
                if r != 0 && (r < 0) != (b < 0) {
                    q - 1
                } else {
                    q
                }
            }
            BinaryOp::FloorMod => {
                let r = a % b;
                if r != 0 && (r < 0) != (b < 0) {
                    r + b
                } else {
                    r
                }
            }
            BinaryOp::Max => a.max(b),
            BinaryOp::Min => a.min(b),
            BinaryOp::LogicalAnd => i128::from(a != 0 && b != 0),
            BinaryOp::LogicalOr => i128::from(a != 0 || b != 0),
            BinaryOp::LogicalXor => i128::from((a != 0) != (b != 0)),
            BinaryOp::BitAnd => a & b,
            BinaryOp::BitOr => a | b,
            BinaryOp::BitXor => a ^ b,
            // Shift amounts are taken modulo the width, as machine shifts do.
            BinaryOp::Shl => a << ((b as u32) % bits),
            BinaryOp::Shr => {
                let v = wrap(a, d);
                v >> ((b as u32) % bits)
            }
            // Wrapping power by squaring; a negative exponent is the run-time error the
            // reference raises.
            BinaryOp::Pow => {
                if b < 0 {
                    return Err("negative integer exponent".into());
                }
                let (mut base, mut exp, mut acc) = (a, b, 1i128);
                while exp > 0 {
                    if exp & 1 == 1 {
                        acc = wrap(acc.wrapping_mul(base), d);
                    }
                    base = wrap(base.wrapping_mul(base), d);
                    exp >>= 1;
                }
                acc
            }
        };
        Ok(S::I(wrap(r, d)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_and_ranges() {
        assert_eq!(wrap(200, DType::I8), -56);
        assert_eq!(wrap(-1, DType::U8), 255);
        assert_eq!(wrap(2, DType::BOOL), 1);
        assert_eq!(wrap(i128::from(u64::MAX), DType::U64), i128::from(u64::MAX));
        assert_eq!(int_range(DType::I16), (-32768, 32767));
        assert_eq!(int_range(DType::U32), (0, 4294967295));
        assert!(matches!(
            const_of(1e20, DType::I32).kind(),
            relay_ir::te::TExprKind::Int(2147483647)
        ));
    }

    #[test]
    fn broadcast_reads_drop_leading_and_unit_dims() {
        let t = Tensor::placeholder("p", vec![3, 1], DType::F32, 0);
        assert!(check_broadcast(&[3, 1], &[2, 3, 4]).is_ok());
        assert!(check_broadcast(&[3, 2], &[2, 3, 4]).is_err());
        assert!(check_broadcast(&[2, 3, 4, 5], &[3, 4, 5]).is_err());
        let r = broadcast_compute("T", &[2, 3, 4], &[&t], |r| Ok(r[0].clone())).unwrap();
        let TeValue::Tensor(out) = r else {
            panic!("expected a tensor")
        };
        let relay_ir::te::TensorOp::Compute { axes, body } = &out.op else {
            panic!("expected a compute")
        };
        let relay_ir::te::TExprKind::Read { indices, .. } = body.kind() else {
            panic!("expected a read")
        };
        assert!(matches!(indices[0].kind(), relay_ir::te::TExprKind::Var(v) if v.id == axes[1].id));
        assert!(matches!(indices[1].kind(), relay_ir::te::TExprKind::Int(0)));
        let bad = Tensor::placeholder("q", vec![5], DType::F32, 0);
        assert!(broadcast_compute("T", &[2, 3], &[&bad], |r| Ok(r[0].clone())).is_err());
    }
}

#[cfg(test)]
pub(crate) mod op_tests {
    //! Every compute definition against its operator's reference evaluation, on random inputs
    //! with special values, broadcasting, size-0 and size-1 dimensions, and every dtype the
    //! type relation accepts.

    use std::sync::Arc;

    use relay_ir::te::{TeValue, Tensor};
    use relay_ir::{AttrValue, Attrs, DType, NDArray, Type, Value};

    use super::interp::Interp;
    use super::{int_range, wrap};
    use crate::testing::attrs;

    pub(crate) const DTYPES: [DType; 12] = [
        DType::BOOL,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::F32,
        DType::F64,
    ];

    /// A small deterministic random number generator (xorshift64*).
    pub(crate) struct Rng(pub(crate) u64);

    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        pub(crate) fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    /// A tensor of random values, a third of them special (NaN, infinities, halves, extremes,
    /// shift widths).
    pub(crate) fn random(rng: &mut Rng, dtype: DType, shape: &[i64]) -> NDArray {
        let n: i64 = shape.iter().product();
        if dtype.is_float() {
            const SPECIAL: [f64; 12] = [
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
                0.0,
                -0.0,
                0.5,
                1.5,
                2.5,
                -2.5,
                1e30,
                -3.0,
                1.0,
            ];
            let v: Vec<f64> = (0..n)
                .map(|_| {
                    if rng.below(3) == 0 {
                        SPECIAL[rng.below(SPECIAL.len() as u64) as usize]
                    } else {
                        (rng.below(4001) as f64 - 2000.0) / 137.0
                    }
                })
                .collect();
            NDArray::from_f64_slice(dtype, shape, &v).unwrap()
        } else {
            let (lo, hi) = int_range(dtype);
            let special = [0, 1, -1, 2, 7, 8, 16, 31, 32, 33, 63, 64, 100, lo, hi];
            let v: Vec<i128> = (0..n)
                .map(|_| {
                    let r = if rng.below(3) == 0 {
                        special[rng.below(special.len() as u64) as usize]
                    } else {
                        rng.below(41) as i128 - 20
                    };
                    wrap(r, dtype)
                })
                .collect();
            NDArray::from_i128_slice(dtype, shape, &v).unwrap()
        }
    }

    /// Whether two results agree: equal shapes and dtypes, equal integers, floats equal or
    /// within a few units in the last place, NaN matching NaN.
    fn agree(want: &NDArray, got: &NDArray) -> bool {
        let rtol = match want.dtype().bits {
            64 => 1e-12,
            32 => 1e-6,
            _ => 4e-3,
        };
        agree_within(want, got, rtol)
    }

    /// As [`agree`] with relative tolerance `rtol` for floats.
    pub(crate) fn agree_within(want: &NDArray, got: &NDArray, rtol: f64) -> bool {
        if want.shape() != got.shape() || want.dtype() != got.dtype() {
            return false;
        }
        if !want.dtype().is_float() {
            return want.to_i128_vec() == got.to_i128_vec();
        }
        want.to_f64_vec()
            .iter()
            .zip(got.to_f64_vec())
            .all(|(&w, g)| w == g || (w.is_nan() && g.is_nan()) || (w - g).abs() <= rtol * w.abs())
    }

    /// One placeholder per input array (`p0`, `p1`, ...), with its shape and dtype.
    pub(crate) fn placeholders(inputs: &[NDArray]) -> Vec<TeValue> {
        inputs
            .iter()
            .enumerate()
            .map(|(i, a)| {
                TeValue::Tensor(Tensor::placeholder(
                    format!("p{i}"),
                    a.shape().to_vec(),
                    a.dtype(),
                    i,
                ))
            })
            .collect()
    }

    /// Runs `name` on `inputs` through its reference evaluation and through its compute
    /// definition (evaluated by [`Interp`]) and asserts they agree. Returns whether the type
    /// relation accepted the inputs.
    pub(crate) fn check(name: &str, inputs: &[NDArray], attrs: &Attrs) -> bool {
        check_with(name, inputs, attrs, agree)
    }

    /// As [`check`], comparing results with `agree` (e.g. [`agree_within`] a tolerance for
    /// contractions, whose sums may associate differently).
    pub(crate) fn check_with(
        name: &str,
        inputs: &[NDArray],
        attrs: &Attrs,
        agree: impl Fn(&NDArray, &NDArray) -> bool,
    ) -> bool {
        let op = crate::lookup(name).unwrap();
        let types: Vec<Type> = inputs
            .iter()
            .map(|a| Type::tensor(a.shape(), a.dtype()))
            .collect();
        let Ok(out) = (op.relation.unwrap())(&types, attrs) else {
            return false;
        };
        let placeholders = placeholders(inputs);
        let compute = op
            .compute
            .unwrap_or_else(|| panic!("`{name}` has no compute definition"));
        let values: Vec<Value> = inputs
            .iter()
            .map(|a| Value::Tensor(Arc::new(a.clone())))
            .collect();
        let want = (op.eval.unwrap())(&values, attrs);
        let te = match compute(&placeholders, attrs, &out) {
            Ok(te) => te,
            // A kernel that would always fail (the max of an empty reduction) does not compile.
            Err(_) if want.is_err() => return true,
            Err(e) => panic!("`{name}` on {types:?}: no compute: {e}"),
        };
        let t = te.as_tensor().unwrap();
        let got = Interp::new(inputs).tensor(t);
        match (&want, &got) {
            (Err(_), Err(_)) => {}
            (Ok(Value::Tensor(w)), Ok(g)) if agree(w, g) => {}
            _ => panic!(
                "`{name}` on {inputs:?} with {attrs:?}:\n eval {:?}\n te   {:?}",
                want.map(|v| match v {
                    Value::Tensor(t) => (t.shape().to_vec(), t.to_f64_vec()),
                    _ => (vec![], vec![]),
                }),
                got.map(|t| (t.shape().to_vec(), t.to_f64_vec()))
            ),
        }
        true
    }

    const BINARY_SHAPES: [(&[i64], &[i64]); 8] = [
        (&[2, 3], &[2, 3]),
        (&[2, 3], &[3]),
        (&[2, 1], &[1, 4]),
        (&[0, 3], &[3]),
        (&[], &[]),
        (&[1], &[5]),
        (&[3, 1, 2], &[4, 1]),
        (&[], &[2, 2]),
    ];

    /// Checks a binary operator on every dtype and shape pair; returns how many dtypes the
    /// relation accepted.
    fn check_binary(name: &str, seed: u64) -> usize {
        let mut rng = Rng(seed);
        let none = attrs(name, &[]);
        let mut accepted = 0;
        for dtype in DTYPES {
            let mut ok = false;
            for (a, b) in BINARY_SHAPES {
                for _ in 0..3 {
                    let x = random(&mut rng, dtype, a);
                    let y = random(&mut rng, dtype, b);
                    ok |= check(name, &[x, y], &none);
                }
            }
            accepted += usize::from(ok);
        }
        accepted
    }

    #[test]
    fn shape_of_gives_the_static_shape() {
        let mut rng = Rng(7);
        for shape in [&[][..], &[0], &[3], &[2, 1, 5]] {
            for dtype in ["int32", "int64"] {
                let a = attrs("shape_of", &[("dtype", AttrValue::Str(dtype.into()))]);
                let x = random(&mut rng, DType::F32, shape);
                assert!(check("shape_of", &[x], &a));
            }
        }
    }

    #[test]
    fn binary_arithmetic() {
        for name in [
            "add",
            "subtract",
            "multiply",
            "divide",
            "power",
            "maximum",
            "minimum",
            "mod",
            "floor_divide",
            "floor_mod",
            "trunc_divide",
            "trunc_mod",
        ] {
            assert_eq!(check_binary(name, 0x9e37_79b9_7f4a_7c15), 12, "{name}");
        }
    }

    #[test]
    fn binary_logic_bits_and_comparisons() {
        for name in ["logical_and", "logical_or", "logical_xor"] {
            assert_eq!(check_binary(name, 7), 1, "{name}");
        }
        for name in [
            "bitwise_and",
            "bitwise_or",
            "bitwise_xor",
            "left_shift",
            "right_shift",
        ] {
            assert_eq!(check_binary(name, 11), 9, "{name}");
        }
        for name in [
            "equal",
            "not_equal",
            "less",
            "less_equal",
            "greater",
            "greater_equal",
        ] {
            assert_eq!(check_binary(name, 13), 12, "{name}");
        }
    }

    #[test]
    fn unary_operators() {
        let mut rng = Rng(17);
        // Every operator with a compute definition, one input and no attributes: the plain
        // unary operators, read from the registry rather than listed again.
        let unary = crate::all()
            .filter(|op| op.compute.is_some() && op.inputs.len() == 1 && op.attrs.is_empty())
            .map(|op| op.name);
        for name in unary {
            let none = attrs(name, &[]);
            let mut accepted = 0;
            for dtype in DTYPES {
                let mut ok = false;
                for shape in [&[2, 3][..], &[0], &[], &[1, 5], &[4, 1, 2]] {
                    ok |= check(name, &[random(&mut rng, dtype, shape)], &none);
                }
                accepted += usize::from(ok);
            }
            assert!(accepted > 0, "{name}");
        }
    }

    #[test]
    fn where_clip_and_casts() {
        let mut rng = Rng(23);
        let none = attrs("where", &[]);
        for cond in [DType::BOOL, DType::I32, DType::F32] {
            for dtype in DTYPES {
                for (c, x, y) in [
                    (&[2, 1][..], &[3][..], &[][..]),
                    (&[2, 3], &[2, 3], &[2, 3]),
                    (&[0], &[1], &[1]),
                    (&[], &[2], &[3, 1]),
                ] {
                    let args = [
                        random(&mut rng, cond, c),
                        random(&mut rng, dtype, x),
                        random(&mut rng, dtype, y),
                    ];
                    assert!(check("where", &args, &none));
                }
            }
        }
        for (lo, hi) in [
            (-0.5, 0.75),
            (-2.0, 6.0),
            (-1e10, 1e10),
            (5.0, 1e12),
            (-1e12, -5e11),
            (f64::NAN, 2.0),
            (3.0, -3.0),
            (0.1, 0.3),
        ] {
            let a = attrs(
                "clip",
                &[
                    ("a_min", AttrValue::Float(lo)),
                    ("a_max", AttrValue::Float(hi)),
                ],
            );
            for dtype in DTYPES {
                assert!(check("clip", &[random(&mut rng, dtype, &[4, 5])], &a));
            }
        }
        for from in DTYPES {
            for to in DTYPES {
                let a = attrs("cast", &[("dtype", AttrValue::Str(to.to_string().into()))]);
                let x = random(&mut rng, from, &[3, 4]);
                assert!(check("cast", std::slice::from_ref(&x), &a));
                let like = random(&mut rng, to, &[2]);
                assert!(check("cast_like", &[x, like], &attrs("cast_like", &[])));
            }
        }
    }

    #[test]
    fn creation_and_broadcast_to() {
        let mut rng = Rng(29);
        let shape = |s: &[i64]| AttrValue::Array(s.iter().map(|&d| AttrValue::Int(d)).collect());
        for dtype in DTYPES {
            let d = AttrValue::Str(dtype.to_string().into());
            for s in [&[2, 3][..], &[], &[0, 2]] {
                for name in ["zeros", "ones"] {
                    let a = attrs(name, &[("shape", shape(s)), ("dtype", d.clone())]);
                    assert!(check(name, &[], &a));
                }
                for fill in [DType::F32, DType::I64, DType::BOOL, DType::F64] {
                    let v = random(&mut rng, fill, &[]);
                    for target in [d.clone(), AttrValue::Str("".into())] {
                        let a = attrs("full", &[("shape", shape(s)), ("dtype", target)]);
                        assert!(check("full", std::slice::from_ref(&v), &a));
                    }
                    let data = random(&mut rng, dtype, s);
                    assert!(check("full_like", &[data, v], &attrs("full_like", &[])));
                }
            }
            for (from, to) in [
                (&[3][..], &[2, 3][..]),
                (&[2, 1], &[2, 4]),
                (&[], &[2]),
                (&[1], &[0]),
                (&[1, 3, 1], &[2, 1, 3, 2]),
            ] {
                let x = random(&mut rng, dtype, from);
                let a = attrs("broadcast_to", &[("shape", shape(to))]);
                assert!(check("broadcast_to", std::slice::from_ref(&x), &a));
                let like = random(&mut rng, DType::F32, to);
                let none = attrs("broadcast_to_like", &[]);
                assert!(check("broadcast_to_like", &[x, like], &none));
            }
        }
    }

    /// Every `axis` attribute for a tensor of `rank` dimensions: none, empty, and every subset
    /// of the axes, each axis given positively or negatively.
    fn axis_choices(rank: usize) -> Vec<Option<Vec<i64>>> {
        let mut out = vec![None, Some(vec![])];
        for subset in 1u32..(1 << rank) {
            let axes: Vec<usize> = (0..rank).filter(|d| subset & (1 << d) != 0).collect();
            let pos: Vec<i64> = axes.iter().map(|&d| d as i64).collect();
            let neg: Vec<i64> = axes.iter().map(|&d| d as i64 - rank as i64).collect();
            out.push(Some(pos));
            out.push(Some(neg.into_iter().rev().collect()));
        }
        out
    }

    #[test]
    fn reductions() {
        let mut rng = Rng(31);
        let shapes: [&[i64]; 9] = [
            &[],
            &[0],
            &[1],
            &[5],
            &[2, 3],
            &[3, 0],
            &[1, 4],
            &[2, 3, 4],
            &[2, 1, 0],
        ];
        let names = [
            "sum", "mean", "max", "min", "prod", "all", "any", "argmax", "argmin",
        ];
        let mut accepted = std::collections::HashMap::<&str, usize>::new();
        for shape in shapes {
            for axis in axis_choices(shape.len()) {
                for keepdims in [false, true] {
                    for exclude in [false, true] {
                        let mut set = vec![
                            ("keepdims", AttrValue::Bool(keepdims)),
                            ("exclude", AttrValue::Bool(exclude)),
                        ];
                        if let Some(axis) = &axis {
                            let v = axis.iter().map(|&a| AttrValue::Int(a)).collect();
                            set.push(("axis", AttrValue::Array(v)));
                        }
                        for name in names {
                            for dtype in DTYPES {
                                let mut set = set.clone();
                                if name.starts_with("arg") {
                                    let last = rng.below(2) == 1;
                                    set.push(("select_last_index", AttrValue::Bool(last)));
                                }
                                let x = random(&mut rng, dtype, shape);
                                if check(name, &[x], &attrs(name, &set)) {
                                    *accepted.entry(name).or_default() += 1;
                                }
                            }
                        }
                        for dtype in [
                            DType::BOOL,
                            DType::I8,
                            DType::U16,
                            DType::I32,
                            DType::U64,
                            DType::F32,
                            DType::F64,
                        ] {
                            let x = random(&mut rng, dtype, shape);
                            let mean_shape: Vec<i64> = shape
                                .iter()
                                .map(|&d| if rng.below(2) == 0 { 1 } else { d })
                                .collect();
                            let m = random(&mut rng, dtype, &mean_shape);
                            for unbiased in [false, true] {
                                let mut set = set.clone();
                                set.push(("unbiased", AttrValue::Bool(unbiased)));
                                if check(
                                    "variance",
                                    &[x.clone(), m.clone()],
                                    &attrs("variance", &set),
                                ) {
                                    *accepted.entry("variance").or_default() += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        for name in names.iter().chain(&["variance"]) {
            assert!(accepted.get(name).is_some_and(|&n| n > 0), "{name}");
        }
    }

    #[test]
    fn dynamic_shapes_are_errors() {
        let op = crate::lookup("add").unwrap();
        let dynamic = Type::from_kind(relay_ir::TypeKind::Tensor {
            shape: vec![relay_ir::Dim::Any, relay_ir::Dim::Known(3)],
            dtype: DType::F32,
        });
        let p = TeValue::Tensor(Tensor::placeholder("p", vec![2, 3], DType::F32, 0));
        let err = (op.compute.unwrap())(&[p.clone(), p], &attrs("add", &[]), &dynamic);
        assert_eq!(
            err.err().map(|e| e.to_string()).as_deref(),
            Some("dynamic shape `Tensor[(?, 3), float32]` is not supported")
        );
    }
}
