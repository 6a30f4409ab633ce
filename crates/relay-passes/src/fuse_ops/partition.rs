//! TVM's `GraphPartitioner`: union-find groups grown in three phases by fusing each node of the
//! dataflow graph (`graph.rs`) into its immediate post-dominator (`dominator.rs`) when every
//! path between them satisfies the phase's pattern condition.
//!
//! A node without a post-dominator (its value is used outside the graph, or not at all) can
//! only be the root of its group.

use relay_ir::OpPattern;

use super::dominator::PostDomTree;
use super::graph::Graph;

/// A fusion group as the partitioner grows it (TVM's `GraphPartitioner::Group`).
#[derive(Clone, Copy, Debug)]
struct Group {
    /// The union-find parent (the node's own index for a root).
    parent: u32,
    /// The group's pattern (kept up to date on roots only).
    pattern: OpPattern,
    /// How many nodes the group holds (kept up to date on roots only).
    num_nodes: usize,
    /// Whether the group holds an `OutEWiseFusable` anchor.
    has_anchor: bool,
}

/// TVM's `CombinePattern` for groups: the larger pattern, `Opaque` when both are complex.
fn combine(lhs: OpPattern, rhs: OpPattern) -> OpPattern {
    if lhs > OpPattern::Broadcast && rhs > OpPattern::Broadcast {
        OpPattern::Opaque
    } else {
        lhs.max(rhs)
    }
}

/// The condition every node on a path must meet, given its group's pattern and whether it is
/// the sink (the post-dominator fused into).
type PathCondition = fn(OpPattern, bool) -> bool;

/// Path condition of an `OutEWiseFusable` anchor absorbing its elementwise epilogue.
fn up_to_broadcast(kind: OpPattern, _is_sink: bool) -> bool {
    kind <= OpPattern::Broadcast
}

/// Path condition of injective fusion (phases 1 and 2).
fn up_to_injective(kind: OpPattern, _is_sink: bool) -> bool {
    kind <= OpPattern::Injective
}

/// Path condition of an elementwise or broadcast node fusing into an injective or reduction
/// post-dominator: injective ops on parallel branches, anything but opaque at the sink.
fn elementwise_into_sink(kind: OpPattern, is_sink: bool) -> bool {
    if is_sink {
        kind <= OpPattern::OutEWiseFusable
    } else {
        kind <= OpPattern::Injective
    }
}

/// The partitioner's state.
struct Partitioner<'g> {
    graph: &'g Graph,
    groups: Vec<Group>,
    max_depth: usize,
    /// Per node: the walk that last visited it (for bounded path walks without clearing).
    node_stamp: Vec<u32>,
    /// Per group root: the walk that last counted it.
    group_stamp: Vec<u32>,
    stamp: u32,
    /// The walk's stack: a node and the index of its next output edge.
    stack: Vec<(u32, u32)>,
    path: Vec<u32>,
}

/// Partitions `graph` into fusion groups of at most `max_depth` nodes and returns the root of
/// each node's group (a group's root is its last node, which post-dominates the others).
pub(super) fn partition(graph: &Graph, max_depth: usize) -> Vec<u32> {
    let n = graph.nodes.len();
    let tree = PostDomTree::new(graph);
    let mut p = Partitioner {
        graph,
        groups: graph
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| Group {
                parent: i as u32,
                pattern: node.pattern,
                num_nodes: 1,
                has_anchor: node.pattern == OpPattern::OutEWiseFusable,
            })
            .collect(),
        max_depth,
        node_stamp: vec![0; n],
        group_stamp: vec![0; n],
        stamp: 0,
        stack: Vec::new(),
        path: Vec::new(),
    };
    for phase in 0..3 {
        p.run_phase(&tree, phase);
    }
    (0..n as u32).map(|i| p.find(i)).collect()
}

