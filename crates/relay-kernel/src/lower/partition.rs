//! Loop partitioning (TVM's `LoopPartition`): the innermost loop of a padded read split into
//! the parts before, inside and after the bounds, so the middle part reads contiguously.

use super::*;

/// `v` with every clamp `max(0, min(x, n - 1))` (either order) of a guarded index `x`
/// (known to lie in `0..n`, by its key) replaced by `x`.
pub(super) fn unclamp(v: &Val, guarded: &[(Ix, i64)]) -> Val {
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
    fn ix(i: &Ix, guarded: &[(Ix, i64)]) -> Ix {
        if let Some((x, m)) = clamp_of(i)
            && guarded.iter().any(|(k, n)| k == x && *n == m + 1)
        {
            return x.clone();
        }
        match i {
            Ix::Bin(op, a, b) => Ix::Bin(*op, Box::new(ix(a, guarded)), Box::new(ix(b, guarded))),
            Ix::Dyn(v) => Ix::Dyn(Box::new(unclamp(v, guarded))),
            other => other.clone(),
        }
    }
    v.map_operands(|i| ix(i, guarded), |x| unclamp(x, guarded))
}

/// Whether a value computes in 32-bit lanes only (loads of 32-bit buffers, 32-bit constants
/// and operations on them), so that a loop storing it can be vectorized. float16 loads,
/// constants and conversions count as 32-bit: codegen converts four float16 lanes to and from
/// an `f32x4` inline.
pub(super) fn lanes32(v: &Val, shapes_dtypes: &[DType]) -> bool {
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
    pub(super) fn partition(
        &mut self,
        id: BufferId,
        index: &LExpr,
        val: &Val,
        loops: &Loops,
        shape: &[i64],
        dtype: DType,
        hoisted: &mut Vec<(LocalId, LExpr)>,
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
        let mut guarded_lo: Vec<Ix> = Vec::new();
        let mut guarded_hi: Vec<(Ix, i64)> = Vec::new();
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
                (CmpOp::Ge, Ix::Const(0)) => guarded_lo.push(a.clone()),
                (CmpOp::Lt, Ix::Const(n)) => guarded_hi.push((a.clone(), *n)),
                (CmpOp::Le, Ix::Const(n)) => guarded_hi.push((a.clone(), n + 1)),
                _ => {}
            }
            if !involves {
                outer.push(t);
                continue;
            }
            match self.bound(op, &a, &b, k, loops, hoisted)? {
                Bound::Lower(e) => lower.push(e),
                Bound::Upper(e) => upper.push(e),
                Bound::Free => outer.push(t),
                Bound::None => return Ok(None),
            }
        }
        if lower.is_empty() && upper.is_empty() {
            return Ok(None);
        }
        let guarded: Vec<(Ix, i64)> = guarded_hi
            .into_iter()
            .filter(|(key, _)| guarded_lo.contains(key))
            .collect();
        let inside = unclamp(then, &guarded);
        let dtypes: Vec<DType> = self.func.buffers.iter().map(|b| b.dtype).collect();
        let kind = |v: &Val| {
            schedule::vector_kind(
                lanes32(v, &dtypes) && dtype.bits == 32 && dtype.code != relay_ir::DTypeCode::Bool,
            )
        };
        let kinds = (kind(&inside), kind(otherwise));
        let bounds = Bounds {
            lower,
            upper,
            outer,
        };
        let store = Store {
            id,
            index,
            extent,
            hoist_loads: false,
        };
        self.parts(&store, bounds, (&inside, otherwise), kinds, loops, hoisted)
            .map(Some)
    }

    /// The innermost loop split at `bounds` into the iterations before them (storing
    /// `outside`), inside them (storing `inside`) and after them (`outside` again), each part
    /// a range of the kind given; the middle part is empty where an outer condition fails.
    fn parts(
        &mut self,
        store: &Store<'_>,
        bounds: Bounds<'_>,
        (inside, outside): (&Val, &Val),
        (inside_kind, outside_kind): (ForKind, ForKind),
        loops: &Loops,
        hoisted: &mut Vec<(LocalId, LExpr)>,
    ) -> Result<Stmt, String> {
        let Bounds {
            lower,
            upper,
            outer,
        } = bounds;
        let (id, index, extent) = (store.id, store.index, store.extent);
        let g = loops.groups.len() - 1;
        let i64c = |c: i64| LExpr::Int(c.into(), DType::I64);
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
        let mut inside_v = self.expr(inside, loops, hoisted)?;
        let outside_v = self.expr(outside, loops, hoisted)?;
        if store.hoist_loads {
            // Only loads the guarded value makes too: those are in bounds on every row.
            let mut safe = Vec::new();
            outside_v.visit(&mut |n| {
                if matches!(n, LExpr::Load { .. }) {
                    safe.push(n.clone());
                }
            });
            let (out, var) = (store.id, loops.counters[g]);
            inside_v = self.hoist_uniform_loads(inside_v, (out, var, &safe), hoisted);
        }
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
        Ok(Stmt::Seq(vec![
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
        ]))
    }
}

