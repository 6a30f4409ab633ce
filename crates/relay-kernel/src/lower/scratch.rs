//! Scratch aliasing: a materialized result written straight into the output made of it
//! element for element, decided on the stages' read and write sets ([`crate::loops::Accesses`]).

use super::*;

/// Writes a scratch result straight into the output that is made of it element for element:
/// when scratch `s` (a GEMM's result) is written by one stage and read by one later stage
/// that is proven elementwise in place — its every store goes to output `o` at one flat index,
/// and it loads `s` and `o` only at that index — with `o` untouched in between, `s` becomes
/// `o`: the epilogue then runs in place (`out = relu(out + bias)`), and a stage left copying
/// `o` to itself disappears. A stage reading `s` as a GEMM operand never qualifies (a GEMM
/// reads whole matrices while it writes: its result must not share storage with an operand).
/// Unused scratch buffers are dropped.
pub(super) fn alias_scratch(buffers: &mut Vec<Buffer>, stages: &mut Vec<Stmt>) {
    for s in 0..buffers.len() {
        if buffers[s].role != BufferRole::Scratch {
            continue;
        }
        let sid = BufferId(s as u32);
        let access: Vec<Accesses> = stages.iter().map(Accesses::of).collect();
        let writers: Vec<usize> = (0..stages.len())
            .filter(|&i| access[i].writes(sid))
            .collect();
        let readers: Vec<usize> = (0..stages.len())
            .filter(|&i| access[i].reads(sid))
            .collect();
        let (&[w], &[r]) = (&writers[..], &readers[..]) else {
            continue;
        };
        if r <= w {
            continue;
        }
        let Some((o, at)) = access[r].elementwise_store() else {
            continue;
        };
        let ob = &buffers[o.0 as usize];
        let same = ob.role == BufferRole::Output
            && ob.dtype == buffers[s].dtype
            && ob.shape.iter().product::<i64>() == buffers[s].shape.iter().product::<i64>();
        let in_place = access[r].reads_only_at(sid, at) && access[r].reads_only_at(o, at);
        if !same || !in_place || access[w..r].iter().any(|a| a.touches(o)) {
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
    let used: Vec<BufferId> = stages
        .iter()
        .flat_map(|st| Accesses::of(st).buffers())
        .collect();
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

/// Whether a stage only copies a buffer onto itself (`o[i] = o[i]`).
pub(super) fn is_self_copy(s: &Stmt) -> bool {
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
        } => buffer == from && index == &**at,
        Stmt::Assign { .. } => true,
        _ => false,
    }
}

/// Rewrites every buffer reference of a statement with `f`.
pub(super) fn map_buffers(s: &mut Stmt, f: &dyn Fn(BufferId) -> BufferId) {
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
            for m in g.matrices_mut() {
                m.buffer = f(m.buffer);
                expr(&mut m.offset);
            }
        }
        Stmt::Depthwise(d) => {
            for (buffer, _) in [&mut d.data, &mut d.weight, &mut d.out] {
                *buffer = f(*buffer);
            }
            for (buffer, _) in [&mut d.epilogue.scale, &mut d.epilogue.shift]
                .into_iter()
                .flatten()
            {
                *buffer = f(*buffer);
            }
        }
    }
}
