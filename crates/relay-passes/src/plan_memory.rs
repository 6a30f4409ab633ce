//! `plan_memory`: reuses storage among allocations whose lifetimes do not overlap.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/plan_memory/`.
//!
//! Each let-chain is planned on its own (nested chains separately, never across a call): a
//! forward walk finds the chain's `memory.alloc_storage` bindings with constant size and
//! alignment, the `memory.alloc_tensor` views placed in them, and for each view its last use
//! (through aliases, tuples, projections and `vm.reshape_tensor` views of it, which share its
//! bytes; a use inside a nested `if`, `match` or function counts at the binding that holds it)
//! or whether it escapes. A view escapes when its value can outlive the chain or be reached
//! through something the walk does not follow: returned, captured by a closure, passed to a
//! call other than as a `vm.invoke_tvm_op` input or output or a `vm.reshape_tensor` in the
//! chain, matched, or stored in a reference. A storage is free once every view in it is dead; a
//! storage with an escaping view is never freed, and one whose variable is used other than as
//! the first argument of `memory.alloc_tensor` is never freed nor replaced. Then a linear scan over the bindings
//! hands each later storage the best-fitting free one with the same alignment and device (the
//! smallest at least as large, else the largest, which grows): its `alloc_storage` binding goes
//! and its views name the earlier storage variable. The storage of a scalar (a rank-0 view)
//! is neither reused nor given to another: the VM computes scalar kernels unboxed when their
//! storage serves nothing else.

use std::collections::{BTreeSet, HashMap};

use relay_ir::visit::{for_each_child, is_primitive, map_children};
use relay_ir::{
    AttrValue, Binding, BindingKind, DType, DTypeCode, Expr, ExprKind, Module, NDArray, Var, VarId,
    ensure_sufficient_stack,
};

use crate::{Pass, PassContext, PassError};

/// The `plan_memory` pass.
pub struct PlanMemory;

impl Pass for PlanMemory {
    fn name(&self) -> &'static str {
        "plan_memory"
    }

    fn description(&self) -> &'static str {
        "reuses storage among allocations whose lifetimes do not overlap"
    }

    fn opt_level(&self) -> u32 {
        1
    }

    fn needs_types(&self) -> bool {
        true
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let before = storage_bytes(&module);
        let mut planner = Planner { reused: 0 };
        for global in &mut module.functions {
            if is_primitive(&global.func) {
                continue;
            }
            global.func.body = planner.visit(&global.func.body);
        }
        cx.stat("storage bytes before", before);
        cx.stat("storage bytes after", storage_bytes(&module));
        cx.stat("storage reused", planner.reused);
        Ok(module)
    }
}

/// The arguments of `e` if it is a call of the operator `name`.
fn op_call<'a>(e: &'a Expr, name: &str) -> Option<&'a [Expr]> {
    match e.kind() {
        ExprKind::Call { callee, args, .. } => match callee.kind() {
            ExprKind::Op(op) if op.name == name => Some(args),
            _ => None,
        },
        _ => None,
    }
}

/// The value of a scalar int64 constant (the sizes and alignments `manifest_alloc` writes).
fn const_int(e: &Expr) -> Option<i64> {
    let ExprKind::Constant(c) = e.kind() else {
        return None;
    };
    if !c.is_scalar() {
        return None;
    }
    let bytes = c.as_bytes();
    match (c.dtype().code, c.dtype().bits) {
        (DTypeCode::Int, 64) => Some(i64::from_ne_bytes(bytes.try_into().ok()?)),
        _ => None,
    }
}

/// A scalar int64 constant holding `value`.
fn int64_constant(value: i64) -> Option<Expr> {
    let array = NDArray::from_bytes(DType::I64, &[], &value.to_ne_bytes()).ok()?;
    Some(Expr::constant(array))
}

