//! The shape memo of a host operator's kernel: the output shapes its shape function gave for
//! the last few input shapes. A warm call at a shape seen before reads them instead of running
//! the operator's relations again — which allocate types and read attributes, and were a fifth
//! of a small attention's call. Operators whose shapes depend on values are never memoized.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use super::HostOp;
use crate::abi::KernelSpec;

/// How many input shapes a memo keeps (the most recent).
const ENTRIES: usize = 4;

/// Input shapes (each rank, then its extents, flattened) and their output shapes.
type Entry = (Vec<i64>, Vec<Vec<i64>>);

/// See the module's documentation.
#[derive(Debug, Default)]
pub(crate) struct ShapeMemo(Mutex<VecDeque<Entry>>);

impl ShapeMemo {
    /// [`HostOp::output_shapes`], from the memo when these input shapes were seen lately.
    pub(crate) fn output_shapes(
        &self,
        op: &HostOp,
        spec: &KernelSpec,
        inputs: &[&[i64]],
        bytes: &[&[u8]],
    ) -> Result<Vec<Vec<i64>>, String> {
        if op.reads_values() {
            return op.output_shapes(spec, inputs, bytes);
        }
        let memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, out)) = memo.iter().find(|(key, _)| same(key, inputs)) {
            return Ok(out.clone());
        }
        drop(memo);
        let out = op.output_shapes(spec, inputs, bytes)?;
        let key = inputs
            .iter()
            .flat_map(|s| std::iter::once(s.len() as i64).chain(s.iter().copied()))
            .collect();
        let mut memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if memo.len() == ENTRIES {
            memo.pop_back();
        }
        memo.push_front((key, out.clone()));
        Ok(out)
    }
}

/// Whether flattened `key` holds exactly the shapes `inputs`.
fn same(key: &[i64], inputs: &[&[i64]]) -> bool {
    let mut at = 0usize;
    for s in inputs {
        let Some(&rank) = key.get(at) else {
            return false;
        };
        let dims = key.get(at + 1..at + 1 + s.len());
        if rank != s.len() as i64 || dims != Some(s) {
            return false;
        }
        at += 1 + s.len();
    }
    at == key.len()
}
