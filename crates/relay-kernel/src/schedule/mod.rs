//! Scheduling: every decision about how a kernel computes its tensors, in one place, and the
//! decisions of one kernel as printed data (`relayc build --emit schedule`).
//!
//! The schedule decides and lowering (`crate::lower`) obeys. Its decisions come as a
//! [`Plan`] made before lowering, and as the rules below that lowering applies to each loop
//! it builds:
//! - **materialization** ([`materialized`]): which tensors are computed into a buffer before
//!   their readers run — every contraction the host GEMM computes and its computed operands,
//!   and every shared subexpression of [`SHARED_NODES`] operations or more ([`shared`]);
//!   everything else is inlined into its readers. When lowering meets a reduction read inside
//!   another reduction's body, which cannot be inlined, the schedule revises the plan with it
//!   in a buffer ([`Plan::materializing`]);
//! - **the stages** ([`Plan`]): the buffer of each materialized tensor, the stages in
//!   dependency order, and how each computes its tensor: one call of the host depthwise
//!   convolution, host GEMM calls, or loops; a host contraction whose one reader is an epilogue
//!   it can apply (float16 GEMMs, depthwise convolutions) absorbs that stage;
//! - **GEMM or loops** ([`uses_gemm`]): a contraction whose reduction axes merge into one
//!   matrix dimension ([`gemm_computes`]) is a call of the host GEMM, with its other axes
//!   looped around it — unless it is a small window ([`direct_window`]: a depthwise or
//!   small-group convolution), which lowering unrolls into vectorized loops like a pool;
//! - **loop kinds** ([`loop_kind`], [`vector_kind`]): the innermost loop of a stage whose
//!   values are all 32 bits wide runs [`LANES`] lanes at once, the outermost loop of a stage of
//!   [`PARALLEL_WORK`] elements or more runs on the kernel context's threads;
//! - **vector legality**: lanes are asked for on the condition that the finished body allows
//!   them (`analysis::lanes::vector_legal`: a straight line that reads every local after
//!   assigning it and every buffer it writes in place). Lowering applies the condition as its
//!   last step (`lower/vectors.rs`), the verifier rejects a vectorized loop that breaks it, and
//!   codegen asks the same function before it emits vector code.
//!
//! Axis merging (adjacent output axes every load reads contiguously become one loop) and loop
//! partitioning (the innermost loop of a padded read split at the bounds) are no choice: they
//! are how lowering writes any such nest (`lower/injective.rs`, `lower/partition.rs`). What the
//! schedule and lowering both need to know of a tensor expression — its inlined form, which
//! host routine a contraction is — lives below both, in `crate::analysis`.
//!
//! [`Schedule::of`] reads the decisions back from a lowered kernel: its stages in order, each
//! with the buffer it writes, whether it runs in place, and its loops (extent, kind, partition)
//! or GEMM.

mod plan;

use std::fmt::{self, Display, Formatter};

use std::collections::{HashMap, HashSet};

use relay_ir::te::{TExprKind, Tensor, TensorOp};

pub(crate) use plan::{Compute, Plan, PlanError};

use crate::analysis::views::{HostDepthwise, conv_window, host_depthwise, input_view};
use crate::analysis::{key, strides};
use crate::compose::Composed;
use crate::contract::{Contraction, Index, contraction};
use crate::loops::{Accesses, BufferId, BufferRole, ForKind, LocalId, LoopFunc, Stmt};

/// Lanes of a vectorized loop over 32-bit elements.
pub const LANES: u32 = 4;

/// The elements (output elements times reduction extents) from which a loop nest's outermost
/// loop runs in parallel on the kernel context's threads.
pub const PARALLEL_WORK: i64 = 1 << 16;

/// The tensors a kernel computes into buffers before their consumers run, besides its
/// outputs: every contraction the GEMM computes (see [`uses_gemm`]) and its computed operands
/// that are not inputs read in place ([`input_view`]), and the large shared subexpressions
/// ([`shared`]).
pub fn materialized(composed: &Composed) -> Vec<Tensor> {
    let mut out = contractions(composed);
    let shared = shared(composed, &out);
    out.extend(shared);
    out
}

/// The size from which a tensor read more than once is computed once into a buffer instead
/// of inlined into each read: its expression's operations, counting those of the tensors it
/// inlines.
pub const SHARED_NODES: usize = 256;

