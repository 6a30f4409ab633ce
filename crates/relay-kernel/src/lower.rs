//! Lowering: tensor expressions → the loop nest IR ([`crate::loops`]).
//!
//! **Stages.** Every computed tensor is inlined into its consumers (its axes replaced by the
//! consumer's read indices; a tensor read twice is computed twice, which is right for
//! elementwise, broadcast and injective operators), except the tensors computed into a buffer
//! first: the outputs; every contraction the host GEMM computes (`contract.rs`) with its
//! computed operands; and a reduction read inside another reduction's body (found while
//! lowering, which then starts again with it materialized). Those that are not outputs get
//! scratch buffers. Each stage is one loop nest (or a GEMM call) storing at row-major flat
//! indices; stages run in dependency order. A scratch result read element for element by the
//! one stage that writes an output becomes that output (the epilogue then runs in place).
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
//! **Reductions** (`TExprKind::Reduce`, at the root of a compute): an output whose value needs
//! one (the reduction itself, an epilogue such as `sqrt(sum(x))`, or a consumer broadcasting
//! it such as `x - max(x)`) gets one loop per output axis, the axes the reductions depend on
//! outermost. Each reduction is computed into locals — `acc = init; for r in axes { v = body;
//! acc = combine(acc, v) }` — inside the loops of the output axes it depends on only (a
//! reduction read several times at one index is computed once), then the element is stored.
//! The innermost loop of a sum, product, `all` or `any` is vectorized with one accumulator per
//! lane. A reduction depending on an inner loop but broadcast along an outer one is
//! recomputed per outer iteration.

use std::collections::HashMap;

use relay_ir::DType;
use relay_ir::te::{BinaryOp, CmpOp, ReduceOp, TExpr, TExprKind, Tensor, TensorOp, UnaryOp};

use crate::compose::Composed;
use crate::contract::{Contraction, Index, contraction};
use crate::loops::{
    Buffer, BufferId, BufferRole, ForKind, Gemm, LExpr, Local, LocalId, LoopFunc, MatrixRef, Stmt,
};

/// The most scalar operations one output's expression may have after inlining.
const MAX_NODES: usize = 1 << 16;

/// Lanes of a vectorized loop over 32-bit elements.
const LANES: u32 = 4;

/// The elements (output elements times reduction extents) from which a loop nest's outermost
/// loop runs in parallel on the kernel context's threads.
const PARALLEL_WORK: i64 = 1 << 16;

/// The loop nest of a composed primitive function, called `name`: its buffers are the inputs,
/// the outputs, then the scratch buffers of the tensors it materializes; its body computes
/// each materialized tensor (a stage) in dependency order, then each output.
pub fn lower(name: &str, composed: &Composed) -> Result<LoopFunc, String> {
    let mut materialize = plan(composed);
    // Lowering a stage may find a reduction read inside another reduction's body: it is then
    // materialized too, and lowering starts again (at most once per tensor).
    loop {
        match lower_stages(name, composed, &materialize) {
            Ok(func) => return Ok(func),
            Err(Fail::Error(message)) => return Err(message),
            Err(Fail::Materialize(t)) => {
                if materialize.iter().any(|m| Tensor::ptr_eq(m, &t)) || materialize.len() > 256 {
                    return Err(format!("cannot schedule the reduction `{}`", t.name));
                }
                materialize.push(t);
            }
        }
    }
}

/// Why lowering with a given set of materialized tensors stopped.
enum Fail {
    /// The kernel cannot be lowered.
    Error(String),
    /// This reduction, read inside another reduction, must be materialized first.
    Materialize(Tensor),
}

impl From<String> for Fail {
    fn from(message: String) -> Fail {
        Fail::Error(message)
    }
}

/// The address of a tensor node, its identity.
fn key(t: &Tensor) -> usize {
    std::ptr::from_ref::<relay_ir::te::TensorNode>(t) as usize
}

/// The tensors a kernel computes into buffers before their consumers run, besides its
/// outputs: every contraction the GEMM can compute (see [`gemm_operands`]) and its computed
/// operands.
fn plan(composed: &Composed) -> Vec<Tensor> {
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
            && gemm_operands(&c).is_some()
        {
            out.push(t.clone());
            for operand in [&c.a.0, &c.b.0] {
                if matches!(operand.op, TensorOp::Compute { .. }) {
                    out.push(operand.clone());
                }
            }
        }
        stack.extend(crate::compose::reads(body));
    }
    out
}

/// The row-major strides of a contraction's operands along each of its reduction axes, if
/// the reduction axes merge into one GEMM dimension in both (each axis's stride is the next
/// inner one's times its extent, in the same order in both) — or the reduction is empty.
/// `None` means the contraction is lowered as loops.
fn gemm_operands(c: &Contraction) -> Option<()> {
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
    let mut nests = Vec::new();
    for (id, t) in &order {
        let mut nest = Nest {
            func: &mut func,
            inputs: &composed.inputs,
            shapes: &shapes,
            buffers: &buffers,
            accs: Vec::new(),
        };
        let stmt = match contraction(t) {
            Some(c)
                if gemm_operands(&c).is_some()
                    && [&c.a.0, &c.b.0].iter().all(|o| {
                        matches!(o.op, TensorOp::Placeholder(_)) || buffers.contains_key(&key(o))
                    }) =>
            {
                nest.gemm(*id, t, &c)?
            }
            _ => nest.output(*id, t)?,
        };
        nests.push(stmt);
    }
    alias_scratch(&mut func.buffers, &mut nests);
    func.body = Stmt::Seq(nests);
    Ok(func)
}

/// Writes a scratch result straight into the output that is made of it element for element:
/// when scratch `s` (a GEMM's result) is written by one stage and read by one later stage
/// that stores only to output `o`, at the very index it reads `s` at, with `o` untouched in
/// between, `s` becomes `o` — the epilogue then runs in place (`out = relu(out + bias)`),
/// and a stage left copying `o` to itself disappears. Unused scratch buffers are dropped.
fn alias_scratch(buffers: &mut Vec<Buffer>, stages: &mut Vec<Stmt>) {
    for s in 0..buffers.len() {
        if buffers[s].role != BufferRole::Scratch {
            continue;
        }
        let sid = BufferId(s as u32);
        let uses: Vec<(bool, bool)> = stages
            .iter()
            .map(|st| {
                let (mut r, mut w) = (Vec::new(), Vec::new());
                stmt_buffers(st, &mut r, &mut w);
                (r.contains(&sid), w.contains(&sid))
            })
            .collect();
        let writers: Vec<usize> = (0..stages.len()).filter(|&i| uses[i].1).collect();
        let readers: Vec<usize> = (0..stages.len()).filter(|&i| uses[i].0).collect();
        let (&[w], &[r]) = (&writers[..], &readers[..]) else {
            continue;
        };
        if r <= w {
            continue;
        }
        // The reader stores to one output, at one index, and reads `s` only there.
        let (mut keys, mut targets, mut loads) = (Vec::new(), Vec::new(), Vec::new());
        store_keys(&stages[r], &mut targets, &mut keys);
        load_keys(&stages[r], sid, &mut loads);
        let ([o], [key]) = (&targets[..], &keys[..]) else {
            continue;
        };
        let o = *o;
        let ob = &buffers[o.0 as usize];
        let same = ob.role == BufferRole::Output
            && ob.dtype == buffers[s].dtype
            && ob.shape.iter().product::<i64>() == buffers[s].shape.iter().product::<i64>();
        if !same || loads.iter().any(|k| k != key) {
            continue;
        }
        let touched = stages[w..r].iter().any(|st| {
            let (mut rd, mut wr) = (Vec::new(), Vec::new());
            stmt_buffers(st, &mut rd, &mut wr);
            rd.contains(&o) || wr.contains(&o)
        });
        if touched {
            continue;
        }
        for st in &mut stages[w..=r] {
            map_buffers(st, &|b| if b == sid { o } else { b });
        }
        if is_self_copy(&stages[r]) {
            stages.remove(r);
        }
    }
    // Drop scratch buffers no stage uses, renumbering the rest.
    let mut used = Vec::new();
    for st in stages.iter() {
        let (mut rd, mut wr) = (Vec::new(), Vec::new());
        stmt_buffers(st, &mut rd, &mut wr);
        used.extend(rd);
        used.extend(wr);
    }
    let mut map = Vec::with_capacity(buffers.len());
    let mut kept = Vec::with_capacity(buffers.len());
    for (i, b) in buffers.drain(..).enumerate() {
        if b.role == BufferRole::Scratch && !used.contains(&BufferId(i as u32)) {
            map.push(None);
        } else {
            map.push(Some(BufferId(kept.len() as u32)));
            kept.push(b);
        }
    }
    *buffers = kept;
    for st in stages.iter_mut() {
        map_buffers(st, &|b| map[b.0 as usize].unwrap_or(b));
    }
}

/// The buffers a statement reads and writes.
fn stmt_buffers(s: &Stmt, reads: &mut Vec<BufferId>, writes: &mut Vec<BufferId>) {
    s.exprs(&mut |e| {
        e.visit(&mut |n| {
            if let LExpr::Load { buffer, .. } = n {
                reads.push(*buffer);
            }
        })
    });
    stores(s, &mut |stored, key| {
        writes.push(stored);
        if key.is_none() {
            // A GEMM reads its operands in full.
            gemm_operands_of(s, reads);
        }
    });
}

/// The operand buffers of every GEMM in a statement.
fn gemm_operands_of(s: &Stmt, out: &mut Vec<BufferId>) {
    match s {
        Stmt::Seq(items) => items.iter().for_each(|s| gemm_operands_of(s, out)),
        Stmt::For { body, .. } | Stmt::Range { body, .. } => gemm_operands_of(body, out),
        Stmt::Gemm(g) => {
            out.push(g.a.buffer);
            out.push(g.b.buffer);
        }
        Stmt::Store { .. } | Stmt::Assign { .. } => {}
    }
}

/// Calls `f` with every buffer a statement writes and the index key it stores at (`None` for
/// a GEMM result, written everywhere).
fn stores(s: &Stmt, f: &mut dyn FnMut(BufferId, Option<String>)) {
    match s {
        Stmt::Seq(items) => items.iter().for_each(|s| stores(s, f)),
        Stmt::For { body, .. } | Stmt::Range { body, .. } => stores(body, f),
        Stmt::Store { buffer, index, .. } => f(*buffer, Some(format!("{index:?}"))),
        Stmt::Gemm(g) => f(g.c.buffer, None),
        Stmt::Assign { .. } => {}
    }
}

/// The buffers and index keys a statement stores to (a GEMM result has the unmatchable key
/// `gemm`).
fn store_keys(s: &Stmt, targets: &mut Vec<BufferId>, keys: &mut Vec<String>) {
    stores(s, &mut |buffer, key| {
        if !targets.contains(&buffer) {
            targets.push(buffer);
        }
        let key = key.unwrap_or_else(|| String::from("gemm"));
        if !keys.contains(&key) {
            keys.push(key);
        }
    });
}

/// The index keys at which a statement loads buffer `b` (a GEMM reading it: `gemm`).
fn load_keys(s: &Stmt, b: BufferId, out: &mut Vec<String>) {
    s.exprs(&mut |e| {
        e.visit(&mut |n| {
            if let LExpr::Load { buffer, index } = n
                && *buffer == b
            {
                out.push(format!("{index:?}"));
            }
        })
    });
    let mut operands = Vec::new();
    gemm_operands_of(s, &mut operands);
    if operands.contains(&b) {
        out.push(String::from("gemm"));
    }
}

/// Whether a stage only copies a buffer onto itself (`o[i] = o[i]`).
fn is_self_copy(s: &Stmt) -> bool {
    match s {
        Stmt::Seq(items) => items.iter().all(is_self_copy),
        Stmt::For { body, .. } => is_self_copy(body),
        Stmt::Store {
            buffer,
            index,
            value:
                LExpr::Load {
                    buffer: from,
                    index: at,
                },
        } => buffer == from && format!("{index:?}") == format!("{at:?}"),
        Stmt::Assign { .. } => true,
        _ => false,
    }
}

/// Rewrites every buffer reference of a statement with `f`.
fn map_buffers(s: &mut Stmt, f: &dyn Fn(BufferId) -> BufferId) {
    let expr = |e: &mut LExpr| {
        e.visit_mut(&mut |n| {
            if let LExpr::Load { buffer, .. } = n {
                *buffer = f(*buffer);
            }
        })
    };
    match s {
        Stmt::Seq(items) => items.iter_mut().for_each(|s| map_buffers(s, f)),
        Stmt::For { body, .. } => map_buffers(body, f),
        Stmt::Range {
            start, end, body, ..
        } => {
            expr(start);
            expr(end);
            map_buffers(body, f);
        }
        Stmt::Store {
            buffer,
            index,
            value,
        } => {
            *buffer = f(*buffer);
            expr(index);
            expr(value);
        }
        Stmt::Assign { value, .. } => expr(value),
        Stmt::Gemm(g) => {
            for m in [&mut g.a, &mut g.b, &mut g.c] {
                m.buffer = f(m.buffer);
                expr(&mut m.offset);
            }
        }
    }
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

/// An index expression over the output's axes (after inlining).
#[derive(Clone, Debug)]
enum Ix {
    /// The output index along axis `k` (an axis of extent greater than 1).
    Axis(usize),
    /// A constant.
    Const(i64),
    /// Arithmetic on indices.
    Bin(BinaryOp, Box<Ix>, Box<Ix>),
    /// Any other `int64` value: one read from a tensor (`take`'s indices), a select.
    Dyn(Box<Val>),
}

/// A scalar expression over the output's axes whose reads are all of buffers.
#[derive(Clone, Debug)]
enum Val {
    Int(i128, DType),
    Float(f64, DType),
    /// An index used as an `int64` value.
    Index(Ix),
    /// An element of input `buffer` at one index per dimension.
    Load {
        buffer: usize,
        dims: Vec<Ix>,
    },
    Unary(UnaryOp, Box<Val>),
    Binary(BinaryOp, Box<Val>, Box<Val>),
    Compare(CmpOp, Box<Val>, Box<Val>),
    Select(Box<Val>, Box<Val>, Box<Val>),
    Cast(DType, Box<Val>),
    /// The result of the `n`-th reduction of the output (computed before the store).
    Acc(usize),
}

/// A reduction of one output element: `acc = init; for r in axes { acc = combine(acc, body) }`.
#[derive(Debug)]
struct Red {
    op: ReduceOp,
    /// The reduction axes (numbered after the output's), outermost first, with extents.
    axes: Vec<(usize, i64)>,
    /// The value reduced.
    body: Val,
    /// The body's dtype.
    body_dtype: DType,
    /// The result's dtype (the body's, or an integer position for `ArgMax`/`ArgMin`).
    dtype: DType,
}

/// Inlines tensor expressions into one [`Val`] per output.
struct Inliner<'a> {
    inputs: &'a [Tensor],
    /// The buffers of the materialized tensors, by [`key`].
    buffers: &'a HashMap<usize, usize>,
    /// The output's shape (the extents of its axes).
    out_shape: Vec<i64>,
    /// A reduction met inside another reduction's body, to be materialized.
    want: Option<Tensor>,
    /// Operations made so far.
    nodes: usize,
    /// Whether every value loaded or computed (other than booleans) is 32 bits wide.
    all32: bool,
    /// The output's rank.
    rank: usize,
    /// The extents of the reduction axes met so far (axis `rank + j` is the `j`-th).
    red_extents: Vec<i64>,
    /// The reductions met so far.
    reductions: Vec<Red>,
    /// Reductions already lowered, by tensor address and read indices.
    red_cache: HashMap<(usize, String), usize>,
    /// Whether the inliner is inside a reduction's body.
    in_reduce: bool,
}

