//! Lowering: tensor expressions → the loop nest IR ([`crate::loops`]).
//!
//! **Stages.** Every computed tensor is inlined into its consumers (its axes replaced by the
//! consumer's read indices; a tensor read twice is computed twice, which is right for
//! elementwise, broadcast and injective operators), except the tensors computed into a buffer
//! first: the outputs; every contraction the host GEMM computes (`contract.rs`) with its
//! computed operands, unless one is an input read in place (`gemm::input_view`: convolution
//! weights, a 1×1 convolution's data); and a reduction read inside another reduction's body
//! (found while lowering, which then starts again with it materialized). Those that are not
//! outputs get scratch buffers. Each stage is one loop nest (or a GEMM call) storing at row-major flat
//! indices; stages run in dependency order. A scratch result read element for element by the
//! one stage that writes an output becomes that output (the epilogue then runs in place). A
//! reduction's operand that the next loop recomputes is stored into the output by the reduction
//! loop and loaded back (`reuse.rs`: softmax's exponentials, computed once).
//!
//! **Injective stages**: adjacent output dimensions that every input reads contiguously (or not
//! at all) collapse into one loop, so a kernel whose inputs all have the output's shape is one
//! flat loop; the innermost loop is vectorized (4 lanes) when every value is 32 bits wide;
//! input indices come from the loop counters with row-major strides (broadcast dimensions
//! contribute 0), and their parts that do not change in the innermost loop are computed once
//! before it. A `select` whose condition bounds the innermost counter (a padded read) splits
//! that loop into the parts before, inside and after the bounds (loop partitioning). The
//! outermost loop of a large stage is `Parallel`.
//!
//! **Sliding windows** (pools, depthwise and small-group convolutions): a sum, max or min of
//! at most 64 taps whose loads mix an output and a reduction axis is unrolled into its taps
//! (`reduce::unroll_windows`), making the output injective; its innermost loop is partitioned
//! where every tap's padding guard holds (`partition::partition_windows`) and the middle part
//! vectorized.
//!
//! **Reductions** (`TExprKind::Reduce`, at the root of a compute): an output whose value needs
//! one (the reduction itself, an epilogue such as `sqrt(sum(x))`, or a consumer broadcasting
//! it such as `x - max(x)`) gets one loop per output axis, the axes the reductions depend on
//! outermost. Each reduction is computed into locals — `acc = init; for r in axes { v = body;
//! acc = combine(acc, v) }` — inside the loops of the output axes it depends on only (a
//! reduction read several times at one index is computed once), then the element is stored.
//! The innermost loop of a sum, product, `all` or `any` is vectorized with one accumulator per
//! lane. A reduction depending on an inner loop but broadcast along an outer one is
//! recomputed per outer iteration.

mod depthwise;
mod epilogue;
mod gemm;
mod injective;
mod inline;
mod partition;
mod pieces;
mod reduce;
mod reuse;
mod scratch;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use relay_ir::DType;
use relay_ir::te::{BinaryOp, CmpOp, ReduceOp, TExpr, TExprKind, Tensor, TensorOp, UnaryOp};

use injective::*;
use inline::*;
use partition::*;
use pieces::*;
use reduce::*;
use scratch::*;

use crate::KernelError;
use crate::compose::Composed;
use crate::contract::{Contraction, Index, contraction};
use crate::loops::{
    Accesses, Buffer, BufferId, BufferRole, ForKind, Gemm, LExpr, Local, LocalId, LoopFunc,
    MatrixRef, Stmt,
};
use crate::schedule::{self, LANES, PARALLEL_WORK};

pub(crate) use depthwise::{HostDepthwise, host_depthwise};
use epilogue::{StageEpilogue, stage_epilogue};
pub(crate) use gemm::{conv_window, input_view};

/// The most scalar operations one output's expression may have after inlining.
const MAX_NODES: usize = 1 << 16;