/// The shared subexpressions of a kernel worth a buffer: the elementwise tensors (no
/// reduction, not an output) read twice or more whose inlined expression has
/// [`SHARED_NODES`] operations or more, counting a tensor already chosen (or in `materialized`)
/// as one load. Inlining copies a tensor's expression into each read, so without this a chain
/// in which each tensor reads the two before it (`%2 = add(%1, %0); %3 = add(%2, %1)`) grows
/// exponentially; with it, a kernel's code is linear in its operators, and each such tensor
/// is computed once.
fn shared(composed: &Composed, materialized: &[Tensor]) -> Vec<Tensor> {
    let order = compute_order(composed);
    let mut reads: HashMap<usize, usize> = HashMap::new();
    for t in &order {
        if let TensorOp::Compute { body, .. } = &t.op {
            for r in crate::compose::reads(body) {
                *reads.entry(key(&r)).or_default() += 1;
            }
        }
    }
    let outputs: HashSet<usize> = composed.outputs.iter().map(key).collect();
    let mut loaded: HashSet<usize> = materialized.iter().map(key).collect();
    let mut size: HashMap<usize, usize> = HashMap::new();
    let mut out = Vec::new();
    for t in &order {
        let TensorOp::Compute { body, .. } = &t.op else {
            continue;
        };
        let mut n = 0usize;
        crate::compose::walk(body, &mut |e| {
            n = n.saturating_add(match e.kind() {
                TExprKind::Read { tensor, .. } if !loaded.contains(&key(tensor)) => {
                    size.get(&key(tensor)).copied().unwrap_or(1)
                }
                _ => 1,
            });
        });
        let k = key(t);
        let reduction = matches!(body.kind(), TExprKind::Reduce { .. });
        if n >= SHARED_NODES
            && reads.get(&k).is_some_and(|&r| r >= 2)
            && !reduction
            && !outputs.contains(&k)
            && loaded.insert(k)
        {
            out.push(t.clone());
            n = 1;
        }
        size.insert(k, n);
    }
    out
}

/// Every tensor the outputs of `composed` read, directly or not, each after the tensors it
/// reads (a post-order walk, without recursion).
fn compute_order(composed: &Composed) -> Vec<Tensor> {
    let mut order = Vec::new();
    let mut done: HashSet<usize> = HashSet::new();
    let mut stack: Vec<(Tensor, bool)> = composed
        .outputs
        .iter()
        .map(|t| (t.clone(), false))
        .collect();
    while let Some((t, expanded)) = stack.pop() {
        if expanded {
            order.push(t);
            continue;
        }
        if !done.insert(key(&t)) {
            continue;
        }
        stack.push((t.clone(), true));
        if let TensorOp::Compute { body, .. } = &t.op {
            for r in crate::compose::reads(body) {
                if !done.contains(&key(&r)) {
                    stack.push((r, false));
                }
            }
        }
    }
    order
}

/// The contractions the GEMM computes and their computed operands (see [`materialized`]).
fn contractions(composed: &Composed) -> Vec<Tensor> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<Tensor> = composed.outputs.clone();
    while let Some(t) = stack.pop() {
        if !seen.insert(key(&t)) {
            continue;
        }
        let TensorOp::Compute { body, .. } = &t.op else {
            continue;
        };
        if let Some(c) = contraction(&t)
            && uses_host_depthwise(&t, &c, &composed.inputs).is_some()
        {
            // Its operands are a kernel input and its window, read by the host in place.
            out.push(t.clone());
            continue;
        }
        if let Some(c) = contraction(&t)
            && uses_gemm(&c, &t.shape)
        {
            out.push(t.clone());
            for operand in [&c.a.0, &c.b.0] {
                // An operand that is an input read in place needs no copy, nor an im2col the
                // GEMM packs from the image (`conv_window`; lowering materializes it after
                // all if the GEMM cannot read it so).
                if matches!(operand.op, TensorOp::Compute { .. })
                    && input_view(operand, &composed.inputs).is_none()
                    && conv_window(operand, &composed.inputs).is_none()
                {
                    out.push(operand.clone());
                }
            }
        }
        stack.extend(crate::compose::reads(body));
    }
    out
}

/// The most taps (product of the reduction extents) of a sliding-window reduction — a
/// depthwise or small-group convolution, a pool — that lowering unrolls into a vectorized
/// loop along the output width instead of looping over the window.
pub const WINDOW_TAPS: i64 = 64;

/// Whether contraction `c` (with output `shape`) is computed by a call of the host GEMM:
/// [`gemm_computes`] says it can, and it is not a [`direct_window`] contraction.
pub fn uses_gemm(c: &Contraction, shape: &[i64]) -> bool {
    gemm_computes(c) && !direct_window(c, shape)
}