impl Partitioner<'_> {
    /// The root of `i`'s group (path halving).
    fn find(&mut self, mut i: u32) -> u32 {
        while self.groups[i as usize].parent != i {
            let grand = self.groups[self.groups[i as usize].parent as usize].parent;
            self.groups[i as usize].parent = grand;
            i = grand;
        }
        i
    }

    /// One phase of TVM's `RunFuse` over all nodes in topological order.
    fn run_phase(&mut self, tree: &PostDomTree, phase: u32) {
        for nid in 0..self.graph.nodes.len() {
            let own = self.groups[nid];
            if own.pattern == OpPattern::Opaque {
                continue;
            }
            let Some(dom) = tree.parent(nid) else {
                continue;
            };
            let dom_pattern = tree.pattern(nid);
            let src = nid as u32;
            if phase == 2 {
                // Fuse injective ops into intermediate tuples that were themselves fused into
                // an injective consumer.
                if own.pattern > OpPattern::Injective {
                    continue;
                }
                let dom_root = self.find(dom);
                let root_pattern = self.groups[dom_root as usize].pattern;
                if root_pattern == OpPattern::Tuple {
                    continue;
                }
                if self.groups[dom as usize].pattern == OpPattern::Tuple
                    && root_pattern <= OpPattern::Injective
                {
                    self.try_fuse(src, dom, up_to_injective);
                }
                continue;
            }
            if self.find(src) == self.find(dom) {
                continue;
            }
            if self.groups[dom as usize].pattern == OpPattern::Tuple {
                continue;
            }
            match own.pattern {
                OpPattern::OutEWiseFusable => {
                    if phase == 0 && dom_pattern == OpPattern::ElemWise {
                        self.try_fuse(src, dom, up_to_broadcast);
                    }
                }
                OpPattern::ElemWise | OpPattern::Broadcast => {
                    if dom_pattern <= OpPattern::Injective || dom_pattern == OpPattern::CommReduce {
                        self.try_fuse(src, dom, elementwise_into_sink);
                    }
                }
                OpPattern::Injective | OpPattern::Tuple => {
                    if phase == 1 {
                        self.try_fuse(src, dom, up_to_injective);
                    }
                }
                OpPattern::CommReduce | OpPattern::Opaque => {}
            }
        }
    }

    /// Fuses `src` and every node on a path from it to `sink` into `sink`'s group, if each of
    /// those nodes meets `cond` and the merged group stays within `max_depth` nodes (TVM's
    /// `CountFusedNodesWithNewChild`, `CheckPath` and `CommitFuse` in one bounded walk).
    fn try_fuse(&mut self, src: u32, sink: u32, cond: PathCondition) {
        if src == sink {
            return;
        }
        let target = self.find(sink);
        if !cond(self.groups[target as usize].pattern, true) {
            return;
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // The stamps wrapped around: clear them so old marks cannot collide.
            self.node_stamp.iter_mut().for_each(|s| *s = 0);
            self.group_stamp.iter_mut().for_each(|s| *s = 0);
            self.stamp = 1;
        }
        let stamp = self.stamp;
        self.group_stamp[target as usize] = stamp;
        let mut count = self.groups[target as usize].num_nodes;
        let src_root = self.find(src);
        if self.group_stamp[src_root as usize] != stamp {
            self.group_stamp[src_root as usize] = stamp;
            count += self.groups[src_root as usize].num_nodes;
        }
        if count > self.max_depth {
            return;
        }
        self.path.clear();
        self.stack.clear();
        self.node_stamp[src as usize] = stamp;
        self.node_stamp[sink as usize] = stamp;
        let graph = self.graph;
        // Depth-first over the edges, one edge per step, so a node with many outputs costs
        // only the edges walked before the depth limit stops the walk.
        self.stack.push((src, 0));
        while let Some(top) = self.stack.last_mut() {
            let (from, edge) = *top;
            let Some(&(node, _)) = graph.nodes[from as usize].outputs.get(edge as usize) else {
                self.stack.pop();
                continue;
            };
            top.1 += 1;
            if self.node_stamp[node as usize] == stamp {
                continue;
            }
            self.node_stamp[node as usize] = stamp;
            // A node used outside the graph never lies between a node and its post-dominator;
            // refusing it anyway keeps every such node the root of its group.
            if graph.nodes[node as usize].extern_ref {
                return;
            }
            let root = self.find(node);
            if !cond(self.groups[root as usize].pattern, false) {
                return;
            }
            if self.group_stamp[root as usize] != stamp {
                self.group_stamp[root as usize] = stamp;
                count += self.groups[root as usize].num_nodes;
                if count > self.max_depth {
                    return;
                }
            }
            self.path.push(node);
            self.stack.push((node, 0));
        }
        self.merge(src, target);
        for k in 0..self.path.len() {
            let node = self.path[k];
            self.merge(node, target);
        }
    }

    /// Merges the group of `child` into the group rooted at `target` (TVM's `MergeFromTo`).
    fn merge(&mut self, child: u32, target: u32) {
        let child = self.find(child);
        let target = self.find(target);
        if child == target {
            return;
        }
        let c = self.groups[child as usize];
        let t = &mut self.groups[target as usize];
        t.num_nodes += c.num_nodes;
        if c.has_anchor {
            t.has_anchor = true;
            t.pattern = combine(c.pattern, t.pattern);
        }
        self.groups[child as usize].parent = target;
    }
}