/// Where a partitioned loop stores: buffer, index, and the loop's full extent; whether the
/// middle part's loads that do not change along the loop are hoisted before it.
struct Store<'a> {
    id: BufferId,
    index: &'a LExpr,
    extent: i64,
    hoist_loads: bool,
}

impl Nest<'_> {
    /// `e` with every load that does not change along the loop of counter `var` (a depthwise
    /// convolution's weights) read once into a local assigned before the loop, instead of
    /// once per iteration. Loads of the stored buffer `out` stay, and so do loads not in
    /// `safe` (the guarded value's loads, in bounds on every row).
    fn hoist_uniform_loads(
        &mut self,
        e: LExpr,
        (out, var, safe): (BufferId, LocalId, &[LExpr]),
        hoisted: &mut Vec<(LocalId, LExpr)>,
    ) -> LExpr {
        let b = |s: &mut Self, x: Box<LExpr>, h: &mut Vec<(LocalId, LExpr)>| {
            Box::new(s.hoist_uniform_loads(*x, (out, var, safe), h))
        };
        match e {
            LExpr::Load { buffer, index }
                if buffer != out
                    && !uses_local(&index, var)
                    && safe.iter().any(|l| {
                        matches!(l, LExpr::Load { buffer: lb, index: li }
                            if *lb == buffer && **li == *index)
                    }) =>
            {
                let load = LExpr::Load { buffer, index };
                if let Some((l, _)) = hoisted.iter().find(|(_, v)| *v == load) {
                    return LExpr::Local(*l);
                }
                let dtype = self.func.buffers[buffer.0 as usize].dtype;
                let local = self.local(format!("w{}", self.func.locals.len()), dtype);
                hoisted.push((local, load));
                LExpr::Local(local)
            }
            LExpr::Unary(op, a) => LExpr::Unary(op, b(self, a, hoisted)),
            LExpr::Cast(d, a) => LExpr::Cast(d, b(self, a, hoisted)),
            LExpr::Binary(op, x, y) => {
                let x = b(self, x, hoisted);
                LExpr::Binary(op, x, b(self, y, hoisted))
            }
            LExpr::Compare(op, x, y) => {
                let x = b(self, x, hoisted);
                LExpr::Compare(op, x, b(self, y, hoisted))
            }
            LExpr::Select(c, x, y) => {
                let c = b(self, c, hoisted);
                let x = b(self, x, hoisted);
                LExpr::Select(c, x, b(self, y, hoisted))
            }
            other => other,
        }
    }
}

/// Whether `e` reads local `l`.
fn uses_local(e: &LExpr, l: LocalId) -> bool {
    let mut found = false;
    e.visit(&mut |n| found |= matches!(n, LExpr::Local(x) if *x == l));
    found
}

/// The bounds of a partitioned loop's middle part: lower and upper bounds on the counter, and
/// conditions free of it (each must hold for the middle part to run).
struct Bounds<'v> {
    lower: Vec<LExpr>,
    upper: Vec<LExpr>,
    outer: Vec<&'v Val>,
}