/// The total static size of the `memory.alloc_storage` calls in `module`.
fn storage_bytes(module: &Module) -> i64 {
    fn walk(e: &Expr, total: &mut i64) {
        ensure_sufficient_stack(|| {
            if let Some(args) = op_call(e, "memory.alloc_storage")
                && let Some(size) = args.first().and_then(const_int)
            {
                *total = total.saturating_add(size);
            }
            if let ExprKind::Function(f) = e.kind()
                && is_primitive(f)
            {
                return;
            }
            for_each_child(e, |c| walk(c, total));
        })
    }
    let mut total = 0;
    for global in &module.functions {
        if !is_primitive(&global.func) {
            walk(&global.func.body, &mut total);
        }
    }
    total
}

/// The planner: rewrites every let-chain of the module.
struct Planner {
    /// How many `alloc_storage` bindings were removed.
    reused: i64,
}

/// Storages are interchangeable when they have the same alignment and device attribute.
type PoolKey = (i64, Option<AttrValue>);

/// One `memory.alloc_storage` binding of the chain being planned.
struct StorageInfo {
    /// Its binding's index.
    binding: usize,
    /// Its variable.
    var: Var,
    /// Its size in bytes.
    size: i64,
    /// The pool it belongs to.
    key: PoolKey,
    /// Whether its variable is used other than as `alloc_tensor`'s storage in this chain (it is
    /// then left alone).
    used_directly: bool,
    /// Whether it holds an escaping view (it may then take a free storage but is never freed).
    escapes: bool,
    /// The index of the last binding that uses it or one of its views.
    free_after: usize,
}

/// One `memory.alloc_tensor` view of a planned storage.
struct TensorInfo {
    /// The storage it is a view of.
    storage: usize,
    /// The index of the last binding that uses it.
    last_use: usize,
    /// Whether its value escapes.
    escapes: bool,
}

/// What the forward walk of one chain learns.
#[derive(Default)]
struct Analysis {
    storages: Vec<StorageInfo>,
    tensors: Vec<TensorInfo>,
    /// Storage variables of the chain.
    storage_of: HashMap<VarId, usize>,
    /// For each variable of the chain that may hold a planned view: the views it may hold.
    refs: HashMap<VarId, Vec<usize>>,
}

impl Analysis {
    /// A use of `v` at binding `pos` that does not retain it.
    fn use_at(&mut self, v: &Var, pos: usize) {
        if let Some(&s) = self.storage_of.get(&v.id()) {
            self.storages[s].used_directly = true;
        }
        if let Some(ts) = self.refs.get(&v.id()) {
            for &t in ts {
                let info = &mut self.tensors[t];
                info.last_use = info.last_use.max(pos);
            }
        }
    }

    /// A use of `v` that may retain it beyond what the walk follows.
    fn escape(&mut self, v: &Var) {
        if let Some(&s) = self.storage_of.get(&v.id()) {
            self.storages[s].used_directly = true;
        }
        if let Some(ts) = self.refs.get(&v.id()) {
            for &t in ts {
                self.tensors[t].escapes = true;
            }
        }
    }

    /// Records the uses of variables in `e`, evaluated at binding `pos`: operands of
    /// `vm.invoke_tvm_op` and `memory.kill` are plain uses, every other occurrence escapes.
    fn scan(&mut self, e: &Expr, pos: usize) {
        ensure_sufficient_stack(|| {
            if self.refs.is_empty() && self.storage_of.is_empty() {
                return;
            }
            match e.kind() {
                ExprKind::Var(v) => self.escape(v),
                ExprKind::Function(f) if is_primitive(f) => {}
                // A closure may run at any later time: whatever it captures escapes.
                ExprKind::Function(_) => self.escape_all(e),
                _ => {
                    if let Some(args) = op_call(e, "vm.invoke_tvm_op") {
                        for (i, a) in args.iter().enumerate() {
                            match a.kind() {
                                ExprKind::Var(v) if i > 0 => self.use_at(v, pos),
                                ExprKind::Tuple(fields) if i > 0 => {
                                    for f in fields {
                                        match f.kind() {
                                            ExprKind::Var(v) => self.use_at(v, pos),
                                            _ => self.scan(f, pos),
                                        }
                                    }
                                }
                                _ => self.scan(a, pos),
                            }
                        }
                    } else if let Some(args) = op_call(e, "memory.kill") {
                        for a in args {
                            match a.kind() {
                                ExprKind::Var(v) => self.use_at(v, pos),
                                _ => self.scan(a, pos),
                            }
                        }
                    } else {
                        for_each_child(e, |c| self.scan(c, pos));
                    }
                }
            }
        })
    }

