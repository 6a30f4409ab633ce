//! A function of one variable over every element, on [`relay_linalg::pointwise`]: a primitive
//! whose body is built from `add`, `subtract`, `multiply`, `divide`, `power`, `negative`,
//! `sqrt` and at least one of `erf`, `tanh`, `exp` and `sigmoid` (the calls the loop nests
//! compute on 4 lanes and the library on 8 or 16), over
//!
//! - the variable: one `float32` parameter, seen through reshapes (which keep the element
//!   order), whose shape is the arithmetic's — a `?` dimension anywhere — and the result
//!   reshaped again, maybe;
//! - biases: parameters of static shape whose extents (leading 1s dropped) are the result's
//!   last extents, read at `i mod len` — `gelu(x + bias)` after a dense layer, or a second
//!   tensor of the result's whole static shape;
//! - scalars: one-element `float32` constants or parameters.
//!
//! The GELU of BERT (`erf`) and of GPT-2 (`tanh`), SiLU and the like become one library call,
//! static or dynamic; a tensor broadcast along other axes, a second tensor with `?` extents or
//! another operator leaves the group to the loop nests.

use relay_ir::{Binding, DType, Dim, Expr, ExprKind, Function, OpRef, TypeKind};
use relay_linalg::KernelContext;
use relay_linalg::pointwise::{Binary, Operands, Program, Src, Step, Unary};
use relay_ops::support::scalar_f32_constant;
use relay_ops::views::Link;

use super::resolve;

/// A pointwise function the kernel library computes (see the module's documentation).
#[derive(Clone, Debug)]
pub struct PointwiseOp {
    /// The steps.
    program: Program,
    /// The variable's parameter.
    x: usize,
    /// The reshapes of the variable, applied first first.
    views: Vec<Link>,
    /// The reshapes of the result, applied first first.
    after: Vec<Link>,
    /// Each bias's parameter and its static extents (leading 1s dropped).
    biases: Vec<(usize, Vec<i64>)>,
    /// Each scalar: a constant, or a parameter's one element.
    scalars: Vec<Scalar>,
}

/// A scalar operand.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scalar {
    Constant(f32),
    Param(usize),
}

/// The pointwise function `func` computes, when it is one.
pub(super) fn recognize(func: &Function) -> Option<PointwiseOp> {
    let (bindings, body) = match func.body.kind() {
        ExprKind::Let { bindings, body } => (bindings.as_slice(), body),
        _ => (&[][..], &func.body),
    };
    // Reshapes of the result keep the element order: peeled off, applied to its shape.
    let mut top = body;
    let (mut after, mut peeled) = (Vec::new(), Vec::new());
    loop {
        top = resolve(bindings, top);
        match top.op_call() {
            Some((op, [a], attrs)) if VIEWS.contains(&op.name) => {
                after.push(link(op, attrs));
                peeled.push(top);
                top = a;
            }
            _ => break,
        }
    }
    after.reverse();
    let result = f32_dims(top.checked_type()?)?;
    let params: Option<Vec<Vec<Dim>>> = func
        .params
        .iter()
        .map(|p| f32_dims(p.checked_type().or(p.ty())?))
        .collect();
    let mut b = Builder {
        func,
        bindings,
        result: &result,
        params: params?,
        x: None,
        views: Vec::new(),
        op: PointwiseOp {
            program: Program::default(),
            x: 0,
            views: Vec::new(),
            after: Vec::new(),
            biases: Vec::new(),
            scalars: Vec::new(),
        },
        seen: Vec::new(),
    };
    // The variable: the first parameter of the result's shape, unless a view names it.
    b.x = b
        .params
        .iter()
        .position(|d| *d == result && d.iter().any(|d| *d != Dim::Known(1)));
    let top = b.node(top)?;
    let steps = &b.op.program.steps;
    let reads_x = steps.iter().any(|s| match s {
        Step::Unary(_, a) => *a == Src::X,
        Step::Binary(_, a, c) => *a == Src::X || *c == Src::X,
    });
    if !matches!(top, Src::Step(_)) || !reads_x || !steps.iter().any(transcendental) {
        return None;
    }
    let x = b.x?;
    b.op.x = x;
    b.op.views = b.views;
    b.op.after = after;
    // Every binding is on the path (a let-bound value nothing reads is not this function).
    let on_path = |v: &Expr| {
        b.seen.iter().any(|(e, _)| Expr::ptr_eq(e, v)) || peeled.iter().any(|e| Expr::ptr_eq(e, v))
    };
    let bound = bindings.iter().all(|bd| on_path(&bd.value));
    bound.then_some(b.op)
}

