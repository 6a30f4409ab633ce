//! Inlining: the tensor expressions of one output, with every computed tensor that is not
//! materialized substituted into its reader, as one scalar expression over the output's axes
//! ([`Val`], whose indices are [`Ix`]), with its reductions ([`Red`]) apart.

use std::collections::HashMap;

use relay_ir::DType;
use relay_ir::te::{BinaryOp, CmpOp, ReduceOp, TExpr, TExprKind, Tensor, TensorOp, UnaryOp};

use super::key;

/// The most scalar operations one output's expression may have after inlining.
pub(crate) const MAX_NODES: usize = 1 << 16;

/// An index expression over the output's axes (after inlining).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Ix {
    /// The output index along axis `k` (an axis of extent greater than 1).
    Axis(usize),
    /// A constant.
    Const(i64),
    /// Arithmetic on indices.
    Bin(BinaryOp, Box<Ix>, Box<Ix>),
    /// Any other `int64` value: one read from a tensor (`take`'s indices), a select.
    Dyn(Box<Val>),
}

/// A scalar expression over the output's axes whose reads are all of buffers. Equality and
/// hashing are structural, float constants compared by their bits.
#[derive(Clone, Debug)]
pub(crate) enum Val {
    Int(i128, DType),
    Float(f64, DType),
    /// An index used as an `int64` value.
    Index(Ix),
    /// An element of input `buffer` at one index per dimension.
    Load {
        buffer: usize,
        dims: Vec<Ix>,
    },
    Unary(UnaryOp, Box<Val>),
    Binary(BinaryOp, Box<Val>, Box<Val>),
    Compare(CmpOp, Box<Val>, Box<Val>),
    Select(Box<Val>, Box<Val>, Box<Val>),
    Cast(DType, Box<Val>),
    /// The result of the `n`-th reduction of the output (computed before the store).
    Acc(usize),
}