impl Inliner<'_> {
    fn value(&mut self, e: &TExpr, env: &HashMap<u32, Ix>) -> Result<Val, String> {
        relay_ir::ensure_sufficient_stack(|| self.value_inner(e, env))
    }

    fn value_inner(&mut self, e: &TExpr, env: &HashMap<u32, Ix>) -> Result<Val, String> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(format!(
                "the kernel's expression has more than {MAX_NODES} operations after inlining"
            ));
        }
        let d = e.dtype();
        if d != DType::BOOL && (d.bits != 32 || d.lanes != 1) {
            self.all32 = false;
        }
        let b = |v: Val| Box::new(v);
        Ok(match e.kind() {
            TExprKind::Var(_) => {
                self.all32 = false;
                Val::Index(self.index(e, env)?)
            }
            // A float16 constant: its float16 value.
            TExprKind::Int(v) if d == DType::F16 => Val::Float(round_f16(*v as f64), d),
            TExprKind::Float(v) if d == DType::F16 => Val::Float(round_f16(*v), d),
            TExprKind::Int(v) => Val::Int(*v, d),
            TExprKind::Float(v) => Val::Float(*v, d),
            TExprKind::Read { tensor, indices } => {
                let is_input = matches!(tensor.op, TensorOp::Placeholder(_));
                if is_input && (d.bits != 32 || d.code == relay_ir::DTypeCode::Bool) {
                    self.all32 = false;
                }
                let dims = indices
                    .iter()
                    .map(|i| self.index(i, env))
                    .collect::<Result<Vec<_>, _>>()?;
                if dims.len() != tensor.shape.len() {
                    return Err(format!(
                        "`{}` of rank {} read with {} indices",
                        tensor.name,
                        tensor.shape.len(),
                        dims.len()
                    ));
                }
                for (ix, &n) in dims.iter().zip(&tensor.shape) {
                    if let Ix::Const(c) = ix
                        && !(0..n).contains(c)
                    {
                        return Err(format!("`{}` read at index {c} of 0..{n}", tensor.name));
                    }
                }
                match &tensor.op {
                    TensorOp::Placeholder(i) => {
                        let input = self.inputs.get(*i).ok_or_else(|| {
                            format!(
                                "`{}` is placeholder {i} of {}",
                                tensor.name,
                                self.inputs.len()
                            )
                        })?;
                        if input.shape != tensor.shape || input.dtype != tensor.dtype {
                            return Err(format!(
                                "`{}` does not match kernel input {i}",
                                tensor.name
                            ));
                        }
                        Val::Load { buffer: *i, dims }
                    }
                    TensorOp::Compute { .. } if self.buffers.contains_key(&key(tensor)) => {
                        if d.bits != 32 || d.code == relay_ir::DTypeCode::Bool {
                            self.all32 = false;
                        }
                        Val::Load {
                            buffer: self.buffers[&key(tensor)],
                            dims,
                        }
                    }
                    TensorOp::Compute { axes, body } => {
                        if axes.len() != dims.len() {
                            return Err(format!("`{}` has the wrong number of axes", tensor.name));
                        }
                        let reduction = matches!(body.kind(), TExprKind::Reduce { .. });
                        let key = (
                            std::ptr::from_ref::<relay_ir::te::TensorNode>(tensor) as usize,
                            format!("{dims:?}"),
                        );
                        if reduction && self.in_reduce {
                            self.want = Some(tensor.clone());
                            return Err(format!("`{}` must be materialized", tensor.name));
                        }
                        if reduction && let Some(&n) = self.red_cache.get(&key) {
                            // A float16 reduction's result is rounded from its accumulator.
                            return Ok(if d == DType::F16 {
                                Val::Cast(d, b(Val::Acc(n)))
                            } else {
                                Val::Acc(n)
                            });
                        }
                        let inner: HashMap<u32, Ix> = axes.iter().map(|a| a.id).zip(dims).collect();
                        let v = self.value(body, &inner)?;
                        let acc = match &v {
                            Val::Acc(n) => Some(*n),
                            Val::Cast(_, a) => match **a {
                                Val::Acc(n) => Some(n),
                                _ => None,
                            },
                            _ => None,
                        };
                        if let (true, Some(n)) = (reduction, acc) {
                            self.red_cache.insert(key, n);
                        }
                        v
                    }
                }
            }
            // float16 operations compute in `F16_WIDE` (widening is exact) and round their
            // result to float16, as the reference does per operation; float16 values are only
            // loaded, stored, selected and converted (`Cast` converts in codegen).
            TExprKind::Unary(op, a) if a.dtype() == DType::F16 => {
                let r = Val::Unary(*op, b(widen_f16(self.value(a, env)?)));
                if d == DType::F16 {
                    Val::Cast(d, b(r))
                } else {
                    r
                }
            }
            TExprKind::Binary(op, x, y) if d == DType::F16 => {
                let (x, y) = (self.value(x, env)?, self.value(y, env)?);
                Val::Cast(d, b(Val::Binary(*op, b(widen_f16(x)), b(widen_f16(y)))))
            }
            TExprKind::Compare(op, x, y) if x.dtype() == DType::F16 => {
                let (x, y) = (self.value(x, env)?, self.value(y, env)?);
                Val::Compare(*op, b(widen_f16(x)), b(widen_f16(y)))
            }
            TExprKind::Unary(op, a) => Val::Unary(*op, b(self.value(a, env)?)),
            // Index arithmetic used as a value (a padding bound test): folded like an index.
            TExprKind::Binary(..) if d == DType::I64 => Val::Index(self.index(e, env)?),
            TExprKind::Binary(op, x, y) => {
                Val::Binary(*op, b(self.value(x, env)?), b(self.value(y, env)?))
            }
            TExprKind::Compare(op, x, y) => {
                Val::Compare(*op, b(self.value(x, env)?), b(self.value(y, env)?))
            }
            TExprKind::Select(c, x, y) => Val::Select(
                b(self.value(c, env)?),
                b(self.value(x, env)?),
                b(self.value(y, env)?),
            ),
            TExprKind::Cast(a) => Val::Cast(d, b(self.value(a, env)?)),
            TExprKind::Reduce { op, axes, body } => {
                if self.in_reduce {
                    return Err(
                        "a reduction reading another reduction cannot be compiled yet".into(),
                    );
                }
                let arg = matches!(op, ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. });
                let fits = if arg { d.is_int() } else { d == body.dtype() };
                if !fits {
                    return Err(format!("a {op:?} reduction of dtype {d}"));
                }
                self.all32 = false;
                let mut inner = env.clone();
                let mut red_axes = Vec::with_capacity(axes.len());
                for a in axes {
                    let k = self.rank + self.red_extents.len();
                    self.red_extents.push(a.extent);
                    let ix = if a.extent == 1 {
                        Ix::Const(0)
                    } else {
                        Ix::Axis(k)
                    };
                    inner.insert(a.id, ix);
                    red_axes.push((k, a.extent));
                }
                self.in_reduce = true;
                let value = self.value(body, &inner);
                self.in_reduce = false;
                let (mut value, mut body_dtype, mut dtype) = (value?, body.dtype(), d);
                if body_dtype == DType::F16 {
                    // A float16 reduction accumulates in `F16_WIDE`, and a sum or product the
                    // body's operation unrounded (the reference's contractions and pools
                    // accumulate in f64 and round once).
                    let op_body =
                        matches!(body.kind(), TExprKind::Unary(..) | TExprKind::Binary(..));
                    value = match value {
                        Val::Cast(_, inner)
                            if op_body && matches!(op, ReduceOp::Sum | ReduceOp::Prod) =>
                        {
                            *inner
                        }
                        v => widen_f16(v),
                    };
                    body_dtype = F16_WIDE;
                    if dtype == DType::F16 {
                        dtype = F16_WIDE;
                    }
                }
                self.reductions.push(Red {
                    op: *op,
                    axes: red_axes,
                    body: value,
                    body_dtype,
                    dtype,
                });
                let acc = Val::Acc(self.reductions.len() - 1);
                if d == DType::F16 {
                    Val::Cast(d, b(acc))
                } else {
                    acc
                }
            }
        })
    }

    /// An index expression (`int64` arithmetic on axes and constants).
    fn index(&mut self, e: &TExpr, env: &HashMap<u32, Ix>) -> Result<Ix, String> {
        relay_ir::ensure_sufficient_stack(|| match e.kind() {
            TExprKind::Var(v) => env
                .get(&v.id)
                .cloned()
                .ok_or_else(|| "an index uses an unbound axis".to_string()),
            TExprKind::Int(c) => i64::try_from(*c)
                .map(Ix::Const)
                .map_err(|_| format!("index constant {c} out of range")),
            TExprKind::Binary(op, x, y) if e.dtype() == DType::I64 => {
                let (x, y) = (self.index(x, env)?, self.index(y, env)?);
                // `x / c` and `x % c` with `0 <= x < c`.
                if let (Some((lo, hi)), Ix::Const(c)) = (self.range(&x), &y)
                    && lo >= 0
                    && hi < *c
                {
                    match op {
                        BinaryOp::Div | BinaryOp::FloorDiv => return Ok(Ix::Const(0)),
                        BinaryOp::Mod | BinaryOp::FloorMod => return Ok(x),
                        _ => {}
                    }
                }
                Ok(fold(*op, x, y))
            }
            _ => {
                let v = self.value(e, env)?;
                let v = if e.dtype() == DType::I64 {
                    v
                } else {
                    Val::Cast(DType::I64, Box::new(v))
                };
                Ok(Ix::Dyn(Box::new(v)))
            }
        })
    }

    /// The values an index takes, when known: axes range over their extents.
    fn range(&self, ix: &Ix) -> Option<(i64, i64)> {
        match ix {
            Ix::Const(c) => Some((*c, *c)),
            Ix::Axis(k) => {
                let extent = match self.out_shape.get(*k) {
                    Some(&n) => n,
                    None => *self.red_extents.get(k - self.rank)?,
                };
                Some((0, extent.checked_sub(1)?))
            }
            Ix::Bin(op, a, b) => {
                let ((al, ah), (bl, bh)) = (self.range(a)?, self.range(b)?);
                match op {
                    BinaryOp::Add => Some((al.checked_add(bl)?, ah.checked_add(bh)?)),
                    BinaryOp::Sub => Some((al.checked_sub(bh)?, ah.checked_sub(bl)?)),
                    BinaryOp::Mul if al >= 0 && bl >= 0 => {
                        Some((al.checked_mul(bl)?, ah.checked_mul(bh)?))
                    }
                    _ => None,
                }
            }
            Ix::Dyn(_) => None,
        }
    }
}

/// The dtype float16 operations compute in: `float64`, in which the basic operations give
/// float16's correctly rounded results and every other one the reference's (which computes in
/// `f64` and rounds once per operation), bit for bit.
const F16_WIDE: DType = DType::F64;

/// `x` rounded to the nearest float16 value (ties to even).
fn round_f16(x: f64) -> f64 {
    f64::from(crate::math::f16_to_f32(crate::math::f64_to_f16(x)))
}

/// A float16 value as an `F16_WIDE` one (exactly): a constant directly, others converted.
fn widen_f16(v: Val) -> Val {
    match v {
        Val::Float(c, d) if d == DType::F16 => Val::Float(c, F16_WIDE),
        v => Val::Cast(F16_WIDE, Box::new(v)),
    }
}

/// `x op y`, folded when both are constants and the result is defined.
fn fold(op: BinaryOp, x: Ix, y: Ix) -> Ix {
    if let (Ix::Const(a), Ix::Const(b)) = (&x, &y) {
        let (a, b) = (*a, *b);
        let r = match op {
            BinaryOp::Add => a.checked_add(b),
            BinaryOp::Sub => a.checked_sub(b),
            BinaryOp::Mul => a.checked_mul(b),
            BinaryOp::Max => Some(a.max(b)),
            BinaryOp::Min => Some(a.min(b)),
            _ => None,
        };
        if let Some(r) = r {
            return Ix::Const(r);
        }
    }
    match (op, &x, &y) {
        (BinaryOp::Add, Ix::Const(0), _) | (BinaryOp::Mul, Ix::Const(1), _) => y,
        (BinaryOp::Add | BinaryOp::Sub, _, Ix::Const(0))
        | (BinaryOp::Mul | BinaryOp::Div | BinaryOp::FloorDiv, _, Ix::Const(1)) => x,
        (BinaryOp::Mul, Ix::Const(0), _)
        | (BinaryOp::Mul, _, Ix::Const(0))
        | (BinaryOp::Mod | BinaryOp::FloorMod, _, Ix::Const(1)) => Ix::Const(0),
        _ => Ix::Bin(op, Box::new(x), Box::new(y)),
    }
}

