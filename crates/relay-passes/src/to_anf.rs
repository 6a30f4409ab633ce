//! `to_anf`: A-normal form: every non-atomic subexpression is let-bound.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/to_anf/`.
//!
//! Every global function body is converted in three walks, none of which recurses once per
//! binding:
//!
//! 1. a depth-first walk over the body as a graph (an explicit stack, each node visited once)
//!    counts how often each non-atomic node is used, so nodes reachable twice (sharing that
//!    passes such as `fuse_ops` create) are recognized by pointer;
//! 2. a walk in topological order (a node after all of its users) gives every node a *scope*:
//!    the innermost scope enclosing all of its uses, where a scope is a function body, an `if`
//!    branch or a `match` clause body (TVM's lowest common ancestor of scopes);
//! 3. the conversion proper recurses once per nesting level and appends the binding of every
//!    non-atomic node to the binding list of its scope when it is first reached, so a shared
//!    node is bound once, ahead of every use, as deep as possible.
//!
//! The input and output tuples of `vm.invoke_tvm_op` calls stay in the call, with atoms for
//! fields. Existing bindings keep their variables and [`BindingKind`]s; a binding chain in the value
//! position of another binding, or in the body of a chain, is flattened into the enclosing
//! chain (variables are unique, so nothing is captured). New variables are called `%x` and are
//! annotated with the checked type of the value they hold, unless that type mentions a type
//! variable that no enclosing definition binds, or is a polymorphic function type and the value
//! is not a function literal (see `is_polymorphic`). Primitive functions are bound like other
//! values but their bodies are never looked at. A `Closure=1` global keeps its function literal
//! as its body; that literal's body is converted.
//!
//! One case is not handled: a shared node that refers to a recursive local function's own
//! variable and is used both inside and after that function would be bound before the
//! function; only hand-built graphs can contain it.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use relay_ir::visit::{for_each_child, is_atom, is_closure, is_primitive, map_children};
use relay_ir::{
    Binding, BindingKind, Clause, Expr, ExprKind, ExprNode, Function, GlobalFunc, Module, Type,
    TypeKind, TypeVarId, ensure_sufficient_stack,
};

use crate::util::fresh_var;
use crate::{Invariants, Pass, PassContext, PassError};

/// The `to_anf` pass.
pub struct ToAnf;

impl Pass for ToAnf {
    fn name(&self) -> &'static str {
        "to_anf"
    }

    fn description(&self) -> &'static str {
        "A-normal form: every non-atomic subexpression is let-bound"
    }

    fn required(&self) -> bool {
        true
    }

    fn needs_types(&self) -> bool {
        true
    }

    fn establishes(&self) -> Invariants {
        Invariants {
            anf: true,
            ..Invariants::default()
        }
    }

    fn run(&self, module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let mut bound = 0i64;
        let functions = module
            .functions
            .iter()
            .map(|g| convert_global(g, &mut bound))
            .collect();
        cx.stat("bindings added", bound);
        Ok(Module {
            functions,
            ..module
        })
    }
}

/// The ANF form of one global function.
fn convert_global(g: &GlobalFunc, bound: &mut i64) -> GlobalFunc {
    let func = &g.func;
    if is_primitive(func) {
        return g.clone();
    }
    let tvars: HashSet<TypeVarId> = func.type_params.iter().map(|t| t.id()).collect();
    let body = if is_closure(func) {
        // A `Closure=1` global must keep a function literal as its body: convert inside it.
        match func.body.kind() {
            ExprKind::Function(inner) if !is_primitive(inner) => {
                let mut tvars = tvars;
                tvars.extend(inner.type_params.iter().map(|t| t.id()));
                let inner_body = convert_body(&inner.body, tvars, bound);
                Expr::new(
                    ExprKind::Function(Function {
                        body: inner_body,
                        ..inner.clone()
                    }),
                    func.body.span(),
                )
            }
            _ => func.body.clone(),
        }
    } else {
        convert_body(&func.body, tvars, bound)
    };
    GlobalFunc {
        func: Function {
            body,
            ..func.clone()
        },
        ..g.clone()
    }
}

