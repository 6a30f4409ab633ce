//! Broadcast kernels: a primitive function with `?` dimensions anywhere whose every operator
//! is elementwise or broadcasting (numpy's rules, extents aligned from the right), save
//! sub-expressions of static tensors alone (a `take` of constants): a causal mask built from
//! `less_equal([1, 1, 1, ?], [1, 1, ?, 1])`, an outer sum `[?, 1] + [1, ?]`.
//!
//! Such a function compiles once into loop nests over a **span** of the result's innermost
//! dimension, for a few span lengths, in which every argument either runs along the span or
//! holds one element repeated over it. One [`PackedFunc`] serves every shape: it walks the
//! result's other dimensions, pointing each argument at the element the broadcast maps the
//! position to (a step of 0 along a dimension where the argument's extent is 1, as ONNX
//! Runtime's broadcast looper does), and covers each row with spans, longest first.
//! Adjacent dimensions along which every argument runs on contiguously, or stays, are merged
//! into the span first. Nothing is compiled per shape; a call whose arguments do not
//! broadcast, or in which an argument that runs along the span has an innermost extent of 1
//! against a longer result, is not served (the caller specializes: [`PackedFunc::serves`]).
//!
//! [`crate::rows`] is tried first: rows that every argument shares are walked in chunks of
//! many rows, which this module's spans of one row are not.

mod call;

use relay_ir::{Dim, Expr, ExprKind, Function, OpPattern, Type, TypeKind};

use crate::KernelError;
use crate::abi::ArgSpec;
use crate::packed::PackedFunc;

pub(crate) use call::call;

/// The span lengths compiled when the innermost extent is not known, longest first.
const SPANS: [i64; 4] = [512, 64, 8, 1];

/// A compiled broadcast kernel.
pub struct Broadcast {
    /// The result's rank.
    rank: usize,
    /// How each kernel argument is passed, inputs then the output.
    args: Vec<Role>,
    /// The bytes of an element of each argument.
    bytes: Vec<usize>,
    /// The innermost extent of static operands that are not arguments (1 when none is
    /// longer).
    constant_inner: i64,
    /// The span kernels, longest first: of [`SPANS`], or of the one innermost extent known.
    spans: Vec<(i64, PackedFunc)>,
    /// Each span kernel's argument shapes (empty for an argument passed whole).
    span_shapes: Vec<Vec<Vec<i64>>>,
    /// Each argument's byte step along a span, as its kernel reads it (0 when repeated or
    /// passed whole).
    along: Vec<isize>,
    /// Whether the innermost extent is known (no dimension is merged into the span).
    fixed: bool,
    /// The result's declared shape (`-1` for `?`).
    declared: Vec<i64>,
}

/// How a broadcast kernel passes one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Walked, its innermost dimension running along the span (a rank-`rank` tensor).
    Along { rank: usize },
    /// Walked, one element repeated over the span (its innermost extent is 1).
    Repeated { rank: usize },
    /// Passed as given: a static tensor only static sub-expressions read.
    Whole,
}

impl Role {
    /// The rank of a walked argument.
    fn walked(self) -> Option<usize> {
        match self {
            Role::Along { rank } | Role::Repeated { rank } => Some(rank),
            Role::Whole => None,
        }
    }
}

/// How a parameter is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    Unused,
    Walked,
    Whole,
}

/// What the analysis of a function found.
struct Analysis<'f> {
    func: &'f Function,
    /// The result's rank.
    rank: usize,
    /// The innermost extent, when something fixes it.
    inner: Option<i64>,
    /// The longest innermost extent of a static operand that is not a parameter.
    constant_inner: i64,
    uses: Vec<Use>,
    /// The variables `let` binds to walked values.
    bound: Vec<relay_ir::Var>,
}

/// The roles of `func`'s parameters, the innermost extent when known, and the innermost
/// extent of its static operands; `None` when it is not a broadcast function.
fn analyze(func: &Function) -> Option<(Vec<Role>, Option<i64>, i64)> {
    if !crate::is_dynamic(func) {
        return None;
    }
    let result = func.body.checked_type().or(func.ret_type.as_ref())?;
    let out = shape(result)?;
    let rank = out.len();
    if rank == 0 || !outer_ones(out) {
        return None;
    }
    let mut a = Analysis {
        func,
        rank,
        inner: match out[rank - 1] {
            Dim::Known(n) => Some(n),
            Dim::Any => None,
        },
        constant_inner: 1,
        uses: vec![Use::Unused; func.params.len()],
        bound: Vec::new(),
    };
    if !a.walked(&func.body) {
        return None;
    }
    let mut roles = Vec::with_capacity(func.params.len());
    let uses = std::mem::take(&mut a.uses);
    for (p, u) in func.params.iter().zip(&uses) {
        let s = shape(p.checked_type().or(p.ty())?)?;
        roles.push(match u {
            Use::Walked => a.walked_role(s)?,
            Use::Whole => Role::Whole,
            Use::Unused if !s.contains(&Dim::Any) => Role::Whole,
            Use::Unused => return None,
        });
    }
    Some((roles, a.inner, a.constant_inner))
}