/// Row-major strides of a shape.
fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1].saturating_mul(shape[d + 1]);
    }
    s
}

/// A flat element index: `sum(coeff * counter of group) + constant + other`.
#[derive(Default)]
struct Flat {
    /// `(group, coefficient)`, outermost group first.
    terms: Vec<(usize, i64)>,
    konst: i64,
    /// Non-linear parts, with whether they change in the innermost loop.
    other: Vec<(LExpr, bool)>,
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

/// The loops of one output: groups of output axes, each one loop.
struct Loops {
    /// The axes of each group, outermost first.
    groups: Vec<Vec<usize>>,
    /// Each group's counter.
    counters: Vec<LocalId>,
    /// The output's shape (then the reduction axes' extents).
    shape: Vec<i64>,
    /// Whether index parts that do not change in the innermost loop may be hoisted before it.
    hoist: bool,
}

impl Loops {
    /// The group holding axis `k`.
    fn group_of(&self, k: usize) -> Option<usize> {
        self.groups.iter().position(|g| g.contains(&k))
    }

    /// The value of output axis `k` from the loop counters.
    fn axis_value(&self, k: usize) -> Result<LExpr, String> {
        let g = self
            .group_of(k)
            .ok_or_else(|| format!("axis {k} has no loop"))?;
        let counter = LExpr::Local(self.counters[g]);
        let group = &self.groups[g];
        if group.len() == 1 {
            return Ok(counter);
        }
        let pos = group.iter().position(|&a| a == k).unwrap_or(0);
        let inner: i64 = group[pos + 1..].iter().map(|&a| self.shape[a]).product();
        let div = if inner == 1 {
            counter
        } else {
            bin(BinaryOp::Div, counter, LExpr::Int(inner.into(), DType::I64))
        };
        Ok(if pos == 0 {
            div
        } else {
            bin(
                BinaryOp::Mod,
                div,
                LExpr::Int(self.shape[k].into(), DType::I64),
            )
        })
    }
}

fn bin(op: BinaryOp, a: LExpr, b: LExpr) -> LExpr {
    LExpr::Binary(op, Box::new(a), Box::new(b))
}

impl Nest<'_> {
    fn local(&mut self, name: String, dtype: DType) -> LocalId {
        self.func.locals.push(Local { name, dtype });
        LocalId(self.func.locals.len() as u32 - 1)
    }

    /// The loop nest writing output `tensor` to buffer `id`.
    fn output(&mut self, id: BufferId, tensor: &Tensor) -> Result<Stmt, Fail> {
        let shape = tensor.shape.clone();
        let mut total: i64 = 1;
        for &n in &shape {
            total = total
                .checked_mul(n)
                .ok_or_else(|| format!("output shape {shape:?} is too large"))?;
        }
        if total == 0 {
            return Ok(Stmt::Seq(Vec::new()));
        }
        let mut inliner = Inliner {
            inputs: self.inputs,
            buffers: self.buffers,
            out_shape: shape.clone(),
            want: None,
            nodes: 0,
            all32: true,
            rank: shape.len(),
            red_extents: Vec::new(),
            reductions: Vec::new(),
            red_cache: HashMap::new(),
            in_reduce: false,
        };
        let env: Vec<Ix> = shape
            .iter()
            .enumerate()
            .map(|(k, &n)| if n == 1 { Ix::Const(0) } else { Ix::Axis(k) })
            .collect();
        let val = match &tensor.op {
            // An output that is an input: a copy.
            TensorOp::Placeholder(i) => {
                let matches = self
                    .inputs
                    .get(*i)
                    .is_some_and(|t| t.shape == tensor.shape && t.dtype == tensor.dtype);
                if !matches {
                    return Err(Fail::Error(format!(
                        "`{}` does not match kernel input {i}",
                        tensor.name
                    )));
                }
                if tensor.dtype.bits != 32 || tensor.dtype.code == relay_ir::DTypeCode::Bool {
                    inliner.all32 = false;
                }
                Val::Load {
                    buffer: *i,
                    dims: env.clone(),
                }
            }
            TensorOp::Compute { axes, body } => {
                let map: HashMap<u32, Ix> =
                    axes.iter().map(|a| a.id).zip(env.iter().cloned()).collect();
                match inliner.value(body, &map) {
                    Ok(v) => v,
                    Err(e) => {
                        return Err(match inliner.want.take() {
                            Some(t) => Fail::Materialize(t),
                            None => Fail::Error(e),
                        });
                    }
                }
            }
        };
        if !inliner.reductions.is_empty() {
            return Ok(self.reduce_output(id, &shape, &val, &inliner)?);
        }
        let dtype = tensor.dtype;
        let vectorize =
            inliner.all32 && dtype.bits == 32 && dtype.code != relay_ir::DTypeCode::Bool;
        let loops = self.schedule(&shape, &val);
        let mut hoisted: Vec<(String, LocalId, LExpr)> = Vec::new();
        let out_strides = strides(&shape);
        let store = Flat {
            terms: loops
                .groups
                .iter()
                .enumerate()
                .map(|(g, axes)| (g, out_strides[*axes.last().unwrap_or(&0)]))
                .collect(),
            ..Flat::default()
        };
        let index = self.flat_expr(store, &loops, &mut hoisted);
        let n = loops.groups.len();
        let partitioned = match n {
            0 => None,
            _ => self.partition(id, &index, &val, &loops, &shape, dtype, &mut hoisted)?,
        };
        let mut stmt = match partitioned {
            // The innermost loop is already split into its parts: the loop nest starts one
            // level up.
            Some(parts) => parts,
            None => Stmt::Store {
                buffer: id,
                index,
                value: self.expr(&val, &loops, &mut hoisted)?,
            },
        };
        let skip_inner = matches!(stmt, Stmt::Seq(_));
        for g in (0..n).rev() {
            let extent: i64 = loops.groups[g].iter().map(|&a| shape[a]).product();
            if g + 1 == n && skip_inner {
                if g > 0 && !hoisted.is_empty() {
                    let mut seq: Vec<Stmt> = hoisted
                        .drain(..)
                        .map(|(_, local, value)| Stmt::Assign { local, value })
                        .collect();
                    seq.push(stmt);
                    stmt = Stmt::Seq(seq);
                }
                if g == 0 {
                    // A single partitioned loop: its parts run one after another.
                    let mut seq: Vec<Stmt> = hoisted
                        .drain(..)
                        .map(|(_, local, value)| Stmt::Assign { local, value })
                        .collect();
                    seq.push(stmt);
                    stmt = Stmt::Seq(seq);
                }
                continue;
            }
            let kind = match (g + 1 == n && vectorize, g == 0 && total >= PARALLEL_WORK) {
                (true, true) => ForKind::Parallel { lanes: LANES },
                (false, true) => ForKind::Parallel { lanes: 1 },
                (true, false) => ForKind::Vectorized { lanes: LANES },
                (false, false) => ForKind::Serial,
            };
            stmt = Stmt::For {
                var: loops.counters[g],
                extent,
                kind,
                body: Box::new(stmt),
            };
            if g + 1 == n && g > 0 && !hoisted.is_empty() {
                let mut seq: Vec<Stmt> = hoisted
                    .drain(..)
                    .map(|(_, local, value)| Stmt::Assign { local, value })
                    .collect();
                seq.push(stmt);
                stmt = Stmt::Seq(seq);
            }
        }
        Ok(stmt)
    }

    /// Groups the output's axes of extent > 1 into loops: adjacent axes merge when every load
    /// reads both contiguously or neither.
    fn schedule(&mut self, shape: &[i64], val: &Val) -> Loops {
        let mut loads = Vec::new();
        let mut general = false;
        collect_loads(val, &mut loads, &mut general);
        // Per load: the input dimension each axis indexes, and the input's strides.
        let mut positions: Vec<(HashMap<usize, usize>, Vec<i64>)> = Vec::new();
        for (buffer, dims) in &loads {
            let mut pos = HashMap::new();
            for (d, ix) in dims.iter().enumerate() {
                match ix {
                    Ix::Axis(k) => {
                        if pos.insert(*k, d).is_some() {
                            general = true;
                        }
                    }
                    Ix::Const(_) => {}
                    Ix::Bin(..) | Ix::Dyn(_) => general = true,
                }
            }
            let shape = self.shapes.get(*buffer).cloned().unwrap_or_default();
            positions.push((pos, strides(&shape)));
        }
        let mergeable = |a: usize, b: usize| {
            !general
                && positions
                    .iter()
                    .all(|(pos, st)| match (pos.get(&a), pos.get(&b)) {
                        (None, None) => true,
                        (Some(&da), Some(&db)) => st[da] == shape[b].saturating_mul(st[db]),
                        _ => false,
                    })
        };
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for k in (0..shape.len()).filter(|&k| shape[k] > 1) {
            match groups.last_mut() {
                Some(g) if mergeable(*g.last().unwrap_or(&k), k) => g.push(k),
                _ => groups.push(vec![k]),
            }
        }
        let counters = (0..groups.len())
            .map(|g| self.local(format!("i{g}"), DType::I64))
            .collect();
        Loops {
            groups,
            counters,
            shape: shape.to_vec(),
            hoist: true,
        }
    }

    /// A flat index as an expression; with two loops or more, its part that does not change in
    /// the innermost loop is hoisted into a local computed before it.
    fn flat_expr(
        &mut self,
        flat: Flat,
        loops: &Loops,
        hoisted: &mut Vec<(String, LocalId, LExpr)>,
    ) -> LExpr {
        let inner = loops.groups.len().checked_sub(1);
        let term = |g: usize, c: i64| {
            let v = LExpr::Local(loops.counters[g]);
            if c == 1 {
                v
            } else {
                bin(BinaryOp::Mul, v, LExpr::Int(c.into(), DType::I64))
            }
        };
        let sum = |parts: Vec<LExpr>| {
            parts
                .into_iter()
                .reduce(|a, b| bin(BinaryOp::Add, a, b))
                .unwrap_or(LExpr::Int(0, DType::I64))
        };
        let mut outer = Vec::new();
        let mut outer_varies = false;
        let mut inner_parts = Vec::new();
        for &(g, c) in &flat.terms {
            if c == 0 {
                continue;
            }
            if Some(g) == inner {
                inner_parts.push(term(g, c));
            } else {
                outer_varies = true;
                outer.push(term(g, c));
            }
        }
        if flat.konst != 0 {
            outer.push(LExpr::Int(flat.konst.into(), DType::I64));
        }
        for (e, varies) in flat.other {
            if varies {
                inner_parts.push(e);
            } else {
                outer_varies = true;
                outer.push(e);
            }
        }
        // A lone counter or constant is as cheap to use as a hoisted local.
        let compound = outer.len() > 1 || matches!(outer.first(), Some(LExpr::Binary(..)));
        let hoist = loops.hoist && outer_varies && compound && loops.groups.len() >= 2;
        let outer = if hoist {
            let value = sum(outer);
            let key = format!("{value:?}");
            let local = match hoisted.iter().find(|(k, ..)| *k == key) {
                Some((_, local, _)) => *local,
                None => {
                    let local = self.local(format!("o{}", self.func.locals.len()), DType::I64);
                    hoisted.push((key, local, value));
                    local
                }
            };
            vec![LExpr::Local(local)]
        } else {
            outer
        };
        sum(outer.into_iter().chain(inner_parts).collect())
    }

    /// A [`Val`] as a loop nest expression.
    fn expr(
        &mut self,
        v: &Val,
        loops: &Loops,
        hoisted: &mut Vec<(String, LocalId, LExpr)>,
    ) -> Result<LExpr, String> {
        relay_ir::ensure_sufficient_stack(|| {
            let mut b = |v: &Val| self.expr(v, loops, hoisted).map(Box::new);
            Ok(match v {
                Val::Int(c, d) => LExpr::Int(*c, *d),
                Val::Float(c, d) => LExpr::Float(*c, *d),
                Val::Index(ix) => self.ix_expr(ix, loops, hoisted)?,
                Val::Unary(op, a) => LExpr::Unary(*op, b(a)?),
                Val::Binary(op, x, y) => LExpr::Binary(*op, b(x)?, b(y)?),
                Val::Compare(op, x, y) => LExpr::Compare(*op, b(x)?, b(y)?),
                Val::Select(c, x, y) => LExpr::Select(b(c)?, b(x)?, b(y)?),
                Val::Cast(d, a) => LExpr::Cast(*d, b(a)?),
                Val::Acc(n) => self
                    .accs
                    .get(*n)
                    .cloned()
                    .ok_or_else(|| format!("reduction {n} is not computed"))?,
                Val::Load { buffer, dims } => {
                    let shape = self
                        .shapes
                        .get(*buffer)
                        .cloned()
                        .ok_or_else(|| format!("no kernel buffer {buffer}"))?;
                    let st = strides(&shape);
                    let mut flat = Flat::default();
                    let inner = loops.groups.len().checked_sub(1);
                    for (d, ix) in dims.iter().enumerate() {
                        match ix {
                            Ix::Const(c) => {
                                flat.konst = flat.konst.saturating_add(c.saturating_mul(st[d]))
                            }
                            Ix::Axis(k) => {
                                let g = loops
                                    .group_of(*k)
                                    .ok_or_else(|| format!("axis {k} has no loop"))?;
                                // In a merged group only the group's last axis is read; the
                                // group's counter times its stride covers the others.
                                if loops.groups[g].last() == Some(k) {
                                    flat.terms.push((g, st[d]));
                                }
                            }
                            Ix::Bin(..) | Ix::Dyn(_) => {
                                let e = self.ix_expr(ix, loops, hoisted)?;
                                let varies = inner.is_some_and(|g| mentions(ix, &loops.groups[g]));
                                let e = if st[d] == 1 {
                                    e
                                } else {
                                    bin(BinaryOp::Mul, e, LExpr::Int(st[d].into(), DType::I64))
                                };
                                flat.other.push((e, varies));
                            }
                        }
                    }
                    flat.terms.sort_by_key(|&(g, _)| g);
                    let index = self.flat_expr(flat, loops, hoisted);
                    LExpr::Load {
                        buffer: BufferId(*buffer as u32),
                        index: Box::new(index),
                    }
                }
            })
        })
    }
}

