//! Lowering: tensor expressions → the loop nest IR ([`crate::loops`]).
//!
//! Every computed tensor that is not an output is inlined into its consumers (its axes replaced
//! by the consumer's read indices; a tensor read twice is computed twice, which is right for the
//! elementwise, broadcast and injective operators of this slice). Each output then becomes one
//! loop nest over its shape storing at the row-major flat index.
//!
//! The schedule is the one for injective kernels: adjacent output dimensions that every input
//! reads contiguously (or not at all) collapse into one loop, so that a kernel whose inputs
//! all have the output's shape is a single flat loop; the innermost loop is vectorized (4 lanes)
//! when the output and every value loaded or computed are 32 bits wide; input indices come from
//! the loop counters with row-major strides (broadcast dimensions contribute 0), and their parts
//! that do not change in the innermost loop are computed once before it.
//!
//! Reductions (`TExprKind::Reduce`, at the root of a compute) are not inlined like the others:
//! an output whose value needs one (the reduction itself, or an elementwise epilogue such as
//! `sqrt(sum(x))`, or a consumer broadcasting it such as `x - max(x)`) gets one serial loop per
//! output axis, the axes the reductions depend on outermost. Each reduction is computed into
//! locals — `acc = init; for r in axes { v = body; acc = combine(acc, v) }` — inside the loops
//! of the output axes it depends on only (a reduction read several times at one index is
//! computed once), then the element is stored. A reduction depending on an inner loop but
//! broadcast along an outer one is recomputed per outer iteration; a reduction reading
//! another reduction is not supported yet (it needs a scratch buffer). Vector accumulators
//! are later work.

use std::collections::HashMap;

use relay_ir::DType;
use relay_ir::te::{BinaryOp, CmpOp, ReduceOp, TExpr, TExprKind, Tensor, TensorOp, UnaryOp};

use crate::compose::Composed;
use crate::loops::{Buffer, BufferId, BufferRole, ForKind, LExpr, Local, LocalId, LoopFunc, Stmt};

/// The most scalar operations one output's expression may have after inlining.
const MAX_NODES: usize = 1 << 16;

/// Lanes of a vectorized loop over 32-bit elements.
const LANES: u32 = 4;

/// The loop nest of a composed primitive function, called `name`: its buffers are the inputs
/// then the outputs, and its body one loop nest per output.
pub fn lower(name: &str, composed: &Composed) -> Result<LoopFunc, String> {
    let mut func = LoopFunc {
        name: name.to_string(),
        buffers: Vec::new(),
        locals: Vec::new(),
        body: Stmt::Seq(Vec::new()),
    };
    let mut names = HashMap::new();
    for (i, t) in composed.inputs.iter().enumerate() {
        if !matches!(t.op, TensorOp::Placeholder(n) if n == i) {
            return Err(format!(
                "kernel input {i} (`{}`) is not placeholder {i}",
                t.name
            ));
        }
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
    let mut nests = Vec::new();
    for (o, t) in composed.outputs.iter().enumerate() {
        let id = BufferId((composed.inputs.len() + o) as u32);
        let nest = Nest {
            func: &mut func,
            inputs: &composed.inputs,
            accs: Vec::new(),
        }
        .output(id, t)?;
        nests.push(nest);
    }
    func.body = Stmt::Seq(nests);
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

/// An index expression over the output's axes (after inlining).
#[derive(Clone, Debug)]
enum Ix {
    /// The output index along axis `k` (an axis of extent greater than 1).
    Axis(usize),
    /// A constant.
    Const(i64),
    /// Arithmetic on indices.
    Bin(BinaryOp, Box<Ix>, Box<Ix>),
}

/// A scalar expression over the output's axes whose reads are all of kernel inputs.
#[derive(Debug)]
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
                            return Err(
                                "a reduction reading another reduction cannot be compiled yet"
                                    .into(),
                            );
                        }
                        if reduction && let Some(&n) = self.red_cache.get(&key) {
                            return Ok(Val::Acc(n));
                        }
                        let inner: HashMap<u32, Ix> = axes.iter().map(|a| a.id).zip(dims).collect();
                        let v = self.value(body, &inner)?;
                        if let (true, Val::Acc(n)) = (reduction, &v) {
                            self.red_cache.insert(key, *n);
                        }
                        v
                    }
                }
            }
            TExprKind::Unary(op, a) => Val::Unary(*op, b(self.value(a, env)?)),
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
                self.reductions.push(Red {
                    op: *op,
                    axes: red_axes,
                    body: value?,
                    body_dtype: body.dtype(),
                    dtype: d,
                });
                Val::Acc(self.reductions.len() - 1)
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
            TExprKind::Binary(op, x, y) => {
                let (x, y) = (self.index(x, env)?, self.index(y, env)?);
                Ok(fold(*op, x, y))
            }
            _ => Err("unsupported index expression".into()),
        })
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
    Ix::Bin(op, Box::new(x), Box::new(y))
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
    fn output(mut self, id: BufferId, tensor: &Tensor) -> Result<Stmt, String> {
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
                    return Err(format!("`{}` does not match kernel input {i}", tensor.name));
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
                inliner.value(body, &map)?
            }
        };
        if !inliner.reductions.is_empty() {
            return self.reduce_output(id, &shape, &val, &inliner);
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
        let value = self.expr(&val, &loops, &mut hoisted)?;
        let mut stmt = Stmt::Store {
            buffer: id,
            index,
            value,
        };
        let n = loops.groups.len();
        for g in (0..n).rev() {
            let extent: i64 = loops.groups[g].iter().map(|&a| shape[a]).product();
            let kind = if g + 1 == n && vectorize {
                ForKind::Vectorized { lanes: LANES }
            } else {
                ForKind::Serial
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
                    Ix::Bin(..) => general = true,
                }
            }
            let shape = self
                .inputs
                .get(*buffer)
                .map(|t| t.shape.clone())
                .unwrap_or_default();
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
                Val::Index(ix) => ix_expr(ix, loops)?,
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
                        .inputs
                        .get(*buffer)
                        .map(|t| t.shape.clone())
                        .ok_or_else(|| format!("no kernel input {buffer}"))?;
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
                            Ix::Bin(..) => {
                                let e = ix_expr(ix, loops)?;
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
        for g in (0..n_out).rev() {
            stmt = Stmt::For {
                var: loops.counters[g],
                extent: shape[loops.groups[g][0]],
                kind: ForKind::Serial,
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
        for &(k, e) in red.axes.iter().rev() {
            if e != 1 {
                let g = loops
                    .group_of(k)
                    .ok_or_else(|| format!("axis {k} has no loop"))?;
                stmt = Stmt::For {
                    var: loops.counters[g],
                    extent: e,
                    kind: ForKind::Serial,
                    body: Box::new(stmt),
                };
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
    }
}

/// An index expression from the loop counters.
fn ix_expr(ix: &Ix, loops: &Loops) -> Result<LExpr, String> {
    relay_ir::ensure_sufficient_stack(|| {
        Ok(match ix {
            Ix::Axis(k) => loops.axis_value(*k)?,
            Ix::Const(c) => LExpr::Int((*c).into(), DType::I64),
            Ix::Bin(op, a, b) => bin(*op, ix_expr(a, loops)?, ix_expr(b, loops)?),
        })
    })
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
                                BinaryOp::Div => a / b,
                                BinaryOp::Mod => a % b,
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
        assert_eq!(
            lower("k", &composed).unwrap_err(),
            "a reduction reading another reduction cannot be compiled yet"
        );
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
