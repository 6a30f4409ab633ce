//! Whether a loop body can run several iterations at once (vector lanes): the rule the
//! schedule's vectorized loops are conditional on, which lowering applies to the loop nest it
//! builds, the verifier checks and codegen follows.

use relay_ir::te::BinaryOp;

use crate::loops::{Accesses, BufferId, LExpr, LocalId, Place, Stmt};

/// Whether a loop body can run several iterations at once: a straight line of stores and
/// assignments that never assigns the counter, reads no local of the body before assigning
/// it, and reads a buffer it writes only in place (at the index it stores to).
pub(crate) fn vector_legal(var: LocalId, body: &Stmt) -> bool {
    fn walk(s: &Stmt, out: &mut Vec<Stmt>) -> bool {
        match s {
            Stmt::Seq(items) => items.iter().all(|s| walk(s, out)),
            Stmt::For { .. } | Stmt::Range { .. } | Stmt::Gemm(_) | Stmt::Depthwise(_) => false,
            other => {
                out.push(other.clone());
                true
            }
        }
    }
    fn reads(e: &LExpr, locals: &mut Vec<LocalId>, buffers: &mut Vec<BufferId>) {
        e.visit(&mut |n| match n {
            LExpr::Local(l) => locals.push(*l),
            LExpr::Load { buffer, .. } => buffers.push(*buffer),
            _ => {}
        });
    }
    let mut stmts = Vec::new();
    if !walk(body, &mut stmts) {
        return false;
    }
    // Accumulators are read only by their own accumulation; they count as assigned.
    let accs: Vec<LocalId> = accumulators(var, body)
        .into_iter()
        .map(|(l, _)| l)
        .collect();
    let mut assigned_so_far: Vec<LocalId> = accs.clone();
    let mut assigned_anywhere: Vec<LocalId> = Vec::new();
    let mut stored: Vec<BufferId> = Vec::new();
    let mut loaded: Vec<BufferId> = Vec::new();
    for s in &stmts {
        if let Stmt::Assign { local, .. } = s {
            assigned_anywhere.push(*local);
        }
    }
    for s in &stmts {
        let mut locals = Vec::new();
        match s {
            Stmt::Assign { local, value } => {
                reads(value, &mut locals, &mut loaded);
                if *local == var {
                    return false;
                }
                if locals
                    .iter()
                    .any(|l| assigned_anywhere.contains(l) && !assigned_so_far.contains(l))
                {
                    return false;
                }
                assigned_so_far.push(*local);
            }
            Stmt::Store {
                buffer,
                index,
                value,
            } => {
                reads(index, &mut locals, &mut loaded);
                reads(value, &mut locals, &mut loaded);
                if locals
                    .iter()
                    .any(|l| assigned_anywhere.contains(l) && !assigned_so_far.contains(l))
                {
                    return false;
                }
                stored.push(*buffer);
            }
            _ => return false,
        }
    }
    // A buffer the body both reads and writes is fine only in place: one store to it,
    // and every load of it at that store's index (the same lanes, in order).
    stored.iter().all(|b| {
        if !loaded.contains(b) {
            return true;
        }
        let access: Vec<Accesses> = stmts.iter().map(Accesses::of).collect();
        let stores: Vec<&Place> = access
            .iter()
            .flat_map(|a| &a.writes)
            .filter(|w| w.buffer == *b)
            .map(|w| &w.place)
            .collect();
        let [Place::At(key)] = stores[..] else {
            return false;
        };
        access.iter().all(|a| a.reads_only_at(*b, key))
    })
}

/// `local op operand` (either order) when `value` accumulates into `local` with an
/// associative operation vector lanes may split: integer `+ *`, float `+ *` (reordering float
/// sums within SPEC §4's reduction tolerance), `&& ||`, and `max min` (exact in any order;
/// a NaN wins wherever it is).
pub(crate) fn accumulation(local: LocalId, value: &LExpr) -> Option<(BinaryOp, &LExpr)> {
    let LExpr::Binary(
        op @ (BinaryOp::Add
        | BinaryOp::Mul
        | BinaryOp::LogicalAnd
        | BinaryOp::LogicalOr
        | BinaryOp::Max
        | BinaryOp::Min),
        a,
        b,
    ) = value
    else {
        return None;
    };
    match (a.as_ref(), b.as_ref()) {
        (LExpr::Local(l), other) | (other, LExpr::Local(l)) if *l == local => {
            let mut reads = Vec::new();
            walk_locals(other, &mut reads);
            (!reads.contains(&local)).then_some((*op, other))
        }
        _ => None,
    }
}

/// The locals an expression reads.
pub(crate) fn walk_locals(e: &LExpr, out: &mut Vec<LocalId>) {
    e.visit(&mut |n| {
        if let LExpr::Local(l) = n {
            out.push(*l);
        }
    });
}

/// The accumulators of a loop body (a straight line): locals other than the counter assigned
/// exactly once, by an [`accumulation`], and read nowhere else in the body.
pub(crate) fn accumulators(var: LocalId, body: &Stmt) -> Vec<(LocalId, BinaryOp)> {
    let mut stmts: Vec<&Stmt> = Vec::new();
    fn flat<'s>(s: &'s Stmt, out: &mut Vec<&'s Stmt>) {
        match s {
            Stmt::Seq(items) => items.iter().for_each(|s| flat(s, out)),
            other => out.push(other),
        }
    }
    flat(body, &mut stmts);
    let mut out = Vec::new();
    for s in &stmts {
        let Stmt::Assign { local, value } = s else {
            continue;
        };
        if *local == var {
            continue;
        }
        let Some((op, _)) = accumulation(*local, value) else {
            continue;
        };
        let assigned = stmts
            .iter()
            .filter(|t| matches!(t, Stmt::Assign { local: l, .. } if l == local))
            .count();
        let mut reads = Vec::new();
        for t in &stmts {
            match t {
                Stmt::Assign { local: l, value } if l == local => {
                    if let Some((_, operand)) = accumulation(*local, value) {
                        walk_locals(operand, &mut reads);
                    }
                }
                Stmt::Assign { value, .. } => walk_locals(value, &mut reads),
                Stmt::Store { index, value, .. } => {
                    walk_locals(index, &mut reads);
                    walk_locals(value, &mut reads);
                }
                _ => {}
            }
        }
        if assigned == 1 && !reads.contains(local) {
            out.push((*local, op));
        }
    }
    out
}