impl Nest<'_> {
    /// The loop nest of an output whose value needs reductions: one serial loop per output axis
    /// (of extent > 1); inside it each reduction's own serial loops accumulate into a local,
    /// then the element is stored. (Vector accumulators and merged loops are later work.)
    fn reduce_output(
        &mut self,
        id: BufferId,
        shape: &[i64],
        val: &Val,
        inliner: &Inliner<'_>,
    ) -> Result<Stmt, String> {
        let rank = shape.len();
        // The output axes each reduction depends on; the axes most reductions depend on loop
        // outermost, so that a reduction sits in the loops it depends on only and is computed
        // once per value (a reduction broadcast along an outer loop is recomputed).
        let deps: Vec<Vec<usize>> = inliner
            .reductions
            .iter()
            .map(|r| {
                let mut axes = Vec::new();
                val_axes(&r.body, &mut axes);
                axes.retain(|&k| k < rank);
                axes.sort_unstable();
                axes.dedup();
                axes
            })
            .collect();
        let mut order: Vec<usize> = (0..rank).filter(|&k| shape[k] > 1).collect();
        order.sort_by_key(|k| std::cmp::Reverse(deps.iter().filter(|d| d.contains(k)).count()));
        let mut groups: Vec<Vec<usize>> = order.iter().map(|&k| vec![k]).collect();
        let n_out = groups.len();
        for (j, &e) in inliner.red_extents.iter().enumerate() {
            if e != 1 {
                groups.push(vec![rank + j]);
            }
        }
        let counters = (0..groups.len())
            .map(|g| {
                let name = if g < n_out {
                    format!("i{g}")
                } else {
                    format!("r{}", g - n_out)
                };
                self.local(name, DType::I64)
            })
            .collect();
        let mut all_shape = shape.to_vec();
        all_shape.extend(&inliner.red_extents);
        let loops = Loops {
            groups,
            counters,
            shape: all_shape,
            hoist: false,
        };
        let mut hoisted = Vec::new();
        let out_strides = strides(shape);
        let store = Flat {
            terms: (0..n_out)
                .map(|g| (g, out_strides[loops.groups[g][0]]))
                .collect(),
            ..Flat::default()
        };
        let index = self.flat_expr(store, &loops, &mut hoisted);
        // Each reduction's statements at its level: inside the loops of the axes it depends on.
        let mut levels: Vec<Vec<Stmt>> = (0..=n_out).map(|_| Vec::new()).collect();
        self.accs.clear();
        for (red, dep) in inliner.reductions.iter().zip(&deps) {
            let (stmt, result) = self.reduction(red, &loops, &mut hoisted)?;
            let level = dep
                .iter()
                .filter_map(|k| order.iter().position(|o| o == k))
                .map(|p| p + 1)
                .max()
                .unwrap_or(0);
            levels[level].push(stmt);
            self.accs.push(result);
        }
        let value = self.expr(val, &loops, &mut hoisted)?;
        let mut inner = levels.pop().unwrap_or_default();
        inner.push(Stmt::Store {
            buffer: id,
            index,
            value,
        });
        let mut stmt = Stmt::Seq(inner);
        let work = shape
            .iter()
            .chain(&inliner.red_extents)
            .fold(1i64, |w, &e| w.saturating_mul(e));
        for g in (0..n_out).rev() {
            let parallel = g == 0 && work >= PARALLEL_WORK && levels.iter().all(Vec::is_empty);
            stmt = Stmt::For {
                var: loops.counters[g],
                extent: shape[loops.groups[g][0]],
                kind: if parallel {
                    ForKind::Parallel { lanes: 1 }
                } else {
                    ForKind::Serial
                },
                body: Box::new(stmt),
            };
            let mut seq = levels.pop().unwrap_or_default();
            if !seq.is_empty() {
                seq.push(stmt);
                stmt = Stmt::Seq(seq);
            }
        }
        Ok(stmt)
    }

    /// The statements computing one reduction into locals, and its result.
    fn reduction(
        &mut self,
        red: &Red,
        loops: &Loops,
        hoisted: &mut Vec<(String, LocalId, LExpr)>,
    ) -> Result<(Stmt, LExpr), String> {
        let d = red.body_dtype;
        let float = d.is_float();
        let body = self.expr(&red.body, loops, hoisted)?;
        let v = self.local(format!("v{}", self.func.locals.len()), d);
        let acc = self.local(format!("acc{}", self.func.locals.len()), d);
        let (lv, la) = (LExpr::Local(v), LExpr::Local(acc));
        let (lo, hi) = extremes(d);
        let init = match red.op {
            ReduceOp::Sum | ReduceOp::Any => LExpr::Int(0, d),
            ReduceOp::Prod | ReduceOp::All => LExpr::Int(1, d),
            ReduceOp::Max | ReduceOp::ArgMax { .. } => lo,
            ReduceOp::Min | ReduceOp::ArgMin { .. } => hi,
        };
        let init = match init {
            LExpr::Int(c, d) if float => LExpr::Float(c as f64, d),
            e => e,
        };
        let nan = |e: &LExpr| LExpr::Unary(UnaryOp::IsNan, Box::new(e.clone()));
        let cmp = |op: CmpOp, a: &LExpr, b: &LExpr| {
            LExpr::Compare(op, Box::new(a.clone()), Box::new(b.clone()))
        };
        let mut pre = vec![Stmt::Assign {
            local: acc,
            value: init,
        }];
        let mut step = vec![Stmt::Assign {
            local: v,
            value: body,
        }];
        let mut result = la.clone();
        match red.op {
            ReduceOp::Sum | ReduceOp::Prod | ReduceOp::All | ReduceOp::Any => {
                let op = match red.op {
                    ReduceOp::Sum => BinaryOp::Add,
                    ReduceOp::Prod => BinaryOp::Mul,
                    ReduceOp::All => BinaryOp::LogicalAnd,
                    _ => BinaryOp::LogicalOr,
                };
                step.push(Stmt::Assign {
                    local: acc,
                    value: bin(op, la.clone(), lv.clone()),
                });
            }
            ReduceOp::Max | ReduceOp::Min => {
                let op = if red.op == ReduceOp::Max {
                    CmpOp::Gt
                } else {
                    CmpOp::Lt
                };
                let mut take = cmp(op, &lv, &la);
                if float {
                    take = bin(BinaryOp::LogicalOr, take, nan(&lv));
                }
                step.push(Stmt::Assign {
                    local: acc,
                    value: LExpr::Select(
                        Box::new(take),
                        Box::new(lv.clone()),
                        Box::new(la.clone()),
                    ),
                });
            }
            ReduceOp::ArgMax { last } | ReduceOp::ArgMin { last } => {
                let op = if matches!(red.op, ReduceOp::ArgMax { .. }) {
                    CmpOp::Gt
                } else {
                    CmpOp::Lt
                };
                let mut better = cmp(op, &lv, &la);
                if last {
                    better = bin(BinaryOp::LogicalOr, better, cmp(CmpOp::Eq, &lv, &la));
                }
                let take = if float {
                    // NaN is the extreme: a NaN replaces a number, and a NaN only when `last`.
                    let after_nan = if last {
                        nan(&lv)
                    } else {
                        LExpr::Int(0, DType::BOOL)
                    };
                    LExpr::Select(
                        Box::new(nan(&la)),
                        Box::new(after_nan),
                        Box::new(bin(BinaryOp::LogicalOr, nan(&lv), better)),
                    )
                } else {
                    better
                };
                let pos = self.local(format!("pos{}", self.func.locals.len()), DType::I64);
                let t = self.local(format!("take{}", self.func.locals.len()), DType::BOOL);
                pre.push(Stmt::Assign {
                    local: pos,
                    value: LExpr::Int(0, DType::I64),
                });
                // The position, row-major over the reduction axes.
                let mut here: Option<LExpr> = None;
                let mut stride = 1i64;
                for &(k, e) in red.axes.iter().rev() {
                    if e != 1 {
                        let g = loops
                            .group_of(k)
                            .ok_or_else(|| format!("axis {k} has no loop"))?;
                        let c = LExpr::Local(loops.counters[g]);
                        let term = if stride == 1 {
                            c
                        } else {
                            bin(BinaryOp::Mul, c, LExpr::Int(stride.into(), DType::I64))
                        };
                        here = Some(match here {
                            None => term,
                            Some(h) => bin(BinaryOp::Add, term, h),
                        });
                    }
                    stride = stride.saturating_mul(e);
                }
                let here = here.unwrap_or(LExpr::Int(0, DType::I64));
                let lt = LExpr::Local(t);
                step.push(Stmt::Assign {
                    local: t,
                    value: take,
                });
                step.push(Stmt::Assign {
                    local: pos,
                    value: LExpr::Select(
                        Box::new(lt.clone()),
                        Box::new(here),
                        Box::new(LExpr::Local(pos)),
                    ),
                });
                step.push(Stmt::Assign {
                    local: acc,
                    value: LExpr::Select(Box::new(lt), Box::new(lv.clone()), Box::new(la.clone())),
                });
                result = LExpr::Cast(red.dtype, Box::new(LExpr::Local(pos)));
            }
        }
        let mut stmt = Stmt::Seq(step);
        // The innermost reduction loop of an associative fold runs with one accumulator per
        // vector lane (codegen combines the lanes after the loop).
        let mut vector = matches!(
            red.op,
            ReduceOp::Sum | ReduceOp::Prod | ReduceOp::All | ReduceOp::Any
        );
        for &(k, e) in red.axes.iter().rev() {
            if e != 1 {
                let g = loops
                    .group_of(k)
                    .ok_or_else(|| format!("axis {k} has no loop"))?;
                stmt = Stmt::For {
                    var: loops.counters[g],
                    extent: e,
                    kind: if vector {
                        ForKind::Vectorized { lanes: LANES }
                    } else {
                        ForKind::Serial
                    },
                    body: Box::new(stmt),
                };
                vector = false;
            }
        }
        pre.push(stmt);
        Ok((Stmt::Seq(pre), result))
    }
}

/// The axes the indices of a value mention.
fn val_axes(v: &Val, out: &mut Vec<usize>) {
    fn ix_axes(ix: &Ix, out: &mut Vec<usize>) {
        match ix {
            Ix::Axis(k) => out.push(*k),
            Ix::Const(_) => {}
            Ix::Bin(_, a, b) => {
                ix_axes(a, out);
                ix_axes(b, out);
            }
            Ix::Dyn(v) => val_axes(v, out),
        }
    }
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Val::Int(..) | Val::Float(..) | Val::Acc(_) => {}
            Val::Index(ix) => ix_axes(ix, out),
            Val::Load { dims, .. } => dims.iter().for_each(|ix| ix_axes(ix, out)),
            Val::Unary(_, a) | Val::Cast(_, a) => stack.push(a),
            Val::Binary(_, a, b) | Val::Compare(_, a, b) => {
                stack.push(b);
                stack.push(a);
            }
            Val::Select(c, a, b) => {
                stack.push(b);
                stack.push(a);
                stack.push(c);
            }
        }
    }
}

/// The least and greatest values of `dtype` (infinities for floats), as constants.
fn extremes(dtype: DType) -> (LExpr, LExpr) {
    if dtype.is_float() {
        return (
            LExpr::Float(f64::NEG_INFINITY, dtype),
            LExpr::Float(f64::INFINITY, dtype),
        );
    }
    let bits = u32::from(dtype.bits).clamp(1, 64);
    let (lo, hi) = if dtype.code == relay_ir::DTypeCode::Bool {
        (0, 1)
    } else if dtype.code == relay_ir::DTypeCode::UInt {
        (0, (1i128 << bits) - 1)
    } else {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    };
    (LExpr::Int(lo, dtype), LExpr::Int(hi, dtype))
}

/// Whether an index expression uses one of `axes`.
fn mentions(ix: &Ix, axes: &[usize]) -> bool {
    match ix {
        Ix::Axis(k) => axes.contains(k),
        Ix::Const(_) => false,
        Ix::Bin(_, a, b) => mentions(a, axes) || mentions(b, axes),
        Ix::Dyn(v) => {
            let mut used = Vec::new();
            val_axes(v, &mut used);
            used.iter().any(|k| axes.contains(k))
        }
    }
}

/// The terms of a conjunction (`a && b && ...`).
fn conjuncts<'v>(v: &'v Val, out: &mut Vec<&'v Val>) {
    match v {
        Val::Binary(BinaryOp::LogicalAnd, a, b) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        other => out.push(other),
    }
}

/// A value that is an index (or an `int64` constant), as one.
fn as_index(v: &Val) -> Option<Ix> {
    match v {
        Val::Index(ix) => Some(ix.clone()),
        Val::Int(c, d) if *d == DType::I64 => i64::try_from(*c).ok().map(Ix::Const),
        _ => None,
    }
}

/// `ix` as `coef * axis_k + rest` with `rest` free of axis `k`, when it is linear in it.
fn split_axis(ix: &Ix, k: usize) -> Option<(i64, Ix)> {
    match ix {
        Ix::Axis(j) if *j == k => Some((1, Ix::Const(0))),
        Ix::Bin(op @ (BinaryOp::Add | BinaryOp::Sub), a, b) => {
            let ((ca, ra), (cb, rb)) = (split_axis(a, k)?, split_axis(b, k)?);
            let c = if *op == BinaryOp::Add {
                ca.checked_add(cb)?
            } else {
                ca.checked_sub(cb)?
            };
            Some((c, fold(*op, ra, rb)))
        }
        Ix::Bin(BinaryOp::Mul, a, b) => match (a.as_ref(), b.as_ref()) {
            (x, Ix::Const(m)) | (Ix::Const(m), x) => {
                let (c, r) = split_axis(x, k)?;
                Some((c.checked_mul(*m)?, fold(BinaryOp::Mul, r, Ix::Const(*m))))
            }
            _ => (!mentions(ix, &[k])).then(|| (0, ix.clone())),
        },
        _ => (!mentions(ix, &[k])).then(|| (0, ix.clone())),
    }
}

