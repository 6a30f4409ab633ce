//! The plan of one kernel: which tensors are computed into buffers and which buffer each one
//! has, the stages in dependency order, and how each stage computes its tensor — by the host
//! depthwise convolution, by a host GEMM (with the epilogue of the stage reading it, fused
//! away), or as loops. The schedule makes it ([`Plan::new`]); lowering carries it out
//! (`crate::lower`), and asks for a revised plan when it meets a reduction it cannot inline
//! ([`Plan::materializing`]).

use std::collections::{HashMap, HashSet};

use relay_ir::DType;
use relay_ir::te::{Tensor, TensorOp};

use super::{uses_gemm, uses_host_depthwise};
use crate::analysis::epilogue::{StageEpilogue, stage_epilogue};
use crate::analysis::key;
use crate::analysis::views::{HostDepthwise, conv_window, input_view};
use crate::compose::Composed;
use crate::contract::{Contraction, contraction};
use crate::loops::{BufferId, DepthwiseEpilogue};

/// The most tensors a plan materializes: past it a kernel is unschedulable.
const MAX_MATERIALIZED: usize = 256;

/// What the schedule decided for one kernel, which lowering carries out. The kernel's buffers
/// are its inputs, then its outputs, then one scratch buffer per [`Plan::scratch`] tensor.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// The tensors computed into a buffer before their readers run, besides the outputs.
    pub(crate) materialized: Vec<Tensor>,
    /// The buffer of each materialized tensor, by [`key`] (an output's when it is one).
    pub(crate) buffers: HashMap<usize, usize>,
    /// The materialized tensors that are not outputs, in the order of their scratch buffers.
    pub(crate) scratch: Vec<Tensor>,
    /// The stages in dependency order (a stage fused into a host contraction has none).
    pub(crate) stages: Vec<PlannedStage>,
}

/// One stage of a [`Plan`]: a tensor, the buffer it is stored to and how it is computed.
#[derive(Clone, Debug)]
pub(crate) struct PlannedStage {
    /// The buffer written: the tensor's own, or for a contraction that applies the epilogue of
    /// its one reader, the reader's.
    pub(crate) buffer: BufferId,
    /// The tensor computed.
    pub(crate) tensor: Tensor,
    /// How.
    pub(crate) compute: Compute,
}

/// How a stage computes its tensor.
#[derive(Clone, Debug)]
pub(crate) enum Compute {
    /// One call of the host depthwise convolution, applying the epilogue (possibly none).
    HostDepthwise(HostDepthwise, DepthwiseEpilogue),
    /// A host GEMM call per iteration of the contraction's other axes, applying the epilogue
    /// of the stage it absorbed, if any.
    Gemm(Contraction, Option<StageEpilogue>),
    /// A loop nest.
    Loops,
}

/// Why no plan could be made.
#[derive(Clone, Debug)]
pub(crate) enum PlanError {
    /// The kernel is malformed (an input that is not its placeholder, stages in a cycle).
    Malformed(String),
    /// A tensor lowering asked to materialize again, or one too many.
    Unschedulable(Tensor),
}

impl Plan {
    /// The plan of `composed` with the tensors of [`super::materialized`] in buffers.
    pub(crate) fn of(composed: &Composed) -> Result<Plan, PlanError> {
        Plan::new(composed, super::materialized(composed))
    }

    /// The plan of `composed` with `materialized` (and the outputs) computed into buffers.
    pub(crate) fn new(composed: &Composed, materialized: Vec<Tensor>) -> Result<Plan, PlanError> {
        for (i, t) in composed.inputs.iter().enumerate() {
            if !matches!(t.op, TensorOp::Placeholder(n) if n == i) {
                return Err(PlanError::Malformed(format!(
                    "kernel input {i} (`{}`) is not placeholder {i}",
                    t.name
                )));
            }
        }
        let (buffers, scratch) = buffers(composed, &materialized);
        let order = stage_order(composed, &buffers, &scratch)?;
        let stages = plan_stages(&order, &buffers, composed);
        Ok(Plan {
            materialized,
            buffers,
            scratch,
            stages,
        })
    }

    /// The plan revised with `t` materialized too: lowering found it, a reduction, read inside
    /// another reduction's body, where it cannot be inlined. Unschedulable when `t` was
    /// materialized already or the kernel has too many buffers.
    pub(crate) fn materializing(&self, composed: &Composed, t: Tensor) -> Result<Plan, PlanError> {
        let again = self.materialized.iter().any(|m| Tensor::ptr_eq(m, &t));
        if again || self.materialized.len() > MAX_MATERIALIZED {
            return Err(PlanError::Unschedulable(t));
        }
        let mut materialized = self.materialized.clone();
        materialized.push(t);
        Plan::new(composed, materialized)
    }
}

