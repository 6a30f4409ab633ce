//! Epilogues a host contraction applies itself: the elementwise stage that reads a GEMM's or
//! a host depthwise convolution's result only at its own index — a batch norm's multiply
//! and add, a bias, a residual add, `relu` or `clip` — recognized ([`stage_epilogue`]) so
//! that the contraction writes the stage's buffer with the epilogue applied and the stage
//! goes (`schedule::Plan`).

use std::collections::HashMap;

use relay_ir::DType;
use relay_ir::te::{BinaryOp, CmpOp, Tensor};

use super::inline::*;
use super::strides;
use crate::loops::BufferId;
use crate::loops::DepthwiseEpilogue;
use relay_linalg::gemm::epilogue::{Lower, MAX_STEPS, Step};

/// An operand of an epilogue step: kernel input `input` read at flat index `offset +
/// Σ coef[a]·axis_a` over the stage's axes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StepOperand {
    pub(crate) input: usize,
    pub(crate) coef: Vec<i64>,
    pub(crate) offset: i64,
}

/// The epilogue a stage computes from a contraction's result `v`: `lower(upper(steps(v)))`
/// (`relay_linalg::gemm::Epilogue`), its operands kernel inputs of the result's dtype.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StageEpilogue {
    pub(crate) steps: Vec<(Step, StepOperand)>,
    pub(crate) upper: Option<f64>,
    pub(crate) lower: Lower<f64>,
}

/// The epilogue stage `reader` applies to the result in buffer `conv` (of shape `shape`) —
/// for float16 with its arithmetic seen as float16 operations ([`as_float16`]) — when its
/// whole value is `lower(upper(v op₁ x₁ op₂ x₂ …))` — `v` the result
/// at the stage's own index, each `op` a multiply or add (either operand order) with a
/// `float32`/`float64` kernel input `x` read at an index linear in the stage's axes, `upper`
/// `clip`'s `select(hi < v, hi, v)` and `lower` `relu`'s `select(v > lo, v, lo)` or `clip`'s
/// `select(v < lo, lo, v)`, each optional (none: a copy, [`StageEpilogue::is_copy`]).
pub(crate) fn stage_epilogue(
    reader: &Tensor,
    conv: usize,
    shape: &[i64],
    inputs: &[Tensor],
    buffers: &HashMap<usize, usize>,
) -> Option<StageEpilogue> {
    let dtype = reader.dtype;
    if ![DType::F16, DType::F32, DType::F64].contains(&dtype) {
        return None;
    }
    let (_, v) = Inliner::elementwise(reader, inputs, buffers)?;
    let v = match dtype {
        DType::F16 => as_float16(&v)?,
        _ => v,
    };
    let (v, lower) = peel_lower(&v, dtype);
    let (mut v, upper) = match peel_clamp(v, false, dtype) {
        Some((x, hi)) => (x, Some(hi)),
        None => (v, None),
    };
    let operand = |x: &Val| step_operand(x, &reader.shape, inputs, dtype);
    let mut steps = Vec::new();
    while let Val::Binary(op @ (BinaryOp::Mul | BinaryOp::Add), a, b) = v {
        let kind = if *op == BinaryOp::Mul {
            Step::Mul
        } else {
            Step::Add
        };
        let (rest, x) = match (operand(a), operand(b)) {
            (_, Some(x)) => (&**a, x),
            (Some(x), None) => (&**b, x),
            (None, None) => return None,
        };
        steps.push((kind, x));
        v = rest;
    }
    steps.reverse();
    let Val::Load { buffer, dims } = v else {
        return None;
    };
    let (coef, k) = flat(dims, shape, reader.shape.len())?;
    let own = strides(&reader.shape);
    let same = k == 0 && (0..own.len()).all(|a| reader.shape[a] == 1 || coef[a] == own[a]);
    let e = StageEpilogue {
        steps,
        upper,
        lower,
    };
    (*buffer == conv && same && e.steps.len() <= MAX_STEPS).then_some(e)
}