impl PartialEq for Val {
    fn eq(&self, other: &Val) -> bool {
        use Val as V;
        match (self, other) {
            (V::Int(a, d), V::Int(b, e)) => a == b && d == e,
            (V::Float(a, d), V::Float(b, e)) => a.to_bits() == b.to_bits() && d == e,
            (V::Index(a), V::Index(b)) => a == b,
            (V::Load { buffer, dims }, V::Load { buffer: b, dims: e }) => buffer == b && dims == e,
            (V::Unary(o, a), V::Unary(p, b)) => o == p && a == b,
            (V::Binary(o, a, b), V::Binary(p, c, d)) => o == p && a == c && b == d,
            (V::Compare(o, a, b), V::Compare(p, c, d)) => o == p && a == c && b == d,
            (V::Select(c, a, b), V::Select(d, x, y)) => c == d && a == x && b == y,
            (V::Cast(d, a), V::Cast(e, b)) => d == e && a == b,
            (V::Acc(a), V::Acc(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Val {}

impl Val {
    /// `self` rebuilt with `ix` applied to its indices and `val` to its operands (one level:
    /// `val` recurses where the caller wants); constants and `Acc`s are copied. The one
    /// structural walk behind rewrites such as [`super::partition::unclamp`] and a
    /// reduction's accumulator substitution.
    pub(crate) fn map_operands(&self, ix: impl Fn(&Ix) -> Ix, val: impl Fn(&Val) -> Val) -> Val {
        let b = |x: &Val| Box::new(val(x));
        match self {
            Val::Index(i) => Val::Index(ix(i)),
            Val::Load { buffer, dims } => Val::Load {
                buffer: *buffer,
                dims: dims.iter().map(&ix).collect(),
            },
            Val::Unary(op, a) => Val::Unary(*op, b(a)),
            Val::Binary(op, x, y) => Val::Binary(*op, b(x), b(y)),
            Val::Compare(op, x, y) => Val::Compare(*op, b(x), b(y)),
            Val::Select(c, x, y) => Val::Select(b(c), b(x), b(y)),
            Val::Cast(d, a) => Val::Cast(*d, b(a)),
            other => other.clone(),
        }
    }
}

impl std::hash::Hash for Val {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Val::Int(v, d) => (v, d).hash(state),
            Val::Float(v, d) => (v.to_bits(), d).hash(state),
            Val::Index(i) => i.hash(state),
            Val::Load { buffer, dims } => (buffer, dims).hash(state),
            Val::Unary(op, a) => (op, a).hash(state),
            Val::Binary(op, a, b) => (op, a, b).hash(state),
            Val::Compare(op, a, b) => (op, a, b).hash(state),
            Val::Select(c, a, b) => (c, a, b).hash(state),
            Val::Cast(d, a) => (d, a).hash(state),
            Val::Acc(n) => n.hash(state),
        }
    }
}

/// A reduction of one output element: `acc = init; for r in axes { acc = combine(acc, body) }`.
#[derive(Debug)]
pub(crate) struct Red {
    pub(crate) op: ReduceOp,
    /// The reduction axes (numbered after the output's), outermost first, with extents.
    pub(crate) axes: Vec<(usize, i64)>,
    /// The value reduced.
    pub(crate) body: Val,
    /// The body's dtype.
    pub(crate) body_dtype: DType,
    /// The result's dtype (the body's, or an integer position for `ArgMax`/`ArgMin`).
    pub(crate) dtype: DType,
}

/// Inlines tensor expressions into one [`Val`] per output.
pub(crate) struct Inliner<'a> {
    pub(crate) inputs: &'a [Tensor],
    /// The buffers of the materialized tensors, by [`key`].
    pub(crate) buffers: &'a HashMap<usize, usize>,
    /// The output's shape (the extents of its axes).
    pub(crate) out_shape: Vec<i64>,
    /// A reduction met inside another reduction's body, to be materialized.
    pub(crate) want: Option<Tensor>,
    /// Why inlining stopped when it is not a bug: the expression grew past [`MAX_NODES`]
    /// (`true`), or it holds what lowering cannot compile yet (`false`).
    pub(crate) limit: Option<bool>,
    /// Operations made so far.
    pub(crate) nodes: usize,
    /// Whether every value loaded or computed (other than booleans) is 32 bits wide.
    pub(crate) all32: bool,
    /// The output's rank.
    pub(crate) rank: usize,
    /// The extents of the reduction axes met so far (axis `rank + j` is the `j`-th).
    pub(crate) red_extents: Vec<i64>,
    /// The reductions met so far.
    pub(crate) reductions: Vec<Red>,
    /// Reductions already lowered, by tensor address and read indices.
    pub(crate) red_cache: HashMap<(usize, Vec<Ix>), usize>,
    /// Whether the inliner is inside a reduction's body.
    pub(crate) in_reduce: bool,
}

impl<'a> Inliner<'a> {
    /// The value of elementwise tensor `t` at the index of its axes (an axis of extent 1
    /// is 0), outside any kernel's lowering, with the inliner that made it (for interval
    /// arithmetic on its indices): `None` for a placeholder, a reduction or what does not
    /// inline.
    pub(crate) fn elementwise(
        t: &Tensor,
        inputs: &'a [Tensor],
        buffers: &'a HashMap<usize, usize>,
    ) -> Option<(Inliner<'a>, Val)> {
        let TensorOp::Compute { axes, body } = &t.op else {
            return None;
        };
        let mut inliner = Inliner::standalone(inputs, buffers, &t.shape);
        let env: HashMap<u32, Ix> = axes
            .iter()
            .zip(&t.shape)
            .enumerate()
            .map(|(k, (a, &n))| (a.id, if n == 1 { Ix::Const(0) } else { Ix::Axis(k) }))
            .collect();
        let v = inliner.value(body, &env).ok()?;
        inliner.reductions.is_empty().then_some((inliner, v))
    }

    /// An inliner of one tensor of shape `shape` reading the kernel's `inputs` and materialized
    /// `buffers`, with no reduction and no limits yet.
    pub(crate) fn standalone(
        inputs: &'a [Tensor],
        buffers: &'a HashMap<usize, usize>,
        shape: &[i64],
    ) -> Inliner<'a> {
        Inliner {
            inputs,
            buffers,
            out_shape: shape.to_vec(),
            want: None,
            limit: None,
            nodes: 0,
            all32: true,
            rank: shape.len(),
            red_extents: Vec::new(),
            reductions: Vec::new(),
            red_cache: HashMap::new(),
            in_reduce: false,
        }
    }

    pub(crate) fn value(&mut self, e: &TExpr, env: &HashMap<u32, Ix>) -> Result<Val, String> {
        relay_ir::ensure_sufficient_stack(|| self.value_inner(e, env))
    }

    pub(crate) fn value_inner(&mut self, e: &TExpr, env: &HashMap<u32, Ix>) -> Result<Val, String> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            self.limit = Some(true);
            return Err(format!(
                "the kernel's expression has more than {MAX_NODES} operations after inlining"
            ));
        }
        let d = e.dtype();
        if d != DType::BOOL && (d.bits != 32 || d.lanes != 1) {
            self.all32 = false;
        }
        let b = |v: Val| Box::new(v);
        Ok(match e.kind() {
            TExprKind::Var(_) => {
                self.all32 = false;
                Val::Index(self.index(e, env)?)
            }
            // A float16 (bfloat16, float8) constant: its value in that type.
            TExprKind::Int(v) if d.is_narrow_float() => Val::Float(round_narrow(*v as f64, d), d),
            TExprKind::Float(v) if d.is_narrow_float() => Val::Float(round_narrow(*v, d), d),
            TExprKind::Int(v) => Val::Int(*v, d),
            TExprKind::Float(v) => Val::Float(*v, d),
            TExprKind::Read { tensor, indices } => self.read(tensor, indices, d, env)?,
            // float16 operations compute in a wider float (`f16_wide_unary`, widening is
            // exact) and round their result to float16, as the reference does per operation;
            // float16 values are only loaded, stored, selected and converted (`Cast` converts
            // in codegen). bfloat16 and the 8-bit floats likewise, always in `F16_WIDE`.
            TExprKind::Unary(op, a) if a.dtype().is_narrow_float() => {
                // In a reduction's body, `F16_WIDE`: a sum or product takes the body's
                // operation unrounded.
                let wide = if self.in_reduce || a.dtype() != DType::F16 {
                    F16_WIDE
                } else {
                    f16_wide_unary(*op)
                };
                let r = Val::Unary(*op, b(widen_f16_to(self.value(a, env)?, wide)));
                if d.is_narrow_float() {
                    Val::Cast(d, b(r))
                } else {
                    r
                }
            }
            TExprKind::Binary(op, x, y) if d.is_narrow_float() => {
                let (x, y) = (self.value(x, env)?, self.value(y, env)?);
                let wide = if self.in_reduce || d != DType::F16 {
                    F16_WIDE
                } else {
                    f16_wide_binary(*op)
                };
                let (x, y) = (widen_f16_to(x, wide), widen_f16_to(y, wide));
                Val::Cast(d, b(Val::Binary(*op, b(x), b(y))))
            }
            TExprKind::Compare(op, x, y) if x.dtype().is_narrow_float() => {
                let (x, y) = (self.value(x, env)?, self.value(y, env)?);
                // Exact in `f32`.
                let (x, y) = (widen_f16_to(x, DType::F32), widen_f16_to(y, DType::F32));
                Val::Compare(*op, b(x), b(y))
            }
            TExprKind::Unary(op, a) => Val::Unary(*op, b(self.value(a, env)?)),
            // Index arithmetic used as a value (a padding bound test): folded like an index.
            TExprKind::Binary(..) if d == DType::I64 => Val::Index(self.index(e, env)?),
            TExprKind::Binary(op, x, y) => {
                Val::Binary(*op, b(self.value(x, env)?), b(self.value(y, env)?))
            }
            TExprKind::Compare(op, x, y) => {
                Val::Compare(*op, b(self.value(x, env)?), b(self.value(y, env)?))
            }
            TExprKind::Select(c, x, y) => Val::Select(
                b(self.value(c, env)?),
                b(self.value(x, env)?),
                b(self.value(y, env)?),
            ),
            TExprKind::Cast(a) => Val::Cast(d, b(self.value(a, env)?)),
            TExprKind::Reduce { op, axes, body } => self.reduce(op, axes, body, d, env)?,
        })
    }

    /// A read of `tensor` at `indices`: a load of an input or a materialized tensor, or the
    /// tensor's compute inlined at those indices (a reduction's result computed once per index).
    fn read(
        &mut self,
        tensor: &Tensor,
        indices: &[TExpr],
        d: DType,
        env: &HashMap<u32, Ix>,
    ) -> Result<Val, String> {
        let b = |v: Val| Box::new(v);
        Ok({
            let is_input = matches!(tensor.op, TensorOp::Placeholder(_));
            if is_input && (d.bits != 32 || d.code == relay_ir::DTypeCode::Bool) {
                self.all32 = false;
            }
            let dims = indices
                .iter()
                .map(|i| self.index(i, env))
                .collect::<Result<Vec<_>, _>>()?;
            if dims.len() != tensor.shape.len() {
                return Err(format!(
                    "`{}` of rank {} read with {} indices",
                    tensor.name,
                    tensor.shape.len(),
                    dims.len()
                ));
            }
            for (ix, &n) in dims.iter().zip(&tensor.shape) {
                if let Ix::Const(c) = ix
                    && !(0..n).contains(c)
                {
                    return Err(format!("`{}` read at index {c} of 0..{n}", tensor.name));
                }
            }
            match &tensor.op {
                TensorOp::Placeholder(i) => {
                    let input = self.inputs.get(*i).ok_or_else(|| {
                        format!(
                            "`{}` is placeholder {i} of {}",
                            tensor.name,
                            self.inputs.len()
                        )
                    })?;
                    if input.shape != tensor.shape || input.dtype != tensor.dtype {
                        return Err(format!("`{}` does not match kernel input {i}", tensor.name));
                    }
                    Val::Load { buffer: *i, dims }
                }
                TensorOp::Compute { .. } if self.buffers.contains_key(&key(tensor)) => {
                    if d.bits != 32 || d.code == relay_ir::DTypeCode::Bool {
                        self.all32 = false;
                    }
                    Val::Load {
                        buffer: self.buffers[&key(tensor)],
                        dims,
                    }
                }
                TensorOp::Compute { axes, body } => {
                    if axes.len() != dims.len() {
                        return Err(format!("`{}` has the wrong number of axes", tensor.name));
                    }
                    let reduction = matches!(body.kind(), TExprKind::Reduce { .. });
                    let key = (key(tensor), dims.clone());
                    if reduction && self.in_reduce {
                        self.want = Some(tensor.clone());
                        return Err(format!("`{}` must be materialized", tensor.name));
                    }
                    if reduction && let Some(&n) = self.red_cache.get(&key) {
                        // A float16 reduction's result is rounded from its accumulator.
                        return Ok(if d.is_narrow_float() {
                            Val::Cast(d, b(Val::Acc(n)))
                        } else {
                            Val::Acc(n)
                        });
                    }
                    let inner: HashMap<u32, Ix> = axes.iter().map(|a| a.id).zip(dims).collect();
                    let v = self.value(body, &inner)?;
                    let acc = match &v {
                        Val::Acc(n) => Some(*n),
                        Val::Cast(_, a) => match **a {
                            Val::Acc(n) => Some(n),
                            _ => None,
                        },
                        _ => None,
                    };
                    if let (true, Some(n)) = (reduction, acc) {
                        self.red_cache.insert(key, n);
                    }
                    v
                }
            }
        })
    }

    /// A reduction over `axes` of `body` (of result dtype `d`): recorded in [`Inliner::reductions`],
    /// its value an accumulator.
    fn reduce(
        &mut self,
        op: &ReduceOp,
        axes: &[relay_ir::te::IterVar],
        body: &TExpr,
        d: DType,
        env: &HashMap<u32, Ix>,
    ) -> Result<Val, String> {
        let b = |v: Val| Box::new(v);
        Ok({
            if self.in_reduce {
                self.limit = Some(false);
                return Err("a reduction reading another reduction cannot be compiled yet".into());
            }
            let arg = matches!(op, ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. });
            let fits = if arg { d.is_int() } else { d == body.dtype() };
            if !fits {
                return Err(format!("a {op:?} reduction of dtype {d}"));
            }
            self.all32 = false;
            let mut inner = env.clone();
            let mut red_axes = Vec::with_capacity(axes.len());
            for a in axes {
                let k = self.rank + self.red_extents.len();
                self.red_extents.push(a.extent);
                let ix = if a.extent == 1 {
                    Ix::Const(0)
                } else {
                    Ix::Axis(k)
                };
                inner.insert(a.id, ix);
                red_axes.push((k, a.extent));
            }
            self.in_reduce = true;
            let value = self.value(body, &inner);
            self.in_reduce = false;
            let (mut value, mut body_dtype, mut dtype) = (value?, body.dtype(), d);
            if body_dtype.is_narrow_float() {
                // A float16 reduction accumulates in `F16_WIDE`, and a sum or product the
                // body's operation unrounded (the reference's contractions and pools
                // accumulate in f64 and round once). A maximum or minimum of float16 values
                // is one of them whatever the accumulator: it compares in float32, exactly,
                // with four lanes to a vector where float64 has two.
                let op_body = matches!(body.kind(), TExprKind::Unary(..) | TExprKind::Binary(..));
                let wide = match op {
                    ReduceOp::Max | ReduceOp::Min => DType::F32,
                    _ => F16_WIDE,
                };
                value = match value {
                    Val::Cast(_, inner)
                        if op_body && matches!(op, ReduceOp::Sum | ReduceOp::Prod) =>
                    {
                        *inner
                    }
                    v => widen_f16_to(v, wide),
                };
                body_dtype = wide;
                if dtype.is_narrow_float() {
                    dtype = wide;
                }
            }
            self.reductions.push(Red {
                op: *op,
                axes: red_axes,
                body: value,
                body_dtype,
                dtype,
            });
            let acc = Val::Acc(self.reductions.len() - 1);
            if d.is_narrow_float() {
                Val::Cast(d, b(acc))
            } else {
                acc
            }
        })
    }

    /// An index expression (`int64` arithmetic on axes and constants).
    pub(crate) fn index(&mut self, e: &TExpr, env: &HashMap<u32, Ix>) -> Result<Ix, String> {
        relay_ir::ensure_sufficient_stack(|| match e.kind() {
            TExprKind::Var(v) => env
                .get(&v.id)
                .cloned()
                .ok_or_else(|| "an index uses an unbound axis".to_string()),
            TExprKind::Int(c) => i64::try_from(*c)
                .map(Ix::Const)
                .map_err(|_| format!("index constant {c} out of range")),
            TExprKind::Binary(op, x, y) if e.dtype() == DType::I64 => {
                let (x, y) = (self.index(x, env)?, self.index(y, env)?);
                // `x / c` and `x % c` with `0 <= x < c`.
                if let (Some((lo, hi)), Ix::Const(c)) = (self.range(&x), &y)
                    && lo >= 0
                    && hi < *c
                {
                    match op {
                        BinaryOp::Div | BinaryOp::FloorDiv => return Ok(Ix::Const(0)),
                        BinaryOp::Mod | BinaryOp::FloorMod => return Ok(x),
                        _ => {}
                    }
                }
                Ok(fold(*op, x, y))
            }
            _ => {
                let v = self.value(e, env)?;
                let v = if e.dtype() == DType::I64 {
                    v
                } else {
                    Val::Cast(DType::I64, Box::new(v))
                };
                Ok(Ix::Dyn(Box::new(v)))
            }
        })
    }

    /// The values an index takes, when known: axes range over their extents.
    pub(crate) fn range(&self, ix: &Ix) -> Option<(i64, i64)> {
        match ix {
            Ix::Const(c) => Some((*c, *c)),
            Ix::Axis(k) => {
                let extent = match self.out_shape.get(*k) {
                    Some(&n) => n,
                    None => *self.red_extents.get(k - self.rank)?,
                };
                Some((0, extent.checked_sub(1)?))
            }
            Ix::Bin(op, a, b) => {
                let ((al, ah), (bl, bh)) = (self.range(a)?, self.range(b)?);
                match op {
                    BinaryOp::Add => Some((al.checked_add(bl)?, ah.checked_add(bh)?)),
                    BinaryOp::Sub => Some((al.checked_sub(bh)?, ah.checked_sub(bl)?)),
                    BinaryOp::Mul if al >= 0 && bl >= 0 => {
                        Some((al.checked_mul(bl)?, ah.checked_mul(bh)?))
                    }
                    _ => None,
                }
            }
            Ix::Dyn(_) => None,
        }
    }
}