/// Where each materialized tensor lives — an output in its buffer (the first one, for a tensor
/// returned twice), another in a scratch buffer after the outputs — and the scratch tensors.
/// Other outputs are recomputed where they are read (cheaper than a load for elementwise ones,
/// and it keeps loops vectorizable).
fn buffers(composed: &Composed, materialized: &[Tensor]) -> (HashMap<usize, usize>, Vec<Tensor>) {
    let first_output = composed.inputs.len();
    let mut outputs: HashMap<usize, usize> = HashMap::new();
    for (o, t) in composed.outputs.iter().enumerate() {
        if matches!(t.op, TensorOp::Compute { .. }) {
            outputs.entry(key(t)).or_insert(first_output + o);
        }
    }
    let mut next = first_output + composed.outputs.len();
    let mut buffers: HashMap<usize, usize> = HashMap::new();
    let mut scratch = Vec::new();
    for t in materialized {
        if let std::collections::hash_map::Entry::Vacant(e) = buffers.entry(key(t)) {
            match outputs.get(&key(t)) {
                Some(&id) => {
                    e.insert(id);
                }
                None => {
                    e.insert(next);
                    next += 1;
                    scratch.push(t.clone());
                }
            }
        }
    }
    (buffers, scratch)
}

/// The stages in dependency order: scratch tensors, then outputs (in order, each after what
/// it reads).
fn stage_order(
    composed: &Composed,
    buffers: &HashMap<usize, usize>,
    scratch: &[Tensor],
) -> Result<Vec<(BufferId, Tensor)>, PlanError> {
    let stages: Vec<(BufferId, Tensor)> = scratch
        .iter()
        .map(|t| (BufferId(buffers[&key(t)] as u32), t.clone()))
        .chain(
            composed
                .outputs
                .iter()
                .enumerate()
                .map(|(o, t)| (BufferId((composed.inputs.len() + o) as u32), t.clone())),
        )
        .collect();
    let mut order = Vec::new();
    let mut done = HashSet::new();
    for stage in &stages {
        visit_stage(stage, &stages, buffers, &mut done, &mut order, 0)?;
    }
    Ok(order)
}

/// How each stage of `order` computes its tensor, the stages fused into a host contraction
/// left out.
fn plan_stages(
    order: &[(BufferId, Tensor)],
    buffers: &HashMap<usize, usize>,
    composed: &Composed,
) -> Vec<PlannedStage> {
    let mut fused = fuse_epilogues(order, buffers, composed);
    let readers: HashSet<usize> = fused.values().map(|f| f.reader).collect();
    let mut stages = Vec::new();
    for (i, (id, t)) in order.iter().enumerate() {
        if readers.contains(&i) {
            continue;
        }
        let c = contraction(t);
        let host_dw = c
            .as_ref()
            .and_then(|c| uses_host_depthwise(t, c, &composed.inputs));
        let (buffer, epilogue) = match fused.remove(&i) {
            Some(f) => (order[f.reader].0, Some(f.epilogue)),
            None => (*id, None),
        };
        let compute = match (c, host_dw, epilogue) {
            (_, Some(d), Some(FusedEpilogue::Depthwise(e))) => Compute::HostDepthwise(d, e),
            (_, Some(d), _) => Compute::HostDepthwise(d, DepthwiseEpilogue::NONE),
            (Some(c), None, Some(FusedEpilogue::Gemm(e))) => Compute::Gemm(c, Some(e)),
            (Some(c), None, _) if gemm_stage(t, &c, buffers, composed) => Compute::Gemm(c, None),
            _ => Compute::Loops,
        };
        stages.push(PlannedStage {
            buffer,
            tensor: t.clone(),
            compute,
        });
    }
    stages
}

/// Whether contraction `c` computing `t` is a call of the host GEMM: a GEMM schedule whose
/// operands are kernel inputs, materialized, views of an input or image windows.
fn gemm_stage(
    t: &Tensor,
    c: &Contraction,
    buffers: &HashMap<usize, usize>,
    composed: &Composed,
) -> bool {
    uses_gemm(c, &t.shape)
        && [&c.a.0, &c.b.0].iter().all(|o| {
            matches!(o.op, TensorOp::Placeholder(_))
                || buffers.contains_key(&key(o))
                || input_view(o, &composed.inputs).is_some()
                || conv_window(o, &composed.inputs).is_some()
        })
}

