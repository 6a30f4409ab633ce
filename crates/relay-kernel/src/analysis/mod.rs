//! The analyses the schedule and lowering share, below both: a tensor's identity ([`key`]),
//! row-major strides, the inlining of tensor expressions into one scalar expression over an
//! output's axes with its index algebra ([`inline`]), whether a loop body can run vector lanes
//! ([`lanes`]), and the recognizers of what a host
//! routine computes ([`views`]). They decide nothing: the schedule decides with them
//! (`crate::schedule`), lowering builds the loop nest with them (`crate::lower`).

pub(crate) mod epilogue;
pub(crate) mod inline;
pub(crate) mod lanes;
pub(crate) mod views;

use relay_ir::te::Tensor;

/// The address of a tensor node, its identity.
pub(crate) fn key(t: &Tensor) -> usize {
    std::ptr::from_ref::<relay_ir::te::TensorNode>(t) as usize
}

/// Row-major strides of a shape.
pub(crate) fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1].saturating_mul(shape[d + 1]);
    }
    s
}
