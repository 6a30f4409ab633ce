//! `fuse_ops`: groups operator calls into Primitive=1 functions (TVM's post-dominator fusion).
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/fuse_ops/`.
//!
//! Each let-chain of each function (a function body, an `if` branch, a match clause, a nested
//! chain) is fused on its own. Its dataflow graph ([`graph`]) has a node for every operator
//! call, tuple and projection evaluated by the chain itself, whether bound (`%a = exp(%x)`,
//! `let %a = ...`) or nested in another node (`add(multiply(%a, %b), %c)`). An edge runs from a
//! node to each node that reads it directly, as an argument, field or projected tuple. A value
//! read by anything else (a non-operator call, an `if` condition, a match scrutinee, a nested
//! scope, a `ref`, the chain's result) is used outside the graph and must be materialized: it
//! can end a group but not sit inside one. The partitioner ([`partition`]) groups nodes with
//! TVM's algorithm (the post-dominator tree of [`dominator`], three phases, `max_depth`); every
//! group that holds an operator call becomes a call of a fresh primitive function, placed where
//! the group's last node was, and the bindings of the other members disappear.
//!
//! Dialect operators (`memory.*`, `vm.*`, `on_device`, `device_copy`) are not fused and stay as
//! they are; primitive functions already in the program are left alone, so the pass is
//! idempotent.

mod attention;
mod dominator;
mod graph;
mod partition;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use relay_ir::visit::{for_each_child, is_primitive};
use relay_ir::{
    AttrValue, Attrs, Binding, BindingKind, Expr, ExprKind, Function, Module, OpPattern, Span,
    Symbol, Type, TypeKind, Var, VarId, ensure_sufficient_stack, structural_hash,
};

use crate::util::fresh_var;
use crate::{Invariants, OptionValue, Pass, PassContext, PassError, PassOption};
use graph::{Graph, GraphNode};

/// The `fuse_ops` pass.
pub struct FuseOps;

/// The default of the `max_depth` option (TVM's `relay.FuseOps.max_depth`).
const DEFAULT_MAX_DEPTH: i64 = 256;

static OPTIONS: &[PassOption] = &[PassOption {
    name: "max_depth",
    default: OptionValue::Int(DEFAULT_MAX_DEPTH),
    min: 1,
    doc: "the most nodes (operator calls, tuples, projections) one primitive function holds",
}];

impl Pass for FuseOps {
    fn name(&self) -> &'static str {
        "fuse_ops"
    }

    fn description(&self) -> &'static str {
        "groups operator calls into Primitive=1 functions (TVM's post-dominator fusion)"
    }

    fn required(&self) -> bool {
        true
    }

    fn needs_types(&self) -> bool {
        true
    }

    fn options(&self) -> &'static [PassOption] {
        OPTIONS
    }

    fn establishes(&self) -> Invariants {
        Invariants {
            fused: true,
            ..Invariants::default()
        }
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        // At opt level 0 nothing fuses: every operator call is its own primitive function.
        let max_depth = if cx.opt_level == 0 {
            1
        } else {
            usize::try_from(cx.int_option("max_depth"))
                .unwrap_or(0)
                .max(1)
        };
        let mut primitives = 0;
        for global in &mut module.functions {
            if is_primitive(&global.func) {
                continue;
            }
            let mut uses = VarMap::default();
            count_uses(&global.func.body, &mut uses);
            let mut fuser = Fuser {
                uses,
                max_depth,
                primitives: 0,
            };
            global.func.body = fuser.scope(&global.func.body);
            primitives += fuser.primitives;
        }
        cx.stat("primitive functions", primitives);
        Ok(module)
    }
}

/// A hasher for variable ids, which are already well spread (a multiplicative hash instead of
/// SipHash: the maps here hold one entry per binding of 100,000-binding chains).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map keyed by variable id.
type VarMap<V> = HashMap<VarId, V, BuildHasherDefault<IdHasher>>;

/// Counts every use of every variable in `e` (primitive functions included, should one use a
/// variable from outside).
fn count_uses(e: &Expr, uses: &mut VarMap<u32>) {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Var(v) => *uses.entry(v.id()).or_insert(0) += 1,
        _ => for_each_child(e, |c| count_uses(c, uses)),
    })
}

/// Whether `e` is a node of the dataflow graph: a call of a non-dialect operator, a tuple or a
/// projection.
fn is_graph_node(e: &Expr) -> bool {
    match e.kind() {
        ExprKind::Call { callee, .. } => fusable_op(callee).is_some(),
        ExprKind::Tuple(_) | ExprKind::Proj { .. } => true,
        _ => false,
    }
}

/// The pattern of `callee` if it is an operator the pass fuses (not a dialect operator).
fn fusable_op(callee: &Expr) -> Option<(OpPattern, Option<OpPattern>)> {
    let ExprKind::Op(op) = callee.kind() else {
        return None;
    };
    let dialect = op.name.starts_with("memory.")
        || op.name.starts_with("vm.")
        || op.name == "on_device"
        || op.name == "device_copy";
    (!dialect).then_some((op.pattern, op.input_edge))
}

/// The operators a call of which, with a `?` dimension in its result, is a primitive of its
/// own: the kernel library computes it at every shape (`relay_kernel::host_op`) — a
/// concatenation, transpose, slice or take as copies, a reshape as a view, a product as one
/// GEMM of all its rows — where fused with its producers or its epilogue it would be a loop
/// nest compiled per shape, or a GEMM per chunk of rows. The elementwise work around them
/// becomes kernels of its own, over the rows (`relay_kernel` row kernels).
const ALONE_WHEN_DYNAMIC: &[&str] = &[
    "concatenate",
    "nn.dense",
    "nn.batch_matmul",
    "nn.matmul",
    "transpose",
    "strided_slice",
    "take",
    "reshape",
    "reshape_like",
    "contrib_reverse_reshape",
    "squeeze",
    "expand_dims",
    "nn.batch_flatten",
];

/// Whether `callee` is one of [`ALONE_WHEN_DYNAMIC`] with a `?` dimension in its result `ty`.
fn kept_alone(callee: &Expr, ty: Option<&Type>) -> bool {
    let listed = matches!(callee.kind(), ExprKind::Op(op) if ALONE_WHEN_DYNAMIC.contains(&op.name));
    listed
        && ty.is_some_and(|t| match t.kind() {
            TypeKind::Tensor { shape, .. } => shape.contains(&relay_ir::Dim::Any),
            _ => false,
        })
}

fn is_tensor(ty: Option<&Type>) -> bool {
    ty.is_some_and(|t| matches!(t.kind(), TypeKind::Tensor { .. }))
}

fn is_tensor_tuple(ty: Option<&Type>) -> bool {
    ty.is_some_and(|t| match t.kind() {
        TypeKind::Tuple(fields) => fields.iter().all(|f| is_tensor(Some(f))),
        _ => false,
    })
}

/// The pattern of an operator's edge from an argument: a broadcast whose argument already has
/// the result's shape is elementwise along that edge (TVM's `IndexedForwardGraph`).
fn edge_pattern(op: OpPattern, arg: Option<&Type>, out: Option<&Type>) -> OpPattern {
    if op != OpPattern::Broadcast {
        return op;
    }
    match (arg.map(Type::kind), out.map(Type::kind)) {
        (Some(TypeKind::Tensor { shape: a, .. }), Some(TypeKind::Tensor { shape: b, .. }))
            if a == b =>
        {
            OpPattern::ElemWise
        }
        _ => op,
    }
}

/// Whether evaluating `e` later than written gives the same value with the same effects: a
/// variable, constant, global, operator, constructor or function literal.
fn is_movable(e: &Expr) -> bool {
    matches!(
        e.kind(),
        ExprKind::Var(_)
            | ExprKind::Constant(_)
            | ExprKind::Global(_)
            | ExprKind::Op(_)
            | ExprKind::Ctor(_)
            | ExprKind::Function(_)
    )
}

/// Whether `e` is a scalar constant, which a primitive function keeps in its body.
fn is_scalar_constant(e: &Expr) -> bool {
    matches!(e.kind(), ExprKind::Constant(c) if c.ndim() == 0)
}

/// `kind` as a new node with `like`'s span and checked type.
fn rebuilt(kind: ExprKind, like: &Expr) -> Expr {
    let e = Expr::new(kind, like.span());
    if let Some(ty) = like.checked_type() {
        e.set_checked_type(ty.clone());
    }
    e
}

/// The bindings of the chain `e` (a chain whose body is a chain is one chain) and its body.
fn flatten(mut e: &Expr) -> (Vec<&Binding>, &Expr) {
    let mut bindings = Vec::new();
    while let ExprKind::Let { bindings: bs, body } = e.kind() {
        bindings.extend(bs);
        e = body;
    }
    (bindings, e)
}

/// The pass's state while it rewrites one global function.
struct Fuser {
    /// How often each variable of the function is used.
    uses: VarMap<u32>,
    max_depth: usize,
    /// How many primitive functions were made.
    primitives: i64,
}

impl Fuser {
    /// Fuses the let-chain (or single expression) `e` and everything nested in it.
    fn scope(&mut self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| {
            let (bindings, body) = flatten(e);
            let mut chain = Chain::default();
            chain.build(self, &bindings, body);
            chain.partition(self.max_depth);
            let (new_bindings, new_body) = chain.rewrite(self, &bindings, body);
            if new_bindings.is_empty() {
                new_body
            } else {
                rebuilt(
                    ExprKind::Let {
                        bindings: new_bindings,
                        body: new_body,
                    },
                    e,
                )
            }
        })
    }
}

/// How a graph node reads one of its children, as the graph is built.
#[derive(Clone, Copy, Debug)]
enum Child {
    /// A graph node nested in it.
    Node(u32),
    /// A variable bound in the chain to a graph node.
    Var(u32),
    /// Anything else (an input).
    Other,
}

/// One child of a graph node once the chain is rewritten.
#[derive(Clone, Debug)]
enum RChild {
    /// The nested graph node.
    Node(u32),
    /// The use of a variable bound to the graph node (the original `Var` expression).
    Var(u32, Expr),
    /// A rewritten input expression, with its checked type.
    Input(Expr, Option<Type>),
}

/// The fusion state of one let-chain.
#[derive(Default)]
struct Chain {
    graph: Graph,
    /// Per node: the original expression.
    exprs: Vec<Expr>,
    /// Per node: the variable it is bound to, if it is a binding's value.
    binders: Vec<Option<Var>>,
    /// Per node: how many times graph nodes read its variable.
    var_uses: Vec<u32>,
    /// Per binding: its value's node, if the value is a graph node.
    slot_nodes: Vec<Option<u32>>,
    /// Variables bound so far to graph nodes.
    var_nodes: VarMap<u32>,
    /// Per node: the root of its group.
    roots: Vec<u32>,
    /// Per group root: the members in topological order.
    members: Vec<Vec<u32>>,
    /// Per node, once rewritten: its children.
    rchildren: Vec<Vec<RChild>>,
    /// Per root, once rewritten: the expression that computes its value.
    results: Vec<Option<Expr>>,
    /// The next node the rewrite meets (it meets them in the order the build numbered them).
    next: u32,
    /// Whether the binding being built reads an input that is not movable.
    pinned: bool,
}

impl Chain {
    // ----- Building the graph -----

    /// Builds the dataflow graph of a chain.
    fn build(&mut self, fuser: &Fuser, bindings: &[&Binding], body: &Expr) {
        for b in bindings {
            if is_graph_node(&b.value) {
                self.pinned = false;
                let node = self.node(&b.value);
                if self.pinned {
                    // An input that may read or change state is evaluated where the binding
                    // is, so the binding must stay where it is, as the root of its group.
                    self.graph.nodes[node as usize].extern_ref = true;
                }
                self.binders[node as usize] = Some(b.var.clone());
                self.var_nodes.insert(b.var.id(), node);
                self.slot_nodes.push(Some(node));
            } else {
                self.walk(&b.value);
                self.slot_nodes.push(None);
            }
        }
        self.walk(body);
        // A bound node whose variable is also used outside the graph (or never) is external.
        for (i, binder) in self.binders.iter().enumerate() {
            if let Some(var) = binder {
                let total = fuser.uses.get(&var.id()).copied().unwrap_or(0);
                if total != self.var_uses[i] || total == 0 {
                    self.graph.nodes[i].extern_ref = true;
                }
            }
        }
    }

    /// Visits an expression evaluated by the chain whose value is used outside the graph,
    /// adding the graph nodes in it. Nested scopes are left to their own chains.
    fn walk(&mut self, e: &Expr) {
        ensure_sufficient_stack(|| {
            if is_graph_node(e) {
                let node = self.node(e);
                self.graph.nodes[node as usize].extern_ref = true;
                return;
            }
            match e.kind() {
                ExprKind::Call { callee, args, .. } => {
                    self.walk(callee);
                    args.iter().for_each(|a| self.walk(a));
                }
                ExprKind::If { cond, .. } => self.walk(cond),
                ExprKind::Match { scrutinee, .. } => self.walk(scrutinee),
                ExprKind::RefNew(x) | ExprKind::RefRead(x) => self.walk(x),
                ExprKind::RefWrite(r, v) => {
                    self.walk(r);
                    self.walk(v);
                }
                _ => {}
            }
        })
    }

    /// Visits a child of a graph node.
    fn child(&mut self, e: &Expr) -> Child {
        if let ExprKind::Var(v) = e.kind() {
            if let Some(&node) = self.var_nodes.get(&v.id()) {
                return Child::Var(node);
            }
        } else if is_graph_node(e) {
            return Child::Node(self.node(e));
        }
        if !is_movable(e) {
            self.pinned = true;
        }
        self.walk(e);
        Child::Other
    }

    /// Adds the graph node `e` (after its children) and returns its index.
    fn node(&mut self, e: &Expr) -> u32 {
        ensure_sufficient_stack(|| {
            let out_ty = e.checked_type();
            let (pattern, children): (OpPattern, Vec<(Child, Option<OpPattern>)>) = match e.kind() {
                ExprKind::Call { callee, args, .. } => {
                    let (op, input_edge) = fusable_op(callee).unwrap_or((OpPattern::Opaque, None));
                    let op = if kept_alone(callee, out_ty) {
                        OpPattern::Opaque
                    } else {
                        op
                    };
                    let children = args
                        .iter()
                        .map(|a| {
                            let edge = input_edge
                                .unwrap_or_else(|| edge_pattern(op, a.checked_type(), out_ty));
                            (self.child(a), Some(edge))
                        })
                        .collect();
                    (op, children)
                }
                ExprKind::Tuple(fields) => {
                    let all_tensors = fields.iter().all(|f| is_tensor(f.checked_type()));
                    let children = fields
                        .iter()
                        .map(|f| {
                            let edge = is_tensor(f.checked_type()).then_some(OpPattern::Injective);
                            (self.child(f), edge)
                        })
                        .collect();
                    let pattern = if all_tensors {
                        OpPattern::Tuple
                    } else {
                        OpPattern::Opaque
                    };
                    (pattern, children)
                }
                ExprKind::Proj { tuple, .. } => {
                    let fusable = is_tensor_tuple(tuple.checked_type());
                    let edge = fusable.then_some(OpPattern::Injective);
                    let pattern = if fusable {
                        OpPattern::Injective
                    } else {
                        OpPattern::Opaque
                    };
                    (pattern, vec![(self.child(tuple), edge)])
                }
                _ => (OpPattern::Opaque, Vec::new()),
            };
            let index = self.graph.nodes.len() as u32;
            for &(child, edge) in &children {
                let (Child::Node(c) | Child::Var(c)) = child else {
                    continue;
                };
                match edge {
                    Some(edge) => {
                        self.graph.nodes[c as usize].outputs.push((index, edge));
                        if matches!(child, Child::Var(_)) {
                            self.var_uses[c as usize] += 1;
                        }
                    }
                    // A non-tensor field: the value is used outside the graph.
                    None => self.graph.nodes[c as usize].extern_ref = true,
                }
            }
            self.graph.nodes.push(GraphNode {
                pattern,
                outputs: Vec::new(),
                extern_ref: false,
            });
            self.exprs.push(e.clone());
            self.binders.push(None);
            self.var_uses.push(0);
            index
        })
    }

    // ----- Partitioning -----

    /// Groups the nodes. A group without an operator call (tuples and projections only) is
    /// dissolved: its nodes stay as they are.
    fn partition(&mut self, max_depth: usize) {
        let n = self.graph.nodes.len();
        self.roots = if max_depth <= 1 {
            (0..n as u32).collect()
        } else {
            let mut roots = partition::partition(&self.graph, max_depth);
            attention::merge(&self.graph, &self.exprs, &self.binders, &mut roots);
            roots
        };
        let mut has_op = vec![false; n];
        for (i, e) in self.exprs.iter().enumerate() {
            if matches!(e.kind(), ExprKind::Call { .. }) {
                has_op[self.roots[i] as usize] = true;
            }
        }
        for i in 0..n {
            if !has_op[self.roots[i] as usize] {
                self.roots[i] = i as u32;
            }
        }
        self.members = vec![Vec::new(); n];
        for i in 0..n {
            self.members[self.roots[i] as usize].push(i as u32);
        }
        self.rchildren = vec![Vec::new(); n];
        self.results = vec![None; n];
    }

    // ----- Rewriting -----

    /// Rewrites the chain: bindings of non-root members disappear, each group's root becomes a
    /// call of its primitive function, nested scopes are fused on their own.
    fn rewrite(
        &mut self,
        fuser: &mut Fuser,
        bindings: &[&Binding],
        body: &Expr,
    ) -> (Vec<Binding>, Expr) {
        self.var_nodes.clear();
        let mut out = Vec::with_capacity(bindings.len());
        for (k, b) in bindings.iter().enumerate() {
            if self.slot_nodes.get(k).copied().flatten().is_some() {
                let node = self.rewrite_node(fuser, &b.value);
                self.var_nodes.insert(b.var.id(), node);
                if let Some(value) = self.results.get(node as usize).cloned().flatten() {
                    out.push(Binding {
                        value,
                        ..(*b).clone()
                    });
                }
            } else {
                let value = self.rewrite_expr(fuser, &b.value);
                out.push(Binding {
                    value,
                    ..(*b).clone()
                });
            }
        }
        let body = self.rewrite_expr(fuser, body);
        (out, body)
    }

    /// Rewrites an expression evaluated by the chain (mirroring [`Chain::walk`]).
    fn rewrite_expr(&mut self, fuser: &mut Fuser, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| {
            if is_graph_node(e) {
                let node = self.rewrite_node(fuser, e);
                // A node reached here is used outside the graph, so it is the root of its
                // group and has a result; the original stays only if the numbering broke.
                return self
                    .results
                    .get(node as usize)
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| e.clone());
            }
            match e.kind() {
                ExprKind::Call {
                    callee,
                    args,
                    attrs,
                } => {
                    let new_callee = self.rewrite_expr(fuser, callee);
                    let new_args: Vec<Expr> =
                        args.iter().map(|a| self.rewrite_expr(fuser, a)).collect();
                    if Expr::ptr_eq(&new_callee, callee)
                        && new_args.iter().zip(args).all(|(n, o)| Expr::ptr_eq(n, o))
                    {
                        return e.clone();
                    }
                    rebuilt(
                        ExprKind::Call {
                            callee: new_callee,
                            args: new_args,
                            attrs: attrs.clone(),
                        },
                        e,
                    )
                }
                ExprKind::If {
                    cond,
                    then_branch,
                    else_branch,
                } => {
                    let cond = self.rewrite_expr(fuser, cond);
                    rebuilt(
                        ExprKind::If {
                            cond,
                            then_branch: fuser.scope(then_branch),
                            else_branch: fuser.scope(else_branch),
                        },
                        e,
                    )
                }
                ExprKind::Match {
                    scrutinee,
                    clauses,
                    complete,
                } => {
                    let scrutinee = self.rewrite_expr(fuser, scrutinee);
                    let clauses = clauses
                        .iter()
                        .map(|c| relay_ir::Clause {
                            pattern: c.pattern.clone(),
                            body: fuser.scope(&c.body),
                        })
                        .collect();
                    rebuilt(
                        ExprKind::Match {
                            scrutinee,
                            clauses,
                            complete: *complete,
                        },
                        e,
                    )
                }
                ExprKind::Function(f) if is_primitive(f) => e.clone(),
                ExprKind::Function(f) => rebuilt(
                    ExprKind::Function(Function {
                        body: fuser.scope(&f.body),
                        ..f.clone()
                    }),
                    e,
                ),
                ExprKind::Let { .. } => fuser.scope(e),
                ExprKind::RefNew(x) => rebuilt(ExprKind::RefNew(self.rewrite_expr(fuser, x)), e),
                ExprKind::RefRead(x) => rebuilt(ExprKind::RefRead(self.rewrite_expr(fuser, x)), e),
                ExprKind::RefWrite(r, v) => {
                    let r = self.rewrite_expr(fuser, r);
                    let v = self.rewrite_expr(fuser, v);
                    rebuilt(ExprKind::RefWrite(r, v), e)
                }
                _ => e.clone(),
            }
        })
    }

    /// Rewrites a child of a graph node (mirroring [`Chain::child`]).
    fn rewrite_child(&mut self, fuser: &mut Fuser, e: &Expr) -> RChild {
        if let ExprKind::Var(v) = e.kind() {
            if let Some(&node) = self.var_nodes.get(&v.id()) {
                return RChild::Var(node, e.clone());
            }
        } else if is_graph_node(e) {
            return RChild::Node(self.rewrite_node(fuser, e));
        }
        RChild::Input(self.rewrite_expr(fuser, e), e.checked_type().cloned())
    }

    /// Rewrites the graph node `e` (mirroring [`Chain::node`]); a root gets its result.
    fn rewrite_node(&mut self, fuser: &mut Fuser, e: &Expr) -> u32 {
        ensure_sufficient_stack(|| {
            let children: Vec<RChild> = match e.kind() {
                ExprKind::Call { args, .. } => {
                    args.iter().map(|a| self.rewrite_child(fuser, a)).collect()
                }
                ExprKind::Tuple(fields) => fields
                    .iter()
                    .map(|f| self.rewrite_child(fuser, f))
                    .collect(),
                ExprKind::Proj { tuple, .. } => vec![self.rewrite_child(fuser, tuple)],
                _ => Vec::new(),
            };
            let node = self.next;
            self.next += 1;
            let i = node as usize;
            if i >= self.exprs.len() {
                // Unreachable: the rewrite meets exactly the nodes the build numbered.
                return node;
            }
            self.rchildren[i] = children;
            if self.roots[i] == node {
                let result =
                    if self.members[i].len() > 1 || matches!(e.kind(), ExprKind::Call { .. }) {
                        fuser.primitives += 1;
                        self.primitive_call(node)
                    } else {
                        self.plain(node)
                    };
                self.results[i] = Some(result);
            }
            node
        })
    }

    /// A tuple or projection that forms a group on its own, rebuilt with rewritten children.
    fn plain(&self, node: u32) -> Expr {
        let children = self.rchildren[node as usize]
            .iter()
            .map(|c| match c {
                RChild::Node(j) => self.result(*j),
                RChild::Var(_, e) | RChild::Input(e, _) => e.clone(),
            })
            .collect();
        self.rebuild(node, children)
    }

    /// The result of a root node.
    fn result(&self, node: u32) -> Expr {
        // A node outside the group being built is the root of its own group, and roots are
        // rewritten before the nodes that read them.
        self.results[node as usize]
            .clone()
            .unwrap_or_else(|| self.exprs[node as usize].clone())
    }

    /// Node `node`'s expression with `children` in place of its arguments, fields or tuple.
    fn rebuild(&self, node: u32, mut children: Vec<Expr>) -> Expr {
        let e = &self.exprs[node as usize];
        let kind = match e.kind() {
            ExprKind::Call { callee, attrs, .. } => ExprKind::Call {
                callee: callee.clone(),
                args: children,
                attrs: attrs.clone(),
            },
            ExprKind::Tuple(_) => ExprKind::Tuple(children),
            ExprKind::Proj { index, tuple } => ExprKind::Proj {
                tuple: children.pop().unwrap_or_else(|| tuple.clone()),
                index: *index,
            },
            _ => return e.clone(),
        };
        rebuilt(kind, e)
    }

    /// The call of the primitive function made of the group rooted at `root`.
    fn primitive_call(&self, root: u32) -> Expr {
        let mut prim = Primitive {
            chain: self,
            root,
            params: Vec::new(),
            args: Vec::new(),
            keys: HashMap::new(),
            locals: HashMap::new(),
        };
        let mut bindings = Vec::new();
        for &m in &self.members[root as usize] {
            if m != root && self.binders[m as usize].is_some() {
                let value = prim.body_of(m);
                let var = Var::new(Symbol::intern("x"), None, Span::DUMMY);
                if let Some(ty) = self.exprs[m as usize].checked_type() {
                    var.set_checked_type(ty.clone());
                }
                prim.locals.insert(m, var.clone());
                bindings.push(Binding {
                    var,
                    value,
                    kind: BindingKind::Graph,
                });
            }
        }
        let result = prim.body_of(root);
        let body = if bindings.is_empty() {
            result
        } else {
            Expr::new(
                ExprKind::Let {
                    bindings,
                    body: result,
                },
                Span::DUMMY,
            )
        };
        let root_expr = &self.exprs[root as usize];
        let ret_type = root_expr.checked_type().cloned();
        let mut func = Function {
            type_params: Vec::new(),
            params: prim.params,
            ret_type: ret_type.clone(),
            body,
            attrs: Attrs::new(vec![(Symbol::intern("Primitive"), AttrValue::Int(1))]),
        };
        let hash = structural_hash(&Expr::new(ExprKind::Function(func.clone()), Span::DUMMY));
        func.attrs = func
            .attrs
            .with("hash", AttrValue::Str(format!("{hash:016x}").into()));
        let call = Expr::new(
            ExprKind::Call {
                callee: Expr::new(ExprKind::Function(func), root_expr.span()),
                args: prim.args,
                attrs: Attrs::empty(),
            },
            root_expr.span(),
        );
        if let Some(ty) = ret_type {
            call.set_checked_type(ty);
        }
        call
    }
}

/// What identifies one parameter of a primitive function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ParamKey {
    /// A variable passed in.
    Var(VarId),
    /// The result of a graph node outside the group.
    Node(u32),
    /// Any other input, one parameter per occurrence.
    Occurrence(usize),
}

/// A primitive function being built from a group.
struct Primitive<'c> {
    chain: &'c Chain,
    root: u32,
    params: Vec<Var>,
    /// What the call passes for each parameter.
    args: Vec<Expr>,
    keys: HashMap<ParamKey, usize>,
    /// The body's variables of members bound in the body.
    locals: HashMap<u32, Var>,
}

impl Primitive<'_> {
    /// The body's expression for member `node`: nested members inline, bound members by
    /// variable, inputs by parameter.
    fn body_of(&mut self, node: u32) -> Expr {
        ensure_sufficient_stack(|| {
            let chain = self.chain;
            let children = chain.rchildren[node as usize]
                .iter()
                .map(|c| match c {
                    RChild::Node(j) if chain.roots[*j as usize] == self.root => self.body_of(*j),
                    RChild::Node(j) => {
                        let ty = chain.exprs[*j as usize].checked_type().cloned();
                        self.param(ParamKey::Node(*j), chain.result(*j), ty)
                    }
                    RChild::Var(j, e) => match self.locals.get(j) {
                        Some(var) => Expr::var(var),
                        None => self.input(e, e.checked_type().cloned()),
                    },
                    RChild::Input(e, ty) => self.input(e, ty.clone()),
                })
                .collect();
            chain.rebuild(node, children)
        })
    }

    /// An input expression: scalar constants stay in the body, anything else is a parameter.
    fn input(&mut self, e: &Expr, ty: Option<Type>) -> Expr {
        match e.kind() {
            _ if is_scalar_constant(e) => e.clone(),
            ExprKind::Var(v) => {
                let ty = ty.or_else(|| v.checked_type().cloned());
                self.param(ParamKey::Var(v.id()), e.clone(), ty)
            }
            _ => {
                let key = ParamKey::Occurrence(self.params.len());
                self.param(key, e.clone(), ty)
            }
        }
    }

    /// The parameter for `key`, made on first use with `arg` as the call's argument.
    fn param(&mut self, key: ParamKey, arg: Expr, ty: Option<Type>) -> Expr {
        if let Some(&i) = self.keys.get(&key) {
            return Expr::var(&self.params[i]);
        }
        let var = fresh_var(&format!("p{}", self.params.len()), ty);
        self.keys.insert(key, self.params.len());
        self.params.push(var.clone());
        self.args.push(arg);
        Expr::var(&var)
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;

    use relay_ir::{PrintOptions, print_module};

    use super::FuseOps;
    use crate::{Pass, PassContext, PassManager};

    /// Parses and type-checks `text`, then runs `passes` with verification.
    fn run(text: &str, passes: Vec<&'static dyn Pass>) -> String {
        let module = relay_syntax::parse(text, "<test>").expect("test program parses");
        relay_types::check_module(&module).expect("test program type-checks");
        let (out, _) = PassManager::new(passes, 2)
            .verify_each(true)
            .run(module)
            .expect("fuse_ops succeeds");
        print_module(&out, &PrintOptions::default())
    }

    /// A chain of `n` elementwise bindings; with `fan_in`, every value is also read by a
    /// final `concatenate`, so every post-dominator is far away.
    fn long_chain(n: usize, fan_in: bool) -> String {
        let mut text = String::from(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n  %0 = exp(%x);\n",
        );
        for i in 1..n {
            writeln!(text, "  %{i} = negative(%{});", i - 1).unwrap();
        }
        if fan_in {
            let fields: Vec<String> = (0..n).map(|i| format!("%{i}")).collect();
            writeln!(text, "  concatenate(({}))\n}}", fields.join(", ")).unwrap();
        } else {
            writeln!(text, "  %{}\n}}", n - 1).unwrap();
        }
        text
    }

    #[test]
    fn running_twice_changes_nothing() {
        let text = "#[version = \"0.0.5\"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32]) {
  %0 = add(%x, %y);
  %1 = split(%0, indices_or_sections=3, axis=1);
  %2 = (exp(%1.0), %1.1);
  let %f = fn (%z: Tensor[(2, 3), float32]) { nn.relu(multiply(%z, 2f)) };
  (concatenate(%2, axis=1), %f(%0), sum(%0))
}";
        assert_eq!(
            run(text, vec![&FuseOps]),
            run(text, vec![&FuseOps, &FuseOps])
        );
    }

    #[test]
    fn long_chains_fuse_in_groups_of_max_depth() {
        let module = relay_syntax::parse(&long_chain(100_000, false), "<test>").unwrap();
        relay_types::check_module(&module).unwrap();
        let mut cx = PassContext::new(&FuseOps, 2);
        let out = FuseOps.run(module, &mut cx).unwrap();
        // 100,000 ops in groups of at most 256.
        let printed = print_module(&out, &PrintOptions::default());
        assert_eq!(
            printed.matches("Primitive=1").count(),
            100_000usize.div_ceil(256)
        );
    }

    #[test]
    fn far_post_dominators_stay_cheap() {
        let start = std::time::Instant::now();
        let out = run(&long_chain(20_000, true), vec![&FuseOps]);
        // Every value is read by the tuple, so each op is a group of its own, except the last
        // ones, which phase 2 fuses into the tuple's `concatenate` up to the depth limit.
        let groups = out.matches("Primitive=1").count();
        assert!((20_001 - 256..20_001).contains(&groups), "{groups} groups");
        assert!(start.elapsed().as_secs() < 60);
    }

    /// A random program over `Tensor[(2, 3), float32]` values: bindings of nested operator
    /// calls (elementwise, broadcast against reductions, injective round trips, tuples,
    /// `concatenate`/`split`), `if`s that read earlier values, and a result tuple of some
    /// values, so that uses inside and outside the dataflow graph mix.
    fn random_program(rng: &mut relay_interp::SplitMix64) -> String {
        fn pick(rng: &mut relay_interp::SplitMix64, n: usize) -> usize {
            (rng.next_u64() % n as u64) as usize
        }
        fn operand(rng: &mut relay_interp::SplitMix64, vars: &[String], depth: u32) -> String {
            let v = vars[pick(rng, vars.len())].clone();
            if depth == 0 || pick(rng, 3) == 0 {
                return v;
            }
            let a = operand(rng, vars, depth - 1);
            let b = operand(rng, vars, depth - 1);
            match pick(rng, 9) {
                0 => format!("negative({a})"),
                1 => format!("tanh({a})"),
                2 => format!("add({a}, {b})"),
                3 => format!("multiply({a}, 0.5f)"),
                4 => format!("maximum({a}, {b})"),
                5 => format!("subtract({a}, sum({b}, axis=[1], keepdims=True))"),
                6 => format!("transpose(reshape({a}, newshape=[3, 2]), axes=None)"),
                7 => format!(
                    "split(concatenate(({a}, {b}), axis=1), indices_or_sections=2, axis=1).1"
                ),
                _ => format!("nn.relu({a})"),
            }
        }
        let mut vars = vec!["%x".to_owned(), "%y".to_owned()];
        let mut text = String::from(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3, 2), float32]) {\n  let %y2 = transpose(%y, axes=None);\n",
        );
        vars[1] = "%y2".to_owned();
        let mut graph = 0;
        for i in 0..12 {
            let value = match pick(rng, 6) {
                0 => {
                    let c = operand(rng, &vars, 1);
                    let t = operand(rng, &vars, 2);
                    let e = operand(rng, &vars, 2);
                    format!("if (less(sum({c}), 0f)) {{ {t} }} else {{ {e} }}")
                }
                _ => operand(rng, &vars, 3),
            };
            let var = if pick(rng, 2) == 0 {
                writeln!(text, "  let %v{i} = {value};").unwrap();
                format!("%v{i}")
            } else {
                writeln!(text, "  %{graph} = {value};").unwrap();
                graph += 1;
                format!("%{}", graph - 1)
            };
            vars.push(var);
        }
        let results: Vec<String> = (0..3).map(|_| operand(rng, &vars, 1)).collect();
        writeln!(text, "  ({})\n}}", results.join(", ")).unwrap();
        text
    }

    #[test]
    fn random_programs_keep_their_results() {
        let mut rng = relay_interp::SplitMix64::new(0xf05e);
        for case in 0..60 {
            let text = random_program(&mut rng);
            let module = relay_syntax::parse(&text, "<random>").expect("program parses");
            relay_types::check_module(&module).expect("program type-checks");
            let main = &module.functions[0].func;
            let inputs = relay_interp::random_inputs(main, case).unwrap();
            let opts = relay_interp::InterpOptions::default();
            let expected = relay_interp::run(&module, "main", inputs.clone(), &opts).unwrap();
            for (opt_level, max_depth) in [(0, 256), (2, 2), (2, 3), (2, 256)] {
                let mut cx = PassContext::new(&FuseOps, opt_level);
                cx.set_option("max_depth", crate::OptionValue::Int(max_depth));
                let out = FuseOps.run(module.clone(), &mut cx).unwrap();
                let printed = print_module(&out, &PrintOptions::default());
                let reparsed = relay_syntax::parse(&printed, "<fused>")
                    .unwrap_or_else(|e| panic!("{e:?}\n{text}\n{printed}"));
                relay_types::check_module(&reparsed)
                    .unwrap_or_else(|e| panic!("{e:?}\n{text}\n{printed}"));
                let actual = relay_interp::run(&reparsed, "main", inputs.clone(), &opts)
                    .unwrap_or_else(|e| panic!("{e:?}\n{text}\n{printed}"));
                relay_interp::compare_values(&actual, &expected, 1e-5, 1e-6)
                    .unwrap_or_else(|e| panic!("{e}\n{text}\n{printed}"));
                let again = FuseOps.run(reparsed, &mut cx).unwrap();
                assert_eq!(
                    print_module(&again, &PrintOptions::default()),
                    printed,
                    "not idempotent"
                );
            }
        }
    }
}