/// The dtype float16 operations compute in: `float64`, in which the basic operations give
/// float16's correctly rounded results and every other one the reference's (which computes in
/// `f64` and rounds once per operation), bit for bit.
pub(crate) const F16_WIDE: DType = DType::F64;

/// `x` rounded to the nearest float16 value (ties to even).
pub(crate) fn round_f16(x: f64) -> f64 {
    f64::from(crate::math::f16_to_f32(crate::math::f64_to_f16(x)))
}

/// `x` rounded to the nearest value of the narrow float `d`.
fn round_narrow(x: f64, d: DType) -> f64 {
    match d.minifloat() {
        Some(f) => f.to_f64(f.from_f64(x)),
        None => round_f16(x),
    }
}

/// A float16 value as a `wide` one (exactly): a constant directly, others converted.
fn widen_f16_to(v: Val, wide: DType) -> Val {
    match v {
        Val::Float(c, d) if d.is_narrow_float() => Val::Float(c, wide),
        v => Val::Cast(wide, Box::new(v)),
    }
}

/// The float a float16 unary operation computes in: `f32` where that gives the same float16
/// result as `f64` — the exact ones (`neg abs sign ceil floor round trunc` and the
/// classifications) and `sqrt`, which is correctly rounded in `f32` and whose second rounding
/// to float16 is then innocuous (Figueroa: double rounding through a format of `q >= 2p + 2`
/// bits is innocuous for `+ - * / sqrt`; `f32` has q = 24 = 2·11 + 2, and float16 operands never
/// leave `f32`'s normal range) — so four lanes vectorize as one `f32x4`. `exp`, `log`,
/// `tanh`, `sigmoid` and `erf` compute in `f32` too, with the JIT's inline vector math
/// (`codegen::vmath`, within 2 `f32` ulp): `f32` carries 13 bits beyond float16's, so the
/// float16 result is the correctly rounded one or, within 2^-22 of a float16 rounding
/// midpoint, its neighbour — within one float16 ulp, inside SPEC §4's 2 ulp for
/// transcendental functions (a float16 GELU or softmax then runs on vector lanes instead of
/// a float64 host call per element). `F16_WIDE` for the rest.
fn f16_wide_unary(op: UnaryOp) -> DType {
    use UnaryOp::*;
    match op {
        Neg | Abs | Sign | Ceil | Floor | Round | Trunc | Sqrt | IsNan | IsInf | IsFinite => {
            DType::F32
        }
        Exp | Log | Tanh | Sigmoid | Erf => DType::F32,
        _ => F16_WIDE,
    }
}

