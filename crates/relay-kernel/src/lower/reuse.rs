//! Reduction operands reused: when the loop after a reduction loop stores, element for
//! element, a value containing the reduction's operand, the reduction loop also stores that
//! operand into the output and the later loop loads it back instead of computing it again.
//! `nn.softmax`'s normalizing loop `out[i] = exp(x[i] - max) * (1 / sum)` after
//! `sum += exp(x[r] - max)` becomes `out[r] = exp(x[r] - max)` in the sum loop and
//! `out[i] = out[i] * (1 / sum)`: one `exp` per element instead of two (TVM's softmax
//! schedule keeps the exponentials in a buffer for the same reason).

use std::collections::HashMap;

use super::*;
use crate::loops::Accesses;
use crate::loops::range::count_assignments;

/// Applies the rewrite to every sequence of statements in `s`.
pub(super) fn reuse_reduction_operands(func: &LoopFunc, s: &mut Stmt) {
    match s {
        Stmt::Seq(items) => {
            for j in 0..items.len() {
                rewrite_pair(func, items, j);
            }
            items
                .iter_mut()
                .for_each(|s| reuse_reduction_operands(func, s));
        }
        Stmt::For { body, .. } | Stmt::Range { body, .. } => reuse_reduction_operands(func, body),
        Stmt::Store { .. } | Stmt::Assign { .. } | Stmt::Gemm(_) | Stmt::Depthwise(_) => {}
    }
}

/// The loop `items[j]` if it is a reduction loop whose operand the next store loop recomputes:
/// rewrites both.
fn rewrite_pair(func: &LoopFunc, items: &mut [Stmt], j: usize) {
    let Some((r, n, operand)) = last_loop(&mut items[j]).and_then(|l| reduction_operand(l)) else {
        return;
    };
    // The next loop of the same extent storing one element per iteration.
    let Some(k) = (j + 1..items.len()).find(|&k| matches!(items[k], Stmt::For { .. })) else {
        return;
    };
    let Stmt::For {
        var: i,
        extent,
        body,
        ..
    } = &items[k]
    else {
        return;
    };
    let Stmt::Store {
        buffer: out,
        index,
        value,
    } = single(body)
    else {
        return;
    };
    let (i, out) = (*i, *out);
    let at_i = with_local(&operand, r, i);
    let fits = *extent == n
        && func.dtype_of(&operand) == Some(func.buffers[out.0 as usize].dtype)
        && func.buffers[out.0 as usize].role == BufferRole::Output
        && !reads(&operand, out)
        && unit_stride(index, i)
        && contains(value, &at_i);
    // Nothing in between touches the output, writes a buffer the operand reads or assigns a
    // local the operand or the index reads.
    let mut assigned = HashMap::new();
    items[j + 1..k]
        .iter()
        .for_each(|s| count_assignments(s, &mut assigned));
    let between_ok = items[j + 1..k]
        .iter()
        .map(Accesses::of)
        .all(|a| !a.touches(out) && !loaded(&operand).iter().any(|&b| a.writes(b)))
        && !mentions_any(&operand, &assigned)
        && !mentions_any(index, &assigned);
    if !fits || !between_ok {
        return;
    }
    let stored_at_r = with_local(index, i, r);
    let reload = LExpr::Load {
        buffer: out,
        index: Box::new(index.clone()),
    };
    let new_value = substitute(value, &at_i, &reload);
    if let Stmt::For { body, .. } = &mut items[k]
        && let Some(value) = stored_value(body)
    {
        *value = new_value;
    }
    if let Some(Stmt::For { body, .. }) = last_loop(&mut items[j]) {
        store_operand(body, &operand, out, stored_at_r);
    }
}

/// The loop ending `s`, inside nested sequences (a reduction's loop after its accumulator's
/// initialization).
fn last_loop(s: &mut Stmt) -> Option<&mut Stmt> {
    match s {
        Stmt::For { .. } => Some(s),
        Stmt::Seq(items) => items.last_mut().and_then(last_loop),
        _ => None,
    }
}

/// The only statement of `s` (a sequence of one statement is that statement).
fn single(s: &Stmt) -> &Stmt {
    match s {
        Stmt::Seq(items) if items.len() == 1 => single(&items[0]),
        other => other,
    }
}

/// The value of the only statement of `s`, a store.
fn stored_value(s: &mut Stmt) -> Option<&mut LExpr> {
    match s {
        Stmt::Store { value, .. } => Some(value),
        Stmt::Seq(items) if items.len() == 1 => stored_value(&mut items[0]),
        _ => None,
    }
}

