//! Concatenations written piece by piece: an output whose value chooses between the inputs
//! of a `concatenate` along one axis (`select(i_a < end, x, y)` chains, through any
//! elementwise epilogue) is stored as one loop nest per input's range of that axis, each
//! reading only its own input, contiguously, with the choice and the index clamps resolved
//! at compile time (ONNX Runtime's and TVM's concatenation copies each input into its slice;
//! a chain evaluated per element loads every input for every element).

use super::*;

/// The ranges `[lo, hi)` of the axis an output's value selects its concatenated inputs by:
/// the axis `a` and the cuts of every `select(i_a < end, ...)` in `v`, when all such selects
/// compare one axis and at least one cut falls inside it.
pub(super) fn concat_pieces(v: &Val, shape: &[i64]) -> Option<(usize, Vec<(i64, i64)>)> {
    let mut cuts: Vec<(usize, i64)> = Vec::new();
    collect_cuts(v, &mut cuts);
    let axis = cuts.first()?.0;
    if cuts.iter().any(|&(a, _)| a != axis) {
        return None;
    }
    let n = *shape.get(axis)?;
    let mut ends: Vec<i64> = cuts
        .into_iter()
        .map(|(_, end)| end)
        .filter(|&e| 0 < e && e < n)
        .collect();
    ends.sort_unstable();
    ends.dedup();
    if ends.is_empty() {
        return None;
    }
    let bounds: Vec<i64> = std::iter::once(0).chain(ends).chain([n]).collect();
    Some((axis, bounds.windows(2).map(|w| (w[0], w[1])).collect()))
}

/// The `(axis, end)` of every select on `Axis(axis) < end` in `v`.
fn collect_cuts(v: &Val, out: &mut Vec<(usize, i64)>) {
    match v {
        Val::Select(c, x, y) => {
            if let Val::Compare(CmpOp::Lt, l, r) = c.as_ref()
                && let (Some(Ix::Axis(a)), Some(Ix::Const(end))) = (as_index(l), as_index(r))
            {
                out.push((a, end));
            }
            for part in [c, x, y] {
                collect_cuts(part, out);
            }
        }
        Val::Unary(_, x) | Val::Cast(_, x) => collect_cuts(x, out),
        Val::Binary(_, x, y) | Val::Compare(_, x, y) => {
            collect_cuts(x, out);
            collect_cuts(y, out);
        }
        Val::Load { dims, .. } => dims.iter().for_each(|d| collect_index_cuts(d, out)),
        Val::Index(i) => collect_index_cuts(i, out),
        Val::Int(..) | Val::Float(..) | Val::Acc(_) => {}
    }
}

fn collect_index_cuts(i: &Ix, out: &mut Vec<(usize, i64)>) {
    match i {
        Ix::Dyn(v) => collect_cuts(v, out),
        Ix::Bin(_, x, y) => {
            collect_index_cuts(x, out);
            collect_index_cuts(y, out);
        }
        Ix::Axis(_) | Ix::Const(_) => {}
    }
}

/// `v` for the piece `[lo, lo + n)` of `axis`: the axis counts from the piece's start
/// (`Axis(axis)` stands for `Axis(axis) + lo`), and every select whose condition the piece
/// decides, and every `min`/`max` of indices it decides, is replaced by the side it takes.
pub(super) fn piece_value(v: &Val, axis: usize, lo: i64, n: i64) -> Val {
    Piece { axis, lo, n }.val(v)
}

/// One piece of a concatenation's axis.
struct Piece {
    axis: usize,
    lo: i64,
    n: i64,
}

impl Piece {
    fn val(&self, v: &Val) -> Val {
        let v = v.map_operands(|i| self.ix(i), |x| self.val(x));
        match v {
            Val::Select(c, x, y) => match self.decide(&c) {
                Some(true) => *x,
                Some(false) => *y,
                None => Val::Select(c, x, y),
            },
            other => other,
        }
    }

