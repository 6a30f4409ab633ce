//! Lowering: tensor expressions → the loop nest IR ([`crate::loops`]).
//!
//! **Stages**, as the schedule's [`Plan`] says. Every computed tensor is inlined into its
//! consumers (its axes replaced by the consumer's read indices; a tensor read twice is computed
//! twice, which is right for elementwise, broadcast and injective operators), except the
//! tensors the plan computes into a buffer first: the outputs; every contraction the host GEMM
//! computes (`contract.rs`) with its computed operands, unless one is an input read in place
//! (`analysis::views::input_view`: convolution weights, a 1×1 convolution's data); and a
//! reduction read inside another reduction's body (found while lowering, which then stops with
//! [`Lowering::NeedsBuffer`] for the schedule to revise the plan). Those that are not outputs
//! get scratch buffers. Each stage is one loop nest (or a GEMM call) storing at row-major flat
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
mod partition;
mod pieces;
mod reduce;
mod reuse;
mod scratch;
#[cfg(test)]
mod tests;
mod vectors;

use std::collections::HashMap;

use relay_ir::DType;
use relay_ir::te::{BinaryOp, CmpOp, ReduceOp, Tensor, TensorOp, UnaryOp};

use crate::analysis::inline::*;
use crate::analysis::views::*;
use crate::analysis::{key, strides};
use injective::*;
use partition::*;
use pieces::*;
use reduce::*;
use scratch::*;

use crate::KernelError;
use crate::compose::Composed;
use crate::contract::{Contraction, Index};
use crate::loops::{
    Accesses, Buffer, BufferId, BufferRole, ForKind, Gemm, LExpr, Local, LocalId, LoopFunc,
    MatrixRef, Stmt,
};
use crate::schedule::{self, Compute, Plan};

/// The loop nest of a composed primitive function, called `name`, as `plan` says: its buffers
/// are the inputs, the outputs, then the scratch buffers of the plan; its body computes each
/// stage in the plan's order. A reduction read inside another reduction's body, which cannot be
/// inlined, is [`Lowering::NeedsBuffer`]: the schedule revises the plan
/// ([`schedule::Plan::materializing`]) and lowering starts again.
pub(crate) fn lower(name: &str, composed: &Composed, plan: &Plan) -> Result<LoopFunc, Lowering> {
    let kernel = name.to_owned();
    match lower_stages(name, composed, plan) {
        Ok(func) => Ok(func),
        Err(Fail::Error(message)) => Err(KernelError::Malformed { kernel, message }.into()),
        Err(Fail::TooLarge(what)) => Err(KernelError::TooLarge { kernel, what }.into()),
        Err(Fail::Unsupported(message)) => Err(KernelError::Unsupported { kernel, message }.into()),
        Err(Fail::Materialize(t)) => Err(Lowering::NeedsBuffer(t)),
    }
}

/// Why lowering a plan stopped.
#[derive(Debug)]
pub(crate) enum Lowering {
    /// The kernel cannot be compiled.
    Failed(KernelError),
    /// This reduction, read inside another reduction, must be computed into a buffer first.
    NeedsBuffer(Tensor),
}

impl From<KernelError> for Lowering {
    fn from(error: KernelError) -> Lowering {
        Lowering::Failed(error)
    }
}

/// Why lowering a stage stopped.
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

/// Lowers a kernel as `plan` says.
fn lower_stages(name: &str, composed: &Composed, plan: &Plan) -> Result<LoopFunc, Fail> {
    let mut func = LoopFunc {
        name: name.to_string(),
        buffers: Vec::new(),
        locals: Vec::new(),
        body: Stmt::Seq(Vec::new()),
    };
    let mut names = HashMap::new();
    for t in &composed.inputs {
        let name = unique(&mut names, &t.name);
        func.buffers.push(buffer(name, t, BufferRole::Input));
    }
    for t in &composed.outputs {
        let base = match t.op {
            TensorOp::Placeholder(_) => format!("T_{}", t.name),
            TensorOp::Compute { .. } => t.name.clone(),
        };
        let name = unique(&mut names, &base);
        func.buffers.push(buffer(name, t, BufferRole::Output));
    }
    for t in &plan.scratch {
        let name = unique(&mut names, &t.name);
        func.buffers.push(buffer(name, t, BufferRole::Scratch));
    }
    let shapes: Vec<Vec<i64>> = func.buffers.iter().map(|b| b.shape.clone()).collect();
    let mut nests = Vec::new();
    for stage in &plan.stages {
        let mut nest = Nest {
            func: &mut func,
            inputs: &composed.inputs,
            shapes: &shapes,
            buffers: &plan.buffers,
            accs: Vec::new(),
        };
        let (out, t) = (stage.buffer, &stage.tensor);
        let stmt = match &stage.compute {
            Compute::HostDepthwise(d, e) => nest.depthwise(out, d, e.clone()),
            Compute::Gemm(c, e) => nest.gemm(out, t, c, e.as_ref())?,
            Compute::Loops => nest.output(out, t)?,
        };
        nests.push(stmt);
    }
    alias_scratch(&mut func.buffers, &mut nests);
    let mut body = Stmt::Seq(nests);
    reuse::reuse_reduction_operands(&func, &mut body);
    func.body = body;
    vectors::legalize_vectors(&mut func.body);
    Ok(func)
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