/// The ANF form of a function body; `tvars` are the type variables bound around it.
fn convert_body(body: &Expr, tvars: HashSet<TypeVarId>, bound: &mut i64) -> Expr {
    if is_atom(body) {
        return body.clone();
    }
    let graph = Graph::build(body);
    let lists = vec![Vec::new(); graph.scope_parent.len()];
    let mut cx = Converter {
        graph,
        lists,
        memo: HashMap::new(),
        tvars,
        bound: 0,
    };
    let out = cx.block(body, ROOT_SCOPE);
    *bound += cx.bound;
    out
}

/// A node's identity: the address of its shared node.
type NodeKey = *const ExprNode;

fn key(e: &Expr) -> NodeKey {
    &**e as *const ExprNode
}

/// A scope: an index into [`Graph::scope_parent`].
type ScopeId = u32;

/// The scope of the converted function body.
const ROOT_SCOPE: ScopeId = 0;

/// Marks a node whose scope is not known yet.
const NO_SCOPE: ScopeId = ScopeId::MAX;

/// What the graph walks know about one non-atomic node.
#[derive(Clone, Copy)]
struct NodeInfo {
    /// How many times the node is a child of another node (`0` for the root).
    uses: u32,
    /// Uses not yet visited by the topological walk.
    pending: u32,
    /// The innermost scope enclosing all uses seen so far.
    scope: ScopeId,
    /// The scope of the node's first scope position (function body, first branch or clause);
    /// further positions follow in order.
    first_inner: ScopeId,
}

/// The use counts and scopes of every non-atomic node of a function body.
struct Graph {
    nodes: HashMap<NodeKey, NodeInfo>,
    scope_parent: Vec<ScopeId>,
    scope_depth: Vec<u32>,
}

impl Graph {
    fn build(root: &Expr) -> Graph {
        let mut nodes = HashMap::new();
        nodes.insert(
            key(root),
            NodeInfo {
                uses: 0,
                pending: 0,
                scope: ROOT_SCOPE,
                first_inner: NO_SCOPE,
            },
        );
        // Walk 1: use counts, each node's children pushed once.
        let mut stack = vec![root.clone()];
        while let Some(e) = stack.pop() {
            for_each_use(&e, |c, _| {
                if is_atom(c) {
                    return;
                }
                match nodes.entry(key(c)) {
                    Entry::Occupied(mut o) => {
                        let info: &mut NodeInfo = o.get_mut();
                        info.uses += 1;
                        info.pending += 1;
                    }
                    Entry::Vacant(v) => {
                        v.insert(NodeInfo {
                            uses: 1,
                            pending: 1,
                            scope: NO_SCOPE,
                            first_inner: NO_SCOPE,
                        });
                        stack.push(c.clone());
                    }
                }
            });
        }
        // Walk 2: scopes in topological order; a node is taken once all its users are done.
        // Indexing `graph.nodes` cannot fail: walk 1 entered the root and every non-atomic
        // node reachable from it, and walk 2 follows the same edges.
        let mut graph = Graph {
            nodes,
            scope_parent: vec![NO_SCOPE],
            scope_depth: vec![0],
        };
        let mut ready = vec![root.clone()];
        let mut children = Vec::new();
        while let Some(e) = ready.pop() {
            let here = graph.nodes[&key(&e)].scope;
            let first_inner = graph.scope_parent.len() as ScopeId;
            for _ in 0..scope_positions(&e) {
                graph.scope_parent.push(here);
                graph.scope_depth.push(graph.scope_depth[here as usize] + 1);
            }
            if let Some(info) = graph.nodes.get_mut(&key(&e)) {
                info.first_inner = first_inner;
            }
            children.clear();
            for_each_use(&e, |c, position| {
                if !is_atom(c) {
                    let scope = position.map_or(here, |k| first_inner + k);
                    children.push((c.clone(), scope));
                }
            });
            for (c, scope) in children.drain(..) {
                let old = graph.nodes[&key(&c)].scope;
                let scope = if old == NO_SCOPE {
                    scope
                } else {
                    graph.lca(old, scope)
                };
                if let Some(info) = graph.nodes.get_mut(&key(&c)) {
                    info.scope = scope;
                    info.pending -= 1;
                    if info.pending == 0 {
                        ready.push(c);
                    }
                }
            }
        }
        graph
    }

