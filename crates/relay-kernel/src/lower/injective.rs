//! Injective stages: the loop nest of an output with no reduction — axes merged into as few
//! loops as the loads allow, flat indices from the counters with their outer parts hoisted,
//! the innermost loop vectorized and the outermost parallel.

use super::*;

/// A flat element index: `sum(coeff * counter of group) + constant + other`.
#[derive(Default)]
pub(super) struct Flat {
    /// `(group, coefficient)`, outermost group first.
    pub(super) terms: Vec<(usize, i64)>,
    pub(super) konst: i64,
    /// Non-linear parts, with whether they change in the innermost loop.
    pub(super) other: Vec<(LExpr, bool)>,
}

/// How an output's loop nests are made: its dtype, whether the innermost loop vectorizes,
/// and whether its windows were unrolled.
#[derive(Clone, Copy)]
struct NestKind {
    dtype: DType,
    vectorize: bool,
    unrolled: bool,
}

/// The box of an output one loop nest stores: its shape, the flat offset of its first
/// element, and the concatenation axis it is a piece of.
struct Region<'s> {
    shape: &'s [i64],
    offset: i64,
    piece_axis: Option<usize>,
}

/// The loops of one output: groups of output axes, each one loop.
pub(super) struct Loops {
    /// The axes of each group, outermost first.
    pub(super) groups: Vec<Vec<usize>>,
    /// Each group's counter.
    pub(super) counters: Vec<LocalId>,
    /// The output's shape (then the reduction axes' extents).
    pub(super) shape: Vec<i64>,
    /// Whether index parts that do not change in the innermost loop may be hoisted before it.
    pub(super) hoist: bool,
}

impl Loops {
    /// The group holding axis `k`.
    pub(super) fn group_of(&self, k: usize) -> Option<usize> {
        self.groups.iter().position(|g| g.contains(&k))
    }