/// The float a float16 binary operation computes in: `f32` for `+ - * /` (the same float16
/// result as in `f64`, by the argument of [`f16_wide_unary`]: sums, products and quotients of
/// float16 values stay within `f32`'s normal range, 2^-48 to 2^40) and `min`/`max` (exact),
/// `F16_WIDE` for the rest.
fn f16_wide_binary(op: BinaryOp) -> DType {
    use BinaryOp::*;
    match op {
        Add | Sub | Mul | Div | Max | Min => DType::F32,
        _ => F16_WIDE,
    }
}

/// `x op y`, folded when both are constants and the result is defined.
pub(crate) fn fold(op: BinaryOp, x: Ix, y: Ix) -> Ix {
    if let (Ix::Const(a), Ix::Const(b)) = (&x, &y) {
        let (a, b) = (*a, *b);
        let r = match op {
            BinaryOp::Add => a.checked_add(b),
            BinaryOp::Sub => a.checked_sub(b),
            BinaryOp::Mul => a.checked_mul(b),
            BinaryOp::Max => Some(a.max(b)),
            BinaryOp::Min => Some(a.min(b)),
            _ => None,
        };
        if let Some(r) = r {
            return Ix::Const(r);
        }
    }
    match (op, &x, &y) {
        (BinaryOp::Add, Ix::Const(0), _) | (BinaryOp::Mul, Ix::Const(1), _) => y,
        (BinaryOp::Add | BinaryOp::Sub, _, Ix::Const(0))
        | (BinaryOp::Mul | BinaryOp::Div | BinaryOp::FloorDiv, _, Ix::Const(1)) => x,
        (BinaryOp::Mul, Ix::Const(0), _)
        | (BinaryOp::Mul, _, Ix::Const(0))
        | (BinaryOp::Mod | BinaryOp::FloorMod, _, Ix::Const(1)) => Ix::Const(0),
        _ => Ix::Bin(op, Box::new(x), Box::new(y)),
    }
}