/// `v` with every clamp `max(0, min(x, n - 1))` (either order) of a guarded index `x`
/// (known to lie in `0..n`, by its key) replaced by `x`.
fn unclamp(v: &Val, guarded: &[(String, i64)]) -> Val {
    /// `(x, m)` when `i` is `max(0, min(x, m))` or `min(max(x, 0), m)`, operands in either
    /// order.
    fn clamp_of(i: &Ix) -> Option<(&Ix, i64)> {
        let Ix::Bin(op @ (BinaryOp::Max | BinaryOp::Min), a, b) = i else {
            return None;
        };
        let inner = if *op == BinaryOp::Max {
            BinaryOp::Min
        } else {
            BinaryOp::Max
        };
        let (c, Ix::Bin(iop, x, d)) = (match (a.as_ref(), b.as_ref()) {
            (c @ Ix::Const(_), other) | (other, c @ Ix::Const(_)) => (c, other),
            _ => return None,
        }) else {
            return None;
        };
        let (Ix::Const(c), Ix::Const(d)) = (c, d.as_ref()) else {
            return None;
        };
        // max(0, min(x, m)) or min(max(x, 0), m).
        match (*op, *c, *d) {
            (BinaryOp::Max, 0, m) | (BinaryOp::Min, m, 0) if *iop == inner => Some((x, m)),
            _ => None,
        }
    }
    fn ix(i: &Ix, guarded: &[(String, i64)]) -> Ix {
        if let Some((x, m)) = clamp_of(i) {
            let key = format!("{x:?}");
            if guarded.iter().any(|(k, n)| *k == key && *n == m + 1) {
                return x.clone();
            }
        }
        match i {
            Ix::Bin(op, a, b) => Ix::Bin(*op, Box::new(ix(a, guarded)), Box::new(ix(b, guarded))),
            Ix::Dyn(v) => Ix::Dyn(Box::new(unclamp(v, guarded))),
            other => other.clone(),
        }
    }
    let b = |x: &Val| Box::new(unclamp(x, guarded));
    match v {
        Val::Index(i) => Val::Index(ix(i, guarded)),
        Val::Load { buffer, dims } => Val::Load {
            buffer: *buffer,
            dims: dims.iter().map(|d| ix(d, guarded)).collect(),
        },
        Val::Unary(op, a) => Val::Unary(*op, b(a)),
        Val::Binary(op, x, y) => Val::Binary(*op, b(x), b(y)),
        Val::Compare(op, x, y) => Val::Compare(*op, b(x), b(y)),
        Val::Select(c, x, y) => Val::Select(b(c), b(x), b(y)),
        Val::Cast(d, a) => Val::Cast(*d, b(a)),
        other => other.clone(),
    }
}

/// Whether a value computes in 32-bit lanes only (loads of 32-bit buffers, 32-bit constants
/// and operations on them), so that a loop storing it can be vectorized.
fn lanes32(v: &Val, shapes_dtypes: &[DType]) -> bool {
    let is32 = |d: DType| d.bits == 32 && d.lanes == 1 && d.code != relay_ir::DTypeCode::Bool;
    match v {
        Val::Int(_, d) | Val::Float(_, d) => is32(*d),
        Val::Load { buffer, .. } => shapes_dtypes.get(*buffer).is_some_and(|&d| is32(d)),
        Val::Unary(_, a) => lanes32(a, shapes_dtypes),
        Val::Binary(_, a, b) => lanes32(a, shapes_dtypes) && lanes32(b, shapes_dtypes),
        Val::Cast(d, a) => is32(*d) && lanes32(a, shapes_dtypes),
        Val::Index(_) | Val::Acc(_) | Val::Compare(..) | Val::Select(..) => false,
    }
}

impl Nest<'_> {
    /// Loop partitioning (TVM's `LoopPartition`) of the innermost loop of an injective output
    /// whose value is `select(cond, then, else)` where `cond` bounds the innermost counter
    /// linearly (a padded read: `x + k - 1 >= 0 && x + k - 1 < 56`): the loop splits into the
    /// iterations before, inside and after the range where `cond` holds — `else`, then `then`
    /// with the clamps of the guarded indices removed (contiguous, vectorizable reads), then
    /// `else` again. Conditions that do not involve the counter empty the middle part when
    /// false. `None` when the value has no such form.
    #[allow(clippy::too_many_arguments)]
    fn partition(
        &mut self,
        id: BufferId,
        index: &LExpr,
        val: &Val,
        loops: &Loops,
        shape: &[i64],
        dtype: DType,
        hoisted: &mut Vec<(String, LocalId, LExpr)>,
    ) -> Result<Option<Stmt>, String> {
        let Val::Select(cond, then, otherwise) = val else {
            return Ok(None);
        };
        let g = loops.groups.len() - 1;
        let [k] = loops.groups[g][..] else {
            return Ok(None);
        };
        let extent = shape[k];
        let mut terms = Vec::new();
        conjuncts(cond, &mut terms);
        let (mut lower, mut upper, mut outer) = (Vec::new(), Vec::new(), Vec::new());
        let mut guarded_lo: Vec<String> = Vec::new();
        let mut guarded_hi: Vec<(String, i64)> = Vec::new();
        let i64c = |c: i64| LExpr::Int(c.into(), DType::I64);
        for t in terms {
            let mut used = Vec::new();
            val_axes(t, &mut used);
            let involves = used.contains(&k);
            let compare = match t {
                Val::Compare(op, a, b) => as_index(a).zip(as_index(b)).map(|(a, b)| (*op, a, b)),
                _ => None,
            };
            let Some((op, a, b)) = compare else {
                if involves {
                    return Ok(None);
                }
                outer.push(t);
                continue;
            };
            // Guards `x >= 0`, `x < n`, `x <= n - 1` of an index `x`.
            match (op, &b) {
                (CmpOp::Ge, Ix::Const(0)) => guarded_lo.push(format!("{a:?}")),
                (CmpOp::Lt, Ix::Const(n)) => guarded_hi.push((format!("{a:?}"), *n)),
                (CmpOp::Le, Ix::Const(n)) => guarded_hi.push((format!("{a:?}"), n + 1)),
                _ => {}
            }
            if !involves {
                outer.push(t);
                continue;
            }
            let (Some((ca, ra)), Some((cb, rb))) = (split_axis(&a, k), split_axis(&b, k)) else {
                return Ok(None);
            };
            // c * i + r OP 0.
            let (mut c, mut r, mut op) = (ca - cb, fold(BinaryOp::Sub, ra, rb), op);
            if c == 0 {
                outer.push(t);
                continue;
            }
            if c < 0 {
                c = -c;
                r = fold(BinaryOp::Sub, Ix::Const(0), r);
                op = match op {
                    CmpOp::Ge => CmpOp::Le,
                    CmpOp::Gt => CmpOp::Lt,
                    CmpOp::Lt => CmpOp::Gt,
                    CmpOp::Le => CmpOp::Ge,
                    other => other,
                };
            }
            // With q = -r: c*i >= q  <=>  i >= ceil(q / c), and so on.
            let q = self.ix_expr(&fold(BinaryOp::Sub, Ix::Const(0), r), loops, hoisted)?;
            let floor = |q: LExpr| bin(BinaryOp::FloorDiv, q, i64c(c));
            let ceil = |q: LExpr| {
                bin(
                    BinaryOp::FloorDiv,
                    bin(BinaryOp::Add, q, i64c(c - 1)),
                    i64c(c),
                )
            };
            match op {
                CmpOp::Ge => lower.push(ceil(q)),
                CmpOp::Gt => lower.push(bin(BinaryOp::Add, floor(q), i64c(1))),
                CmpOp::Lt => upper.push(ceil(q)),
                CmpOp::Le => upper.push(bin(BinaryOp::Add, floor(q), i64c(1))),
                CmpOp::Eq | CmpOp::Ne => return Ok(None),
            }
        }
        if lower.is_empty() && upper.is_empty() {
            return Ok(None);
        }
        let guarded: Vec<(String, i64)> = guarded_hi
            .into_iter()
            .filter(|(key, _)| guarded_lo.contains(key))
            .collect();
        let lo = lower
            .into_iter()
            .fold(i64c(0), |acc, e| bin(BinaryOp::Max, acc, e));
        let mut hi = upper
            .into_iter()
            .fold(i64c(extent), |acc, e| bin(BinaryOp::Min, acc, e));
        let (lo_l, hi_l) = (
            self.local(format!("lo{}", self.func.locals.len()), DType::I64),
            self.local(format!("hi{}", self.func.locals.len()), DType::I64),
        );
        if let Some(first) = outer.first() {
            let mut c = self.expr(first, loops, hoisted)?;
            for t in &outer[1..] {
                c = bin(BinaryOp::LogicalAnd, c, self.expr(t, loops, hoisted)?);
            }
            hi = LExpr::Select(Box::new(c), Box::new(hi), Box::new(LExpr::Local(lo_l)));
        }
        // The parts do not overlap: `lo <= hi`.
        let hi = bin(BinaryOp::Max, hi, LExpr::Local(lo_l));
        let inside = unclamp(then, &guarded);
        let dtypes: Vec<DType> = self.func.buffers.iter().map(|b| b.dtype).collect();
        let kind = |v: &Val| {
            if lanes32(v, &dtypes) && dtype.bits == 32 && dtype.code != relay_ir::DTypeCode::Bool {
                ForKind::Vectorized { lanes: LANES }
            } else {
                ForKind::Serial
            }
        };
        let (inside_kind, outside_kind) = (kind(&inside), kind(otherwise));
        let inside_v = self.expr(&inside, loops, hoisted)?;
        let outside_v = self.expr(otherwise, loops, hoisted)?;
        let var = loops.counters[g];
        let store = |value: LExpr| Stmt::Store {
            buffer: id,
            index: index.clone(),
            value,
        };
        let part = |start: LExpr, end: LExpr, kind: ForKind, value: LExpr| Stmt::Range {
            var,
            start,
            end,
            extent,
            kind,
            body: Box::new(store(value)),
        };
        Ok(Some(Stmt::Seq(vec![
            Stmt::Assign {
                local: lo_l,
                value: lo,
            },
            Stmt::Assign {
                local: hi_l,
                value: hi,
            },
            part(i64c(0), LExpr::Local(lo_l), outside_kind, outside_v.clone()),
            part(
                LExpr::Local(lo_l),
                LExpr::Local(hi_l),
                inside_kind,
                inside_v,
            ),
            part(LExpr::Local(hi_l), i64c(extent), outside_kind, outside_v),
        ])))
    }
}

/// One axis of a contraction with its strides in `a`, `b` and `c`.
#[derive(Clone, Copy, Debug)]
struct GemmAxis {
    extent: i64,
    sa: i64,
    sb: i64,
    sc: i64,
}

/// Splits `axes` (outermost first) into the longest innermost run whose strides merge into
/// one matrix dimension under each of `keys` (each axis's stride is the next inner one's
/// times its extent), returned as (extent, innermost axis), and the outer rest.
fn merge(
    axes: &[GemmAxis],
    keys: &[fn(&GemmAxis) -> i64],
) -> (Option<(i64, GemmAxis)>, Vec<GemmAxis>) {
    let Some(&inner) = axes.last() else {
        return (None, Vec::new());
    };
    let mut start = axes.len() - 1;
    let mut extent = inner.extent;
    while start > 0 {
        let (outer, next) = (axes[start - 1], axes[start]);
        let fits = keys
            .iter()
            .all(|k| Some(k(&outer)) == k(&next).checked_mul(next.extent));
        match (fits, extent.checked_mul(outer.extent)) {
            (true, Some(e)) => {
                extent = e;
                start -= 1;
            }
            _ => break,
        }
    }
    (Some((extent, inner)), axes[..start].to_vec())
}