    /// The value of output axis `k` from the loop counters.
    pub(super) fn axis_value(&self, k: usize) -> Result<LExpr, String> {
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

impl Nest<'_> {
    /// The loop nest writing output `tensor` to buffer `id`.
    pub(super) fn output(&mut self, id: BufferId, tensor: &Tensor) -> Result<Stmt, Fail> {
        let shape = tensor.shape.clone();
        let mut total: i64 = 1;
        for &n in &shape {
            total = total
                .checked_mul(n)
                .ok_or_else(|| Fail::TooLarge(format!("output shape {shape:?}")))?;
        }
        if total == 0 {
            return Ok(Stmt::Seq(Vec::new()));
        }
        let mut inliner = Inliner::standalone(self.inputs, self.buffers, &shape);
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
                        return Err(match (inliner.want.take(), inliner.limit) {
                            (Some(t), _) => Fail::Materialize(t),
                            (None, Some(true)) => Fail::TooLarge(e),
                            (None, Some(false)) => Fail::Unsupported(e),
                            (None, None) => Fail::Error(e),
                        });
                    }
                }
            }
        };
        let dtype = tensor.dtype;
        let is32 = is_32(dtype);
        // Sliding windows (pools, depthwise convolutions) unrolled: an injective output.
        let unrolled = match inliner.reductions.is_empty() {
            true => None,
            false => unroll_windows(&val, &inliner),
        };
        let was_unrolled = unrolled.is_some();
        let (val, vectorize) = match unrolled {
            Some(v) => {
                let dtypes: Vec<DType> = self.func.buffers.iter().map(|b| b.dtype).collect();
                let lanes = lanes32_select(&v, &dtypes);
                (v, lanes && is32)
            }
            None if !inliner.reductions.is_empty() => {
                return Ok(self.reduce_output(id, &shape, &val, &inliner)?);
            }
            // float16 values (never `all32`) vectorize when they compute in `f32` (`relu` is a
            // select on a comparison).
            None if dtype == DType::F16 => {
                let dtypes: Vec<DType> = self.func.buffers.iter().map(|b| b.dtype).collect();
                let lanes = lanes32_select(&val, &dtypes);
                (val, lanes)
            }
            None => (val, inliner.all32 && is32),
        };
        let kind = NestKind {
            dtype,
            vectorize,
            unrolled: was_unrolled,
        };
        if let Some((axis, pieces)) = concat_pieces(&val, &shape) {
            return self.pieces(id, &shape, &val, axis, &pieces, kind);
        }
        let whole = Region {
            shape: &shape,
            offset: 0,
            piece_axis: None,
        };
        self.nest(id, &shape, whole, &val, kind)
    }

    /// The output stored one concatenated input's range of `axis` at a time
    /// ([`concat_pieces`]).
    fn pieces(
        &mut self,
        id: BufferId,
        full: &[i64],
        val: &Val,
        axis: usize,
        pieces: &[(i64, i64)],
        kind: NestKind,
    ) -> Result<Stmt, Fail> {
        let stride: i64 = full[axis + 1..].iter().product();
        let mut stmts = Vec::with_capacity(pieces.len());
        for &(lo, hi) in pieces {
            let mut shape = full.to_vec();
            shape[axis] = hi - lo;
            let region = Region {
                shape: &shape,
                offset: lo * stride,
                piece_axis: Some(axis),
            };
            let value = piece_value(val, axis, lo, hi - lo);
            // The choice between the inputs (index comparisons, which kept the whole output
            // scalar) is resolved: a piece whose values are 32-bit vectorizes.
            let dtypes: Vec<DType> = self.func.buffers.iter().map(|b| b.dtype).collect();
            let kind = NestKind {
                vectorize: kind.vectorize || (is_32(kind.dtype) && lanes32_select(&value, &dtypes)),
                ..kind
            };
            stmts.push(self.nest(id, full, region, &value, kind)?);
        }
        Ok(Stmt::Seq(stmts))
    }

    /// The loop nest storing `val` over `region` of an output of shape `full` in buffer `id`.
    fn nest(
        &mut self,
        id: BufferId,
        full: &[i64],
        region: Region<'_>,
        val: &Val,
        kind: NestKind,
    ) -> Result<Stmt, Fail> {
        let shape = region.shape;
        let total: i64 = shape.iter().product();
        let mut loops = self.schedule(shape, val);
        if let Some(a) = region.piece_axis {
            self.split_groups_at(&mut loops, a);
        }
        let mut hoisted: Vec<(LocalId, LExpr)> = Vec::new();
        let out_strides = strides(full);
        let store = Flat {
            terms: loops
                .groups
                .iter()
                .enumerate()
                .map(|(g, axes)| (g, out_strides[*axes.last().unwrap_or(&0)]))
                .collect(),
            konst: region.offset,
            ..Flat::default()
        };
        let index = self.flat_expr(store, &loops, &mut hoisted);
        let n = loops.groups.len();
        let partitioned = match n {
            0 => None,
            _ => match self.partition(id, &index, val, &loops, shape, kind.dtype, &mut hoisted)? {
                None if kind.unrolled => {
                    self.partition_windows(id, &index, val, &loops, shape, &mut hoisted)?
                }
                parts => parts,
            },
        };
        let stmt = match partitioned {
            // The innermost loop is already split into its parts: the loop nest starts one
            // level up.
            Some(parts) => parts,
            None => Stmt::Store {
                buffer: id,
                index,
                value: self.expr(val, &loops, &mut hoisted)?,
            },
        };
        Ok(wrap_loops(
            stmt,
            &loops,
            shape,
            hoisted,
            kind.vectorize,
            total,
        ))
    }

    /// `loops` with every group that holds axes both before and from `axis` on split in two
    /// there: a piece of a concatenation is not contiguous in the output across its axis.
    fn split_groups_at(&mut self, loops: &mut Loops, axis: usize) {
        let Some(g) = loops
            .groups
            .iter()
            .position(|g| g.iter().any(|&k| k < axis) && g.iter().any(|&k| k >= axis))
        else {
            return;
        };
        let at = loops.groups[g].partition_point(|&k| k < axis);
        let inner = loops.groups[g].split_off(at);
        loops.groups.insert(g + 1, inner);
        let counter = self.local(format!("i{}", loops.counters.len()), DType::I64);
        loops.counters.insert(g + 1, counter);
    }

    /// Groups the output's axes of extent > 1 into loops: adjacent axes merge when every load
    /// reads both contiguously or neither.
    pub(super) fn schedule(&mut self, shape: &[i64], val: &Val) -> Loops {
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
                    other => match shifted_axis(other) {
                        Some((k, _)) => {
                            if pos.insert(k, d).is_some() {
                                general = true;
                            }
                        }
                        None => general = true,
                    },
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
    pub(super) fn flat_expr(
        &mut self,
        flat: Flat,
        loops: &Loops,
        hoisted: &mut Vec<(LocalId, LExpr)>,
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
            let local = match hoisted.iter().find(|(_, v)| *v == value) {
                Some((local, _)) => *local,
                None => {
                    let local = self.local(format!("o{}", self.func.locals.len()), DType::I64);
                    hoisted.push((local, value));
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
    pub(super) fn expr(
        &mut self,
        v: &Val,
        loops: &Loops,
        hoisted: &mut Vec<(LocalId, LExpr)>,
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
                            // An axis read at an offset (a concatenation piece's channel
                            // of a per-channel operand): the axis' term and a constant.
                            Ix::Bin(..) if let Some((k, c)) = shifted_axis(ix) => {
                                let g = loops
                                    .group_of(k)
                                    .ok_or_else(|| format!("axis {k} has no loop"))?;
                                if loops.groups[g].last() == Some(&k) {
                                    flat.terms.push((g, st[d]));
                                }
                                flat.konst = flat.konst.saturating_add(c.saturating_mul(st[d]));
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
    /// An index expression from the loop counters.
    pub(super) fn ix_expr(
        &mut self,
        ix: &Ix,
        loops: &Loops,
        hoisted: &mut Vec<(LocalId, LExpr)>,
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

/// Whether an output of `dtype` stores 32-bit lanes (float16 ones compute in `f32`).
fn is_32(dtype: DType) -> bool {
    (dtype.bits == 32 || dtype == DType::F16) && dtype.code != relay_ir::DTypeCode::Bool
}

/// `(k, c)` for an index `Axis(k) + c` (either operand order), with the axis of a loop.
fn shifted_axis(ix: &Ix) -> Option<(usize, i64)> {
    match ix {
        Ix::Bin(BinaryOp::Add, a, b) => match (a.as_ref(), b.as_ref()) {
            (Ix::Axis(k), Ix::Const(c)) | (Ix::Const(c), Ix::Axis(k)) => Some((*k, *c)),
            _ => None,
        },
        _ => None,
    }
}

/// The loads of a value, and whether any index is not a plain axis or constant (or an index
/// is used as a value).
pub(super) fn collect_loads<'v>(v: &'v Val, out: &mut Vec<(usize, &'v [Ix])>, general: &mut bool) {
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

/// `stmt` preceded by the assignments of the hoisted locals (which `hoisted` gives up).
fn with_hoisted(hoisted: &mut Vec<(LocalId, LExpr)>, stmt: Stmt) -> Stmt {
    let mut seq: Vec<Stmt> = hoisted
        .drain(..)
        .map(|(local, value)| Stmt::Assign { local, value })
        .collect();
    seq.push(stmt);
    Stmt::Seq(seq)
}

/// The loops of an injective output around its innermost statement `stmt` (a store, or the
/// parts of a partitioned innermost loop), each of the kind the schedule gives it, with the
/// hoisted index parts assigned just outside the innermost loop.
fn wrap_loops(
    mut stmt: Stmt,
    loops: &Loops,
    shape: &[i64],
    mut hoisted: Vec<(LocalId, LExpr)>,
    vectorize: bool,
    total: i64,
) -> Stmt {
    let n = loops.groups.len();
    let skip_inner = matches!(stmt, Stmt::Seq(_));
    for g in (0..n).rev() {
        let extent: i64 = loops.groups[g].iter().map(|&a| shape[a]).product();
        if g + 1 == n && skip_inner {
            // The innermost loop is already split into its parts; a single partitioned loop's
            // parts run one after another.
            if g == 0 || !hoisted.is_empty() {
                stmt = with_hoisted(&mut hoisted, stmt);
            }
            continue;
        }
        stmt = Stmt::For {
            var: loops.counters[g],
            extent,
            kind: schedule::loop_kind(g, n, vectorize, total),
            body: Box::new(stmt),
        };
        if g + 1 == n && g > 0 && !hoisted.is_empty() {
            stmt = with_hoisted(&mut hoisted, stmt);
        }
    }
    stmt
}