    /// The innermost scope enclosing both `a` and `b`.
    fn lca(&self, mut a: ScopeId, mut b: ScopeId) -> ScopeId {
        while self.scope_depth[a as usize] > self.scope_depth[b as usize] {
            a = self.scope_parent[a as usize];
        }
        while self.scope_depth[b as usize] > self.scope_depth[a as usize] {
            b = self.scope_parent[b as usize];
        }
        while a != b {
            a = self.scope_parent[a as usize];
            b = self.scope_parent[b as usize];
        }
        a
    }

    fn info(&self, e: &Expr) -> Option<&NodeInfo> {
        self.nodes.get(&key(e))
    }
}

/// How many scopes `e` opens: a non-primitive function's body, an `if`'s two branches, a
/// `match`'s clause bodies.
fn scope_positions(e: &Expr) -> u32 {
    match e.kind() {
        ExprKind::Function(f) if !is_primitive(f) => 1,
        ExprKind::If { .. } => 2,
        ExprKind::Match { clauses, .. } => clauses.len() as u32,
        _ => 0,
    }
}

/// Calls `f` on each child of `e` with the index of the scope position it is in (`None` when
/// it is evaluated in `e`'s own scope). A primitive function's body is not a child.
fn for_each_use(e: &Expr, mut f: impl FnMut(&Expr, Option<u32>)) {
    match e.kind() {
        ExprKind::Function(func) => {
            if !is_primitive(func) {
                f(&func.body, Some(0));
            }
        }
        ExprKind::If {
            cond,
            then_branch,
            else_branch,
        } => {
            f(cond, None);
            f(then_branch, Some(0));
            f(else_branch, Some(1));
        }
        ExprKind::Match {
            scrutinee, clauses, ..
        } => {
            f(scrutinee, None);
            for (i, c) in clauses.iter().enumerate() {
                f(&c.body, Some(i as u32));
            }
        }
        _ => for_each_child(e, |c| f(c, None)),
    }
}

/// The conversion proper (walk 3).
struct Converter {
    graph: Graph,
    /// The bindings of every scope, appended as nodes are first reached.
    lists: Vec<Vec<Binding>>,
    /// The variable holding each shared node already bound.
    memo: HashMap<NodeKey, Expr>,
    /// Type variables bound by the global or a function literal seen so far, which new
    /// variables' annotations may mention.
    tvars: HashSet<TypeVarId>,
    /// How many new bindings were made.
    bound: i64,
}

impl Converter {
    fn is_shared(&self, e: &Expr) -> bool {
        self.graph.info(e).is_some_and(|i| i.uses > 1)
    }

    fn scope_of(&self, e: &Expr) -> ScopeId {
        // Every non-atomic node reachable from the body has an entry; the root scope is a safe
        // fallback for the root itself.
        self.graph.info(e).map_or(ROOT_SCOPE, |i| {
            if i.scope == NO_SCOPE {
                ROOT_SCOPE
            } else {
                i.scope
            }
        })
    }

    fn first_inner(&self, e: &Expr) -> ScopeId {
        self.graph.info(e).map_or(NO_SCOPE, |i| i.first_inner)
    }

    /// `e` converted in scope `scope` (a function body, branch or clause): a let-chain of the
    /// bindings placed in that scope, ending in an atom.
    fn block(&mut self, e: &Expr, scope: ScopeId) -> Expr {
        let atom = self.atom(e);
        let bindings = self
            .lists
            .get_mut(scope as usize)
            .map(std::mem::take)
            .unwrap_or_default();
        if bindings.is_empty() {
            atom
        } else {
            Expr::new(
                ExprKind::Let {
                    bindings,
                    body: atom,
                },
                e.span(),
            )
        }
    }

