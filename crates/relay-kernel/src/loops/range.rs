//! Interval arithmetic over a loop nest's `int64` index expressions: the values a loop counter
//! or a once-assigned local (a hoisted index) can take, and so the range of an index. Codegen
//! drops the bounds check of an index proven in range; the verifier rejects one proven out of
//! range.

use std::collections::HashMap;

use relay_ir::DType;
use relay_ir::te::BinaryOp;

use super::{LExpr, LocalId, LoopFunc, Stmt};

/// An inclusive range of integer values.
pub type Interval = (i128, i128);

/// The known ranges of a kernel's locals at one point of its loop nest.
#[derive(Clone, Debug, Default)]
pub struct Ranges {
    /// The loop counters in scope: `0..extent`.
    counters: HashMap<LocalId, Interval>,
    /// Locals assigned exactly once in the whole body, with the range of what they hold
    /// (their value, or their initial zero before the assignment).
    locals: HashMap<LocalId, Interval>,
}

impl Ranges {
    /// The ranges of `func`'s once-assigned locals, with no loop counter in scope.
    pub fn of(func: &LoopFunc) -> Ranges {
        let mut counts = HashMap::new();
        count_assignments(&func.body, &mut counts);
        let mut ranges = Ranges::default();
        ranges.collect_locals(func, &func.body, &counts);
        ranges
    }

    /// Brings counter `var` of a loop of `extent` iterations into scope; returns what it
    /// replaced, for [`Ranges::leave`]. A loop that never runs leaves `var` unknown.
    pub fn enter(&mut self, var: LocalId, extent: i64) -> Option<Interval> {
        if extent <= 0 {
            return self.counters.remove(&var);
        }
        self.counters.insert(var, (0, i128::from(extent) - 1))
    }

    /// Brings counter `var` into scope with the values `lo..=hi` (a partitioned loop's part);
    /// returns what it replaced, for [`Ranges::leave`].
    pub fn enter_interval(&mut self, var: LocalId, (lo, hi): Interval) -> Option<Interval> {
        if lo > hi {
            return self.counters.remove(&var);
        }
        self.counters.insert(var, (lo, hi))
    }

    /// Takes counter `var` out of scope, restoring what [`Ranges::enter`] returned.
    pub fn leave(&mut self, var: LocalId, saved: Option<Interval>) {
        match saved {
            Some(r) => self.counters.insert(var, r),
            None => self.counters.remove(&var),
        };
    }

    /// The range of values of an `int64` expression of `func`, if interval arithmetic over
    /// the ranges in scope gives one that fits in `int64`.
    pub fn range(&self, func: &LoopFunc, e: &LExpr) -> Option<Interval> {
        let fits = |(lo, hi): Interval| {
            (lo >= i128::from(i64::MIN) && hi <= i128::from(i64::MAX)).then_some((lo, hi))
        };
        let r = match e {
            LExpr::Int(v, d) if d.is_int() => (*v, *v),
            LExpr::Local(l) => *self.counters.get(l).or_else(|| self.locals.get(l))?,
            LExpr::Cast(to, a) if *to == DType::I64 && func.dtype_of(a)?.is_int() => {
                self.range(func, a)?
            }
            LExpr::Binary(op, a, b) if func.dtype_of(e)? == DType::I64 => {
                let (x, y) = (self.range(func, a)?, self.range(func, b)?);
                let constant = match **b {
                    LExpr::Int(c, _) if c > 0 => Some(c),
                    _ => None,
                };
                binary(*op, x, y, constant)?
            }
            _ => return None,
        };
        fits(r)
    }

    fn collect_locals(&mut self, func: &LoopFunc, s: &Stmt, counts: &HashMap<LocalId, usize>) {
        match s {
            Stmt::Seq(items) => items
                .iter()
                .for_each(|s| self.collect_locals(func, s, counts)),
            Stmt::For {
                var, extent, body, ..
            }
            | Stmt::Range {
                var, extent, body, ..
            } => {
                if *extent <= 0 {
                    return;
                }
                let saved = self.enter(*var, *extent);
                self.collect_locals(func, body, counts);
                self.leave(*var, saved);
            }
            Stmt::Assign { local, value } => {
                if counts.get(local) == Some(&1)
                    && !self.counters.contains_key(local)
                    && let Some((lo, hi)) = self.range(func, value)
                {
                    self.locals.insert(*local, (lo.min(0), hi.max(0)));
                }
            }
            Stmt::Store { .. } | Stmt::Gemm(_) | Stmt::Depthwise(_) => {}
        }
    }
}

/// The range of `x op y`; `constant` is `y` when it is a positive constant.
fn binary(op: BinaryOp, x: Interval, y: Interval, constant: Option<i128>) -> Option<Interval> {
    Some(match op {
        BinaryOp::Add => (x.0 + y.0, x.1 + y.1),
        BinaryOp::Sub => (x.0 - y.1, x.1 - y.0),
        BinaryOp::Mul => {
            let p = [x.0 * y.0, x.0 * y.1, x.1 * y.0, x.1 * y.1];
            (*p.iter().min()?, *p.iter().max()?)
        }
        BinaryOp::Div | BinaryOp::FloorDiv if x.0 >= 0 => {
            let c = constant?;
            (x.0 / c, x.1 / c)
        }
        BinaryOp::Mod if x.0 >= 0 => {
            let c = constant?;
            if x.1 < c { x } else { (0, c - 1) }
        }
        BinaryOp::FloorMod => {
            let c = constant?;
            if x.0 >= 0 && x.1 < c { x } else { (0, c - 1) }
        }
        BinaryOp::Min => (x.0.min(y.0), x.1.min(y.1)),
        BinaryOp::Max => (x.0.max(y.0), x.1.max(y.1)),
        _ => return None,
    })
}

/// How many times each local is assigned in `s` (a loop counter once per loop).
pub fn count_assignments(s: &Stmt, counts: &mut HashMap<LocalId, usize>) {
    match s {
        Stmt::Seq(items) => items.iter().for_each(|s| count_assignments(s, counts)),
        Stmt::For { var, body, .. } | Stmt::Range { var, body, .. } => {
            *counts.entry(*var).or_default() += 1;
            count_assignments(body, counts);
        }
        Stmt::Assign { local, .. } => *counts.entry(*local).or_default() += 1,
        Stmt::Store { .. } | Stmt::Gemm(_) | Stmt::Depthwise(_) => {}
    }
}