impl Nest<'_> {
    /// The statements computing the contraction `t` into buffer `id` with the host's GEMM:
    /// the output axes only `a` reads are the rows, those only `b` reads the columns, the
    /// reduction axes the inner dimension; other output axes (read by both, by neither, or
    /// not merging into the matrix dimensions) become loops around the call.
    fn gemm(&mut self, id: BufferId, t: &Tensor, c: &Contraction) -> Result<Stmt, Fail> {
        let shape = &t.shape;
        if shape.contains(&0) {
            return Ok(Stmt::Seq(Vec::new()));
        }
        let operand = |(tensor, _): &(Tensor, Vec<Index>)| -> Result<usize, String> {
            match tensor.op {
                TensorOp::Placeholder(i) => Ok(i),
                TensorOp::Compute { .. } => self
                    .buffers
                    .get(&key(tensor))
                    .copied()
                    .ok_or_else(|| format!("`{}` is not materialized", tensor.name)),
            }
        };
        let (abuf, bbuf) = (operand(&c.a)?, operand(&c.b)?);
        let (ast, bst, cst) = (strides(&c.a.0.shape), strides(&c.b.0.shape), strides(shape));
        let stride = |ix: &[Index], st: &[i64], want: Index| -> i64 {
            ix.iter().position(|&i| i == want).map_or(0, |d| st[d])
        };
        let konst = |ix: &[Index], st: &[i64]| -> i64 {
            ix.iter()
                .zip(st)
                .map(|(i, s)| match i {
                    Index::Const(v) => v * s,
                    _ => 0,
                })
                .sum()
        };
        let (mut rows, mut cols, mut batch, mut inner) = (vec![], vec![], vec![], vec![]);
        for (k, &extent) in shape.iter().enumerate() {
            if extent == 1 {
                continue;
            }
            let axis = GemmAxis {
                extent,
                sa: stride(&c.a.1, &ast, Index::Out(k)),
                sb: stride(&c.b.1, &bst, Index::Out(k)),
                sc: cst[k],
            };
            let (in_a, in_b) = (
                c.a.1.contains(&Index::Out(k)),
                c.b.1.contains(&Index::Out(k)),
            );
            match (in_a, in_b) {
                (true, false) => rows.push(axis),
                (false, true) => cols.push(axis),
                _ => batch.push(axis),
            }
        }
        for (j, &extent) in c.red_extents.iter().enumerate() {
            if extent != 1 {
                inner.push(GemmAxis {
                    extent,
                    sa: stride(&c.a.1, &ast, Index::Red(j)),
                    sb: stride(&c.b.1, &bst, Index::Red(j)),
                    sc: 0,
                });
            }
        }
        rows.sort_by_key(|a| std::cmp::Reverse(a.sc));
        cols.sort_by_key(|a| std::cmp::Reverse(a.sc));
        inner.sort_by_key(|a| std::cmp::Reverse(a.sa));
        let (m, rest) = merge(&rows, &[|a| a.sa, |a| a.sc]);
        batch.extend(rest);
        let (n, rest) = merge(&cols, &[|a| a.sb, |a| a.sc]);
        batch.extend(rest);
        let k = if inner.iter().any(|a| a.extent == 0) {
            Some((
                0,
                GemmAxis {
                    extent: 0,
                    sa: 0,
                    sb: 0,
                    sc: 0,
                },
            ))
        } else {
            let (k, rest) = merge(&inner, &[|a| a.sa, |a| a.sb]);
            if !rest.is_empty() {
                return Err(Fail::Error(
                    "the reduction axes do not merge into one".into(),
                ));
            }
            k
        };
        let one = GemmAxis {
            extent: 1,
            sa: 0,
            sb: 0,
            sc: 0,
        };
        let (m, mi) = m.unwrap_or((1, one));
        let (n, ni) = n.unwrap_or((1, one));
        let (k, ki) = k.unwrap_or((1, one));
        // The loops over the batch axes, and the offsets they give each matrix.
        let mut offsets = [
            vec![LExpr::Int(konst(&c.a.1, &ast).into(), DType::I64)],
            vec![LExpr::Int(konst(&c.b.1, &bst).into(), DType::I64)],
            vec![],
        ];
        let mut counters = Vec::new();
        for (g, axis) in batch.iter().enumerate() {
            let counter = self.local(format!("b{g}"), DType::I64);
            counters.push((counter, axis.extent));
            for (o, s) in offsets.iter_mut().zip([axis.sa, axis.sb, axis.sc]) {
                if s != 0 {
                    o.push(bin(
                        BinaryOp::Mul,
                        LExpr::Local(counter),
                        LExpr::Int(s.into(), DType::I64),
                    ));
                }
            }
        }
        let [oa, ob, oc] = offsets.map(|parts| {
            parts
                .into_iter()
                .filter(|e| !matches!(e, LExpr::Int(0, _)))
                .reduce(|x, y| bin(BinaryOp::Add, x, y))
                .unwrap_or(LExpr::Int(0, DType::I64))
        });
        let mut gemm = Gemm {
            m,
            n,
            k,
            a: MatrixRef {
                buffer: BufferId(abuf as u32),
                offset: oa,
                row_stride: mi.sa,
                col_stride: ki.sa,
            },
            b: MatrixRef {
                buffer: BufferId(bbuf as u32),
                offset: ob,
                row_stride: ki.sb,
                col_stride: ni.sb,
            },
            c: MatrixRef {
                buffer: id,
                offset: oc,
                row_stride: mi.sc,
                col_stride: ni.sc,
            },
        };
        // The GEMM is fastest writing rows of `c` contiguously: a column-major result is
        // computed as the transposed product `c^T = b^T a^T`.
        if gemm.c.row_stride < gemm.c.col_stride && gemm.m > 1 {
            let t = |m: MatrixRef| MatrixRef {
                row_stride: m.col_stride,
                col_stride: m.row_stride,
                ..m
            };
            gemm = Gemm {
                m: gemm.n,
                n: gemm.m,
                k: gemm.k,
                a: t(gemm.b),
                b: t(gemm.a),
                c: t(gemm.c),
            };
        }
        let mut stmt = Stmt::Gemm(Box::new(gemm));
        for (counter, extent) in counters.into_iter().rev() {
            stmt = Stmt::For {
                var: counter,
                extent,
                kind: ForKind::Serial,
                body: Box::new(stmt),
            };
        }
        Ok(stmt)
    }
}

impl Nest<'_> {
    /// An index expression from the loop counters.
    fn ix_expr(
        &mut self,
        ix: &Ix,
        loops: &Loops,
        hoisted: &mut Vec<(String, LocalId, LExpr)>,
    ) -> Result<LExpr, String> {
        relay_ir::ensure_sufficient_stack(|| {
            Ok(match ix {
                Ix::Axis(k) => loops.axis_value(*k)?,
                Ix::Const(c) => LExpr::Int((*c).into(), DType::I64),
                Ix::Bin(op, a, b) => {
                    let a = self.ix_expr(a, loops, hoisted)?;
                    bin(*op, a, self.ix_expr(b, loops, hoisted)?)
                }
                Ix::Dyn(v) => self.expr(v, loops, hoisted)?,
            })
        })
    }
}