/// Whether `step` is a call the library computes wider than the loop nests.
fn transcendental(step: &Step) -> bool {
    matches!(
        step,
        Step::Unary(Unary::Erf | Unary::Tanh | Unary::Exp | Unary::Sigmoid, _)
    )
}

/// A reshape `op` with `attrs` as a link of a chain.
fn link(op: OpRef, attrs: &relay_ir::Attrs) -> Link {
    Link {
        op,
        attrs: attrs.clone(),
        like: None,
        index: None,
    }
}

/// The dimensions of a `float32` tensor type.
fn f32_dims(t: &relay_ir::Type) -> Option<Vec<Dim>> {
    match t.kind() {
        TypeKind::Tensor { dtype, shape } if *dtype == DType::F32 => Some(shape.clone()),
        _ => None,
    }
}

/// `dims` without its leading 1s.
fn stripped(dims: &[Dim]) -> &[Dim] {
    let lead = dims.iter().take_while(|d| **d == Dim::Known(1)).count();
    &dims[lead..]
}

/// Builds a [`PointwiseOp`] from a function body, node by node (shared nodes once).
struct Builder<'a> {
    func: &'a Function,
    bindings: &'a [Binding],
    result: &'a [Dim],
    params: Vec<Vec<Dim>>,
    x: Option<usize>,
    views: Vec<Link>,
    op: PointwiseOp,
    /// The nodes built, with their operands.
    seen: Vec<(&'a Expr, Src)>,
}