    /// An atom holding `e`'s value, binding `e` (in its scope) if it is not one.
    fn atom(&mut self, e: &Expr) -> Expr {
        if is_atom(e) {
            return e.clone();
        }
        if let Some(a) = self.memo.get(&key(e)) {
            return a.clone();
        }
        let a = ensure_sufficient_stack(|| {
            if matches!(e.kind(), ExprKind::Let { .. }) {
                return self.chain(e, true);
            }
            let value = self.value(e);
            let annotation = self
                .annotation(e.checked_type())
                .filter(|t| is_function(&value) || !is_polymorphic(t));
            let var = fresh_var("x", annotation);
            self.emit(
                self.scope_of(e),
                Binding {
                    var: var.clone(),
                    value,
                    kind: BindingKind::Let,
                },
            );
            self.bound += 1;
            Expr::var(&var)
        });
        if self.is_shared(e) {
            self.memo.insert(key(e), a.clone());
        }
        a
    }

    /// The value an existing binding gets for `e`: an ANF binding value.
    fn binding_value(&mut self, e: &Expr) -> Expr {
        if is_atom(e) || self.is_shared(e) {
            self.atom(e)
        } else if matches!(e.kind(), ExprKind::Let { .. }) {
            ensure_sufficient_stack(|| self.chain(e, false))
        } else {
            ensure_sufficient_stack(|| self.value(e))
        }
    }

    /// Emits the bindings of chain `e` (and of chains nested in its body) into its scope and
    /// returns its result: an atom if `want_atom`, else an ANF binding value.
    fn chain(&mut self, e: &Expr, want_atom: bool) -> Expr {
        let mut cur = e.clone();
        loop {
            let ExprKind::Let { bindings, body } = cur.kind() else {
                return if want_atom {
                    self.atom(&cur)
                } else {
                    self.binding_value(&cur)
                };
            };
            let scope = self.scope_of(&cur);
            for b in bindings {
                let value = self.binding_value(&b.value);
                self.emit(scope, Binding { value, ..b.clone() });
            }
            if matches!(body.kind(), ExprKind::Let { .. }) && !self.is_shared(body) {
                cur = body.clone();
                continue;
            }
            return if want_atom {
                self.atom(body)
            } else {
                self.binding_value(body)
            };
        }
    }

    /// `e` (non-atomic, not a chain) with its parts converted: atoms where ANF wants atoms,
    /// blocks in scope positions.
    fn value(&mut self, e: &Expr) -> Expr {
        match e.kind() {
            ExprKind::Function(f) => {
                if is_primitive(f) {
                    return e.clone();
                }
                self.tvars.extend(f.type_params.iter().map(|t| t.id()));
                let body = self.block(&f.body, self.first_inner(e));
                rebuild_if(&[(&f.body, &body)], e, || {
                    ExprKind::Function(Function {
                        body: body.clone(),
                        ..f.clone()
                    })
                })
            }
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                let first = self.first_inner(e);
                let c = self.atom(cond);
                let t = self.block(then_branch, first);
                let f = self.block(else_branch, first.wrapping_add(1));
                rebuild_if(
                    &[(cond, &c), (then_branch, &t), (else_branch, &f)],
                    e,
                    || ExprKind::If {
                        cond: c.clone(),
                        then_branch: t.clone(),
                        else_branch: f.clone(),
                    },
                )
            }
            ExprKind::Match {
                scrutinee,
                clauses,
                complete,
            } => {
                let first = self.first_inner(e);
                let s = self.atom(scrutinee);
                let new_clauses: Vec<Clause> = clauses
                    .iter()
                    .enumerate()
                    .map(|(i, c)| Clause {
                        pattern: c.pattern.clone(),
                        body: self.block(&c.body, first.wrapping_add(i as u32)),
                    })
                    .collect();
                Expr::new(
                    ExprKind::Match {
                        scrutinee: s,
                        clauses: new_clauses,
                        complete: *complete,
                    },
                    e.span(),
                )
            }
            ExprKind::Let { .. } => self.chain(e, false),
            ExprKind::Call { callee, .. } if is_invoke_tvm_op(callee) => {
                map_children(e, |c| match c.kind() {
                    ExprKind::Tuple(_) => map_children(c, |field| self.atom(field)),
                    _ => self.atom(c),
                })
            }
            _ => map_children(e, |c| self.atom(c)),
        }
    }

    fn emit(&mut self, scope: ScopeId, b: Binding) {
        if let Some(list) = self.lists.get_mut(scope as usize) {
            list.push(b);
        }
    }

    /// The annotation of a new variable holding a value of type `ty`: the type itself, unless
    /// it is unknown or mentions a type variable nothing around binds.
    fn annotation(&self, ty: Option<&Type>) -> Option<Type> {
        let ty = ty?;
        type_is_closed(ty, &self.tvars, &mut Vec::new()).then(|| ty.clone())
    }
}