/// The loads of a value, and whether any index is not a plain axis or constant (or an index
/// is used as a value).
fn collect_loads<'v>(v: &'v Val, out: &mut Vec<(usize, &'v [Ix])>, general: &mut bool) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Val::Int(..) | Val::Float(..) | Val::Acc(_) => {}
            Val::Index(_) => *general = true,
            Val::Load { buffer, dims } => out.push((*buffer, dims)),
            Val::Unary(_, a) | Val::Cast(_, a) => stack.push(a),
            Val::Binary(_, a, b) | Val::Compare(_, a, b) => {
                stack.push(b);
                stack.push(a);
            }
            Val::Select(c, a, b) => {
                stack.push(b);
                stack.push(a);
                stack.push(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compose::compose;
    use crate::compose::tests::primitive;

    /// The printed loop nest of the primitive function in `@main` of a program with parameters
    /// `params` whose primitive function has parameters `prim` and body `body`.
    fn kernel(params: &str, prim: &str, body: &str, args: &str) -> String {
        let text = format!(
            "#[version = \"0.0.5\"]\ndef @main({params}) {{\n  %0 = fn ({prim}, Primitive=1) {{\n    {body}\n  }};\n  %0({args})\n}}"
        );
        let f = primitive(&text);
        let composed = compose(&f).unwrap();
        lower("k", &composed).unwrap().to_string()
    }

    #[test]
    fn broadcast_add_relu_hoists_the_row() {
        let got = kernel(
            "%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32]",
            "%p0: Tensor[(2, 3), float32], %p1: Tensor[(3), float32]",
            "nn.relu(add(%p0, %p1))",
            "%x, %y",
        );
        assert_eq!(
            got,
            "kernel k(p0: float32[2, 3] in, p1: float32[3] in, T_relu: float32[2, 3] out) {
  for i0 in 0..2 {
    o2 = i0 * 3
    for i1 in 0..3 vectorized(4) {
      T_relu[o2 + i1] = select(p0[o2 + i1] + p1[i1] > 0f, p0[o2 + i1] + p1[i1], 0f)
    }
  }
}
"
        );
    }

    #[test]
    fn reduction_with_an_epilogue_and_a_broadcast_consumer() {
        let got = kernel(
            "%x: Tensor[(2, 3), float32]",
            "%p0: Tensor[(2, 3), float32]",
            "sqrt(sum(%p0, axis=[1]))",
            "%x",
        );
        assert!(got.contains("for r0 in 0..3"), "{got}");
        let got = kernel(
            "%x: Tensor[(2, 3), float32], %m: Tensor[(3), float32]",
            "%p0: Tensor[(2, 3), float32], %p1: Tensor[(3), float32]",
            "%0 = max(%p1); subtract(%p0, %0)",
            "%x, %m",
        );
        // The max does not depend on the output's axes: computed once, before the loops.
        assert!(
            got.starts_with("kernel k(")
                && got.find("for r").unwrap() < got.find("for i0").unwrap(),
            "{got}"
        );
    }

    #[test]
    fn same_shapes_give_one_flat_loop() {
        let got = kernel(
            "%x: Tensor[(4, 5), float32], %y: Tensor[(4, 5), float32]",
            "%p0: Tensor[(4, 5), float32], %p1: Tensor[(4, 5), float32]",
            "exp(multiply(%p0, %p1))",
            "%x, %y",
        );
        assert_eq!(
            got,
            "kernel k(p0: float32[4, 5] in, p1: float32[4, 5] in, T_exp: float32[4, 5] out) {
  for i0 in 0..20 vectorized(4) {
    T_exp[i0] = exp(p0[i0] * p1[i0])
  }
}
"
        );
        // Unit dimensions do not split loops; float64 is not vectorized.
        let got = kernel(
            "%x: Tensor[(2, 1, 3), float64]",
            "%p0: Tensor[(2, 1, 3), float64]",
            "add(%p0, 1f64)",
            "%x",
        );
        assert_eq!(
            got,
            "kernel k(p0: float64[2, 1, 3] in, T_add: float64[2, 1, 3] out) {
  for i0 in 0..6 {
    T_add[i0] = p0[i0] + 1f64
  }
}
"
        );
    }

    #[test]
    fn broadcasts_collapse_what_they_share() {
        let got = kernel(
            "%x: Tensor[(2, 1), int32], %y: Tensor[(1, 4), int32]",
            "%p0: Tensor[(2, 1), int32], %p1: Tensor[(1, 4), int32]",
            "subtract(%p0, %p1)",
            "%x, %y",
        );
        assert_eq!(
            got,
            "kernel k(p0: int32[2, 1] in, p1: int32[1, 4] in, T_subtract: int32[2, 4] out) {
  for i0 in 0..2 {
    o2 = i0 * 4
    for i1 in 0..4 vectorized(4) {
      T_subtract[o2 + i1] = p0[i0] - p1[i1]
    }
  }
}
"
        );
        let got = kernel(
            "%x: Tensor[(4, 2, 3), float32], %y: Tensor[(2, 3), float32]",
            "%p0: Tensor[(4, 2, 3), float32], %p1: Tensor[(2, 3), float32]",
            "add(%p0, %p1)",
            "%x, %y",
        );
        assert_eq!(
            got,
            "kernel k(p0: float32[4, 2, 3] in, p1: float32[2, 3] in, T_add: float32[4, 2, 3] out) {
  for i0 in 0..4 {
    o2 = i0 * 6
    for i1 in 0..6 vectorized(4) {
      T_add[o2 + i1] = p0[o2 + i1] + p1[i1]
    }
  }
}
"
        );
        let got = kernel(
            "%x: Tensor[(2, 3, 4), float32], %b: Tensor[(3), float32]",
            "%p0: Tensor[(2, 3, 4), float32], %p1: Tensor[(3), float32]",
            "nn.bias_add(%p0, %p1)",
            "%x, %b",
        );
        assert_eq!(
            got,
            "kernel k(p0: float32[2, 3, 4] in, p1: float32[3] in, T_bias_add: float32[2, 3, 4] out) {
  for i0 in 0..2 {
    for i1 in 0..3 {
      o3 = i0 * 12 + i1 * 4
      for i2 in 0..4 vectorized(4) {
        T_bias_add[o3 + i2] = p0[o3 + i2] + p1[i1]
      }
    }
  }
}
"
        );
        // 8-bit elements are not vectorized.
        let got = kernel(
            "%x: Tensor[(3, 1), int8]",
            "%p0: Tensor[(3, 1), int8]",
            "broadcast_to(%p0, shape=[2, 3, 5])",
            "%x",
        );
        assert_eq!(
            got,
            "kernel k(p0: int8[3, 1] in, T_broadcast_to: int8[2, 3, 5] out) {
  for i0 in 0..2 {
    for i1 in 0..3 {
      o3 = i0 * 15 + i1 * 5
      for i2 in 0..5 {
        T_broadcast_to[o3 + i2] = p0[i1]
      }
    }
  }
}
"
        );
    }

    #[test]
    fn tuples_scalars_and_empty_outputs() {
        let got = kernel(
            "%x: Tensor[(3, 4), float32]",
            "%p0: Tensor[(3, 4), float32]",
            "%1 = greater(%p0, 0f); (where(%1, %p0, 0f), %1)",
            "%x",
        );
        assert_eq!(
            got,
            "kernel k(p0: float32[3, 4] in, T_where: float32[3, 4] out, T_greater: bool[3, 4] out) {
  for i0 in 0..12 vectorized(4) {
    T_where[i0] = select(p0[i0] > 0f, p0[i0], 0f)
  }
  for i0 in 0..12 {
    T_greater[i0] = p0[i0] > 0f
  }
}
"
        );
        let got = kernel(
            "%x: Tensor[(), float32]",
            "%p0: Tensor[(), float32]",
            "(sqrt(%p0), %p0)",
            "%x",
        );
        assert_eq!(
            got,
            "kernel k(p0: float32[] in, T_sqrt: float32[] out, T_p0: float32[] out) {
  T_sqrt[0] = sqrt(p0[0])
  T_p0[0] = p0[0]
}
"
        );
        let got = kernel(
            "%x: Tensor[(0, 3), float32]",
            "%p0: Tensor[(0, 3), float32]",
            "negative(%p0)",
            "%x",
        );
        assert_eq!(
            got,
            "kernel k(p0: float32[0, 3] in, T_negative: float32[0, 3] out) {\n}\n"
        );
    }

    /// A reference interpreter of the loop nest IR for these tests: floats compute in `f64`
    /// rounded to their dtype, integers in `i128` wrapped to their width.
    mod run {
        use relay_ir::te::{BinaryOp, CmpOp, UnaryOp};
        use relay_ir::{DType, DTypeCode, NDArray};

        use crate::loops::{BufferRole, LExpr, LoopFunc, Stmt};

        #[derive(Clone, Copy)]
        enum S {
            F(f64),
            I(i128),
        }

        impl S {
            fn f(self) -> f64 {
                match self {
                    S::F(v) => v,
                    S::I(v) => v as f64,
                }
            }
            fn i(self) -> i128 {
                match self {
                    S::F(v) if v.is_nan() => 0,
                    S::F(v) => v as i128,
                    S::I(v) => v,
                }
            }
        }

        /// `v` stored as `dtype` and read back (numpy conversions).
        fn conv(v: S, d: DType) -> S {
            let a = match v {
                S::F(x) => NDArray::from_f64_slice(d, &[], &[x]),
                S::I(x) => NDArray::from_i128_slice(d, &[], &[x]),
            }
            .unwrap();
            if d.is_float() {
                S::F(a.to_f64_vec()[0])
            } else {
                S::I(a.to_i128_vec()[0])
            }
        }

        struct M<'a> {
            f: &'a LoopFunc,
            bufs: Vec<Vec<S>>,
            locals: Vec<S>,
        }

        /// Runs `f` on `inputs`; returns its outputs.
        pub fn run(f: &LoopFunc, inputs: &[NDArray]) -> Result<Vec<NDArray>, String> {
            let mut bufs = Vec::new();
            let mut k = 0;
            for b in &f.buffers {
                if b.role == BufferRole::Input {
                    let a = &inputs[k];
                    k += 1;
                    bufs.push(if a.dtype().is_float() {
                        a.to_f64_vec().into_iter().map(S::F).collect()
                    } else {
                        a.to_i128_vec().into_iter().map(S::I).collect()
                    });
                } else {
                    let n: i64 = b.shape.iter().product();
                    bufs.push(vec![S::I(i128::MIN); n as usize]);
                }
            }
            let mut m = M {
                f,
                bufs,
                locals: vec![S::I(0); f.locals.len()],
            };
            m.stmt(&f.body)?;
            let mut outs = Vec::new();
            for (b, v) in f.buffers.iter().zip(&m.bufs) {
                if b.role == BufferRole::Output {
                    if v.iter().any(|s| matches!(s, S::I(i128::MIN))) {
                        return Err(format!("`{}` not fully written", b.name));
                    }
                    outs.push(if b.dtype.is_float() {
                        let x: Vec<f64> = v.iter().map(|s| s.f()).collect();
                        NDArray::from_f64_slice(b.dtype, &b.shape, &x).unwrap()
                    } else {
                        let x: Vec<i128> = v.iter().map(|s| s.i()).collect();
                        NDArray::from_i128_slice(b.dtype, &b.shape, &x).unwrap()
                    });
                }
            }
            Ok(outs)
        }

        impl M<'_> {
            fn stmt(&mut self, s: &Stmt) -> Result<(), String> {
                match s {
                    Stmt::For {
                        var, extent, body, ..
                    } => {
                        for i in 0..*extent {
                            self.locals[var.0 as usize] = S::I(i.into());
                            self.stmt(body)?;
                        }
                    }
                    Stmt::Store {
                        buffer,
                        index,
                        value,
                    } => {
                        let i = self.expr(index)?.0.i();
                        let b = &self.f.buffers[buffer.0 as usize];
                        let v = conv(self.expr(value)?.0, b.dtype);
                        let slot = self.bufs[buffer.0 as usize]
                            .get_mut(usize::try_from(i).map_err(|_| "negative index")?)
                            .ok_or("store out of bounds")?;
                        *slot = v;
                    }
                    Stmt::Assign { local, value } => {
                        self.locals[local.0 as usize] = self.expr(value)?.0;
                    }
                    Stmt::Seq(v) => {
                        for s in v {
                            self.stmt(s)?;
                        }
                    }
                    Stmt::Range {
                        var,
                        start,
                        end,
                        extent,
                        body,
                        ..
                    } => {
                        let start = self.expr(start)?.0.i().clamp(0, i128::from(*extent));
                        let end = self.expr(end)?.0.i().clamp(start, i128::from(*extent));
                        for i in start..end {
                            self.locals[var.0 as usize] = S::I(i);
                            self.stmt(body)?;
                        }
                    }
                    Stmt::Gemm(g) => {
                        let base = |m: &crate::loops::MatrixRef| -> Result<i128, String> {
                            Ok(self.expr(&m.offset)?.0.i())
                        };
                        let (oa, ob, oc) = (base(&g.a)?, base(&g.b)?, base(&g.c)?);
                        let at =
                            |o: i128, r: i64, c: i64, rs: i64, cs: i64| -> Result<usize, String> {
                                usize::try_from(o + i128::from(r * rs + c * cs))
                                    .map_err(|_| "negative GEMM index".to_string())
                            };
                        let d = self.f.buffers[g.c.buffer.0 as usize].dtype;
                        for i in 0..g.m {
                            for j in 0..g.n {
                                let mut acc = 0f64;
                                for l in 0..g.k {
                                    let x = self.bufs[g.a.buffer.0 as usize]
                                        .get(at(oa, i, l, g.a.row_stride, g.a.col_stride)?)
                                        .ok_or("GEMM read out of bounds")?
                                        .f();
                                    let y = self.bufs[g.b.buffer.0 as usize]
                                        .get(at(ob, l, j, g.b.row_stride, g.b.col_stride)?)
                                        .ok_or("GEMM read out of bounds")?
                                        .f();
                                    acc += x * y;
                                }
                                let slot = self.bufs[g.c.buffer.0 as usize]
                                    .get_mut(at(oc, i, j, g.c.row_stride, g.c.col_stride)?)
                                    .ok_or("GEMM write out of bounds")?;
                                *slot = conv(S::F(acc), d);
                            }
                        }
                    }
                }
                Ok(())
            }

            fn expr(&self, e: &LExpr) -> Result<(S, DType), String> {
                Ok(match e {
                    LExpr::Local(l) => {
                        (self.locals[l.0 as usize], self.f.locals[l.0 as usize].dtype)
                    }
                    LExpr::Int(v, d) => (conv(S::I(*v), *d), *d),
                    LExpr::Float(v, d) => (conv(S::F(*v), *d), *d),
                    LExpr::Load { buffer, index } => {
                        let i = self.expr(index)?.0.i();
                        let v = *self.bufs[buffer.0 as usize]
                            .get(usize::try_from(i).map_err(|_| "negative index")?)
                            .ok_or("load out of bounds")?;
                        (v, self.f.buffers[buffer.0 as usize].dtype)
                    }
                    LExpr::Unary(op, a) => {
                        let (x, d) = self.expr(a)?;
                        let pred = |b: bool| (S::I(b.into()), DType::BOOL);
                        if d.is_float() {
                            let v = x.f();
                            let r = match op {
                                UnaryOp::IsNan => return Ok(pred(v.is_nan())),
                                UnaryOp::IsInf => return Ok(pred(v.is_infinite())),
                                UnaryOp::IsFinite => return Ok(pred(v.is_finite())),
                                UnaryOp::Neg => -v,
                                UnaryOp::Abs => v.abs(),
                                UnaryOp::Exp => v.exp(),
                                UnaryOp::Log => v.ln(),
                                UnaryOp::Sqrt => v.sqrt(),
                                UnaryOp::Rsqrt => 1.0 / v.sqrt(),
                                UnaryOp::Sigmoid => 1.0 / (1.0 + (-v).exp()),
                                UnaryOp::Tanh => v.tanh(),
                                UnaryOp::Floor => v.floor(),
                                UnaryOp::Round => v.round_ties_even(),
                                _ => return Err(format!("{op:?} not interpreted")),
                            };
                            (conv(S::F(r), d), d)
                        } else {
                            let v = x.i();
                            match op {
                                UnaryOp::LogicalNot => pred(v == 0),
                                UnaryOp::Neg => (conv(S::I(-v), d), d),
                                UnaryOp::BitwiseNot => (conv(S::I(!v), d), d),
                                UnaryOp::Abs => (conv(S::I(v.abs()), d), d),
                                _ => return Err(format!("{op:?} not interpreted")),
                            }
                        }
                    }
                    LExpr::Binary(op, a, b) => {
                        let ((x, d), (y, _)) = (self.expr(a)?, self.expr(b)?);
                        if d.is_float() {
                            let (a, b) = (x.f(), y.f());
                            let r = match op {
                                BinaryOp::Add => a + b,
                                BinaryOp::Sub => a - b,
                                BinaryOp::Mul => a * b,
                                BinaryOp::Div => a / b,
                                BinaryOp::Max => a.max(b),
                                BinaryOp::Min => a.min(b),
                                _ => return Err(format!("{op:?} not interpreted")),
                            };
                            (conv(S::F(r), d), d)
                        } else {
                            let (a, b) = (x.i(), y.i());
                            let r = match op {
                                BinaryOp::Add => a + b,
                                BinaryOp::Sub => a - b,
                                BinaryOp::Mul => a * b,
                                BinaryOp::Div | BinaryOp::Mod if b == 0 => {
                                    return Err("integer division by zero".into());
                                }
                                BinaryOp::FloorDiv | BinaryOp::FloorMod if b == 0 => {
                                    return Err("integer division by zero".into());
                                }
                                BinaryOp::Div => a / b,
                                BinaryOp::Mod => a % b,
                                BinaryOp::FloorDiv => {
                                    a.div_euclid(b) - i128::from(b < 0 && a.rem_euclid(b) != 0)
                                }
                                BinaryOp::FloorMod => {
                                    a - b
                                        * (a.div_euclid(b)
                                            - i128::from(b < 0 && a.rem_euclid(b) != 0))
                                }
                                BinaryOp::Max => a.max(b),
                                BinaryOp::Min => a.min(b),
                                BinaryOp::LogicalAnd => i128::from(a != 0 && b != 0),
                                BinaryOp::LogicalOr => i128::from(a != 0 || b != 0),
                                _ => return Err(format!("{op:?} not interpreted")),
                            };
                            (conv(S::I(r), d), d)
                        }
                    }
                    LExpr::Compare(op, a, b) => {
                        let ((x, d), (y, _)) = (self.expr(a)?, self.expr(b)?);
                        let o = if d.is_float() {
                            x.f().partial_cmp(&y.f())
                        } else {
                            Some(x.i().cmp(&y.i()))
                        };
                        use std::cmp::Ordering::*;
                        let r = match op {
                            CmpOp::Eq => o == Some(Equal),
                            CmpOp::Ne => o != Some(Equal),
                            CmpOp::Lt => o == Some(Less),
                            CmpOp::Le => matches!(o, Some(Less | Equal)),
                            CmpOp::Gt => o == Some(Greater),
                            CmpOp::Ge => matches!(o, Some(Greater | Equal)),
                        };
                        (S::I(r.into()), DType::BOOL)
                    }
                    LExpr::Select(c, a, b) => {
                        if self.expr(c)?.0.i() != 0 {
                            self.expr(a)?
                        } else {
                            self.expr(b)?
                        }
                    }
                    LExpr::Cast(d, a) => {
                        let (x, from) = self.expr(a)?;
                        let x = if from.code == DTypeCode::Bool {
                            S::I(x.i())
                        } else {
                            x
                        };
                        (conv(x, *d), *d)
                    }
                })
            }
        }
    }

    /// Lowers the primitive function of `text` and runs it on the random inputs of `@main`,
    /// comparing with the reference interpreter's result of `@main`.
    fn agrees_with_interpreter(text: &str) {
        let m = crate::compose::tests::checked(text);
        let f = primitive(text);
        let lowered = lower("k", &compose(&f).unwrap()).unwrap();
        let main = m.function(relay_ir::Symbol::intern("main")).unwrap();
        for seed in 0..4 {
            let args = relay_interp::random_inputs(&main.func, seed).unwrap();
            let want = relay_interp::run(&m, "main", args.clone(), &Default::default());
            let arrays: Vec<relay_ir::NDArray> = args
                .iter()
                .map(|v| match v {
                    relay_ir::Value::Tensor(t) => (**t).clone(),
                    _ => panic!("tensor arguments only"),
                })
                .collect();
            let got = run::run(&lowered, &arrays);
            match (want, got) {
                (Ok(w), Ok(g)) => {
                    let g: Vec<relay_ir::Value> = g
                        .into_iter()
                        .map(|a| relay_ir::Value::Tensor(std::sync::Arc::new(a)))
                        .collect();
                    let g = if g.len() == 1 {
                        g[0].clone()
                    } else {
                        relay_ir::Value::Tuple(g.into())
                    };
                    if let Err(e) = relay_interp::compare_values(&g, &w, 1e-5, 1e-6) {
                        panic!("{text}\n{lowered}\n{e}");
                    }
                }
                (Err(_), Err(_)) => {}
                (w, g) => panic!("{text}\n{lowered}\nwant {w:?}\ngot {g:?}"),
            }
        }
    }

    #[test]
    fn lowered_kernels_compute_what_the_interpreter_does() {
        let cases = [
            (
                "%x: Tensor[(2, 3, 4), float32]",
                "%0 = exp(%p0); %1 = sum(%0, axis=[1]); sqrt(%1)",
                "%x",
            ),
            (
                "%x: Tensor[(3, 4), float32], %y: Tensor[(4), float32]",
                "%0 = mean(%p0, axis=[0]); add(%0, %p1)",
                "%x, %y",
            ),
            (
                "%x: Tensor[(2, 5), float32], %y: Tensor[(3, 2), float32]",
                "%0 = max(%p0, axis=[1]); multiply(%p1, %0)",
                "%x, %y",
            ),
            (
                "%x: Tensor[(3, 4), int8]",
                "(argmax(%p0, axis=[1]), argmin(%p0, axis=[0], keepdims=True), prod(%p0, exclude=True, axis=[1]))",
                "%x",
            ),
            (
                "%x: Tensor[(2, 3, 4), float64], %y: Tensor[(2, 1, 4), float64]",
                "variance(%p0, %p1, axis=[1], unbiased=True)",
                "%x, %y",
            ),
            (
                "%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32]",
                "nn.relu(add(%p0, %p1))",
                "%x, %y",
            ),
            (
                "%x: Tensor[(2, 1, 3), float32], %y: Tensor[(4, 1), float32]",
                "multiply(%p0, exp(%p1))",
                "%x, %y",
            ),
            (
                "%x: Tensor[(4, 2, 3), int32], %y: Tensor[(2, 3), int32]",
                "%1 = subtract(%p0, %p1); maximum(%1, %p1)",
                "%x, %y",
            ),
            (
                "%x: Tensor[(2, 3, 4), float32], %y: Tensor[(3), float32]",
                "nn.bias_add(%p0, %p1)",
                "%x, %y",
            ),
            (
                "%x: Tensor[(2, 3, 4), float32], %y: Tensor[(4), float32]",
                "nn.prelu(%p0, %p1, axis=2)",
                "%x, %y",
            ),
            (
                "%x: Tensor[(3, 1), int8], %y: Tensor[(2, 3, 5), int8]",
                "broadcast_to_like(%p0, %p1)",
                "%x, %y",
            ),
            (
                "%x: Tensor[(5, 1, 2), float64], %y: Tensor[(1, 3, 1), float64]",
                "%1 = add(%p0, %p1); (sigmoid(%1), floor(%1), %p1)",
                "%x, %y",
            ),
            (
                "%x: Tensor[(3, 4), float32], %y: Tensor[(3, 4), float32]",
                "%1 = greater(%p0, %p1); (where(%1, %p0, %p1), %1, cast(%1, dtype=\"int32\"))",
                "%x, %y",
            ),
            (
                "%x: Tensor[(2, 2), float32], %y: Tensor[(2, 2), float32]",
                "clip(divide(%p0, %p1), a_min=-1f, a_max=1f)",
                "%x, %y",
            ),
            (
                "%x: Tensor[(0, 3), float32], %y: Tensor[(3), float32]",
                "add(%p0, %p1)",
                "%x, %y",
            ),
            (
                "%x: Tensor[(), int32], %y: Tensor[(7), int32]",
                "(multiply(%p0, %p1), negative(%p0))",
                "%x, %y",
            ),
            // Contractions (GEMM calls) with epilogues; materialized reductions.
            (
                "%x: Tensor[(3, 5), float32], %y: Tensor[(4, 5), float32]",
                "nn.relu(add(nn.dense(%p0, %p1, units=4), 1f))",
                "%x, %y",
            ),
            (
                "%x: Tensor[(5, 3), float64], %y: Tensor[(4, 5), float64]",
                "nn.matmul(%p0, %p1, units=None, transpose_a=True, transpose_b=True)",
                "%x, %y",
            ),
            (
                "%x: Tensor[(2, 3, 5), float32], %y: Tensor[(1, 5, 4), float32]",
                "nn.batch_matmul(%p0, %p1)",
                "%x, %y",
            ),
            (
                "%x: Tensor[(3, 5), int32], %y: Tensor[(4, 5), int32]",
                "nn.dense(%p0, %p1, units=None)",
                "%x, %y",
            ),
            ("%x: Tensor[(2, 7), float32]", "nn.softmax(%p0)", "%x"),
            (
                "%x: Tensor[(1, 2, 5, 5), float32], %y: Tensor[(3, 2, 3, 3), float32]",
                "nn.conv2d(%p0, %p1, padding=[1, 1])",
                "%x, %y",
            ),
            (
                "%x: Tensor[(1, 4, 5, 5), float32], %y: Tensor[(4, 2, 3, 3), float32]",
                "nn.conv2d(%p0, %p1, strides=[2, 2], padding=[1, 0, 1, 2], groups=2)",
                "%x, %y",
            ),
            (
                "%x: Tensor[(5, 3), float32], %y: Tensor[(2, 4), int32]",
                "take(%p0, %p1, axis=0, mode=\"wrap\")",
                "%x, %y",
            ),
            (
                "%x: Tensor[(2, 3, 4), float32]",
                "variance(%p0, mean(%p0, axis=[1], keepdims=True), axis=[1])",
                "%x",
            ),
        ];
        for (params, body, args) in cases {
            let prim = params.replace("%x", "%p0").replace("%y", "%p1");
            let text = format!(
                "#[version = \"0.0.5\"]\ndef @main({params}) {{\n  %0 = fn ({prim}, Primitive=1) {{\n    {body}\n  }};\n  %0({args})\n}}"
            );
            agrees_with_interpreter(&text);
        }
    }

    #[test]
    fn runaway_inlining_is_an_error() {
        let mut body = String::from("%1 = add(%p0, %p0);");
        for i in 2..22 {
            body.push_str(&format!(" %{i} = add(%{}, %{});", i - 1, i - 1));
        }
        body.push_str(" %21");
        let text = format!(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {{\n  %0 = fn (%p0: Tensor[(2), float32], Primitive=1) {{\n    {body}\n  }};\n  %0(%x)\n}}"
        );
        let f = primitive(&text);
        let composed = compose(&f).unwrap();
        assert!(
            lower("k", &composed)
                .unwrap_err()
                .contains("after inlining")
        );
    }

    #[test]
    fn float16_operations_compute_in_float64_and_round() {
        // Each operation widens its operands exactly and rounds its result; a constant is its
        // float16 value.
        assert_eq!(
            kernel(
                "%x: Tensor[(4), float16]",
                "%p0: Tensor[(4), float16]",
                "multiply(%p0, 0.1f16)",
                "%x",
            ),
            "kernel k(p0: float16[4] in, T_multiply: float16[4] out) {
  for i0 in 0..4 {
    T_multiply[i0] = float16(float64(p0[i0]) * 0.0999755859375f64)
  }
}
"
        );
        // A contraction accumulates its products unrounded in float64, then rounds once.
        let dense = kernel(
            "%x: Tensor[(2, 3), float16], %w: Tensor[(4, 3), float16]",
            "%p0: Tensor[(2, 3), float16], %p1: Tensor[(4, 3), float16]",
            "nn.dense(%p0, %p1, units=None)",
            "%x, %w",
        );
        assert!(dense.contains(" = 0f64\n"), "{dense}");
        assert!(
            dense.contains(" = float64(p0[i0 * 3 + r0]) * float64(p1[i1 * 3 + r0])\n"),
            "{dense}"
        );
        assert!(
            dense.contains("T_dense[i0 * 4 + i1] = float16(acc"),
            "{dense}"
        );
        // float16 values are selected as they are: no conversion around a select.
        let relu = kernel(
            "%x: Tensor[(4), float16]",
            "%p0: Tensor[(4), float16]",
            "nn.relu(%p0)",
            "%x",
        );
        assert!(
            relu.contains("T_relu[i0] = select(float64(p0[i0]) > 0f64, p0[i0], 0f16)"),
            "{relu}"
        );
    }

    #[test]
    fn float16_kernels_compute_what_the_interpreter_does() {
        // Each kernel lowered, interpreted and compiled agrees with the reference evaluation
        // (which rounds after each operator): elementwise chains, casts both ways, reductions
        // accumulating in float64, a contraction, a padded convolution, pooling and softmax.
        // (The loop nest interpreter of these tests has no float `pow` or `%`: the second
        // case is only compiled.)
        let cases = [
            (
                "%x: Tensor[(3, 4), float16], %y: Tensor[(4), float16]",
                "%0 = add(%p0, %p1); %1 = exp(%0); nn.relu(subtract(%1, %p1))",
                true,
            ),
            (
                "%x: Tensor[(3, 4), float16], %y: Tensor[(4), float16]",
                "(divide(%p0, %p1), power(%p0, %p1), maximum(%p0, %p1), floor_mod(%p0, %p1))",
                false,
            ),
            (
                "%x: Tensor[(7), float16]",
                "(cast(%p0, dtype=\"int8\"), cast(%p0, dtype=\"float64\"), isnan(%p0), sigmoid(%p0))",
                true,
            ),
            (
                "%x: Tensor[(7), int32]",
                "cast(%p0, dtype=\"float16\")",
                true,
            ),
            (
                "%x: Tensor[(7), float64]",
                "cast(%p0, dtype=\"float16\")",
                true,
            ),
            (
                "%x: Tensor[(2, 3, 4), float16]",
                "(sum(%p0, axis=[1]), mean(%p0, axis=[0, 2]), max(%p0, axis=[2]), argmin(%p0, axis=[1]))",
                true,
            ),
            (
                "%x: Tensor[(2, 3), float16], %w: Tensor[(4, 3), float16]",
                "nn.dense(%p0, %p1, units=None)",
                true,
            ),
            (
                "%x: Tensor[(1, 2, 5, 5), float16], %w: Tensor[(3, 2, 3, 3), float16]",
                "nn.conv2d(%p0, %p1, padding=[1, 1, 1, 1])",
                true,
            ),
            (
                "%x: Tensor[(1, 2, 5, 5), float16]",
                "(nn.avg_pool2d(%p0, pool_size=[2, 2]), nn.max_pool2d(%p0, pool_size=[3, 3], padding=[1, 1, 1, 1]))",
                true,
            ),
            ("%x: Tensor[(2, 5), float16]", "nn.softmax(%p0)", true),
        ];
        for (params, body, interpretable) in cases {
            let n = params.matches("Tensor").count();
            let prim: Vec<String> = params
                .split(", %")
                .enumerate()
                .map(|(i, p)| format!("%p{i}{}", &p[p.find(':').unwrap_or(0)..]))
                .collect();
            let args: Vec<String> = params
                .split(", %")
                .map(|p| {
                    format!(
                        "%{}",
                        p.trim_start_matches('%').split(':').next().unwrap_or("")
                    )
                })
                .collect();
            assert_eq!((prim.len(), args.len()), (n, n));
            let text = format!(
                "#[version = \"0.0.5\"]\ndef @main({params}) {{\n  %0 = fn ({}, Primitive=1) {{\n    {body}\n  }};\n  %0({})\n}}",
                prim.join(", "),
                args.join(", ")
            );
            if interpretable {
                agrees_with_interpreter(&text);
            }
            // Compiled: the same values bit for bit.
            let m = crate::compose::tests::checked(&text);
            let f = primitive(&text);
            let kernel = crate::compile_primitive(&f, "k").unwrap();
            let main = m.function(relay_ir::Symbol::intern("main")).unwrap();
            let args = relay_interp::random_inputs(&main.func, 7).unwrap();
            let want = relay_interp::run(&m, "main", args.clone(), &Default::default()).unwrap();
            let inputs: Vec<relay_ir::NDArray> = args
                .iter()
                .map(|v| match v {
                    relay_ir::Value::Tensor(t) => (**t).clone(),
                    _ => panic!("tensor arguments only"),
                })
                .collect();
            let mut outputs = crate::output_arrays(&f).unwrap();
            let refs: Vec<&relay_ir::NDArray> = inputs.iter().collect();
            let mut outs: Vec<&mut relay_ir::NDArray> = outputs.iter_mut().collect();
            kernel.call(&refs, &mut outs).unwrap();
            for (got, want) in outputs.iter().zip(want.tensor_leaves()) {
                if let Some(why) = relay_interp::compare_tensors(got, &want, 0.0, 0.0) {
                    panic!("{text}\n{why}");
                }
            }
        }
    }

    #[test]
    fn malformed_compositions_are_errors() {
        use relay_ir::te::ReduceOp;
        let p = Tensor::placeholder("p0", vec![4], DType::F32, 0);
        let k = relay_ir::te::IterVar::new(4);
        let sum = Tensor::compute("T_sum", &[], |_| {
            p.at(&[k.expr()]).reduce(ReduceOp::Sum, vec![k])
        });
        let composed = Composed {
            inputs: vec![p.clone()],
            outputs: vec![sum],
        };
        assert!(lower("k", &composed).is_ok());
        let twice = Tensor::compute("T_sum2", &[], |_| {
            let j = relay_ir::te::IterVar::new(4);
            let inner = Tensor::compute("T_inner", &[], |_| {
                p.at(&[j.expr()]).reduce(ReduceOp::Sum, vec![j])
            });
            let k = relay_ir::te::IterVar::new(4);
            inner.at(&[]).reduce(ReduceOp::Sum, vec![k])
        });
        let composed = Composed {
            inputs: vec![p.clone()],
            outputs: vec![twice],
        };
        // A reduction read inside another reduction is materialized first — here in the
        // output itself, which the outer reduction reads only at the element it then writes.
        let func = lower("k", &composed).unwrap();
        assert_eq!(
            func.to_string(),
            "kernel k(p0: float32[4] in, T_sum2: float32[] out) {\n  acc2 = 0f\n  \
             for r0 in 0..4 vectorized(4) {\n    v1 = p0[r0]\n    acc2 = acc2 + v1\n  }\n  \
             T_sum2[0] = acc2\n  acc5 = 0f\n  for r0 in 0..4 vectorized(4) {\n    \
             v4 = T_sum2[0]\n    acc5 = acc5 + v4\n  }\n  T_sum2[0] = acc5\n}\n"
        );
        let out = run::run(
            &func,
            &[relay_ir::NDArray::from_f64_slice(DType::F32, &[4], &[1.0, 2.0, 3.0, 4.5]).unwrap()],
        )
        .unwrap();
        assert_eq!(out[0].to_f64_vec(), [42.0]);
        let q = Tensor::placeholder("q", vec![4], DType::F32, 1);
        let composed = Composed {
            inputs: vec![q.clone()],
            outputs: vec![q],
        };
        assert_eq!(
            lower("k", &composed).unwrap_err(),
            "kernel input 0 (`q`) is not placeholder 0"
        );
        let stray = Tensor::placeholder("r", vec![5], DType::F32, 0);
        let composed = Composed {
            inputs: vec![p.clone()],
            outputs: vec![Tensor::compute("T", &[5], |i| stray.at(i))],
        };
        assert_eq!(
            lower("k", &composed).unwrap_err(),
            "`r` does not match kernel input 0"
        );
        let composed = Composed {
            inputs: vec![p.clone()],
            outputs: vec![Tensor::compute("T", &[2], |_| p.at(&[TExpr::index(7)]))],
        };
        assert_eq!(
            lower("k", &composed).unwrap_err(),
            "`p0` read at index 7 of 0..4"
        );
    }
}