impl<'a> Builder<'a> {
    fn resolve(&self, e: &'a Expr) -> &'a Expr {
        resolve(self.bindings, e)
    }

    /// The operand `e` is, its steps added.
    fn node(&mut self, e: &'a Expr) -> Option<Src> {
        let e = self.resolve(e);
        if let Some((_, s)) = self.seen.iter().find(|(n, _)| Expr::ptr_eq(n, e)) {
            return Some(*s);
        }
        let src = self.fresh(e)?;
        self.seen.push((e, src));
        Some(src)
    }

    fn fresh(&mut self, e: &'a Expr) -> Option<Src> {
        if let Some(v) = scalar_f32_constant(e) {
            return Some(self.scalar(Scalar::Constant(v)));
        }
        if let ExprKind::Var(v) = e.kind() {
            let p = self.func.params.iter().position(|q| q.id() == v.id())?;
            return self.param(p);
        }
        let (op, args, _) = e.op_call()?;
        // The result's rank bounds every value's (a scalar broadcast never widens it).
        if f32_dims(e.checked_type()?)?.len() > self.result.len() {
            return None;
        }
        let step = match (op.name, args) {
            (name, [a]) if VIEWS.contains(&name) => return self.view(op, e, a),
            (name, [a]) => Step::Unary(unary(name)?, self.node(a)?),
            (name, [a, b]) => Step::Binary(binary(name)?, self.node(a)?, self.node(b)?),
            _ => return None,
        };
        self.op.program.steps.push(step);
        Some(Src::Step(self.op.program.steps.len() - 1))
    }

    /// A view `e` of `a` (the operator `op`): only of the variable, before any arithmetic.
    fn view(&mut self, op: OpRef, e: &'a Expr, a: &'a Expr) -> Option<Src> {
        let mut chain = vec![(op, e)];
        let mut inner = self.resolve(a);
        while let Some((op, [next], _)) = inner.op_call()
            && VIEWS.contains(&op.name)
        {
            chain.push((op, inner));
            inner = self.resolve(next);
        }
        let ExprKind::Var(v) = inner.kind() else {
            return None;
        };
        let p = self.func.params.iter().position(|q| q.id() == v.id())?;
        if self.x.is_some_and(|x| x != p) || !self.views.is_empty() {
            return None;
        }
        let links = chain.iter().rev().map(|&(op, e)| {
            let (_, _, attrs) = e.op_call()?;
            Some(link(op, attrs))
        });
        self.views = links.collect::<Option<Vec<_>>>()?;
        let dims = f32_dims(e.checked_type()?)?;
        self.variable(p, &dims)
    }

    /// Parameter `p` as an operand: the variable, a scalar or a bias.
    fn param(&mut self, p: usize) -> Option<Src> {
        let dims = self.params.get(p)?.clone();
        if self.x == Some(p) {
            return self.variable(p, &dims);
        }
        let count = super::count(&super::spec_dims(&dims));
        if count == Some(1) {
            return Some(self.scalar(Scalar::Param(p)));
        }
        let trailing = stripped(&dims);
        let fits_tail = count.is_some()
            && trailing.len() <= self.result.len()
            && self.result[self.result.len() - trailing.len()..] == *trailing;
        if !fits_tail {
            return None;
        }
        // Static (a count), so no extent is `-1`.
        let extents = super::spec_dims(trailing);
        self.op.biases.push((p, extents));
        Some(Src::Bias(self.op.biases.len() - 1))
    }

    /// Parameter `p`, of shape `dims` where it enters the arithmetic, as the variable.
    fn variable(&mut self, p: usize, dims: &[Dim]) -> Option<Src> {
        if self.x.is_some_and(|x| x != p) || dims != self.result || self.used_as_bias(p) {
            return None;
        }
        self.x = Some(p);
        Some(Src::X)
    }

    /// Whether parameter `p` is a bias already.
    fn used_as_bias(&self, p: usize) -> bool {
        self.op.biases.iter().any(|(q, _)| *q == p)
    }

    /// The scalar `s` as an operand.
    fn scalar(&mut self, s: Scalar) -> Src {
        let at = match self.op.scalars.iter().position(|&t| t == s) {
            Some(at) => at,
            None => {
                self.op.scalars.push(s);
                self.op.scalars.len() - 1
            }
        };
        Src::Scalar(at)
    }
}

/// The reshape-like operators a variable may be seen through.
const VIEWS: &[&str] = &["reshape", "squeeze", "expand_dims", "nn.batch_flatten"];

fn unary(name: &str) -> Option<Unary> {
    Some(match name {
        "negative" => Unary::Negative,
        "exp" => Unary::Exp,
        "tanh" => Unary::Tanh,
        "sigmoid" => Unary::Sigmoid,
        "erf" => Unary::Erf,
        "sqrt" => Unary::Sqrt,
        _ => return None,
    })
}

fn binary(name: &str) -> Option<Binary> {
    Some(match name {
        "add" => Binary::Add,
        "subtract" => Binary::Subtract,
        "multiply" => Binary::Multiply,
        "divide" => Binary::Divide,
        "power" => Binary::Power,
        _ => return None,
    })
}

impl PointwiseOp {
    /// The result's shape for inputs of shapes `inputs`: the variable's after its views, whose
    /// last extents must be each bias's.
    pub(super) fn output_shapes(&self, inputs: &[&[i64]]) -> Result<Vec<Vec<i64>>, String> {
        let mut shape = inputs
            .get(self.x)
            .ok_or("a pointwise function without its variable")?
            .to_vec();
        for link in &self.views {
            shape = link
                .output_shape(&shape, inputs, DType::F32)
                .map_err(|e| e.to_string())?;
        }
        for (p, extents) in &self.biases {
            let given = inputs
                .get(*p)
                .ok_or("a pointwise function without its bias")?;
            let lead = given.iter().take_while(|&&d| d == 1).count();
            let tail = shape.len().checked_sub(extents.len());
            let fits =
                given[lead..] == extents[..] && tail.is_some_and(|t| shape[t..] == extents[..]);
            if !fits {
                return Err(format!(
                    "a bias of shape {given:?} for a pointwise result of shape {shape:?}"
                ));
            }
        }
        for link in &self.after {
            shape = link
                .output_shape(&shape, inputs, DType::F32)
                .map_err(|e| e.to_string())?;
        }
        Ok(vec![shape])
    }

    /// Runs it on `args` (the inputs, then the output; their shapes checked against
    /// [`Self::output_shapes`]).
    pub(super) fn run(&self, ctx: &KernelContext, args: &mut [&mut [f32]]) -> Result<(), String> {
        let (out, inputs) = args
            .split_last_mut()
            .ok_or("a pointwise function has an output")?;
        let arg = |p: usize| inputs.get(p).map(|a| &**a).ok_or("a missing argument");
        let scalars = self
            .scalars
            .iter()
            .map(|s| match *s {
                Scalar::Constant(v) => Ok(v),
                Scalar::Param(p) => arg(p)?.first().copied().ok_or("an empty scalar"),
            })
            .collect::<Result<Vec<f32>, _>>()?;
        let biases = self
            .biases
            .iter()
            .map(|(p, _)| arg(*p))
            .collect::<Result<Vec<&[f32]>, _>>()?;
        let ops = Operands {
            x: arg(self.x)?,
            biases: &biases,
            scalars: &scalars,
        };
        relay_linalg::pointwise::pointwise(ctx, &self.program, &ops, out)
    }
}