impl Analysis<'_> {
    /// Whether `e`, whose value a broadcast reads, is computed elementwise from walked
    /// parameters and static operands.
    fn walked(&mut self, e: &Expr) -> bool {
        let Some(s) = e.checked_type().and_then(shape) else {
            return false;
        };
        if s.len() > self.rank {
            return false;
        }
        if !s.contains(&Dim::Any) && !matches!(e.kind(), ExprKind::Var(_)) {
            // A static operand computed inside the kernel: it must broadcast over every
            // dimension but the innermost.
            return self.static_tree(e) && self.static_operand(s);
        }
        match e.kind() {
            ExprKind::Var(v) => match self.func.params.iter().position(|p| p == v) {
                Some(i) => self.mark(i, Use::Walked),
                None => self.bound.contains(v),
            },
            ExprKind::Let { bindings, body } => {
                for b in bindings {
                    if !self.walked(&b.value) {
                        return false;
                    }
                    self.bound.push(b.var.clone());
                }
                self.walked(body)
            }
            ExprKind::Call { args, .. } => {
                let Some((op, _, attrs)) = e.op_call() else {
                    return false;
                };
                let elementwise = matches!(op.pattern, OpPattern::ElemWise | OpPattern::Broadcast);
                let no_axis = matches!(relay_ops::support::attr_opt_int(attrs, "axis"), Ok(None));
                elementwise && no_axis && outer_ones(s) && args.iter().all(|a| self.walked(a))
            }
            _ => false,
        }
    }

    /// Whether every node of `e` has a static type, its parameters marked as read whole.
    fn static_tree(&mut self, e: &Expr) -> bool {
        let fixed = e
            .checked_type()
            .and_then(shape)
            .is_some_and(|s| !s.contains(&Dim::Any));
        fixed
            && match e.kind() {
                ExprKind::Constant(_) => true,
                // A bound variable of a static type holds a static tree (see `walked`).
                ExprKind::Var(v) => match self.func.params.iter().position(|p| p == v) {
                    Some(i) => self.mark(i, Use::Whole),
                    None => self.bound.contains(v),
                },
                ExprKind::Call { args, .. } => {
                    e.op_call().is_some() && args.iter().all(|a| self.static_tree(a))
                }
                _ => false,
            }
    }

    /// Whether a static operand of shape `s` broadcasts over every dimension but the
    /// innermost, whose extent it then fixes when longer than 1.
    fn static_operand(&mut self, s: &[Dim]) -> bool {
        let Some((last, outer)) = s.split_last() else {
            return true;
        };
        let Dim::Known(n) = *last else { return false };
        if !outer.iter().all(|d| *d == Dim::Known(1)) {
            return false;
        }
        self.constant_inner = self.constant_inner.max(n);
        n == 1 || self.fix_inner(n)
    }

    /// Records that the innermost extent is `n`; `false` when something else fixed it.
    fn fix_inner(&mut self, n: i64) -> bool {
        match self.inner {
            Some(m) => m == n,
            None => {
                self.inner = Some(n);
                true
            }
        }
    }

    /// Records use `u` of parameter `i`; `false` when it is read both ways.
    fn mark(&mut self, i: usize, u: Use) -> bool {
        match self.uses[i] {
            Use::Unused => {
                self.uses[i] = u;
                true
            }
            seen => seen == u,
        }
    }

    /// The role of a walked parameter of shape `s`.
    fn walked_role(&mut self, s: &[Dim]) -> Option<Role> {
        let rank = s.len();
        if !outer_ones(s) {
            return None;
        }
        match s.last() {
            None | Some(Dim::Known(1)) => Some(Role::Repeated { rank }),
            Some(Dim::Known(n)) => self.fix_inner(*n).then_some(Role::Along { rank }),
            Some(Dim::Any) => Some(Role::Along { rank }),
        }
    }
}

/// Whether the dimensions of `s` but its innermost are `?` or 1 (a span kernel sets them to
/// 1).
fn outer_ones(s: &[Dim]) -> bool {
    let outer = &s[..s.len().saturating_sub(1)];
    outer.iter().all(|d| matches!(d, Dim::Any | Dim::Known(1)))
}

/// A tensor type's shape.
fn shape(ty: &Type) -> Option<&[Dim]> {
    match ty.kind() {
        TypeKind::Tensor { shape, .. } => Some(shape),
        _ => None,
    }
}

/// Whether `func` is a broadcast function (compiled by [`compile`]).
pub(crate) fn is_broadcast_function(func: &Function) -> bool {
    analyze(func).is_some()
}

/// The broadcast kernel of `func`, named `name`, when it is a broadcast function.
pub(crate) fn compile(func: &Function, name: &str) -> Option<Result<PackedFunc, KernelError>> {
    let (params, inner, constant_inner) = analyze(func)?;
    Some(compile_spans(func, name, params, inner, constant_inner))
}