    fn ix(&self, i: &Ix) -> Ix {
        match i {
            // An axis of extent 1 has no loop: the piece's one index.
            Ix::Axis(k) if *k == self.axis && self.n == 1 => Ix::Const(self.lo),
            Ix::Axis(k) if *k == self.axis => fold(BinaryOp::Add, Ix::Axis(*k), Ix::Const(self.lo)),
            Ix::Bin(op, x, y) => {
                let (x, y) = (self.ix(x), self.ix(y));
                let pick = match (op, self.range(&x), self.range(&y)) {
                    (BinaryOp::Min, Some(a), Some(b)) if a.1 <= b.0 => Some(true),
                    (BinaryOp::Min, Some(a), Some(b)) if b.1 <= a.0 => Some(false),
                    (BinaryOp::Max, Some(a), Some(b)) if a.0 >= b.1 => Some(true),
                    (BinaryOp::Max, Some(a), Some(b)) if b.0 >= a.1 => Some(false),
                    _ => None,
                };
                match pick {
                    Some(true) => x,
                    Some(false) => y,
                    None => reassociate(*op, x, y),
                }
            }
            Ix::Dyn(v) => Ix::Dyn(Box::new(self.val(v))),
            other => other.clone(),
        }
    }

    /// The range `[min, max]` an index takes over the piece, when it depends on no axis
    /// but the piece's (which runs over `0..n`).
    fn range(&self, i: &Ix) -> Option<(i64, i64)> {
        match i {
            Ix::Const(c) => Some((*c, *c)),
            Ix::Axis(k) if *k == self.axis => Some((0, self.n - 1)),
            Ix::Bin(op, x, y) => {
                let ((a, b), (c, d)) = (self.range(x)?, self.range(y)?);
                match op {
                    BinaryOp::Add => Some((a.checked_add(c)?, b.checked_add(d)?)),
                    BinaryOp::Sub => Some((a.checked_sub(d)?, b.checked_sub(c)?)),
                    BinaryOp::Mul if c == d && c >= 0 => {
                        Some((a.checked_mul(c)?, b.checked_mul(c)?))
                    }
                    BinaryOp::Min => Some((a.min(c), b.min(d))),
                    BinaryOp::Max => Some((a.max(c), b.max(d))),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The value of comparison `c` over the whole piece, when it is the same everywhere.
    fn decide(&self, c: &Val) -> Option<bool> {
        let Val::Compare(op, x, y) = c else {
            return None;
        };
        let ((a, b), (lo, hi)) = (self.range(&as_index(x)?)?, self.range(&as_index(y)?)?);
        match op {
            CmpOp::Lt if b < lo => Some(true),
            CmpOp::Lt if a >= hi => Some(false),
            CmpOp::Le if b <= lo => Some(true),
            CmpOp::Le if a > hi => Some(false),
            CmpOp::Gt if a > hi => Some(true),
            CmpOp::Gt if b <= lo => Some(false),
            CmpOp::Ge if a >= hi => Some(true),
            CmpOp::Ge if b < lo => Some(false),
            _ => None,
        }
    }
}

/// `x op y` folded, with a constant added to `z + c` merged into `c`: the piece's start
/// `Axis + lo` and the input's offset `- off` cancel (`(i + 4) + -4` is `i`).
fn reassociate(op: BinaryOp, x: Ix, y: Ix) -> Ix {
    let sign = match op {
        BinaryOp::Add => 1,
        BinaryOp::Sub => -1,
        _ => return fold(op, x, y),
    };
    if let (Ix::Bin(BinaryOp::Add, z, c), Ix::Const(d)) = (&x, &y)
        && let Ix::Const(c) = c.as_ref()
        && let Some(sum) = d.checked_mul(sign).and_then(|d| c.checked_add(d))
    {
        return fold(BinaryOp::Add, (**z).clone(), Ix::Const(sum));
    }
    fold(op, x, y)
}
