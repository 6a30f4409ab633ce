//! The masked softmax of an attention as PyTorch exports `scaled_dot_product_attention` to
//! ONNX, on [`relay_linalg::softmax::softmax_with`] (one pass over memory, the mask read per
//! row) where a loop nest took nine nanoseconds an element:
//!
//! ```text
//! where(isnan(y), c, y)   where y = nn.softmax(add(x', bias), axis=-1)
//! ```
//!
//! `x'` is the first parameter `x`, or `x` multiplied or divided by a one-element `float32`
//! (the scaling); `bias` is a `float32` parameter, or `where(mask, keep, drop)` of a boolean
//! parameter and two one-element `float32`s, broadcast to `x` over the rows (its last
//! dimension is the row's); the NaN guard (`where(isnan(y), c, y)`, what a row masked whole
//! gives) is optional, and so is the scaling. Every one-element operand is a constant or a
//! parameter, read at run time. Any shape: the rows, the columns and the bias's broadcast are
//! read from the arguments.

use std::collections::HashSet;

use relay_ir::{Binding, DType, Expr, ExprKind, Function, VarId};
use relay_linalg::KernelContext;
use relay_linalg::softmax::{Bias, BiasValues, Extras, Prologue, Softmax};
use relay_ops::support::attr_int;

use super::softmax::tensor_dims as tensor;

/// A masked softmax the kernel library computes (see the module's documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct MaskedSoftmax {
    /// `nn.log_softmax` rather than `nn.softmax`.
    pub log: bool,
    /// The data's parameter.
    pub data: usize,
    /// The scaling's factor, and whether it divides.
    pub scale: Option<(Operand, bool)>,
    /// The bias's parameter.
    pub bias: usize,
    /// For a boolean mask, the values added where it is set and where it is not.
    pub mask: Option<(Operand, Operand)>,
    /// What replaces a NaN result.
    pub nan_to: Option<Operand>,
}

/// A one-element `float32` operand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand {
    /// A constant of the primitive.
    Constant(f32),
    /// The one element of parameter `i`.
    Param(usize),
}

/// The expressions of a primitive's body, its let-bound variables looked through, with the
/// bindings followed recorded.
struct Body<'a> {
    func: &'a Function,
    bindings: &'a [Binding],
    followed: HashSet<VarId>,
}

