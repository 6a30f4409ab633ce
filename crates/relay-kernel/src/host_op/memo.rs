//! The memo of a host operator's kernel: what it derived from the last few input shapes. A
//! warm call at a shape seen before reads it instead of running the operator's relations
//! again — which allocate types and read attributes by name, and were a fifth of a small
//! attention's call: the output shapes (TVM's shape function) and, for a copy, its strided
//! moves, for an attention, its sizes. Operators whose shapes depend on values are never
//! memoized.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use super::HostOp;
use super::attention::{AttentionOp, Plan};
use super::copy::{CopyOp, Move};
use crate::abi::KernelSpec;

/// How many input shapes a memo keeps (the most recent).
const ENTRIES: usize = 16;

/// What a host kernel derived from its input shapes.
#[derive(Debug, Default)]
pub(crate) struct ShapeMemo {
    shapes: Memo<Arc<[Vec<i64>]>>,
    moves: Memo<Arc<[Move]>>,
    plans: Memo<Arc<Plan>>,
}

impl ShapeMemo {
    /// [`HostOp::output_shapes`], from the memo when these input shapes were seen lately.
    pub(crate) fn output_shapes(
        &self,
        op: &HostOp,
        spec: &KernelSpec,
        inputs: &[&[i64]],
        bytes: &[&[u8]],
    ) -> Result<Arc<[Vec<i64>]>, String> {
        let compute = || {
            let out = match op {
                // An attention's output shape comes with its plan, which its run reads next.
                HostOp::Attention(a) => {
                    HostOp::declared(spec, inputs, vec![self.plan(a, inputs)?.out.clone()])
                }
                _ => op.output_shapes(spec, inputs, bytes),
            };
            out.map(Arc::from)
        };
        if op.reads_values() {
            return compute();
        }
        self.shapes.get_or(inputs, compute)
    }

    /// The moves of copy `op` from inputs of shapes `inputs` into outputs of shapes `outs`
    /// (those the inputs' give), from the memo unless an integer scalar argument (a `take`'s
    /// index among `scalars`) takes part.
    pub(crate) fn moves(
        &self,
        op: &CopyOp,
        inputs: &[&[i64]],
        outs: &[&[i64]],
        scalars: &[Option<i128>],
    ) -> Result<Arc<[Move]>, String> {
        let compute = || op.moves(inputs, outs, scalars).map(Arc::from);
        if scalars.iter().any(Option::is_some) {
            return compute();
        }
        self.moves.get_or(inputs, compute)
    }
}

impl ShapeMemo {
    /// The sizes of attention `op` for inputs of shapes `inputs`.
    pub(crate) fn plan(&self, op: &AttentionOp, inputs: &[&[i64]]) -> Result<Arc<Plan>, String> {
        self.plans.get_or(inputs, || op.plan(inputs).map(Arc::new))
    }
}

/// Values keyed by input shapes (each rank, then its extents, flattened, with their
/// [`digest`] compared first), the most recent first.
#[derive(Debug)]
struct Memo<V>(Mutex<VecDeque<(u64, Vec<i64>, V)>>);

impl<V> Default for Memo<V> {
    fn default() -> Self {
        Memo(Mutex::default())
    }
}

impl<V: Clone> Memo<V> {
    /// The value for `inputs`, from the memo or else by `compute` (then kept).
    fn get_or(
        &self,
        inputs: &[&[i64]],
        compute: impl FnOnce() -> Result<V, String>,
    ) -> Result<V, String> {
        let hash = digest(inputs);
        let memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let found = memo
            .iter()
            .find(|(h, key, _)| *h == hash && same(key, inputs));
        if let Some((_, _, v)) = found {
            return Ok(v.clone());
        }
        drop(memo);
        let v = compute()?;
        let key = inputs
            .iter()
            .flat_map(|s| std::iter::once(s.len() as i64).chain(s.iter().copied()))
            .collect();
        let mut memo = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if memo.len() == ENTRIES {
            memo.pop_back();
        }
        memo.push_front((hash, key, v.clone()));
        Ok(v)
    }
}

/// A hash of the shapes `inputs` (FxHash's multiply-rotate over each rank and extent), so
/// that a lookup at a new shape compares one word per entry.
fn digest(inputs: &[&[i64]]) -> u64 {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let mix = |h: u64, v: i64| (h.rotate_left(5) ^ v as u64).wrapping_mul(SEED);
    inputs.iter().fold(0, |h, s| {
        s.iter().fold(mix(h, s.len() as i64), |h, &d| mix(h, d))
    })
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
