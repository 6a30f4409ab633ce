//! The epilogue a host GEMM applies, in the loop nest: the operands of the stage the schedule
//! fused into the GEMM (`analysis::epilogue::StageEpilogue`) addressed from the GEMM's batch
//! loops.

use super::*;
use crate::analysis::epilogue::StageEpilogue;
use crate::loops::GemmEpilogue;
use relay_linalg::gemm::epilogue::MAX_STEPS;

impl StageEpilogue {
    /// The epilogue of a GEMM whose batch loops have `counters` (a local and the strides of
    /// its axis in each step's operand, in step order), its rows and columns `rows` and
    /// `cols` (the strides of their innermost axes).
    pub(super) fn gemm(
        &self,
        counters: &[(LocalId, [i64; MAX_STEPS])],
        rows: &[i64; MAX_STEPS],
        cols: &[i64; MAX_STEPS],
    ) -> GemmEpilogue {
        let steps = self
            .steps
            .iter()
            .enumerate()
            .map(|(q, (kind, x))| {
                let parts = counters.iter().filter(|(_, s)| s[q] != 0).map(|(c, s)| {
                    bin(
                        BinaryOp::Mul,
                        LExpr::Local(*c),
                        LExpr::Int(s[q].into(), DType::I64),
                    )
                });
                let offset = parts.fold(LExpr::Int(x.offset.into(), DType::I64), |a, b| {
                    bin(BinaryOp::Add, a, b)
                });
                let m = MatrixRef {
                    buffer: BufferId(x.input as u32),
                    offset,
                    row_stride: rows[q],
                    col_stride: cols[q],
                };
                (*kind, m)
            })
            .collect();
        GemmEpilogue {
            steps,
            upper: self.upper,
            lower: self.lower,
        }
    }
}