/// What a comparison `a OP b` in the condition of a padded read says of the innermost counter.
enum Bound {
    /// The counter is at least this.
    Lower(LExpr),
    /// The counter is below this.
    Upper(LExpr),
    /// It does not depend on the counter.
    Free,
    /// Nothing a loop bound can express (an equality, a non-linear index).
    None,
}

impl Nest<'_> {
    /// The bound `a OP b` puts on the counter of axis `k`, both sides linear in it.
    fn bound(
        &mut self,
        op: CmpOp,
        a: &Ix,
        b: &Ix,
        k: usize,
        loops: &Loops,
        hoisted: &mut Vec<(LocalId, LExpr)>,
    ) -> Result<Bound, String> {
        let i64c = |c: i64| LExpr::Int(c.into(), DType::I64);
        let (Some((ca, ra)), Some((cb, rb))) = (split_axis(a, k), split_axis(b, k)) else {
            return Ok(Bound::None);
        };
        // c * i + r OP 0.
        let (mut c, mut r, mut op) = (ca - cb, fold(BinaryOp::Sub, ra, rb), op);
        if c == 0 {
            return Ok(Bound::Free);
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
        Ok(match op {
            CmpOp::Ge => Bound::Lower(ceil(q)),
            CmpOp::Gt => Bound::Lower(bin(BinaryOp::Add, floor(q), i64c(1))),
            CmpOp::Lt => Bound::Upper(ceil(q)),
            CmpOp::Le => Bound::Upper(bin(BinaryOp::Add, floor(q), i64c(1))),
            CmpOp::Eq | CmpOp::Ne => Bound::None,
        })
    }
}

/// A dtype of 32-bit lanes for [`lanes32`] (float16 included).
fn is32(d: DType) -> bool {
    (d.bits == 32 || d == DType::F16) && d.lanes == 1 && d.code != relay_ir::DTypeCode::Bool
}

/// Like [`lanes32`], also taking a `select` on a comparison of 32-bit values (one vector
/// comparison and a `bitselect` in codegen): the bodies of pools and unrolled windows.
pub(super) fn lanes32_select(v: &Val, dtypes: &[DType]) -> bool {
    let is = |x: &Val| lanes32_select(x, dtypes);
    match v {
        Val::Select(c, x, y) => match &**c {
            Val::Compare(_, a, b) => is(a) && is(b) && is(x) && is(y),
            _ => false,
        },
        Val::Unary(_, a) => is(a),
        Val::Binary(_, a, b) => is(a) && is(b),
        // A conversion of a select (float16 `relu` then an operation).
        Val::Cast(d, a) => is32(*d) && is(a),
        Val::Int(..) | Val::Float(..) | Val::Load { .. } => lanes32(v, dtypes),
        Val::Index(_) | Val::Acc(_) | Val::Compare(..) => false,
    }
}

/// The conjuncts of `cond` when they are all index comparisons and one involves axis `k`:
/// a padding guard of a sliding window along the innermost loop.
fn window_guard(cond: &Val, k: usize) -> Option<Vec<(&Val, CmpOp, Ix, Ix)>> {
    let mut terms = Vec::new();
    conjuncts(cond, &mut terms);
    let mut out = Vec::with_capacity(terms.len());
    let mut involves = false;
    for t in terms {
        let Val::Compare(op, a, b) = t else {
            return None;
        };
        let (a, b) = (as_index(a)?, as_index(b)?);
        involves |= mentions(&a, &[k]) || mentions(&b, &[k]);
        out.push((t, *op, a, b));
    }
    involves.then_some(out)
}

/// The padding guards (`select(guard, x, pad)`) along axis `k` in `v`.
fn window_selects<'v>(v: &'v Val, k: usize, out: &mut Vec<&'v Val>) {
    match v {
        Val::Select(c, x, y) => {
            if window_guard(c, k).is_some() {
                if !out.contains(&&**c) {
                    out.push(c);
                }
            } else {
                window_selects(c, k, out);
            }
            window_selects(x, k, out);
            window_selects(y, k, out);
        }
        Val::Unary(_, a) | Val::Cast(_, a) => window_selects(a, k, out),
        Val::Binary(_, a, b) | Val::Compare(_, a, b) => {
            window_selects(a, k, out);
            window_selects(b, k, out);
        }
        _ => {}
    }
}