/// Whether contraction `c` is a small window better computed directly than as GEMMs: a
/// depthwise convolution (per channel a GEMM with n = 1 and k = 9) or a grouped one with at
/// most 4 output channels per group — a computed operand (the im2col), two reduction axes or
/// more, at most [`WINDOW_TAPS`] taps, and one matrix dimension of at most 4. Lowering then
/// inlines the window into the output's loops.
pub fn direct_window(c: &Contraction, shape: &[i64]) -> bool {
    let computed = [&c.a.0, &c.b.0]
        .iter()
        .any(|t| matches!(t.op, TensorOp::Compute { .. }));
    let axes = c.red_extents.iter().filter(|&&e| e > 1).count();
    let taps = c
        .red_extents
        .iter()
        .try_fold(1i64, |p, &e| p.checked_mul(e));
    // m: output axes only `a` reads; n: those only `b` reads.
    let only = |x: &[Index], y: &[Index]| -> i64 {
        (0..shape.len())
            .filter(|&k| x.contains(&Index::Out(k)) && !y.contains(&Index::Out(k)))
            .map(|k| shape[k])
            .product()
    };
    let (m, n) = (only(&c.a.1, &c.b.1), only(&c.b.1, &c.a.1));
    computed && axes >= 2 && taps.is_some_and(|t| t <= WINDOW_TAPS) && m.min(n) <= 4
}

/// The host depthwise convolution computing contraction `c` (tensor `t`, in a kernel with
/// `inputs`), if it is one (`lower::host_depthwise`: a float32 depthwise convolution of a
/// kernel input by weights read in place). It is materialized and computed by one call of
/// `relay_linalg::depthwise` instead of a [`direct_window`]; its epilogue runs over its buffer.
pub(crate) fn uses_host_depthwise(
    t: &Tensor,
    c: &Contraction,
    inputs: &[Tensor],
) -> Option<HostDepthwise> {
    host_depthwise(t, c, inputs)
}

/// Whether the host GEMM computes contraction `c`: its reduction axes merge into one GEMM
/// dimension in both operands (each axis's stride is the next inner one's times its extent,
/// in the same order in both), or the reduction is empty. Otherwise it is lowered as loops.
pub fn gemm_computes(c: &Contraction) -> bool {
    gemm_strides(c).is_some()
}

fn gemm_strides(c: &Contraction) -> Option<()> {
    let axes: Vec<usize> = (0..c.red_extents.len())
        .filter(|&j| c.red_extents[j] != 1)
        .collect();
    if c.red_extents.contains(&0) {
        return Some(());
    }
    let stride_of = |(t, ix): &(Tensor, Vec<Index>), j: usize| {
        let st = strides(&t.shape);
        ix.iter().position(|&i| i == Index::Red(j)).map(|d| st[d])
    };
    let mut order = axes.clone();
    order.sort_by_key(|&j| std::cmp::Reverse(stride_of(&c.a, j)));
    for pair in order.windows(2) {
        let (outer, inner) = (pair[0], pair[1]);
        for operand in [&c.a, &c.b] {
            let (so, si) = (stride_of(operand, outer)?, stride_of(operand, inner)?);
            if so != si.checked_mul(c.red_extents[inner])? {
                return None;
            }
        }
    }
    Some(())
}

/// The kind of a loop that is not a stage's outer loop — a partitioned loop's part, a
/// reduction's innermost loop — whose values are all 32 bits wide when `lanes32`: [`LANES`]
/// lanes at once, or one at a time.
pub fn vector_kind(lanes32: bool) -> ForKind {
    if lanes32 {
        ForKind::Vectorized { lanes: LANES }
    } else {
        ForKind::Serial
    }
}

/// The kind of loop `g` of `n` loops (outermost first) of a stage of `work` elements (output
/// elements times reduction extents), whose values are all 32 bits wide when `lanes32`.
pub fn loop_kind(g: usize, n: usize, lanes32: bool, work: i64) -> ForKind {
    match (g + 1 == n && lanes32, g == 0 && work >= PARALLEL_WORK) {
        (true, true) => ForKind::Parallel { lanes: LANES },
        (false, true) => ForKind::Parallel { lanes: 1 },
        (true, false) => ForKind::Vectorized { lanes: LANES },
        (false, false) => ForKind::Serial,
    }
}

/// The decisions of one lowered kernel, as printed data.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The kernel's name.
    pub kernel: String,
    /// Its buffers: name, role.
    pub buffers: Vec<(String, BufferRole)>,
    /// Its stages, in the order they run.
    pub stages: Vec<Stage>,
}