/// Whether an index expression uses one of `axes`.
pub(crate) fn mentions(ix: &Ix, axes: &[usize]) -> bool {
    match ix {
        Ix::Axis(k) => axes.contains(k),
        Ix::Const(_) => false,
        Ix::Bin(_, a, b) => mentions(a, axes) || mentions(b, axes),
        Ix::Dyn(v) => {
            let mut used = Vec::new();
            val_axes(v, &mut used);
            used.iter().any(|k| axes.contains(k))
        }
    }
}

/// The terms of a conjunction (`a && b && ...`).
pub(crate) fn conjuncts<'v>(v: &'v Val, out: &mut Vec<&'v Val>) {
    match v {
        Val::Binary(BinaryOp::LogicalAnd, a, b) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        other => out.push(other),
    }
}

/// A value that is an index (or an `int64` constant), as one.
pub(crate) fn as_index(v: &Val) -> Option<Ix> {
    match v {
        Val::Index(ix) => Some(ix.clone()),
        Val::Int(c, d) if *d == DType::I64 => i64::try_from(*c).ok().map(Ix::Const),
        _ => None,
    }
}

/// `ix` as `coef * axis_k + rest` with `rest` free of axis `k`, when it is linear in it.
pub(crate) fn split_axis(ix: &Ix, k: usize) -> Option<(i64, Ix)> {
    match ix {
        Ix::Axis(j) if *j == k => Some((1, Ix::Const(0))),
        Ix::Bin(op @ (BinaryOp::Add | BinaryOp::Sub), a, b) => {
            let ((ca, ra), (cb, rb)) = (split_axis(a, k)?, split_axis(b, k)?);
            let c = if *op == BinaryOp::Add {
                ca.checked_add(cb)?
            } else {
                ca.checked_sub(cb)?
            };
            Some((c, fold(*op, ra, rb)))
        }
        Ix::Bin(BinaryOp::Mul, a, b) => match (a.as_ref(), b.as_ref()) {
            (x, Ix::Const(m)) | (Ix::Const(m), x) => {
                let (c, r) = split_axis(x, k)?;
                Some((c.checked_mul(*m)?, fold(BinaryOp::Mul, r, Ix::Const(*m))))
            }
            _ => (!mentions(ix, &[k])).then(|| (0, ix.clone())),
        },
        _ => (!mentions(ix, &[k])).then(|| (0, ix.clone())),
    }
}