fn compile_spans(
    func: &Function,
    name: &str,
    params: Vec<Role>,
    inner: Option<i64>,
    constant_inner: i64,
) -> Result<PackedFunc, KernelError> {
    let malformed = |message: String| KernelError::Malformed {
        kernel: name.to_owned(),
        message,
    };
    let (spec, inputs) = crate::host_op::kernel_spec(func, name, true)?;
    if spec.args.len() != inputs + 1 || params.len() != inputs {
        return Err(malformed("a broadcast has one result".into()));
    }
    let rank = spec.args[inputs].shape.len();
    let mut args = params;
    args.push(Role::Along { rank });
    let lengths = match inner {
        Some(n) => vec![n],
        None => SPANS.to_vec(),
    };
    let mut spans = Vec::with_capacity(lengths.len());
    for length in lengths {
        let types: Vec<Type> = spec.args[..inputs]
            .iter()
            .zip(&args)
            .map(|(a, role)| span_type(a, *role, length))
            .collect::<Result<_, _>>()
            .map_err(malformed)?;
        // A span starts anywhere in a row: its kernel takes data of any alignment.
        let span = crate::specialize::specialize_named(func, &types, name)?;
        let loops = crate::lower_primitive(&span, name)?;
        spans.push((length, crate::packed::compile_aligned(&loops, 1)?));
    }
    let bytes: Vec<usize> = spec
        .args
        .iter()
        .map(|a| usize::from(a.dtype.bits).div_ceil(8))
        .collect();
    let span_shapes = spans
        .iter()
        .map(|(length, _)| args.iter().map(|&r| span_shape(r, *length, &[])).collect())
        .collect();
    let along = args
        .iter()
        .zip(&bytes)
        .map(|(role, &w)| match role {
            Role::Along { .. } => w as isize,
            _ => 0,
        })
        .collect();
    let b = Broadcast {
        rank,
        args,
        bytes,
        constant_inner,
        spans,
        span_shapes,
        along,
        fixed: inner.is_some(),
        declared: spec.args[inputs].shape.clone(),
    };
    Ok(PackedFunc::broadcast(name.to_owned(), spec, inputs, b))
}

/// The type of argument `a` in a span of `length` elements.
fn span_type(a: &ArgSpec, role: Role, length: i64) -> Result<Type, String> {
    let dtype = relay_ir::DType::parse(&crate::abi::dtype_name(a.dtype))
        .ok_or_else(|| format!("argument {}: an unknown dtype", a.name))?;
    Ok(Type::tensor(&span_shape(role, length, &a.shape), dtype))
}

/// The shape of an argument of role `role` (declared `declared`) in a span of `length`.
fn span_shape(role: Role, length: i64, declared: &[i64]) -> Vec<i64> {
    match role {
        Role::Along { rank } => {
            let mut s = vec![1; rank];
            if let Some(last) = s.last_mut() {
                *last = length;
            }
            s
        }
        Role::Repeated { rank } => vec![1; rank],
        Role::Whole => declared.to_vec(),
    }
}

impl Broadcast {
    /// The result's shape for inputs of shapes `inputs` (numpy's broadcast of the walked
    /// ones and of the static operands' innermost extent).
    pub(crate) fn output_shape(&self, inputs: &[&[i64]]) -> Result<Vec<i64>, String> {
        let mut out = vec![1i64; self.rank];
        if let Some(last) = out.last_mut() {
            *last = self.constant_inner;
        }
        for (i, (shape, role)) in inputs.iter().zip(&self.args).enumerate() {
            let Some(rank) = role.walked() else { continue };
            if shape.len() != rank || shape.iter().any(|&d| d < 0) {
                return Err(format!("argument {i}: expected rank {rank}, got {shape:?}"));
            }
            for (o, &d) in out[self.rank - rank..].iter_mut().zip(*shape) {
                match (*o, d) {
                    (_, 1) => {}
                    (1, d) => *o = d,
                    (x, d) if x == d => {}
                    (x, d) => {
                        return Err(format!(
                            "argument {i} of shape {shape:?}: extent {d} does not broadcast \
                             with {x}"
                        ));
                    }
                }
            }
        }
        let fits = out
            .iter()
            .zip(&self.declared)
            .all(|(&o, &d)| d < 0 || o == d);
        match fits {
            true => Ok(out),
            false => Err(format!(
                "a result of shape {out:?}, declared {:?}",
                self.declared
            )),
        }
    }

    /// The result's shape for inputs of shapes `inputs` when the span kernels compute it:
    /// every argument that runs along the span has the result's innermost extent.
    fn served_shape(&self, inputs: &[&[i64]]) -> Result<Vec<i64>, String> {
        let out = self.output_shape(inputs)?;
        let inner = out.last().copied().unwrap_or(1);
        for (i, (shape, role)) in inputs.iter().zip(&self.args).enumerate() {
            if matches!(role, Role::Along { .. }) && shape.last() != Some(&inner) {
                return Err(format!(
                    "argument {i} of shape {shape:?} is repeated along the innermost \
                     dimension of a result of shape {out:?}"
                ));
            }
        }
        Ok(out)
    }

    /// Whether it computes inputs of shapes `inputs`.
    pub(crate) fn serves(&self, inputs: &[&[i64]]) -> bool {
        self.served_shape(inputs).is_ok()
    }
}

#[cfg(test)]
mod tests;