/// The loop nest of a composed primitive function, called `name`: its buffers are the inputs,
/// the outputs, then the scratch buffers of the tensors it materializes; its body computes
/// each materialized tensor (a stage) in dependency order, then each output.
pub fn lower(name: &str, composed: &Composed) -> Result<LoopFunc, KernelError> {
    let mut materialize = schedule::materialized(composed);
    let kernel = name.to_owned();
    // Lowering a stage may find a reduction read inside another reduction's body: it is then
    // materialized too, and lowering starts again (at most once per tensor).
    loop {
        match lower_stages(name, composed, &materialize) {
            Ok(func) => return Ok(func),
            Err(Fail::Error(message)) => return Err(KernelError::Malformed { kernel, message }),
            Err(Fail::TooLarge(what)) => return Err(KernelError::TooLarge { kernel, what }),
            Err(Fail::Unsupported(message)) => {
                return Err(KernelError::Unsupported { kernel, message });
            }
            Err(Fail::Materialize(t)) => {
                if materialize.iter().any(|m| Tensor::ptr_eq(m, &t)) || materialize.len() > 256 {
                    let tensor = t.name.clone();
                    return Err(KernelError::Unschedulable { kernel, tensor });
                }
                materialize.push(t);
            }
        }
    }
}

/// Why lowering with a given set of materialized tensors stopped.
enum Fail {
    /// The loop nest would be malformed: a bug in lowering or in a compute definition.
    Error(String),
    /// A size past the kernel compiler's limits.
    TooLarge(String),
    /// Something lowering does not compile yet.
    Unsupported(String),
    /// This reduction, read inside another reduction, must be materialized first.
    Materialize(Tensor),
}

impl From<String> for Fail {
    fn from(message: String) -> Fail {
        Fail::Error(message)
    }
}

/// The address of a tensor node, its identity.
pub(crate) fn key(t: &Tensor) -> usize {
    std::ptr::from_ref::<relay_ir::te::TensorNode>(t) as usize
}

/// Lowers a kernel in which the tensors of `materialize` (and the outputs) are computed into
/// buffers.
fn lower_stages(name: &str, composed: &Composed, materialize: &[Tensor]) -> Result<LoopFunc, Fail> {
    let mut func = LoopFunc {
        name: name.to_string(),
        buffers: Vec::new(),
        locals: Vec::new(),
        body: Stmt::Seq(Vec::new()),
    };
    let mut names = HashMap::new();
    for (i, t) in composed.inputs.iter().enumerate() {
        if !matches!(t.op, TensorOp::Placeholder(n) if n == i) {
            return Err(Fail::Error(format!(
                "kernel input {i} (`{}`) is not placeholder {i}",
                t.name
            )));
        }
        let name = unique(&mut names, &t.name);
        func.buffers.push(buffer(name, t, BufferRole::Input));
    }
    // Where each materialized tensor lives: outputs in their buffers (the first one, for a
    // tensor returned twice), the others in scratch buffers.
    // Other outputs are recomputed where they are read (cheaper than a load for elementwise
    // ones, and it keeps loops vectorizable).
    let mut outputs: HashMap<usize, usize> = HashMap::new();
    for t in &composed.outputs {
        let base = match t.op {
            TensorOp::Placeholder(_) => format!("T_{}", t.name),
            TensorOp::Compute { .. } => t.name.clone(),
        };
        let name = unique(&mut names, &base);
        if matches!(t.op, TensorOp::Compute { .. }) {
            outputs.entry(key(t)).or_insert(func.buffers.len());
        }
        func.buffers.push(buffer(name, t, BufferRole::Output));
    }
    let mut buffers: HashMap<usize, usize> = HashMap::new();
    let mut scratch = Vec::new();
    for t in materialize {
        if let std::collections::hash_map::Entry::Vacant(e) = buffers.entry(key(t)) {
            match outputs.get(&key(t)) {
                Some(&id) => {
                    e.insert(id);
                }
                None => {
                    e.insert(func.buffers.len());
                    let name = unique(&mut names, &t.name);
                    func.buffers.push(buffer(name, t, BufferRole::Scratch));
                    scratch.push(t.clone());
                }
            }
        }
    }
    let shapes: Vec<Vec<i64>> = func.buffers.iter().map(|b| b.shape.clone()).collect();
    // The stages in dependency order: scratch tensors, then outputs (in order, each after
    // what it reads).
    let mut order: Vec<(BufferId, Tensor)> = Vec::new();
    let mut done = std::collections::HashSet::new();
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
    for stage in &stages {
        visit_stage(stage, &stages, &buffers, &mut done, &mut order, 0)?;
    }
    let fused = fuse_epilogues(&order, &buffers, &func.buffers, composed);
    let mut nests = Vec::new();
    for (i, (id, t)) in order.iter().enumerate() {
        if fused.values().any(|f| f.reader == i) {
            continue;
        }
        let mut nest = Nest {
            func: &mut func,
            inputs: &composed.inputs,
            shapes: &shapes,
            buffers: &buffers,
            accs: Vec::new(),
        };
        let c = contraction(t);
        let host_dw = c
            .as_ref()
            .and_then(|c| schedule::uses_host_depthwise(t, c, &composed.inputs));
        let (out, epilogue) = match fused.get(&i) {
            Some(f) => (order[f.reader].0, Some(&f.epilogue)),
            None => (*id, None),
        };
        let stmt = match (c, host_dw, epilogue) {
            (_, Some(d), Some(FusedEpilogue::Depthwise(e))) => nest.depthwise(out, &d, e.clone()),
            (_, Some(d), _) => nest.depthwise(out, &d, crate::loops::DepthwiseEpilogue::NONE),
            (Some(c), None, Some(FusedEpilogue::Gemm(e))) => nest.gemm(out, t, &c, Some(e))?,
            (Some(c), None, _) if gemm_stage(t, &c, &buffers, composed) => {
                nest.gemm(out, t, &c, None)?
            }
            _ => nest.output(out, t)?,
        };
        nests.push(stmt);
    }
    alias_scratch(&mut func.buffers, &mut nests);
    let mut body = Stmt::Seq(nests);
    reuse::reuse_reduction_operands(&func, &mut body);
    func.body = body;
    schedule::legalize_vectors(&mut func.body);
    Ok(func)
}