/// One stage of a kernel: a loop nest or a GEMM computing one buffer.
#[derive(Clone, Debug)]
pub struct Stage {
    /// The buffers it writes.
    pub writes: Vec<BufferId>,
    /// Whether it reads a buffer it writes (an epilogue running in place).
    pub in_place: bool,
    /// Its loops and GEMMs, outermost first.
    pub nest: Vec<Node>,
}

/// A loop or GEMM of a stage.
#[derive(Clone, Debug)]
pub enum Node {
    /// A loop.
    Loop {
        /// Its counter's name.
        counter: String,
        /// Its trip count (the greatest, for a partitioned loop).
        extent: i64,
        /// How it runs.
        kind: ForKind,
        /// Whether it is one part of a partitioned loop (bounds computed at run time).
        partitioned: bool,
        /// The loops and GEMMs inside it.
        inner: Vec<Node>,
    },
    /// A call of the host GEMM: `m × k` by `k × n` into `c`.
    Gemm {
        /// Rows of the result.
        m: i64,
        /// Columns of the result.
        n: i64,
        /// The reduction's extent.
        k: i64,
        /// The result's buffer, and the operands'.
        c: BufferId,
        /// The left operand's buffer.
        a: BufferId,
        /// The right operand's buffer.
        b: BufferId,
        /// Whether the host applies an epilogue to each tile.
        epilogue: bool,
    },
    /// A call of the host depthwise convolution.
    Depthwise {
        /// Its shape.
        params: relay_linalg::depthwise::DepthwiseParams,
        /// The result's buffer.
        out: BufferId,
        /// The data's buffer.
        data: BufferId,
        /// The weights' buffer.
        weight: BufferId,
        /// Whether it applies the group's epilogue (scale, shift, clamp) itself.
        epilogue: bool,
    },
}

impl Schedule {
    /// The decisions lowering made for `func`.
    pub fn of(func: &LoopFunc) -> Schedule {
        let stages = match &func.body {
            Stmt::Seq(items) => items.iter().map(|s| Stage::of(func, s)).collect(),
            other => vec![Stage::of(func, other)],
        };
        Schedule {
            kernel: func.name.clone(),
            buffers: func
                .buffers
                .iter()
                .map(|b| (b.name.clone(), b.role))
                .collect(),
            stages,
        }
    }
}

impl Stage {
    fn of(func: &LoopFunc, s: &Stmt) -> Stage {
        let access = Accesses::of(s);
        let mut writes: Vec<BufferId> = Vec::new();
        for w in &access.writes {
            if !writes.contains(&w.buffer) {
                writes.push(w.buffer);
            }
        }
        let in_place = writes.iter().any(|b| access.reads(*b));
        Stage {
            writes,
            in_place,
            nest: nodes(func, s),
        }
    }
}

/// The loops and GEMMs of `s`, outermost first.
fn nodes(func: &LoopFunc, s: &Stmt) -> Vec<Node> {
    let name = |v: &LocalId| {
        func.locals
            .get(v.0 as usize)
            .map_or_else(|| format!("l{}", v.0), |l| l.name.clone())
    };
    match s {
        Stmt::Seq(items) => items.iter().flat_map(|s| nodes(func, s)).collect(),
        Stmt::For {
            var,
            extent,
            kind,
            body,
        }
        | Stmt::Range {
            var,
            extent,
            kind,
            body,
            ..
        } => vec![Node::Loop {
            counter: name(var),
            extent: *extent,
            kind: *kind,
            partitioned: matches!(s, Stmt::Range { .. }),
            inner: nodes(func, body),
        }],
        Stmt::Gemm(g) => vec![Node::Gemm {
            m: g.m,
            n: g.n,
            k: g.k,
            c: g.c.buffer,
            a: g.a.buffer,
            b: g.b.buffer,
            epilogue: !g.epilogue.is_empty(),
        }],
        Stmt::Depthwise(d) => vec![Node::Depthwise {
            params: d.params,
            out: d.out.0,
            data: d.data.0,
            weight: d.weight.0,
            epilogue: d.epilogue != crate::loops::DepthwiseEpilogue::NONE,
        }],
        Stmt::Store { .. } | Stmt::Assign { .. } => Vec::new(),
    }
}