    /// Records every variable occurring in `e` as escaping.
    fn escape_all(&mut self, e: &Expr) {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Var(v) => self.escape(v),
            _ => for_each_child(e, |c| self.escape_all(c)),
        })
    }

    /// The views `v` may hold.
    fn refs_of(&self, v: &Var) -> Vec<usize> {
        self.refs.get(&v.id()).cloned().unwrap_or_default()
    }
}

impl Planner {
    /// `e` with every let-chain in it planned.
    fn visit(&mut self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Function(f) if is_primitive(f) => e.clone(),
            ExprKind::Let { bindings, body } => self.chain(e, bindings, body),
            _ => map_children(e, |c| self.visit(c)),
        })
    }

    /// A planned let-chain.
    fn chain(&mut self, e: &Expr, bindings: &[Binding], body: &Expr) -> Expr {
        let mut changed = false;
        let mut values: Vec<Expr> = Vec::with_capacity(bindings.len());
        for b in bindings {
            let v = self.visit(&b.value);
            changed |= !Expr::ptr_eq(&v, &b.value);
            values.push(v);
        }
        let new_body = self.visit(body);
        changed |= !Expr::ptr_eq(&new_body, body);

        let analysis = analyze(bindings, &values, &new_body);
        let mut plan = assign(&analysis);
        // The grown storages' new `alloc_storage` calls; a chain whose sizes cannot be
        // rewritten keeps its storages as they were.
        let mut grown: HashMap<usize, Expr> = HashMap::new();
        for (&s, &size) in &plan.grown {
            match with_size(&values[analysis.storages[s].binding], size) {
                Some(new) => {
                    grown.insert(s, new);
                }
                None => {
                    plan.replaced.iter_mut().for_each(|r| *r = None);
                    grown.clear();
                    break;
                }
            }
        }
        if plan.replaced.iter().all(Option::is_none) && !changed {
            return e.clone();
        }

        let mut out = Vec::with_capacity(bindings.len());
        for (i, (b, value)) in bindings.iter().zip(values).enumerate() {
            if let Some(&s) = analysis.storage_of.get(&b.var.id())
                && analysis.storages[s].binding == i
            {
                if plan.replaced[s].is_some() {
                    self.reused += 1;
                    continue;
                }
                if let Some(new) = grown.remove(&s) {
                    out.push(Binding {
                        value: new,
                        ..b.clone()
                    });
                    continue;
                }
            }
            let value = retarget(&analysis, &plan, &value).unwrap_or(value);
            out.push(Binding { value, ..b.clone() });
        }
        Expr::new(
            ExprKind::Let {
                bindings: out,
                body: new_body,
            },
            e.span(),
        )
    }
}

