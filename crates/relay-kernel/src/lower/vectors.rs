//! Lowering's last step: every loop the schedule asked to run lanes at once
//! (`schedule::loop_kind`) whose finished body cannot ([`vector_legal`]: after inlining,
//! partitioning, operand reuse and scratch aliasing) runs one iteration at a time.

use crate::analysis::lanes::vector_legal;
use crate::loops::{ForKind, Stmt};

/// Runs every vectorized loop of `s` whose body is not [`vector_legal`] one iteration at a
/// time (a parallel one keeps its threads with one lane).
pub(super) fn legalize_vectors(s: &mut Stmt) {
    match s {
        Stmt::Seq(items) => items.iter_mut().for_each(legalize_vectors),
        Stmt::For {
            var, kind, body, ..
        }
        | Stmt::Range {
            var, kind, body, ..
        } => {
            legalize_vectors(body);
            let vectorized = matches!(kind, ForKind::Vectorized { .. })
                || matches!(kind, ForKind::Parallel { lanes } if *lanes > 1);
            if vectorized && !vector_legal(*var, body) {
                *kind = match kind {
                    ForKind::Parallel { .. } => ForKind::Parallel { lanes: 1 },
                    _ => ForKind::Serial,
                };
            }
        }
        Stmt::Store { .. } | Stmt::Assign { .. } | Stmt::Gemm(_) | Stmt::Depthwise(_) => {}
    }
}
