//! Contractions: computes of the form `out[o...] = sum_{r...} a[ia] * b[ib]` (`nn.dense`,
//! `nn.matmul`, `nn.batch_matmul`, the core of `nn.conv2d`), which lowering turns into calls
//! of the host's tuned GEMM instead of loops (docs/design.md §7.3).
//!
//! A compute is a contraction when its body is a `Sum` reduction, in `float16`, `float32` or
//! `float64`, of the product of two reads of tensors of that dtype, each read indexed by bare
//! output axes, bare reduction axes and constants, with every reduction axis read once by each
//! operand and no axis read twice by one operand (a `float16` contraction is computed in
//! `float32` and rounded once, which is exact for its products). Lowering then views each operand as a matrix (row and
//! column strides over the groups of axes it reads) and loops over the axes left over
//! (`batch_matmul`'s batch, or axes whose strides do not merge).

use relay_ir::DType;
use relay_ir::te::{BinaryOp, ReduceOp, TExpr, TExprKind, Tensor, TensorOp};

/// What one index of an operand read is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Index {
    /// Output axis `k`.
    Out(usize),
    /// Reduction axis `j`.
    Red(usize),
    /// A constant.
    Const(i64),
}

/// A recognized contraction.
#[derive(Clone, Debug)]
pub struct Contraction {
    /// The left operand and its indices.
    pub a: (Tensor, Vec<Index>),
    /// The right operand and its indices.
    pub b: (Tensor, Vec<Index>),
    /// The extents of the reduction axes.
    pub red_extents: Vec<i64>,
}

/// The contraction `t` computes, if it is one.
pub fn contraction(t: &Tensor) -> Option<Contraction> {
    let TensorOp::Compute { axes, body } = &t.op else {
        return None;
    };
    if ![DType::F16, DType::F32, DType::F64].contains(&t.dtype) {
        return None;
    }
    let TExprKind::Reduce {
        op: ReduceOp::Sum,
        axes: red,
        body,
    } = body.kind()
    else {
        return None;
    };
    let TExprKind::Binary(BinaryOp::Mul, x, y) = body.kind() else {
        return None;
    };
    let operand = |e: &TExpr| -> Option<(Tensor, Vec<Index>)> {
        let TExprKind::Read { tensor, indices } = e.kind() else {
            return None;
        };
        if tensor.dtype != t.dtype || indices.len() != tensor.shape.len() {
            return None;
        }
        let mut out = Vec::with_capacity(indices.len());
        for (ix, &extent) in indices.iter().zip(&tensor.shape) {
            out.push(match ix.kind() {
                TExprKind::Var(v) => {
                    if let Some(k) = axes.iter().position(|a| a.id == v.id) {
                        if axes[k].extent != extent && axes[k].extent != 1 {
                            return None;
                        }
                        Index::Out(k)
                    } else {
                        let j = red.iter().position(|a| a.id == v.id)?;
                        if red[j].extent != extent {
                            return None;
                        }
                        Index::Red(j)
                    }
                }
                TExprKind::Int(c) => {
                    let c = i64::try_from(*c).ok()?;
                    if !(0..extent).contains(&c) {
                        return None;
                    }
                    Index::Const(c)
                }
                _ => return None,
            });
        }
        // No axis read twice by one operand.
        for (i, p) in out.iter().enumerate() {
            if !matches!(p, Index::Const(_)) && out[..i].contains(p) {
                return None;
            }
        }
        Some((tensor.clone(), out))
    };
    let (a, b) = (operand(x)?, operand(y)?);
    // Every reduction axis is read by both operands.
    for j in 0..red.len() {
        if !a.1.contains(&Index::Red(j)) || !b.1.contains(&Index::Red(j)) {
            return None;
        }
    }
    Some(Contraction {
        a,
        b,
        red_extents: red.iter().map(|r| r.extent).collect(),
    })
}