/// Whether `callee` is `vm.invoke_tvm_op`, whose input and output tuples stay in the call
/// (`manifest_alloc`'s form, which the bytecode compiler reads).
fn is_invoke_tvm_op(callee: &Expr) -> bool {
    matches!(callee.kind(), ExprKind::Op(op) if op.name == "vm.invoke_tvm_op")
}

/// Whether `e` is a function literal.
fn is_function(e: &Expr) -> bool {
    matches!(e.kind(), ExprKind::Function(_))
}

/// Whether `ty` is a function type with type parameters. Such a checked type of a value other
/// than a function literal is not a safe annotation: in A-normal form the literals inside the
/// value are read through variables (and, after `lambda_lift`, globals), which the type checker
/// instantiates, so the value may have lost its type parameters (`(fn [A](%a: A) -> A { %a },
/// 2).0` becomes `let %x: fn [A](A) -> A = fn …; let %p = (%x, 2); let %y = %p.0`, where the
/// tuple holds an instance of `%x`). Unannotated, the variable gets the value's own type.
fn is_polymorphic(ty: &Type) -> bool {
    matches!(ty.kind(), TypeKind::Func(f) if !f.type_params.is_empty())
}

/// `e` itself when every `(old, new)` child pair is pointer-equal, else a new node of `kind()`.
fn rebuild_if(pairs: &[(&Expr, &Expr)], e: &Expr, kind: impl FnOnce() -> ExprKind) -> Expr {
    if pairs.iter().all(|(a, b)| Expr::ptr_eq(a, b)) {
        e.clone()
    } else {
        Expr::new(kind(), e.span())
    }
}

