//! The indexed forward dataflow graph of one let-chain (TVM's `IndexedForwardGraph`): what the
//! post-dominator tree (`dominator.rs`) is built on and the partitioner (`partition.rs`) groups.
//!
//! Nodes are numbered in topological order (every input of a node has a smaller index), as
//! TVM's post-DFS order.

use relay_ir::OpPattern;

/// A node of the dataflow graph: an operator call, a tuple or a projection.
#[derive(Debug)]
pub(super) struct GraphNode {
    /// How the node fuses.
    pub pattern: OpPattern,
    /// The nodes that read this node's value, with the pattern of each edge.
    pub outputs: Vec<(u32, OpPattern)>,
    /// Whether the value is also used outside the graph (it must be materialized).
    pub extern_ref: bool,
}

/// The dataflow graph of one let-chain, in topological order.
#[derive(Debug, Default)]
pub(super) struct Graph {
    /// The nodes.
    pub nodes: Vec<GraphNode>,
}
