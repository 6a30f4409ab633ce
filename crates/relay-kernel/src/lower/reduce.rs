//! Reductions: the loop nest of an output whose value needs reductions, each accumulated
//! into locals inside the loops of the output axes it depends on.

use super::*;

impl Nest<'_> {
    /// The loop nest of an output whose value needs reductions: one serial loop per output axis
    /// (of extent > 1); inside it each reduction's own serial loops accumulate into a local,
    /// then the element is stored. (Vector accumulators and merged loops are later work.)
    pub(super) fn reduce_output(
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
        // The innermost output loop runs on vector lanes when no reduction sits in it and the
        // value is 32 bits wide throughout (softmax's normalization; a float16 output is
        // computed in `f32` and rounded as it is stored, four lanes to a vector).
        let dtypes: Vec<DType> = self.func.buffers.iter().map(|b| b.dtype).collect();
        let vector_inner = levels.last().is_some_and(Vec::is_empty)
            && dtypes.get(id.0 as usize).is_some_and(|&d| {
                (d.bits == 32 || d == DType::F16) && d.code != relay_ir::DTypeCode::Bool
            })
            && lanes32_reduced(val, &dtypes, inliner);
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
            // A loop with reductions computed at a level inside it stays serial.
            let work = if levels.iter().all(Vec::is_empty) {
                work
            } else {
                0
            };
            stmt = Stmt::For {
                var: loops.counters[g],
                extent: shape[loops.groups[g][0]],
                kind: schedule::loop_kind(g, n_out, vector_inner, work),
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
    pub(super) fn reduction(
        &mut self,
        red: &Red,
        loops: &Loops,
        hoisted: &mut Vec<(LocalId, LExpr)>,
    ) -> Result<(Stmt, LExpr), String> {
        let d = red.body_dtype;
        let float = d.is_float();
        let body = self.expr(&red.body, loops, hoisted)?;
        let v = self.local(format!("v{}", self.func.locals.len()), d);
        let acc = self.local(format!("acc{}", self.func.locals.len()), d);
        let (lv, la) = (LExpr::Local(v), LExpr::Local(acc));
        let init = initial(red.op, d);
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
                // The machine's `max`/`min`: a NaN wins (as the reference's), and the fold is
                // associative, so that vector lanes may split it.
                let op = if red.op == ReduceOp::Max {
                    BinaryOp::Max
                } else {
                    BinaryOp::Min
                };
                step.push(Stmt::Assign {
                    local: acc,
                    value: bin(op, la.clone(), lv.clone()),
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
                let here = position(red, loops)?;
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
        pre.push(reduction_loops(red, loops, Stmt::Seq(step))?);
        Ok((Stmt::Seq(pre), result))
    }
}

/// Whether `v` computes on 32-bit lanes only (as [`lanes32_select`]), its reductions' results
/// included: an output of reductions whose elementwise stage can be vectorized.
fn lanes32_reduced(v: &Val, dtypes: &[DType], inliner: &Inliner<'_>) -> bool {
    let is = |x: &Val| lanes32_reduced(x, dtypes, inliner);
    match v {
        Val::Acc(n) => inliner.reductions.get(*n).is_some_and(|r| {
            let d = r.dtype;
            d.bits == 32 && d.lanes == 1 && d.code != relay_ir::DTypeCode::Bool
        }),
        Val::Select(c, x, y) => match &**c {
            Val::Compare(_, a, b) => is(a) && is(b) && is(x) && is(y),
            _ => false,
        },
        Val::Unary(_, a) => is(a),
        Val::Binary(_, a, b) => is(a) && is(b),
        Val::Cast(d, a) => lanes32(&Val::Float(0.0, *d), dtypes) && is(a),
        Val::Int(..) | Val::Float(..) | Val::Load { .. } => lanes32(v, dtypes),
        Val::Index(_) | Val::Compare(..) => false,
    }
}

/// The least and greatest values of `dtype` (infinities for floats), as constants.
pub(super) fn extremes(dtype: DType) -> (LExpr, LExpr) {
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

/// The value a reduction starts from: 0 for sums and `any`, 1 for products and `all`, the
/// least value of `d` for a maximum, the greatest for a minimum.
fn initial(op: ReduceOp, d: DType) -> LExpr {
    let (lo, hi) = extremes(d);
    let init = match op {
        ReduceOp::Sum | ReduceOp::Any => LExpr::Int(0, d),
        ReduceOp::Prod | ReduceOp::All => LExpr::Int(1, d),
        ReduceOp::Max | ReduceOp::ArgMax { .. } => lo,
        ReduceOp::Min | ReduceOp::ArgMin { .. } => hi,
    };
    match init {
        LExpr::Int(c, d) if d.is_float() => LExpr::Float(c as f64, d),
        e => e,
    }
}

/// The position of the current element of a reduction, row-major over its axes.
fn position(red: &Red, loops: &Loops) -> Result<LExpr, String> {
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
    Ok(here.unwrap_or(LExpr::Int(0, DType::I64)))
}

/// `step` inside the loops of a reduction's axes. The innermost loop of an associative fold
/// runs with one accumulator per vector lane (codegen combines the lanes after the loop).
fn reduction_loops(red: &Red, loops: &Loops, step: Stmt) -> Result<Stmt, String> {
    let mut stmt = step;
    let mut vector = matches!(
        red.op,
        ReduceOp::Sum
            | ReduceOp::Prod
            | ReduceOp::All
            | ReduceOp::Any
            | ReduceOp::Max
            | ReduceOp::Min
    );
    for &(k, e) in red.axes.iter().rev() {
        if e != 1 {
            let g = loops
                .group_of(k)
                .ok_or_else(|| format!("axis {k} has no loop"))?;
            stmt = Stmt::For {
                var: loops.counters[g],
                extent: e,
                kind: schedule::vector_kind(vector),
                body: Box::new(stmt),
            };
            vector = false;
        }
    }
    Ok(stmt)
}

/// A value whose reductions are all small sliding windows (pools, depthwise convolutions)
/// with each reduction replaced by its taps combined in order — `Σ` as `+`, `max`/`min` as
/// the machine's `max`/`min` — so that the output is injective: its loops are those of an
/// elementwise output, vectorized along the output width and partitioned at the padding
/// (`Nest::partition_windows`) instead of looping over the window per element. A window: a
/// sum, max or min of at most [`schedule::WINDOW_TAPS`] taps whose body loads an index mixing
/// an output axis and one of its reduction axes. `isnan(x)` becomes `x != x` (a vector
/// comparison). `None` when some reduction is no such window.
pub(super) fn unroll_windows(val: &Val, inliner: &Inliner<'_>) -> Option<Val> {
    let rank = inliner.rank;
    let mut taps_of = Vec::with_capacity(inliner.reductions.len());
    for red in &inliner.reductions {
        let op = match red.op {
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
            _ => return None,
        };
        let d = red.dtype;
        if d != red.body_dtype || !(d.is_float() || d.is_int()) || d.is_narrow_float() {
            return None;
        }
        let taps = red
            .axes
            .iter()
            .try_fold(1i64, |p, &(_, e)| p.checked_mul(e))?;
        let red_axes: Vec<usize> = red.axes.iter().map(|&(k, _)| k).collect();
        let out_axes: Vec<usize> = (0..rank).collect();
        let mut loads = Vec::new();
        let mut general = false;
        collect_loads(&red.body, &mut loads, &mut general);
        let window = loads.iter().any(|(_, dims)| {
            dims.iter()
                .any(|ix| mentions(ix, &red_axes) && mentions(ix, &out_axes))
        });
        if !(1..=schedule::WINDOW_TAPS).contains(&taps) || !window {
            return None;
        }
        let mut acc: Option<Val> = None;
        for t in 0..taps {
            // The tap's position on each reduction axis, the last axis fastest.
            let mut rest = t;
            let mut at = vec![(0usize, 0i64); red.axes.len()];
            for (slot, &(k, e)) in at.iter_mut().zip(&red.axes).rev() {
                *slot = (k, rest % e);
                rest /= e;
            }
            let v = substitute(&red.body, &at);
            acc = Some(match acc {
                None => v,
                Some(a) => Val::Binary(op, Box::new(a), Box::new(v)),
            });
        }
        taps_of.push(acc?);
    }
    Some(with_accs(val, &taps_of))
}

/// `v` with reduction axis `k` set to `c` for every `(k, c)` of `at` (indices folded), and
/// `isnan(x)` written `x != x`.
fn substitute(v: &Val, at: &[(usize, i64)]) -> Val {
    fn ix(i: &Ix, at: &[(usize, i64)]) -> Ix {
        match i {
            Ix::Axis(k) => match at.iter().find(|(a, _)| a == k) {
                Some(&(_, c)) => Ix::Const(c),
                None => i.clone(),
            },
            Ix::Const(_) => i.clone(),
            Ix::Bin(op, a, b) => fold(*op, ix(a, at), ix(b, at)),
            Ix::Dyn(v) => Ix::Dyn(Box::new(substitute(v, at))),
        }
    }
    let b = |x: &Val| Box::new(substitute(x, at));
    match v {
        Val::Index(i) => Val::Index(ix(i, at)),
        Val::Load { buffer, dims } => Val::Load {
            buffer: *buffer,
            dims: dims.iter().map(|d| ix(d, at)).collect(),
        },
        Val::Unary(UnaryOp::IsNan, a) => Val::Compare(CmpOp::Ne, b(a), b(a)),
        Val::Unary(op, a) => Val::Unary(*op, b(a)),
        Val::Binary(op, x, y) => Val::Binary(*op, b(x), b(y)),
        Val::Compare(op, x, y) => Val::Compare(*op, b(x), b(y)),
        Val::Select(c, x, y) => normal_select(substitute(c, at), substitute(x, at), b(y)),
        Val::Cast(d, a) => Val::Cast(*d, b(a)),
        other => other.clone(),
    }
}

/// `select(c, x, y)`, with `select(!g || p, x, y)` (a pool's padding guard `g`) written
/// `select(g, select(p, x, y), x)`, so that the guard is the condition partitioning sees.
fn normal_select(c: Val, x: Val, y: Box<Val>) -> Val {
    if let Val::Binary(BinaryOp::LogicalOr, l, p) = &c
        && let Val::Unary(UnaryOp::LogicalNot, g) = &**l
    {
        let inner = Val::Select(p.clone(), Box::new(x.clone()), y);
        return Val::Select(g.clone(), Box::new(inner), Box::new(x));
    }
    Val::Select(Box::new(c), Box::new(x), y)
}

/// `v` with every `Acc(n)` replaced by `accs[n]` (in indices too: an integer average's
/// division is index arithmetic).
fn with_accs(v: &Val, accs: &[Val]) -> Val {
    fn ix(i: &Ix, accs: &[Val]) -> Ix {
        match i {
            Ix::Bin(op, a, b) => Ix::Bin(*op, Box::new(ix(a, accs)), Box::new(ix(b, accs))),
            Ix::Dyn(v) => Ix::Dyn(Box::new(with_accs(v, accs))),
            other => other.clone(),
        }
    }
    match v {
        Val::Acc(n) => accs.get(*n).cloned().unwrap_or(Val::Acc(*n)),
        _ => v.map_operands(|i| ix(i, accs), |x| with_accs(x, accs)),
    }
}