/// The axes the indices of a value mention.
pub(crate) fn val_axes(v: &Val, out: &mut Vec<usize>) {
    fn ix_axes(ix: &Ix, out: &mut Vec<usize>) {
        match ix {
            Ix::Axis(k) => out.push(*k),
            Ix::Const(_) => {}
            Ix::Bin(_, a, b) => {
                ix_axes(a, out);
                ix_axes(b, out);
            }
            Ix::Dyn(v) => val_axes(v, out),
        }
    }
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Val::Int(..) | Val::Float(..) | Val::Acc(_) => {}
            Val::Index(ix) => ix_axes(ix, out),
            Val::Load { dims, .. } => dims.iter().for_each(|ix| ix_axes(ix, out)),
            Val::Unary(_, a) | Val::Cast(_, a) => stack.push(a),
            Val::Binary(_, a, b) | Val::Compare(_, a, b) => {
                stack.push(b);
                stack.push(a);
            }
            Val::Select(c, a, b) => {
                stack.push(b);
                stack.push(a);
                stack.push(c);
            }
        }
    }
}

/// `ix` as `Σ coef[k]·axis_k + constant` over axes `0..rank`, when it is linear.
pub(crate) fn linear(ix: &Ix, rank: usize) -> Option<(Vec<i64>, i64)> {
    let mut coef = vec![0; rank];
    let mut rest = ix.clone();
    for (k, c) in coef.iter_mut().enumerate() {
        let (ck, r) = split_axis(&rest, k)?;
        *c = ck;
        rest = r;
    }
    match rest {
        Ix::Const(v) => Some((coef, v)),
        _ => None,
    }
}