/// A host contraction that applies the epilogue of the stage reading its result.
struct Fused {
    /// The reading stage (in the stage order), which goes; the contraction writes its buffer
    /// instead of its own.
    reader: usize,
    epilogue: FusedEpilogue,
}

/// The epilogue a host contraction applies, in its form.
enum FusedEpilogue {
    Depthwise(DepthwiseEpilogue),
    Gemm(StageEpilogue),
}

/// The host contractions (float16 GEMMs and depthwise convolutions) that apply an epilogue
/// ([`stage_epilogue`]), by stage: each writes a scratch buffer whose one reader, a later
/// stage writing an output of the same size, is its epilogue — for a GEMM one whose indices
/// carry over to its axes (`StageEpilogue::on_shape`), for a depthwise convolution one it
/// can apply (`StageEpilogue::depthwise`).
fn fuse_epilogues(
    order: &[(BufferId, Tensor)],
    buffers: &HashMap<usize, usize>,
    composed: &Composed,
) -> HashMap<usize, Fused> {
    let outputs = composed.inputs.len()..composed.inputs.len() + composed.outputs.len();
    let mut fused = HashMap::new();
    for (i, (id, t)) in order.iter().enumerate() {
        let Some(c) = contraction(t) else {
            continue;
        };
        let depthwise = uses_host_depthwise(t, &c, &composed.inputs).is_some();
        let gemm = !depthwise && gemm_stage(t, &c, buffers, composed);
        let scratch = id.0 as usize >= outputs.end;
        // float32/float64 GEMMs keep their epilogue as an in-place loop after the call: on
        // ResNet-50 every per-tile variant measured 1–4% slower than that second pass
        // (docs/design.md §7.4); float16's loop converts each operand, the host's F16C
        // epilogue does not.
        let gemm = gemm && t.dtype == DType::F16;
        if !(depthwise || gemm) || !scratch {
            continue;
        }
        let readers: Vec<usize> = (0..order.len())
            .filter(|&j| j != i && stage_reads(&order[j].1, buffers).contains(&(id.0 as usize)))
            .collect();
        let &[j] = readers.as_slice() else {
            continue;
        };
        let (out, reader) = &order[j];
        let out_shape = outputs
            .contains(&(out.0 as usize))
            .then(|| &composed.outputs[out.0 as usize - outputs.start].shape);
        let fits = j > i
            && out_shape
                .is_some_and(|s| s.iter().product::<i64>() == t.shape.iter().product::<i64>());
        let epilogue = fits
            .then(|| stage_epilogue(reader, id.0 as usize, &t.shape, &composed.inputs, buffers))
            .flatten()
            .and_then(|e| match depthwise {
                true => e.depthwise(&reader.shape).map(FusedEpilogue::Depthwise),
                false if e.is_copy() => None,
                false => e.on_shape(&reader.shape, &t.shape).map(FusedEpilogue::Gemm),
            });
        if let Some(epilogue) = epilogue {
            fused.insert(
                i,
                Fused {
                    reader: j,
                    epilogue,
                },
            );
        }
    }
    fused
}

/// Appends `stage` to `order` after the stages it reads (depth first).
fn visit_stage(
    stage: &(BufferId, Tensor),
    stages: &[(BufferId, Tensor)],
    buffers: &HashMap<usize, usize>,
    done: &mut HashSet<u32>,
    order: &mut Vec<(BufferId, Tensor)>,
    depth: usize,
) -> Result<(), PlanError> {
    if done.contains(&stage.0.0) {
        return Ok(());
    }
    if depth > stages.len() {
        return Err(PlanError::Malformed(
            "the kernel's stages depend on each other in a cycle".into(),
        ));
    }
    for dep in stage_reads(&stage.1, buffers) {
        if let Some(s) = stages.iter().find(|(id, _)| id.0 as usize == dep) {
            visit_stage(s, stages, buffers, done, order, depth + 1)?;
        }
    }
    if done.insert(stage.0.0) {
        order.push(stage.clone());
    }
    Ok(())
}

/// The buffers of the materialized tensors computing `t` reads (through the computes it
/// inlines).
fn stage_reads(t: &Tensor, buffers: &HashMap<usize, usize>) -> Vec<usize> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let TensorOp::Compute { body, .. } = &t.op else {
        return out;
    };
    let mut stack = crate::compose::reads(body);
    while let Some(r) = stack.pop() {
        if !seen.insert(key(&r)) {
            continue;
        }
        if let Some(&b) = buffers.get(&key(&r)) {
            out.push(b);
        } else if let TensorOp::Compute { body, .. } = &r.op {
            stack.extend(crate::compose::reads(body));
        }
    }
    out
}
