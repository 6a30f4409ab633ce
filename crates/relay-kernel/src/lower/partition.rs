//! Loop partitioning (TVM's `LoopPartition`): the innermost loop of a padded read split into
//! the parts before, inside and after the bounds, so the middle part reads contiguously.

use super::*;

/// Whether an index expression uses one of `axes`.
pub(super) fn mentions(ix: &Ix, axes: &[usize]) -> bool {
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
pub(super) fn conjuncts<'v>(v: &'v Val, out: &mut Vec<&'v Val>) {
    match v {
        Val::Binary(BinaryOp::LogicalAnd, a, b) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        other => out.push(other),
    }
}

/// A value that is an index (or an `int64` constant), as one.
pub(super) fn as_index(v: &Val) -> Option<Ix> {
    match v {
        Val::Index(ix) => Some(ix.clone()),
        Val::Int(c, d) if *d == DType::I64 => i64::try_from(*c).ok().map(Ix::Const),
        _ => None,
    }
}

/// `ix` as `coef * axis_k + rest` with `rest` free of axis `k`, when it is linear in it.
pub(super) fn split_axis(ix: &Ix, k: usize) -> Option<(i64, Ix)> {
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
pub(super) fn lanes32(v: &Val, shapes_dtypes: &[DType]) -> bool {
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