/// The forward walk over one chain (`values` are the bindings' values after nested planning).
fn analyze(bindings: &[Binding], values: &[Expr], body: &Expr) -> Analysis {
    let mut a = Analysis::default();
    for (i, (b, value)) in bindings.iter().zip(values).enumerate() {
        if let Some(args) = op_call(value, "memory.alloc_storage")
            && b.kind != BindingKind::Seq
            && args.len() == 2
            && let (Some(size), Some(align)) = (const_int(&args[0]), const_int(&args[1]))
            && size >= 0
            && let ExprKind::Call { attrs, .. } = value.kind()
        {
            a.storage_of.insert(b.var.id(), a.storages.len());
            a.storages.push(StorageInfo {
                binding: i,
                var: b.var.clone(),
                size,
                key: (align, attrs.get("virtual_device").cloned()),
                used_directly: false,
                escapes: false,
                free_after: i,
            });
            continue;
        }
        if let Some(args) = op_call(value, "memory.alloc_tensor")
            && let Some(ExprKind::Var(s)) = args.first().map(Expr::kind)
            && let Some(&storage) = a.storage_of.get(&s.id())
        {
            for arg in &args[1..] {
                a.scan(arg, i);
            }
            // A scalar's storage is left to it: the VM then computes a scalar kernel's result
            // unboxed, without the storage (`relay_vm` compiler, `plan_scalars`).
            if args.get(2).is_some_and(
                |shape| matches!(shape.kind(), ExprKind::Constant(c) if c.num_elements() == 0),
            ) {
                a.storages[storage].used_directly = true;
            }
            let t = a.tensors.len();
            a.tensors.push(TensorInfo {
                storage,
                last_use: i,
                escapes: false,
            });
            a.refs.insert(b.var.id(), vec![t]);
            continue;
        }
        // `vm.reshape_tensor` is a view of the same bytes: an alias, whose uses keep the
        // storage (a use inside a nested scope escapes, as any other).
        if let Some(args) = op_call(value, "vm.reshape_tensor")
            && let Some(ExprKind::Var(y)) = args.first().map(Expr::kind)
        {
            a.use_at(y, i);
            for arg in &args[1..] {
                a.scan(arg, i);
            }
            let r = a.refs_of(y);
            if !r.is_empty() {
                a.refs.insert(b.var.id(), r);
            }
            continue;
        }
        match value.kind() {
            ExprKind::Var(y) => {
                if let Some(&s) = a.storage_of.get(&y.id()) {
                    a.storages[s].used_directly = true;
                }
                let r = a.refs_of(y);
                if !r.is_empty() {
                    a.refs.insert(b.var.id(), r);
                }
            }
            ExprKind::Tuple(fields) => {
                let mut r = Vec::new();
                for f in fields {
                    match f.kind() {
                        ExprKind::Var(y) => {
                            if let Some(&s) = a.storage_of.get(&y.id()) {
                                a.storages[s].used_directly = true;
                            }
                            r.extend(a.refs_of(y));
                        }
                        _ => a.scan(f, i),
                    }
                }
                if !r.is_empty() {
                    r.sort_unstable();
                    r.dedup();
                    a.refs.insert(b.var.id(), r);
                }
            }
            ExprKind::Proj { tuple, .. } => match tuple.kind() {
                ExprKind::Var(y) => {
                    let r = a.refs_of(y);
                    if !r.is_empty() {
                        a.refs.insert(b.var.id(), r);
                    }
                }
                _ => a.scan(tuple, i),
            },
            _ => a.scan(value, i),
        }
    }
    // What the chain returns escapes.
    a.scan(body, bindings.len());
    for t in &a.tensors {
        let s = &mut a.storages[t.storage];
        s.escapes |= t.escapes;
        s.free_after = s.free_after.max(t.last_use);
    }
    a
}

/// The result of the linear scan.
struct Plan {
    /// For each storage, the storage whose variable replaces it (`None`: kept).
    replaced: Vec<Option<usize>>,
    /// The kept storages whose size grows, with their new size.
    grown: HashMap<usize, i64>,
}

/// The linear scan: hands each storage a free earlier one when there is one. A storage used
/// directly takes none and is never freed; one with an escaping view may take one but is never
/// freed.
fn assign(a: &Analysis) -> Plan {
    let n = a.storages.len();
    let mut replaced: Vec<Option<usize>> = vec![None; n];
    let mut sizes: Vec<i64> = a.storages.iter().map(|s| s.size).collect();
    // The storages that can be released, in the order they die.
    let mut releases: Vec<usize> = (0..n)
        .filter(|&s| !a.storages[s].escapes && !a.storages[s].used_directly)
        .collect();
    releases.sort_by_key(|&s| a.storages[s].free_after);
    let mut next_release = 0;
    // Free physical storages (kept storages) per pool, by size.
    let mut pools: HashMap<&PoolKey, BTreeSet<(i64, usize)>> = HashMap::new();
    for s in 0..n {
        let info = &a.storages[s];
        if info.used_directly {
            continue;
        }
        // Release everything dead before this binding.
        while next_release < releases.len()
            && a.storages[releases[next_release]].free_after < info.binding
        {
            let dead = releases[next_release];
            next_release += 1;
            let physical = replaced[dead].unwrap_or(dead);
            pools
                .entry(&a.storages[physical].key)
                .or_default()
                .insert((sizes[physical], physical));
        }
        let Some(pool) = pools.get_mut(&info.key) else {
            continue;
        };
        let fit = pool
            .range((info.size, 0)..)
            .next()
            .copied()
            .or_else(|| pool.iter().next_back().copied());
        if let Some(entry) = fit {
            pool.remove(&entry);
            let physical = entry.1;
            sizes[physical] = sizes[physical].max(info.size);
            replaced[s] = Some(physical);
        }
    }
    let grown = (0..n)
        .filter(|&s| replaced[s].is_none() && sizes[s] != a.storages[s].size)
        .map(|s| (s, sizes[s]))
        .collect();
    Plan { replaced, grown }
}

