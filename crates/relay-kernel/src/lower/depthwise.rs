//! Depthwise convolutions computed by the host (`relay_linalg::depthwise`): a contraction the
//! schedule gives to the host (recognized by `analysis::views::host_depthwise`) lowered to one
//! [`Stmt::Depthwise`] writing the contraction's buffer.

use super::*;
use crate::loops::Depthwise;

impl Nest<'_> {
    /// The statement computing depthwise convolution `d` into buffer `id`, `epilogue` applied.
    pub(super) fn depthwise(
        &mut self,
        id: BufferId,
        d: &HostDepthwise,
        epilogue: crate::loops::DepthwiseEpilogue,
    ) -> Stmt {
        let buffer = |(b, o): (usize, i64)| (BufferId(b as u32), o);
        Stmt::Depthwise(Box::new(Depthwise {
            params: d.params,
            data: buffer(d.data),
            weight: buffer(d.weight),
            out: (id, 0),
            epilogue,
        }))
    }
}