/// Whether `ty` is complete and mentions only type variables in `tvars` or bound by function
/// types around the occurrence (`inner`).
fn type_is_closed(ty: &Type, tvars: &HashSet<TypeVarId>, inner: &mut Vec<TypeVarId>) -> bool {
    ensure_sufficient_stack(|| match ty.kind() {
        TypeKind::Tensor { .. } => true,
        TypeKind::Incomplete => false,
        TypeKind::Var(v) => tvars.contains(&v.id()) || inner.contains(&v.id()),
        TypeKind::Tuple(fields) => fields.iter().all(|t| type_is_closed(t, tvars, inner)),
        TypeKind::Adt { args, .. } => args.iter().all(|t| type_is_closed(t, tvars, inner)),
        TypeKind::Ref(t) => type_is_closed(t, tvars, inner),
        TypeKind::Func(f) => {
            let depth = inner.len();
            inner.extend(f.type_params.iter().map(|t| t.id()));
            let ok = f.params.iter().all(|t| type_is_closed(t, tvars, inner))
                && type_is_closed(&f.ret, tvars, inner);
            inner.truncate(depth);
            ok
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PassManager;
    use crate::testing::eval;
    use relay_ir::{PrintOptions, Span, print_module};

    fn parse(text: &str) -> Module {
        crate::testing::parse_checked(text)
    }

    fn run_pass(m: Module) -> Module {
        PassManager::new(vec![&ToAnf], 2)
            .verify_each(true)
            .run(m)
            .expect("to_anf succeeds")
            .0
    }

    fn reparse(m: &Module) -> String {
        let text = print_module(m, &PrintOptions::default());
        let again = relay_syntax::parse(&text, "<printed>").expect("output re-parses");
        relay_types::check_module(&again).expect("output type-checks");
        text
    }

    #[test]
    fn nested_calls_become_bindings() {
        let m = parse(
            "#[version = \"0.0.5\"]\n\
             def @main() { let %f = fn (%x: int32) -> int32 { %x * (%x + 1) }; \
             if (%f(2) > 3) { %f(%f(1)) } else { 0 } }",
        );
        let before = eval(&m);
        let out = run_pass(m);
        let text = reparse(&out);
        assert!(text.contains("let %x"), "{text}");
        assert_eq!(eval(&out), before);
    }

    #[test]
    fn shared_nodes_are_bound_once_in_the_innermost_common_scope() {
        // Parse `S = %a + %a` and `M = %a * %a`, then build
        // `(if (%a > 0) { add(S, S) } else { multiply(M, M) }, S)` with S and M shared.
        let m = parse(
            "#[version = \"0.0.5\"]\n\
             def @main(%a: int32) { if (%a > 0) { %a + %a } else { %a * %a } }",
        );
        let g = &m.functions[0];
        let ExprKind::If {
            cond,
            then_branch: s,
            else_branch: mm,
        } = g.func.body.kind()
        else {
            panic!("the test program's body is an if");
        };
        let twice = |e: &Expr| {
            let ExprKind::Call { callee, attrs, .. } = e.kind() else {
                panic!("an operator call");
            };
            Expr::new(
                ExprKind::Call {
                    callee: callee.clone(),
                    args: vec![e.clone(), e.clone()],
                    attrs: attrs.clone(),
                },
                Span::DUMMY,
            )
        };
        let iff = Expr::new(
            ExprKind::If {
                cond: cond.clone(),
                then_branch: twice(s),
                else_branch: twice(mm),
            },
            Span::DUMMY,
        );
        let body = Expr::new(ExprKind::Tuple(vec![iff, s.clone()]), Span::DUMMY);
        let dag = Module {
            functions: vec![GlobalFunc {
                func: Function {
                    body,
                    ret_type: None,
                    ..g.func.clone()
                },
                ..g.clone()
            }],
            ..m.clone()
        };
        relay_types::check_module(&dag).expect("the shared program type-checks");
        let out = run_pass(dag.clone());
        let text = reparse(&out);
        assert_eq!(text.matches("add(%a, %a)").count(), 1, "{text}");
        assert_eq!(text.matches("multiply(%a, %a)").count(), 1, "{text}");
        // S is bound in the function body ahead of the `if`; M inside the else branch.
        let s_at = text.find("add(%a, %a)").expect("S is bound");
        let if_at = text.find("if (").expect("the if is kept");
        let m_at = text.find("multiply(%a, %a)").expect("M is bound");
        assert!(s_at < if_at && if_at < m_at, "{text}");
        for a in [3, -3] {
            let arg = || {
                let x = relay_ir::NDArray::scalar_i128(relay_ir::DType::I32, a)
                    .expect("an int32 scalar");
                vec![relay_ir::Value::tensor(x)]
            };
            let opts = Default::default();
            let before = relay_interp::run(&dag, "main", arg(), &opts).expect("runs");
            let after = relay_interp::run(&out, "main", arg(), &opts).expect("runs");
            assert_eq!(format!("{before:?}"), format!("{after:?}"));
        }
    }

    #[test]
    fn long_chains_do_not_overflow() {
        let mut text = String::from("#[version = \"0.0.5\"]\ndef @main() {\n  let %v0 = 0;\n");
        for i in 1..100_000 {
            text.push_str(&format!("  let %v{i} = %v{} + 1;\n", i - 1));
        }
        text.push_str("  %v99999 * 2\n}\n");
        let m = parse(&text);
        let before = eval(&m);
        let out = run_pass(m);
        assert_eq!(eval(&out), before);
    }
}
