//! Attention groups: the chain `relay_ops::attention` describes (`nn.batch_matmul` → views →
//! a scaling by a constant → `nn.softmax` over the last axis → views → the first operand of
//! another `nn.batch_matmul` → views), each value read only by the next. After partitioning,
//! the groups of such a chain are merged into one primitive function, which the kernel library
//! computes block by block of rows in cache (`relay_kernel`'s attention operator): the
//! `[B, M, N]` scores are never written to memory, where apart they are written by the first
//! product, read and written by the softmax and read by the second.

use relay_ir::{Expr, ExprKind, Var};
use relay_ops::attention::{self, Stage};

use super::graph::Graph;

/// Merges the groups of every attention chain of the graph into the group of its second
/// product: `roots` (each node's group root) are updated. The views of the result that follow
/// the product are left out, last first, while their groups hold other nodes (static shapes
/// fuse the importer's view back to four dimensions with the transpose after it); a chain
/// whose other groups hold any other node is left as it is.
pub(super) fn merge(graph: &Graph, exprs: &[Expr], binders: &[Option<Var>], roots: &mut [u32]) {
    for first in 0..exprs.len() {
        let Some((mut chain, product)) = chain_from(graph, exprs, binders, first) else {
            continue;
        };
        while strangers(&chain, roots) && chain.len() > product + 1 {
            chain.pop();
        }
        if strangers(&chain, roots) || !closed(graph, &chain) {
            continue;
        }
        let last = *chain.last().unwrap_or(&(first as u32));
        for &n in &chain {
            roots[n as usize] = last;
        }
    }
}

/// Whether the groups of the nodes of `chain` hold other nodes.
fn strangers(chain: &[u32], roots: &[u32]) -> bool {
    let groups: Vec<u32> = chain.iter().map(|&n| roots[n as usize]).collect();
    roots
        .iter()
        .enumerate()
        .any(|(n, r)| groups.contains(r) && !chain.contains(&(n as u32)))
}

/// The nodes of the attention chain whose first product is node `first`, in order: the
/// second product, then the views of its result that follow it, last; and the second
/// product's index in it. A node of the chain may also be the shape source of a
/// `reshape_like` of the chain (the importer's reshape of a product back to four dimensions);
/// every other reader of a value must be the next node.
fn chain_from(
    graph: &Graph,
    exprs: &[Expr],
    binders: &[Option<Var>],
    first: usize,
) -> Option<(Vec<u32>, usize)> {
    if !attention::is_first(&exprs[first]) {
        return None;
    }
    let mut chain = vec![first as u32];
    let mut stage = Stage::Scores;
    let mut product = 0;
    loop {
        let at = *chain.last()? as usize;
        let Some(next) = successor(graph, exprs, binders, at) else {
            break;
        };
        let e = &exprs[next];
        let Some((_, args, _)) = e.op_call() else {
            break;
        };
        let Some(operand) = args.iter().position(|a| is_node(a, exprs, binders, at)) else {
            break;
        };
        let Some((_, after)) = attention::step(stage, e, operand) else {
            break;
        };
        if after == Stage::Context && stage != Stage::Context {
            product = chain.len();
        }
        stage = after;
        chain.push(next as u32);
    }
    (stage == Stage::Context && closed(graph, &chain)).then_some((chain, product))
}

/// Whether only the last node of `chain` is read outside it.
fn closed(graph: &Graph, chain: &[u32]) -> bool {
    let inner = |n: &u32| {
        let node = &graph.nodes[*n as usize];
        !node.extern_ref && node.outputs.iter().all(|(o, _)| chain.contains(o))
    };
    chain[..chain.len().saturating_sub(1)].iter().all(inner)
}

/// The node that continues a chain at node `at`: its one reader other than `reshape_like`s
/// that read it as their shape source.
fn successor(graph: &Graph, exprs: &[Expr], binders: &[Option<Var>], at: usize) -> Option<usize> {
    let mut next = None;
    for &(o, _) in &graph.nodes[at].outputs {
        let e = &exprs[o as usize];
        let shape_source = match e.op_call() {
            Some((op, args, _)) if op.name == "reshape_like" => {
                args.get(1).is_some_and(|a| is_node(a, exprs, binders, at))
                    && !args.first().is_some_and(|a| is_node(a, exprs, binders, at))
            }
            _ => false,
        };
        if shape_source {
            continue;
        }
        if next.replace(o as usize).is_some_and(|n| n != o as usize) {
            return None;
        }
    }
    next
}

/// Whether `arg` is node `n`'s value: its bound variable, or the node itself nested.
fn is_node(arg: &Expr, exprs: &[Expr], binders: &[Option<Var>], n: usize) -> bool {
    match (arg.kind(), &binders[n]) {
        (ExprKind::Var(v), Some(b)) => v.id() == b.id(),
        _ => Expr::ptr_eq(arg, &exprs[n]),
    }
}