/// `(counter, extent, operand)` of a reduction loop `for r { ...; v = E; ...; acc = acc op v }`
/// whose operand `E` reads no local its body assigns.
fn reduction_operand(s: &Stmt) -> Option<(LocalId, i64, LExpr)> {
    let Stmt::For {
        var, extent, body, ..
    } = s
    else {
        return None;
    };
    let Stmt::Seq(body_items) = body.as_ref() else {
        return None;
    };
    let mut assigned = HashMap::new();
    count_assignments(body, &mut assigned);
    // `acc = acc op v` with `v` assigned once in the body, from an expression.
    let operand_local = body_items.iter().find_map(|st| match st {
        Stmt::Assign {
            local: acc,
            value: LExpr::Binary(_, a, b),
        } => match (a.as_ref(), b.as_ref()) {
            (LExpr::Local(x), LExpr::Local(v)) if x == acc && v != acc => Some(*v),
            _ => None,
        },
        _ => None,
    })?;
    if assigned.get(&operand_local) != Some(&1) {
        return None;
    }
    let operand = body_items.iter().find_map(|st| match st {
        Stmt::Assign { local, value } if *local == operand_local => Some(value.clone()),
        _ => None,
    })?;
    let compound = !matches!(
        operand,
        LExpr::Local(_) | LExpr::Int(..) | LExpr::Float(..) | LExpr::Load { .. }
    );
    (compound && !mentions_any(&operand, &assigned)).then_some((*var, *extent, operand))
}

/// Adds `out[index] = v` right after `v = operand` in the reduction loop's body.
fn store_operand(body: &mut Stmt, operand: &LExpr, out: BufferId, index: LExpr) {
    let Stmt::Seq(items) = body else {
        return;
    };
    let Some(pos) = items
        .iter()
        .position(|s| matches!(s, Stmt::Assign { value, .. } if value == operand))
    else {
        return;
    };
    let Stmt::Assign { local, .. } = items[pos] else {
        return;
    };
    items.insert(
        pos + 1,
        Stmt::Store {
            buffer: out,
            index,
            value: LExpr::Local(local),
        },
    );
}

/// `e` with local `from` read as `to`.
fn with_local(e: &LExpr, from: LocalId, to: LocalId) -> LExpr {
    let mut e = e.clone();
    e.visit_mut(&mut |n| {
        if matches!(n, LExpr::Local(l) if *l == from) {
            *n = LExpr::Local(to);
        }
    });
    e
}

/// `e` with every occurrence of `what` replaced by `by`.
fn substitute(e: &LExpr, what: &LExpr, by: &LExpr) -> LExpr {
    if e == what {
        return by.clone();
    }
    let sub = |a: &LExpr| Box::new(substitute(a, what, by));
    match e {
        LExpr::Local(_) | LExpr::Int(..) | LExpr::Float(..) => e.clone(),
        LExpr::Load { buffer, index } => LExpr::Load {
            buffer: *buffer,
            index: sub(index),
        },
        LExpr::Unary(op, a) => LExpr::Unary(*op, sub(a)),
        LExpr::Cast(d, a) => LExpr::Cast(*d, sub(a)),
        LExpr::Binary(op, a, b) => LExpr::Binary(*op, sub(a), sub(b)),
        LExpr::Compare(op, a, b) => LExpr::Compare(*op, sub(a), sub(b)),
        LExpr::Select(c, a, b) => LExpr::Select(sub(c), sub(a), sub(b)),
    }
}

/// Whether `what` occurs in `e`.
fn contains(e: &LExpr, what: &LExpr) -> bool {
    let mut found = false;
    e.visit(&mut |n| found |= n == what);
    found
}

/// The buffers `e` loads from.
fn loaded(e: &LExpr) -> Vec<BufferId> {
    let mut out = Vec::new();
    e.visit(&mut |n| {
        if let LExpr::Load { buffer, .. } = n {
            out.push(*buffer);
        }
    });
    out
}

/// Whether `e` loads from `buffer`.
fn reads(e: &LExpr, buffer: BufferId) -> bool {
    let mut found = false;
    e.visit(&mut |n| found |= matches!(n, LExpr::Load { buffer: b, .. } if *b == buffer));
    found
}

/// Whether `e` reads a local of `locals`.
fn mentions_any(e: &LExpr, locals: &HashMap<LocalId, usize>) -> bool {
    let mut found = false;
    e.visit(&mut |n| found |= matches!(n, LExpr::Local(l) if locals.contains_key(l)));
    found
}

/// Whether `index` is `i + (terms without i)`: distinct iterations store distinct elements.
fn unit_stride(index: &LExpr, i: LocalId) -> bool {
    let mentions = |e: &LExpr| {
        let mut found = false;
        e.visit(&mut |n| found |= matches!(n, LExpr::Local(l) if *l == i));
        found
    };
    match index {
        LExpr::Local(l) => *l == i,
        LExpr::Binary(BinaryOp::Add, a, b) => match (mentions(a), mentions(b)) {
            (true, false) => unit_stride(a, i),
            (false, true) => unit_stride(b, i),
            _ => false,
        },
        _ => false,
    }
}