/// A float16 stage's value with its float32 arithmetic folded back into float16 operations:
/// `float16(float32(x) op float32(y))` — an operation computed in float32 and rounded, as
/// SPEC §4 computes a float16 multiply or add — is `x op y` on float16, and a comparison of
/// widened values or of a float32 constant (a widened float16 one) compares float16 values.
/// `None` for anything else (other float32 arithmetic), which then stays a loop.
fn as_float16(v: &Val) -> Option<Val> {
    let b = Box::new;
    Some(match v {
        Val::Cast(DType::F16, inner) => match &**inner {
            Val::Binary(op @ (BinaryOp::Mul | BinaryOp::Add), x, y) => {
                Val::Binary(*op, b(narrowed(x)?), b(narrowed(y)?))
            }
            _ => return None,
        },
        Val::Select(c, x, y) => {
            let Val::Compare(op, l, r) = &**c else {
                return None;
            };
            let c = Val::Compare(*op, b(narrowed(l)?), b(narrowed(r)?));
            Val::Select(b(c), b(as_float16(x)?), b(as_float16(y)?))
        }
        Val::Load { .. } | Val::Float(_, DType::F16) => v.clone(),
        _ => return None,
    })
}

/// A widened float16 value as the float16 one ([`as_float16`]).
fn narrowed(v: &Val) -> Option<Val> {
    match v {
        Val::Cast(DType::F32, x) => as_float16(x),
        &Val::Float(c, DType::F32)
            if f64::from(crate::math::f16_to_f32(crate::math::f64_to_f16(c))) == c =>
        {
            Some(Val::Float(c, DType::F16))
        }
        _ => None,
    }
}

/// The value under a lower clamp (`relu`'s or `clip`'s) and the clamp.
fn peel_lower(v: &Val, dtype: DType) -> (&Val, Lower<f64>) {
    if let Some((x, lo)) = peel_clamp(v, true, dtype) {
        return (x, Lower::Clip(lo));
    }
    // `relu`: select(x > lo, x, lo).
    if let Val::Select(cond, x, bound) = v
        && let (&Val::Float(lo, d), Val::Compare(CmpOp::Gt, l, r)) = (&**bound, &**cond)
        && d == dtype
        && matches!(&**r, &Val::Float(c, e) if e == d && c.to_bits() == lo.to_bits())
        && l == x
    {
        return (&**x, Lower::Relu(lo));
    }
    (v, Lower::None)
}

/// `(x, bound)` for `clip`'s `select(x < lo, lo, x)` (`lower`) or `select(hi < x, hi, x)`.
fn peel_clamp(v: &Val, lower: bool, dtype: DType) -> Option<(&Val, f64)> {
    let Val::Select(cond, bound, x) = v else {
        return None;
    };
    let (&Val::Float(c, d), Val::Compare(CmpOp::Lt, l, r)) = (&**bound, &**cond) else {
        return None;
    };
    let (other, y) = if lower { (&**r, &**l) } else { (&**l, &**r) };
    let same_bound = matches!(other, &Val::Float(b, e) if e == d && b.to_bits() == c.to_bits());
    (d == dtype && same_bound && y == &**x).then_some((&**x, c))
}

/// The operand `v` is: a load of a kernel input of `dtype` at an index linear in the axes of
/// `shape`.
fn step_operand(v: &Val, shape: &[i64], inputs: &[Tensor], dtype: DType) -> Option<StepOperand> {
    let Val::Load { buffer, dims } = v else {
        return None;
    };
    let input = inputs.get(*buffer)?;
    if input.dtype != dtype {
        return None;
    }
    let (coef, offset) = flat(dims, &input.shape, shape.len())?;
    Some(StepOperand {
        input: *buffer,
        coef,
        offset,
    })
}

/// The flat index (row-major in `shape`) of a load at `dims`, as coefficients of the `rank`
/// output axes and a constant.
fn flat(dims: &[Ix], shape: &[i64], rank: usize) -> Option<(Vec<i64>, i64)> {
    if dims.len() != shape.len() {
        return None;
    }
    let st = strides(shape);
    let mut coef = vec![0i64; rank];
    let mut k = 0i64;
    let mut d = 0;
    while d < dims.len() {
        // `x / m` then `x % m` along an axis of extent `m` (a group's channel split, `[N, G·O,
        // H, W]` read as `[N, G, O, H, W]`) is `x` along the inner axis.
        let (ix, s, used) = match split_pair(&dims[d..]) {
            Some((x, m)) if shape[d + 1] == m => (x, st[d + 1], 2),
            _ => (&dims[d], st[d], 1),
        };
        let (c, v) = linear(ix, rank)?;
        for (a, ca) in coef.iter_mut().zip(c) {
            *a = a.checked_add(ca.checked_mul(s)?)?;
        }
        k = k.checked_add(v.checked_mul(s)?)?;
        d += used;
    }
    Some((coef, k))
}