impl<'a> Body<'a> {
    /// `e`, or the value its variable is bound to.
    fn resolve(&mut self, e: &'a Expr) -> &'a Expr {
        let mut e = e;
        while let ExprKind::Var(v) = e.kind() {
            match self.bindings.iter().find(|b| b.var.id() == v.id()) {
                Some(b) => {
                    self.followed.insert(v.id());
                    e = &b.value;
                }
                None => break,
            }
        }
        e
    }

    /// The parameter `e` is, with its type.
    fn param(&mut self, e: &'a Expr) -> Option<(usize, &'a relay_ir::Type)> {
        let ExprKind::Var(v) = self.resolve(e).kind() else {
            return None;
        };
        let i = self.func.params.iter().position(|p| p.id() == v.id())?;
        let p = &self.func.params[i];
        Some((i, p.checked_type().or(p.ty())?))
    }

    /// `e` as a one-element `float32` operand.
    fn operand(&mut self, e: &'a Expr) -> Option<Operand> {
        let e = self.resolve(e);
        if let Some(v) = super::scalar_constant(e) {
            return Some(Operand::Constant(v));
        }
        let (i, ty) = self.param(e)?;
        let (dtype, dims) = tensor(ty)?;
        (dtype == DType::F32 && dims.iter().all(|d| *d == Some(1))).then_some(Operand::Param(i))
    }

    /// `e` as `op(args)`.
    fn call(&mut self, e: &'a Expr, op: &str) -> Option<&'a [Expr]> {
        let (o, args, _) = self.resolve(e).op_call()?;
        (o.name == op).then_some(args)
    }
}

/// The masked softmax `func` computes, when it is one.
pub(super) fn recognize(
    func: &Function,
    bindings: &[Binding],
    body: &Expr,
) -> Option<MaskedSoftmax> {
    let mut b = Body {
        func,
        bindings,
        followed: HashSet::new(),
    };
    // The NaN guard: `where(isnan(y), c, y)`.
    let (softmax, nan_to) = match b.call(body, "where") {
        Some([cond, c, y]) => {
            let [guarded] = b.call(cond, "isnan")? else {
                return None;
            };
            let same = matches!((guarded.kind(), y.kind()),
                (ExprKind::Var(u), ExprKind::Var(v)) if u.id() == v.id());
            (same.then_some(y)?, Some(b.operand(c)?))
        }
        _ => (body, None),
    };
    let (op, args, attrs) = b.resolve(softmax).op_call()?;
    let log = match op.name {
        "nn.softmax" => false,
        "nn.log_softmax" => true,
        _ => return None,
    };
    let [input] = args else { return None };
    let rank = tensor(input.checked_type()?)?.1.len() as i64;
    let axis = attr_int(attrs, "axis").ok()?;
    if axis != rank - 1 && axis != -1 {
        return None;
    }
    let [u, v] = b.call(input, "add")? else {
        return None;
    };
    // The data is the operand of the sum's type (the bias broadcasts to it).
    let sum = tensor(b.resolve(input).checked_type()?)?;
    let (data, scale, bias, mask) = [(u, v), (v, u)].into_iter().find_map(|(d, m)| {
        let mut trial = Body {
            func,
            bindings,
            followed: b.followed.clone(),
        };
        let (data, scale) = data_path(&mut trial, d)?;
        let p = &func.params[data];
        if tensor(p.checked_type().or(p.ty())?)? != sum {
            return None;
        }
        let (bias, mask) = bias_path(&mut trial, m)?;
        b.followed = trial.followed;
        Some((data, scale, bias, mask))
    })?;
    let op = MaskedSoftmax {
        log,
        data,
        scale,
        bias,
        mask,
        nan_to,
    };
    let used = op.params();
    let all_used = (0..func.params.len()).all(|i| used.contains(&i));
    (all_used && b.followed.len() == bindings.len()).then_some(op)
}

/// The data of a softmax's input: a `float32` parameter, possibly scaled.
fn data_path<'a>(b: &mut Body<'a>, e: &'a Expr) -> Option<(usize, Option<(Operand, bool)>)> {
    for (op, divide) in [("multiply", false), ("divide", true)] {
        if let Some([x, k]) = b.call(e, op) {
            let (x, k) = (x, k);
            let scale = b.operand(k)?;
            let (data, ty) = b.param(x)?;
            return (tensor(ty)?.0 == DType::F32).then_some((data, Some((scale, divide))));
        }
    }
    let (data, ty) = b.param(e)?;
    (tensor(ty)?.0 == DType::F32).then_some((data, None))
}

/// The bias of a softmax's input: a `float32` parameter, or `where(mask, keep, drop)` of a
/// boolean one.
fn bias_path<'a>(b: &mut Body<'a>, e: &'a Expr) -> Option<(usize, Option<(Operand, Operand)>)> {
    if let Some([mask, keep, drop]) = b.call(e, "where") {
        let (mask, ty) = b.param(mask)?;
        if tensor(ty)?.0 != DType::BOOL {
            return None;
        }
        return Some((mask, Some((b.operand(keep)?, b.operand(drop)?))));
    }
    let (bias, ty) = b.param(e)?;
    (tensor(ty)?.0 == DType::F32).then_some((bias, None))
}

impl MaskedSoftmax {
    /// The parameters it reads.
    fn params(&self) -> Vec<usize> {
        let mut ps = vec![self.data, self.bias];
        let mut operand = |o: Option<Operand>| {
            if let Some(Operand::Param(i)) = o {
                ps.push(i);
            }
        };
        operand(self.scale.map(|s| s.0));
        operand(self.mask.map(|m| m.0));
        operand(self.mask.map(|m| m.1));
        operand(self.nan_to);
        ps
    }

    /// Whether the bias is a boolean mask (its argument is read as bytes).
    pub(super) fn has_mask(&self) -> bool {
        self.mask.is_some()
    }

