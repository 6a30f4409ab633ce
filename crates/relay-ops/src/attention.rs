//! The attention pattern: a product (`nn.batch_matmul`, `nn.dense` or `nn.matmul`: the
//! scores), views (`reshape`, `reshape_like`), at most one scaling by a one-element `float32`
//! constant, `nn.softmax` over the last axis, views, a product of that by the values (any of
//! the three), then views of the result, `float32` throughout; an `nn.matmul` or a second
//! `nn.batch_matmul` does not transpose its first operand. `fuse_ops` groups such a chain into
//! one primitive function and the kernel library computes it in cache; both walk it with
//! [`step`].

use relay_ir::{DType, Expr, TypeKind};

use crate::support::{attr_bool, scalar_f32_constant};

/// Where a walk along an attention is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// After the first product.
    Scores,
    /// After the scaling.
    Scaled,
    /// After the softmax.
    Probabilities,
    /// After the second product (views of it may follow).
    Context,
}

/// What a call of an attention does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A view: its elements in the same order, another shape.
    View,
    /// The scaling by a constant.
    Scale,
    /// The softmax.
    Softmax,
    /// The product by the values.
    Product,
}

/// Whether `e` can start an attention: a `float32` `nn.batch_matmul`, `nn.dense`, or
/// `nn.matmul` that does not transpose its first operand.
pub fn is_first(e: &Expr) -> bool {
    let product = match e.op_call() {
        Some((op, _, attrs)) => match op.name {
            "nn.batch_matmul" | "nn.dense" => true,
            "nn.matmul" => attr_bool(attrs, "transpose_a").ok() == Some(false),
            _ => false,
        },
        None => false,
    };
    product && is_f32(e)
}

/// The role of call `e` when the chain, at `stage`, enters it by argument `operand`, and the
/// stage after it; `None` when `e` does not continue an attention there.
pub fn step(stage: Stage, e: &Expr, operand: usize) -> Option<(Role, Stage)> {
    let (op, args, attrs) = e.op_call()?;
    if !is_f32(e) {
        return None;
    }
    let constant = |i: usize| args.get(i).and_then(scalar_f32_constant).is_some();
    match (stage, op.name, operand) {
        (_, "reshape" | "reshape_like", 0) => Some((Role::View, stage)),
        (Stage::Scores, "multiply" | "divide", 0) if constant(1) => {
            Some((Role::Scale, Stage::Scaled))
        }
        (Stage::Scores, "multiply", 1) if constant(0) => Some((Role::Scale, Stage::Scaled)),
        (Stage::Scores | Stage::Scaled, "nn.softmax", 0) if last_axis(e, attrs) => {
            Some((Role::Softmax, Stage::Probabilities))
        }
        (Stage::Probabilities, "nn.batch_matmul" | "nn.matmul", 0)
            if attr_bool(attrs, "transpose_a").ok() == Some(false) =>
        {
            Some((Role::Product, Stage::Context))
        }
        (Stage::Probabilities, "nn.dense", 0) => Some((Role::Product, Stage::Context)),
        _ => None,
    }
}

/// Whether `e`'s checked type is a `float32` tensor.
fn is_f32(e: &Expr) -> bool {
    e.checked_type()
        .is_some_and(|t| matches!(t.kind(), TypeKind::Tensor { dtype, .. } if *dtype == DType::F32))
}

/// Whether softmax call `e` with `attrs` normalizes its last axis.
fn last_axis(e: &Expr, attrs: &relay_ir::Attrs) -> bool {
    let rank = match e.checked_type().map(|t| t.kind()) {
        Some(TypeKind::Tensor { shape, .. }) => shape.len() as i64,
        _ => return false,
    };
    let axis = attrs.get("axis").and_then(|v| v.as_int()).unwrap_or(-1);
    rank > 0 && (axis == -1 || axis == rank - 1)
}