/// `(x, m)` when `dims` starts with `x / m` and `x % m` (indices are not negative: floor and
/// truncating division agree).
fn split_pair(dims: &[Ix]) -> Option<(&Ix, i64)> {
    let [Ix::Bin(div, x, m), Ix::Bin(rem, y, n), ..] = dims else {
        return None;
    };
    let (&Ix::Const(m), &Ix::Const(n)) = (&**m, &**n) else {
        return None;
    };
    let ops = matches!(div, BinaryOp::Div | BinaryOp::FloorDiv)
        && matches!(rem, BinaryOp::Mod | BinaryOp::FloorMod);
    (ops && x == y && m == n && m > 0).then_some((&**x, m))
}

impl StageEpilogue {
    /// The epilogue with its operands' indices over the axes of `shape` instead of the
    /// reader's `reader` (the same elements in the same row-major order, for instance a
    /// convolution's `[N, G, O, H, W]` read as `[N, G·O, H, W]`): each axis of `shape` must
    /// lie within one axis of `reader`, so that a step along it is a step along that axis.
    pub(crate) fn on_shape(&self, reader: &[i64], shape: &[i64]) -> Option<StageEpilogue> {
        let (rs, cs) = (strides(reader), strides(shape));
        // For each axis of `shape`: the reader axis it lies in and the steps along it.
        let mut within = Vec::with_capacity(shape.len());
        for (b, &n) in shape.iter().enumerate() {
            if n == 1 {
                within.push(None);
                continue;
            }
            let (step, end) = (cs[b], cs[b].checked_mul(n)?);
            let a = (0..reader.len()).find(|&a| {
                step % rs[a] == 0 && step >= rs[a] && end <= rs[a].saturating_mul(reader[a])
            })?;
            within.push(Some((a, step / rs[a])));
        }
        let steps = self
            .steps
            .iter()
            .map(|(kind, x)| {
                let coef = within
                    .iter()
                    .map(|w| w.map_or(Some(0), |(a, k)| x.coef[a].checked_mul(k)))
                    .collect::<Option<Vec<i64>>>()?;
                Some((*kind, StepOperand { coef, ..x.clone() }))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(StageEpilogue {
            steps,
            ..self.clone()
        })
    }

    /// The epilogue as a host depthwise convolution applies it (NCHW `shape`): a
    /// per-channel multiply, then a per-channel add, then `clip`, each optional.
    /// Whether the stage only copies the result (a reshape): nothing for a GEMM to apply.
    pub(crate) fn is_copy(&self) -> bool {
        self.steps.is_empty() && self.upper.is_none() && self.lower == Lower::None
    }

    pub(crate) fn depthwise(&self, shape: &[i64]) -> Option<DepthwiseEpilogue> {
        if self.steps.len() > 2 || shape.len() != 4 || matches!(self.lower, Lower::Relu(_)) {
            return None;
        }
        let unit = i64::from(shape[1] > 1);
        let channel = |x: &StepOperand| {
            (x.coef == [0, unit, 0, 0]).then_some((BufferId(x.input as u32), x.offset))
        };
        let mut e = DepthwiseEpilogue::NONE;
        let mut kinds = Vec::new();
        for (kind, x) in &self.steps {
            let slot = match kind {
                Step::Mul => &mut e.scale,
                Step::Add => &mut e.shift,
            };
            *slot = Some(channel(x)?);
            kinds.push(*kind);
        }
        if !matches!(kinds.as_slice(), [] | [_] | [Step::Mul, Step::Add]) {
            return None;
        }
        e.hi = self.upper.map_or(f32::INFINITY, |h| h as f32);
        e.lo = match self.lower {
            Lower::Clip(lo) => lo as f32,
            _ => f32::NEG_INFINITY,
        };
        Some(e)
    }
}
