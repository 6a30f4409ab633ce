//! The post-dominator tree of a dataflow graph (TVM's `DominatorTree`): each node's immediate
//! post-dominator is the least common ancestor of its outputs in the tree, computed from the
//! sinks backwards, together with the combined pattern of the paths that lead there.
//!
//! A virtual root stands for "outside the graph": nodes used outside the graph, and nodes not
//! used at all, hang from it, and a node whose outputs meet only there has no post-dominator.
//! Ancestor queries use skew-binary jump pointers (one jump pointer per node, each carrying
//! the combined pattern of the nodes it skips), so every least-common-ancestor query costs
//! O(log n) even on 100,000-node chains with far-apart uses.

use relay_ir::OpPattern;

use super::graph::Graph;

/// A multiset of patterns as TVM's dominator `CombinePattern` folds them: the largest, except
/// that two complex (above `Broadcast`) patterns make `Opaque`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Combined {
    max: OpPattern,
    /// How many complex patterns were combined, capped at 2.
    complex: u8,
}

impl Combined {
    /// The empty combination (TVM starts from `ElemWise`).
    const EMPTY: Combined = Combined {
        max: OpPattern::ElemWise,
        complex: 0,
    };

    fn of(p: OpPattern) -> Combined {
        Combined {
            max: p,
            complex: u8::from(p > OpPattern::Broadcast),
        }
    }

    fn add(self, other: Combined) -> Combined {
        Combined {
            max: self.max.max(other.max),
            complex: (self.complex + other.complex).min(2),
        }
    }

    fn pattern(self) -> OpPattern {
        if self.complex >= 2 {
            OpPattern::Opaque
        } else {
            self.max
        }
    }
}

/// The post-dominator tree. Index `n` (the number of graph nodes) is the virtual root.
pub(super) struct PostDomTree {
    parent: Vec<u32>,
    depth: Vec<u32>,
    jump: Vec<u32>,
    /// The combined pattern of the paths from the node to its parent.
    pattern: Vec<OpPattern>,
    /// The combined pattern of the nodes from the node (inclusive) to its jump (exclusive).
    jump_pattern: Vec<Combined>,
}

impl PostDomTree {
    /// Builds the tree of `graph`, whose nodes are in topological order.
    pub fn new(graph: &Graph) -> PostDomTree {
        let n = graph.nodes.len();
        let root = n as u32;
        let mut tree = PostDomTree {
            parent: vec![root; n + 1],
            depth: vec![0; n + 1],
            jump: vec![root; n + 1],
            pattern: vec![OpPattern::Opaque; n + 1],
            jump_pattern: vec![Combined::EMPTY; n + 1],
        };
        for i in (0..n).rev() {
            let node = &graph.nodes[i];
            let (parent, pattern) = if node.extern_ref || node.outputs.is_empty() {
                (root, OpPattern::Opaque)
            } else {
                let mut combined = Combined::EMPTY;
                let mut lca = node.outputs[0].0;
                for &(out, edge) in &node.outputs {
                    lca = tree.lca(lca, out, &mut combined);
                    combined = combined.add(Combined::of(edge));
                }
                (lca, combined.pattern())
            };
            tree.attach(i as u32, parent, pattern);
        }
        tree
    }

    /// Hangs node `v` from `p` (already in the tree).
    fn attach(&mut self, v: u32, p: u32, pattern: OpPattern) {
        let (vi, pi) = (v as usize, p as usize);
        self.parent[vi] = p;
        self.depth[vi] = self.depth[pi] + 1;
        self.pattern[vi] = pattern;
        let jp = self.jump[pi];
        let jjp = self.jump[jp as usize];
        // The virtual root is its own jump, so its children jump to it.
        if self.depth[pi] - self.depth[jp as usize]
            == self.depth[jp as usize] - self.depth[jjp as usize]
        {
            self.jump[vi] = jjp;
            self.jump_pattern[vi] = Combined::of(pattern)
                .add(self.jump_pattern[pi])
                .add(self.jump_pattern[jp as usize]);
        } else {
            self.jump[vi] = p;
            self.jump_pattern[vi] = Combined::of(pattern);
        }
    }

    /// The least common ancestor of `a` and `b`, adding to `combined` the patterns of the
    /// nodes on both paths up to it (exclusive), as TVM's `LeastCommonAncestor` does.
    fn lca(&self, mut a: u32, mut b: u32, combined: &mut Combined) -> u32 {
        if self.depth[a as usize] < self.depth[b as usize] {
            std::mem::swap(&mut a, &mut b);
        }
        let target = self.depth[b as usize];
        while self.depth[a as usize] > target {
            let ai = a as usize;
            if self.depth[self.jump[ai] as usize] >= target {
                *combined = combined.add(self.jump_pattern[ai]);
                a = self.jump[ai];
            } else {
                *combined = combined.add(Combined::of(self.pattern[ai]));
                a = self.parent[ai];
            }
        }
        while a != b {
            let (ai, bi) = (a as usize, b as usize);
            if self.jump[ai] != self.jump[bi] {
                *combined = combined
                    .add(self.jump_pattern[ai])
                    .add(self.jump_pattern[bi]);
                a = self.jump[ai];
                b = self.jump[bi];
            } else {
                *combined = combined
                    .add(Combined::of(self.pattern[ai]))
                    .add(Combined::of(self.pattern[bi]));
                a = self.parent[ai];
                b = self.parent[bi];
            }
        }
        a
    }

    /// The immediate post-dominator of node `i`, if it has one in the graph.
    pub fn parent(&self, i: usize) -> Option<u32> {
        let p = self.parent[i];
        (p as usize != self.parent.len() - 1).then_some(p)
    }

    /// The combined pattern of the paths from node `i` to its post-dominator.
    pub fn pattern(&self, i: usize) -> OpPattern {
        self.pattern[i]
    }
}