impl Display for Schedule {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "schedule {}", self.kernel)?;
        let name = |b: &BufferId| -> String {
            self.buffers
                .get(b.0 as usize)
                .map_or_else(|| String::from("?"), |(n, _)| n.clone())
        };
        for (i, stage) in self.stages.iter().enumerate() {
            let targets: Vec<String> = stage
                .writes
                .iter()
                .map(|b| {
                    let role = match self.buffers.get(b.0 as usize).map(|(_, r)| *r) {
                        Some(BufferRole::Scratch) => "scratch",
                        Some(BufferRole::Input) => "in",
                        _ => "out",
                    };
                    format!("{} ({role})", name(b))
                })
                .collect();
            let place = if stage.in_place { ", in place" } else { "" };
            writeln!(f, "  stage {i}: {}{place}", targets.join(", "))?;
            for node in &stage.nest {
                write_node(f, node, 2, &name)?;
            }
        }
        Ok(())
    }
}

fn write_node(
    f: &mut Formatter<'_>,
    node: &Node,
    depth: usize,
    name: &dyn Fn(&BufferId) -> String,
) -> fmt::Result {
    let pad = "  ".repeat(depth);
    match node {
        Node::Loop {
            counter,
            extent,
            kind,
            partitioned,
            inner,
        } => {
            let part = if *partitioned { " partitioned" } else { "" };
            writeln!(f, "{pad}loop {counter} extent {extent} {kind}{part}")?;
            inner
                .iter()
                .try_for_each(|n| write_node(f, n, depth + 1, name))
        }
        Node::Gemm {
            m,
            n,
            k,
            c,
            a,
            b,
            epilogue,
        } => writeln!(
            f,
            "{pad}gemm {} = {} * {} m={m} n={n} k={k}{}",
            name(c),
            name(a),
            name(b),
            if *epilogue { " + epilogue" } else { "" }
        ),
        Node::Depthwise {
            params: p,
            out,
            data,
            weight,
            epilogue,
        } => writeln!(
            f,
            "{pad}depthwise {} = {} * {} c={} multiplier={} out={}x{} kernel={}x{} strides={}x{}{}",
            name(out),
            name(data),
            name(weight),
            p.channels,
            p.multiplier,
            p.out_height,
            p.out_width,
            p.kernel_h,
            p.kernel_w,
            p.stride_h,
            p.stride_w,
            if *epilogue { " + epilogue" } else { "" }
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::compose::tests::primitive;

    /// The schedule, loop nest and Cranelift IR of `body` over parameters `prim`.
    fn stages(prim: &str, body: &str, args: &str) -> (String, String, String) {
        let text = format!(
            "#[version = \"0.0.5\"]\ndef @main({prim}) {{\n  %0 = fn ({prim}, Primitive=1) {{\n    {body}\n  }};\n  %0({args})\n}}"
        );
        let f = primitive(&text);
        let schedule = crate::schedule_primitive(&f, "fused_nn_dense_add_nn_relu").unwrap();
        let loops = crate::lower_primitive(&f, "fused_nn_dense_add_nn_relu").unwrap();
        let clif = crate::codegen::emit_clif(&loops).unwrap();
        (schedule.to_string(), loops.to_string(), clif)
    }

    #[test]
    fn dense_bias_relu_is_one_gemm_and_an_epilogue_in_place() {
        let (schedule, loops, clif) = stages(
            "%x: Tensor[(64, 784), float32], %w: Tensor[(512, 784), float32], %b: Tensor[(512), float32]",
            "nn.relu(add(nn.dense(%x, %w, units=None), %b))",
            "%x, %w, %b",
        );
        if std::env::var_os("RELAY_PRINT_SCHEDULE").is_some() {
            eprintln!("{schedule}\n{loops}\n{clif}");
        }
        assert_eq!(
            schedule,
            "schedule fused_nn_dense_add_nn_relu\n\
             \x20 stage 0: T_relu (out)\n\
             \x20   gemm T_relu = x * w m=64 n=512 k=784\n\
             \x20 stage 1: T_relu (out), in place\n\
             \x20   loop i0 extent 64 serial\n\
             \x20     loop i1 extent 512 vectorized(4)\n"
        );
        // In float16 the host applies the epilogue.
        let (schedule, loops, _) = stages(
            "%x: Tensor[(64, 784), float16], %w: Tensor[(512, 784), float16], %b: Tensor[(512), float16]",
            "nn.relu(add(nn.dense(%x, %w, units=None), %b))",
            "%x, %w, %b",
        );
        assert!(
            schedule.contains("gemm T_relu = x * w m=64 n=512 k=784 + epilogue\n"),
            "{schedule}"
        );
        assert!(
            loops.contains("epilogue(add b[0; 0, 1], relu 0)"),
            "{loops}"
        );
    }
}