/// `v` with every padding guard along axis `k` taken as true.
fn without_guards(v: &Val, k: usize) -> Val {
    let b = |x: &Val| Box::new(without_guards(x, k));
    match v {
        Val::Select(c, x, _) if window_guard(c, k).is_some() => without_guards(x, k),
        Val::Select(c, x, y) => Val::Select(b(c), b(x), b(y)),
        Val::Unary(op, a) => Val::Unary(*op, b(a)),
        Val::Cast(d, a) => Val::Cast(*d, b(a)),
        Val::Binary(op, x, y) => Val::Binary(*op, b(x), b(y)),
        Val::Compare(op, x, y) => Val::Compare(*op, b(x), b(y)),
        other => other.clone(),
    }
}

impl Nest<'_> {
    /// Loop partitioning of a sliding window (an unrolled pool or depthwise convolution):
    /// the innermost loop's middle part is where every tap's padding guard holds, found as
    /// the intersection of the guards' bounds on the counter; it computes the value with the
    /// guards and the clamps they protect removed (contiguous or strided loads, vectorized),
    /// and the parts before and after it the guarded value. Guards free of the counter (the
    /// window's rows) empty the middle part when one fails, so border rows run guarded.
    /// `None` when the value has no guard along the innermost loop, or one a loop bound
    /// cannot express.
    pub(super) fn partition_windows(
        &mut self,
        id: BufferId,
        index: &LExpr,
        val: &Val,
        loops: &Loops,
        shape: &[i64],
        hoisted: &mut Vec<(LocalId, LExpr)>,
    ) -> Result<Option<Stmt>, String> {
        let g = loops.groups.len() - 1;
        let [k] = loops.groups[g][..] else {
            return Ok(None);
        };
        let mut guards = Vec::new();
        window_selects(val, k, &mut guards);
        if guards.is_empty() {
            return Ok(None);
        }
        let (mut lower, mut upper, mut outer) = (Vec::new(), Vec::new(), Vec::<&Val>::new());
        let (mut guarded_lo, mut guarded_hi) = (Vec::new(), Vec::new());
        for cond in guards {
            for (t, op, a, b) in window_guard(cond, k).unwrap_or_default() {
                match (op, &b) {
                    (CmpOp::Ge, Ix::Const(0)) => guarded_lo.push(a.clone()),
                    (CmpOp::Lt, Ix::Const(n)) => guarded_hi.push((a.clone(), *n)),
                    (CmpOp::Le, Ix::Const(n)) => guarded_hi.push((a.clone(), n + 1)),
                    _ => {}
                }
                match self.bound(op, &a, &b, k, loops, hoisted)? {
                    Bound::Lower(e) if !lower.contains(&e) => lower.push(e),
                    Bound::Upper(e) if !upper.contains(&e) => upper.push(e),
                    Bound::Free if !outer.contains(&t) => outer.push(t),
                    Bound::None => return Ok(None),
                    _ => {}
                }
            }
        }
        let guarded: Vec<(Ix, i64)> = guarded_hi
            .into_iter()
            .filter(|(key, _)| guarded_lo.contains(key))
            .collect();
        let inside = unclamp(&without_guards(val, k), &guarded);
        let dtypes: Vec<DType> = self.func.buffers.iter().map(|b| b.dtype).collect();
        let dtype = self.func.buffers[id.0 as usize].dtype;
        let is32 = dtype.bits == 32 && dtype.code != relay_ir::DTypeCode::Bool;
        let inside_kind = schedule::vector_kind(is32 && lanes32_select(&inside, &dtypes));
        let bounds = Bounds {
            lower,
            upper,
            outer,
        };
        let store = Store {
            id,
            index,
            extent: shape[k],
            hoist_loads: true,
        };
        let kinds = (inside_kind, ForKind::Serial);
        self.parts(&store, bounds, (&inside, val), kinds, loops, hoisted)
            .map(Some)
    }
}