    /// The bias's argument.
    pub(super) fn bias_arg(&self) -> usize {
        self.bias
    }

    /// The result's shape (the data's), the bias checked to broadcast over its rows.
    pub(super) fn output_shapes(&self, inputs: &[&[i64]]) -> Result<Vec<Vec<i64>>, String> {
        let data = *inputs.get(self.data).ok_or("no data")?;
        let bias = *inputs.get(self.bias).ok_or("no bias")?;
        self.row_strides(data, bias)?;
        for o in [
            self.scale.map(|s| s.0),
            self.mask.map(|m| m.0),
            self.mask.map(|m| m.1),
        ]
        .into_iter()
        .chain([self.nan_to])
        {
            if let Some(Operand::Param(i)) = o
                && inputs.get(i).is_none_or(|s| s.iter().product::<i64>() != 1)
            {
                return Err(format!("argument {i} must have one element"));
            }
        }
        Ok(vec![data.to_vec()])
    }

    /// The data's row dimensions and, per row dimension, the bias's step in rows (0 where it
    /// broadcasts); an error unless the bias's last dimension is the row's and its others
    /// broadcast to the data's.
    fn row_strides(&self, data: &[i64], bias: &[i64]) -> Result<(Vec<usize>, Vec<usize>), String> {
        let bad = || format!("a bias of shape {bias:?} for data of shape {data:?}");
        let (&cols, rows) = data.split_last().ok_or_else(bad)?;
        if bias.len() > data.len() || bias.last() != Some(&cols) {
            return Err(bad());
        }
        let lead = data.len() - bias.len();
        let dims: Vec<usize> = rows.iter().map(|&d| d.max(0) as usize).collect();
        let mut strides = vec![0usize; dims.len()];
        let mut step = 1usize;
        for k in (0..dims.len()).rev() {
            let Some(j) = k.checked_sub(lead) else { break };
            match bias[j] {
                1 => {}
                d if d as usize == dims[k] => {
                    strides[k] = step;
                    step = step.checked_mul(dims[k]).ok_or_else(bad)?;
                }
                _ => return Err(bad()),
            }
        }
        Ok((dims, strides))
    }

    /// Runs it on `args` (`float32` arguments as floats, the mask as `mask` bytes; the output
    /// last) of shapes `shapes`.
    pub(super) fn run(
        &self,
        ctx: &KernelContext,
        args: &mut [&mut [f32]],
        mask: Option<&[u8]>,
        shapes: &[&[i64]],
    ) -> Result<(), String> {
        let (y, inputs) = args.split_last_mut().ok_or("no output")?;
        let data = *shapes.get(self.data).ok_or("no data")?;
        let bias = *shapes.get(self.bias).ok_or("no bias")?;
        let (dims, strides) = self.row_strides(data, bias)?;
        let value = |o: Operand| -> Result<f32, String> {
            match o {
                Operand::Constant(v) => Ok(v),
                Operand::Param(i) => inputs
                    .get(i)
                    .and_then(|a| a.first())
                    .copied()
                    .ok_or_else(|| format!("no argument {i}")),
            }
        };
        let prologue = match self.scale {
            Some((k, divide)) => Prologue::scale(value(k)?, divide),
            None => Prologue::None,
        };
        let values = match (self.mask, mask) {
            (Some((keep, drop)), Some(mask)) => BiasValues::Mask {
                mask,
                keep: value(keep)?,
                drop: value(drop)?,
            },
            (None, _) => BiasValues::Add(inputs.get(self.bias).ok_or("no bias")?),
            (Some(_), None) => return Err("no mask".into()),
        };
        let extras = Extras {
            bias: Some(Bias {
                values,
                dims,
                strides,
            }),
            nan_to: self.nan_to.map(value).transpose()?,
        };
        let cols = data.last().copied().unwrap_or(1).max(1) as usize;
        let s = Softmax {
            rows: y.len() / cols,
            cols,
            prologue,
            log: self.log,
        };
        let x = inputs.get(self.data).ok_or("no data")?;
        relay_linalg::softmax::softmax_with(ctx, &s, &extras, x, y)
    }
}