/// An `alloc_storage` call with its size constant replaced by `size`.
fn with_size(value: &Expr, size: i64) -> Option<Expr> {
    let ExprKind::Call {
        callee,
        args,
        attrs,
    } = value.kind()
    else {
        return None;
    };
    let constant = int64_constant(size)?;
    if let Some(ty) = args[0].checked_type() {
        constant.set_checked_type(ty.clone());
    }
    let mut new_args = args.clone();
    new_args[0] = constant;
    Some(Expr::new(
        ExprKind::Call {
            callee: callee.clone(),
            args: new_args,
            attrs: attrs.clone(),
        },
        value.span(),
    ))
}

/// An `alloc_tensor` call of a replaced storage, naming the storage that replaces it.
fn retarget(a: &Analysis, plan: &Plan, value: &Expr) -> Option<Expr> {
    let args = op_call(value, "memory.alloc_tensor")?;
    let ExprKind::Var(s) = args.first()?.kind() else {
        return None;
    };
    let storage = *a.storage_of.get(&s.id())?;
    let physical = plan.replaced[storage]?;
    let ExprKind::Call { callee, attrs, .. } = value.kind() else {
        return None;
    };
    let var = &a.storages[physical].var;
    let arg = Expr::var(var);
    if let Some(ty) = var.checked_type() {
        arg.set_checked_type(ty.clone());
    }
    let mut new_args = args.to_vec();
    new_args[0] = arg;
    Some(Expr::new(
        ExprKind::Call {
            callee: callee.clone(),
            args: new_args,
            attrs: attrs.clone(),
        },
        value.span(),
    ))
}

#[cfg(test)]
mod tests {
    use crate::liveness::tests::{run_pass, stat};

    /// A manifested chain of `n` kernels, each reading the previous result.
    fn chain(n: usize) -> String {
        let mut text = String::from(
            "#[version = \"0.0.5\"]\nextern type Storage\n\
             def @main(%t0: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] {\n",
        );
        for i in 1..=n {
            text.push_str(&format!(
                "  let %s{i} = memory.alloc_storage(24i64, 64i64, dtype=\"float32\");\n  \
                 let %t{i} = memory.alloc_tensor(%s{i}, 0i64, stack((2i64, 3i64), axis=0), \
                 dtype=\"float32\", assert_shape=[2, 3]);\n  \
                 let %u{i} = vm.invoke_tvm_op(fn (%p0: Tensor[(2, 3), float32], Primitive=1) \
                 -> Tensor[(2, 3), float32] {{ nn.relu(%p0) }}, (%t{},), (%t{i},));\n",
                i - 1
            ));
        }
        text.push_str(&format!("  %t{n}\n}}\n"));
        text
    }

    #[test]
    fn statistics() {
        let (printed, stats) = run_pass(&super::PlanMemory, &chain(4));
        // Two storages alternate: each kernel reads one and writes the other.
        assert_eq!(stat(&stats, "storage bytes before"), 96);
        assert_eq!(stat(&stats, "storage bytes after"), 48);
        assert_eq!(stat(&stats, "storage reused"), 2);
        assert!(printed.contains("let %t3 = memory.alloc_tensor(%s1, 0i64"));
        assert!(printed.contains("let %t4 = memory.alloc_tensor(%s2, 0i64"));
    }

    #[test]
    fn long_chain_is_linear() {
        let n = 33_334;
        let (_, stats) = run_pass(&super::PlanMemory, &chain(n));
        assert_eq!(stat(&stats, "storage reused"), n as i64 - 2);
        assert_eq!(stat(&stats, "storage bytes after"), 48);
    }
}