/// Whether contraction `c` computing `t` is a call of the host GEMM: a GEMM schedule whose
/// operands are kernel inputs, materialized, views of an input or image windows.
fn gemm_stage(
    t: &Tensor,
    c: &Contraction,
    buffers: &HashMap<usize, usize>,
    composed: &Composed,
) -> bool {
    schedule::uses_gemm(c, &t.shape)
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
    Depthwise(crate::loops::DepthwiseEpilogue),
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
    func_buffers: &[Buffer],
    composed: &Composed,
) -> HashMap<usize, Fused> {
    let mut fused = HashMap::new();
    for (i, (id, t)) in order.iter().enumerate() {
        let Some(c) = contraction(t) else {
            continue;
        };
        let depthwise = schedule::uses_host_depthwise(t, &c, &composed.inputs).is_some();
        let gemm = !depthwise && gemm_stage(t, &c, buffers, composed);
        let scratch = func_buffers[id.0 as usize].role == BufferRole::Scratch;
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
        let ob = &func_buffers[out.0 as usize];
        let fits = j > i
            && ob.role == BufferRole::Output
            && ob.shape.iter().product::<i64>() == t.shape.iter().product::<i64>();
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
    done: &mut std::collections::HashSet<u32>,
    order: &mut Vec<(BufferId, Tensor)>,
    depth: usize,
) -> Result<(), Fail> {
    if done.contains(&stage.0.0) {
        return Ok(());
    }
    if depth > stages.len() {
        return Err(Fail::Error(
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
    let mut seen = std::collections::HashSet::new();
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

/// A name not used yet: `name`, or `name_1`, `name_2`, ...
fn unique(used: &mut HashMap<String, usize>, name: &str) -> String {
    let mut candidate = name.to_string();
    let mut n = 0;
    while used.contains_key(&candidate) {
        n += 1;
        candidate = format!("{name}_{n}");
    }
    used.insert(candidate.clone(), 0);
    candidate
}

fn buffer(name: String, t: &Tensor, role: BufferRole) -> Buffer {
    Buffer {
        name,
        dtype: t.dtype,
        shape: t.shape.clone(),
        role,
    }
}

/// Row-major strides of a shape.
pub(crate) fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1].saturating_mul(shape[d + 1]);
    }
    s
}

/// The loop nest of one output.
struct Nest<'a> {
    func: &'a mut LoopFunc,
    inputs: &'a [Tensor],
    /// Every buffer's shape, by buffer index.
    shapes: &'a [Vec<i64>],
    /// The buffers of the materialized tensors, by [`key`].
    buffers: &'a HashMap<usize, usize>,
    /// The value of each [`Val::Acc`] of the output being lowered.
    accs: Vec<LExpr>,
}

fn bin(op: BinaryOp, a: LExpr, b: LExpr) -> LExpr {
    LExpr::Binary(op, Box::new(a), Box::new(b))
}

impl Nest<'_> {
    fn local(&mut self, name: String, dtype: DType) -> LocalId {
        self.func.locals.push(Local { name, dtype });
        LocalId(self.func.locals.len() as u32 - 1)
    }
}
