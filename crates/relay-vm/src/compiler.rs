//! The bytecode compiler: a module lowered by the pass pipeline → an [`Executable`].
//!
//! The input is in the form the required passes leave it (docs/passes.md): operators only
//! inside primitive functions, A-normal form, no nested non-primitive function literals,
//! kernel calls in destination-passing style (`vm.invoke_tvm_op`) on storage from
//! `memory.alloc_storage`/`memory.alloc_tensor`, kills (`memory.kill`), tail calls marked
//! `tail=True`, constants in the pool `const_pool_layout` laid out.
//!
//! Each global becomes one [`VmFunction`] (a `Closure=1` global: its captured values then its
//! inner function's parameters). Every binding gets a fresh register (a register file is
//! sized by the count), parameters are registers `0..n`, and an `if` or `match` result is
//! moved into a fresh merge register from every branch. `match` is compiled clause by clause
//! into a decision tree of `get_tag`/`if` tests over nested patterns, ending in a `fatal`
//! leaf that carries the source location when the last clause can fail. A self tail call
//! moves its arguments into the parameter registers and jumps to the start; any other tail
//! call is `tail_invoke`/`tail_invoke_closure`, which reuses the frame.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use relay_ir::visit::{is_closure, is_primitive};
use relay_ir::{
    AttrValue, Binding, Clause, ConstPool, DType, Expr, ExprKind, Function, GlobalFunc, Module,
    Pattern, PatternKind, Span, Symbol, TypeKind, VarId,
};

use crate::bytecode::{Instruction, Reg, SourceLocation, VmFunction};
use crate::error::CompileError;
use crate::executable::{Executable, KernelEntry};

/// Compiles a lowered, type-checked module (the output of the pipeline's required passes:
/// fused, ANF, lifted, primitives inlined, manifested, tail calls marked, constant pool laid
/// out) to bytecode. Kernels are not JIT-compiled here: [`Executable::jit`] compiles them all,
/// or each is compiled on its first call.
pub fn compile(module: &Module) -> std::result::Result<Executable, CompileError> {
    let pool = ConstPool::of(module);
    let indices: HashMap<Symbol, u32> = module
        .functions
        .iter()
        .enumerate()
        .map(|(i, g)| (g.name, i as u32))
        .collect();
    let mut kernels = Kernels::default();
    let mut functions = Vec::with_capacity(module.functions.len());
    for (index, global) in module.functions.iter().enumerate() {
        let cx = ModuleCx {
            module,
            pool: &pool,
            indices: &indices,
        };
        functions.push(FunctionCompiler::new(cx, &mut kernels, global, index as u32).compile()?);
    }
    // A primitive function used as a value is a closure of a function that calls its kernel.
    for &kernel in &kernels.wrappers {
        let entry = &kernels.entries[kernel as usize];
        let params = entry.function().map_or(&[][..], |f| f.params.as_slice());
        let n = params.len() as u32;
        functions.push(VmFunction {
            name: format!("{}_closure", entry.name),
            params: params
                .iter()
                .map(|p| p.name().as_str().to_owned())
                .collect(),
            register_count: n + 1,
            code: vec![
                Instruction::InvokePackedAlloc {
                    kernel,
                    inputs: (0..n).map(Reg).collect(),
                    dst: Reg(n),
                },
                Instruction::Ret { result: Reg(n) },
            ],
            param_types: params
                .iter()
                .map(|p| p.checked_type().or(p.ty()).cloned())
                .collect(),
            ret_type: entry
                .function()
                .and_then(|f| f.body.checked_type().or(f.ret_type.as_ref()).cloned()),
            locations: vec![],
        });
    }
    // Only the constants some `load_const` loads (sizes, offsets and shapes became
    // `load_consti` operands and static shapes), renumbered in pool order.
    let mut used = vec![false; pool.constants.len()];
    for f in &functions {
        for i in &f.code {
            if let Instruction::LoadConst { index, .. } = i
                && let Some(u) = used.get_mut(*index as usize)
            {
                *u = true;
            }
        }
    }
    let mut renumber = vec![u32::MAX; used.len()];
    let mut constants = Vec::new();
    for (old, c) in pool.constants.iter().enumerate() {
        if used[old] {
            renumber[old] = constants.len() as u32;
            constants.push(c.clone());
        }
    }
    for f in &mut functions {
        for i in &mut f.code {
            if let Instruction::LoadConst { index, .. } = i
                && let Some(&new) = renumber.get(*index as usize)
            {
                *index = new;
            }
        }
    }
    let exe = Executable {
        functions,
        constants,
        kernels: kernels.entries,
        globals: module
            .functions
            .iter()
            .enumerate()
            .map(|(i, g)| (g.name.as_str().to_owned(), i as u32))
            .collect(),
        types: module.types.clone(),
        cache: Arc::default(),
        packed: std::sync::OnceLock::new(),
    };
    // The compiler's output is valid by construction; checking it is cheap and turns a
    // compiler bug into an error instead of a VM misbehaving.
    exe.validate().map_err(|e| CompileError {
        function: e.function.clone(),
        message: format!("internal error, invalid bytecode: {e}"),
        location: None,
    })?;
    Ok(exe)
}

/// The module-wide tables a function's compilation reads.
#[derive(Clone, Copy)]
struct ModuleCx<'m> {
    module: &'m Module,
    pool: &'m ConstPool,
    indices: &'m HashMap<Symbol, u32>,
}

/// The kernel table: one entry per structurally distinct primitive function.
#[derive(Default)]
struct Kernels {
    entries: Vec<KernelEntry>,
    /// Entry indices by structural hash.
    by_hash: HashMap<u64, Vec<u32>>,
    /// How many kernels have each base name, for unique names.
    names: HashMap<String, usize>,
    /// Kernels used as function values, each wrapped in a function (appended after the
    /// globals) that calls it: in order, and by kernel index.
    wrappers: Vec<u32>,
    wrapper_of: HashMap<u32, u32>,
    /// Entry indices by the address of the function expression already looked up (the
    /// module outlives the compilation), so a call site is hashed once, not per lookup.
    by_addr: HashMap<usize, u32>,
}

impl Kernels {
    /// The position among the wrapper functions of the one calling kernel `kernel`.
    fn wrapper(&mut self, kernel: u32) -> u32 {
        if let Some(&w) = self.wrapper_of.get(&kernel) {
            return w;
        }
        let w = self.wrappers.len() as u32;
        self.wrappers.push(kernel);
        self.wrapper_of.insert(kernel, w);
        w
    }

    /// The index of primitive function `expr` (`f`), adding it if new.
    fn index(&mut self, expr: &Expr, f: &Function) -> u32 {
        if let Some(&i) = self.by_addr.get(&addr(expr)) {
            return i;
        }
        let i = self.index_by_structure(expr, f);
        self.by_addr.insert(addr(expr), i);
        i
    }

    /// The index of primitive function `expr` (`f`) by structural equality, adding it if new.
    fn index_by_structure(&mut self, expr: &Expr, f: &Function) -> u32 {
        let hash = relay_ir::structural::structural_hash(expr);
        if let Some(list) = self.by_hash.get(&hash) {
            for &i in list {
                if relay_ir::structural::structural_eq(&self.entries[i as usize].func, expr) {
                    return i;
                }
            }
        }
        let base = relay_kernel::kernel_name(f);
        let n = self.names.entry(base.clone()).or_insert(0);
        let name = if *n == 0 { base } else { format!("{base}_{n}") };
        *n += 1;
        let index = self.entries.len() as u32;
        self.entries.push(KernelEntry::new(name, expr.clone()));
        self.by_hash.entry(hash).or_default().push(index);
        index
    }
}

/// What a variable is bound to.
#[derive(Clone, Copy, Debug)]
enum Slot {
    /// A register.
    Reg(Reg),
    /// The empty tuple of a binding that produces nothing (a kernel call, a kill); made into
    /// a register only if the variable is used.
    Unit,
}

/// The compilation of one global function.
struct FunctionCompiler<'m, 'k> {
    cx: ModuleCx<'m>,
    kernels: &'k mut Kernels,
    global: &'m GlobalFunc,
    /// This function's index.
    index: u32,
    code: Vec<Instruction>,
    registers: u32,
    env: HashMap<VarId, Slot>,
    locations: Vec<(u32, SourceLocation)>,
    /// How many parameters (registers `0..params`).
    params: u32,
    /// Bindings not emitted: the storage and tensor of a scalar kernel's output, which the
    /// VM computes unboxed (by address of the binding's value node).
    skipped: HashSet<usize>,
    /// Output tensors of scalar kernels (computed by `invoke_packed_alloc`).
    scalar_outputs: HashSet<VarId>,
    /// Kernel calls that may write over their first input, dead after them (by address of
    /// the call): `invoke_packed_update`.
    updates: HashSet<usize>,
    /// Variables bound to constants, so memory-dialect operands written through a variable
    /// are still static sizes, offsets and shapes.
    consts: HashMap<VarId, Expr>,
}

type Result<T> = std::result::Result<T, CompileError>;

impl<'m, 'k> FunctionCompiler<'m, 'k> {
    fn new(cx: ModuleCx<'m>, kernels: &'k mut Kernels, global: &'m GlobalFunc, index: u32) -> Self {
        FunctionCompiler {
            cx,
            kernels,
            global,
            index,
            code: Vec::new(),
            registers: 0,
            env: HashMap::new(),
            locations: Vec::new(),
            params: 0,
            skipped: HashSet::new(),
            scalar_outputs: HashSet::new(),
            updates: HashSet::new(),
            consts: HashMap::new(),
        }
    }

    fn compile(mut self) -> Result<VmFunction> {
        let func = &self.global.func;
        // A `Closure=1` global's body is the closure's function: its parameters follow the
        // captured values.
        let (params, body) = if is_closure(func) {
            match func.body.kind() {
                ExprKind::Function(inner) => {
                    let params: Vec<_> = func.params.iter().chain(&inner.params).cloned().collect();
                    (params, &inner.body)
                }
                _ => {
                    return Err(self.error(
                        func.body.span(),
                        "a `Closure=1` function's body must be a function literal".into(),
                    ));
                }
            }
        } else {
            (func.params.clone(), &func.body)
        };
        for p in &params {
            let r = self.fresh();
            self.env.insert(p.id(), Slot::Reg(r));
        }
        self.params = params.len() as u32;
        let ret_type = body.checked_type().cloned();
        self.tail(body)?;
        Ok(VmFunction {
            name: self.global.name.as_str().to_owned(),
            params: params
                .iter()
                .map(|p| p.name().as_str().to_owned())
                .collect(),
            register_count: self.registers,
            code: self.code,
            param_types: params
                .iter()
                .map(|p| p.checked_type().or(p.ty()).cloned())
                .collect(),
            ret_type,
            locations: self.locations,
        })
    }

    fn fresh(&mut self) -> Reg {
        let r = Reg(self.registers);
        self.registers += 1;
        r
    }

    fn pc(&self) -> usize {
        self.code.len()
    }

    fn emit(&mut self, i: Instruction) -> usize {
        self.code.push(i);
        self.code.len() - 1
    }

    /// Emits `i`, recording `span` as its source location.
    fn emit_at(&mut self, i: Instruction, span: Span) -> usize {
        let pc = self.emit(i);
        if let Some(text) = location(self.cx.module, span) {
            let span = Some(span);
            self.locations
                .push((pc as u32, SourceLocation { text, span }));
        }
        pc
    }

    fn error(&self, span: Span, message: String) -> CompileError {
        CompileError {
            function: self.global.name.as_str().to_owned(),
            message,
            location: location(self.cx.module, span),
        }
    }

    /// Compiles `e` in tail position: its value is the function's result.
    fn tail(&mut self, e: &Expr) -> Result<()> {
        relay_ir::ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Let { bindings, body } => {
                self.plan(bindings);
                let tail_at = tail_binding(bindings, body);
                for (i, b) in bindings.iter().enumerate() {
                    if Some(i) == tail_at {
                        return self.tail(&b.value);
                    }
                    self.bind(b)?;
                }
                self.tail(body)
            }
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                let branch = self.branch(cond)?;
                self.tail(then_branch)?;
                self.patch_false(branch);
                self.tail(else_branch)
            }
            ExprKind::Match {
                scrutinee, clauses, ..
            } => self.match_(scrutinee, clauses, e.span(), None),
            ExprKind::Call { attrs, .. } if is_tail(attrs) => self.tail_call(e),
            _ => self.ret_value(e),
        })
    }

    /// A call in tail position: a jump for a self call, `tail_invoke[_closure]` otherwise.
    fn tail_call(&mut self, e: &Expr) -> Result<()> {
        let ExprKind::Call { callee, args, .. } = e.kind() else {
            return self.ret_value(e);
        };
        match callee.kind() {
            ExprKind::Global(g) => {
                let callee_fn = self.cx.module.function(*g);
                let plain = callee_fn.is_some_and(|f| !is_closure(&f.func));
                match self.cx.indices.get(g) {
                    Some(&func) if plain => {
                        let args = self.atoms(args)?;
                        if func == self.index && args.len() as u32 == self.params {
                            self.self_jump(args);
                        } else {
                            self.emit_at(Instruction::TailInvoke { func, args }, e.span());
                        }
                        Ok(())
                    }
                    _ => self.ret_value(e),
                }
            }
            ExprKind::Var(_) => {
                let closure = self.expr(callee)?;
                let args = self.atoms(args)?;
                self.emit_at(Instruction::TailInvokeClosure { closure, args }, e.span());
                Ok(())
            }
            _ => self.ret_value(e),
        }
    }

    /// Computes `e` and returns it.
    fn ret_value(&mut self, e: &Expr) -> Result<()> {
        let r = self.expr(e)?;
        self.emit(Instruction::Ret { result: r });
        Ok(())
    }

    /// A self tail call: the arguments move into the parameter registers (through temporaries
    /// where a parameter is read after being overwritten), the registers they came from are
    /// killed (so a parameter is the only register holding its value, and a kernel that
    /// updates it in place finds it alone), then a jump to the start.
    fn self_jump(&mut self, args: Vec<Reg>) {
        let n = self.params;
        let args: Vec<Reg> = args
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                if a.0 < n && a.0 != i as u32 {
                    let t = self.fresh();
                    self.emit(Instruction::Move { from: a, dst: t });
                    t
                } else {
                    a
                }
            })
            .collect();
        for (i, &a) in args.iter().enumerate() {
            if a.0 != i as u32 {
                self.emit(Instruction::Move {
                    from: a,
                    dst: Reg(i as u32),
                });
            }
        }
        // Every register the loop body writes is written again before it is read.
        let mut sources: Vec<Reg> = args.into_iter().filter(|a| a.0 >= n).collect();
        sources.sort_by_key(|r| r.0);
        sources.dedup();
        for reg in sources {
            self.emit(Instruction::KillRegister { reg });
        }
        if self.pc() == 0 {
            // An unconditional self call as the first instruction: a jump needs a non-zero
            // offset, so the loop gets one instruction to jump back to.
            let r = self.fresh();
            self.emit(Instruction::LoadConsti { value: 0, dst: r });
        }
        let offset = -(self.pc() as i32);
        self.emit(Instruction::Goto { offset });
    }

    /// Compiles `e` for its value, in a register.
    fn expr(&mut self, e: &Expr) -> Result<Reg> {
        relay_ir::ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Var(v) => match self.env.get(&v.id()) {
                Some(Slot::Reg(r)) => Ok(*r),
                Some(Slot::Unit) => Ok(self.unit()),
                None => Err(self.error(
                    e.span(),
                    format!("variable `%{}` is not bound here", v.name()),
                )),
            },
            ExprKind::Constant(c) => {
                let index = self.cx.pool.index_of_array(c).ok_or_else(|| {
                    self.error(e.span(), "a constant missing from the constant pool".into())
                })?;
                let dst = self.fresh();
                self.emit(Instruction::LoadConst {
                    index: index as u32,
                    dst,
                });
                Ok(dst)
            }
            ExprKind::Global(g) => {
                let func = self.function_index(*g, e.span())?;
                if self
                    .cx
                    .module
                    .function(*g)
                    .is_some_and(|f| is_closure(&f.func))
                {
                    return Err(self.error(
                        e.span(),
                        format!("closure-allocating global `@{g}` used as a value"),
                    ));
                }
                let dst = self.fresh();
                self.emit(Instruction::AllocClosure {
                    func,
                    captured: vec![],
                    dst,
                });
                Ok(dst)
            }
            ExprKind::Ctor(c) => {
                let arity = self.cx.module.ctor_def(*c).map_or(0, |d| d.fields.len());
                if arity != 0 {
                    return Err(self.error(
                        e.span(),
                        format!(
                            "constructor `{}` used as a function value (run the eta_expand pass)",
                            c.name
                        ),
                    ));
                }
                let dst = self.fresh();
                self.emit(Instruction::AllocAdt {
                    tag: c.tag,
                    fields: vec![],
                    dst,
                });
                Ok(dst)
            }
            ExprKind::Op(op) => {
                Err(self.error(e.span(), format!("operator `{}` used as a value", op.name)))
            }
            ExprKind::Call {
                callee,
                args,
                attrs: _,
            } => self.call(e, callee, args),
            ExprKind::Function(f) if is_primitive(f) => {
                let kernel = self.kernels.index(e, f);
                let func = self.cx.indices.len() as u32 + self.kernels.wrapper(kernel);
                let dst = self.fresh();
                self.emit(Instruction::AllocClosure {
                    func,
                    captured: vec![],
                    dst,
                });
                Ok(dst)
            }
            ExprKind::Function(_) => Err(self.error(
                e.span(),
                "a function literal outside a call (run the lambda_lift pass)".into(),
            )),
            ExprKind::Let { bindings, body } => {
                self.plan(bindings);
                for b in bindings {
                    self.bind(b)?;
                }
                self.expr(body)
            }
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                let merge = self.fresh();
                let branch = self.branch(cond)?;
                self.merge_branch(then_branch, merge)?;
                let goto = self.emit(Instruction::Goto { offset: 0 });
                self.patch_false(branch);
                self.merge_branch(else_branch, merge)?;
                self.patch_goto(goto);
                Ok(merge)
            }
            ExprKind::Match {
                scrutinee, clauses, ..
            } => {
                let merge = self.fresh();
                self.match_(scrutinee, clauses, e.span(), Some(merge))?;
                Ok(merge)
            }
            ExprKind::Tuple(fields) => {
                let fields = self.atoms(fields)?;
                let dst = self.fresh();
                self.emit(Instruction::AllocTuple { fields, dst });
                Ok(dst)
            }
            ExprKind::Proj { tuple, index } => {
                let object = self.expr(tuple)?;
                let dst = self.fresh();
                self.emit(Instruction::GetField {
                    object,
                    index: *index,
                    dst,
                });
                Ok(dst)
            }
            ExprKind::RefNew(v) => {
                let value = self.expr(v)?;
                let dst = self.fresh();
                self.emit(Instruction::AllocRef { value, dst });
                Ok(dst)
            }
            ExprKind::RefRead(r) => {
                let reference = self.expr(r)?;
                let dst = self.fresh();
                self.emit(Instruction::RefRead { reference, dst });
                Ok(dst)
            }
            ExprKind::RefWrite(r, v) => {
                let reference = self.expr(r)?;
                let value = self.expr(v)?;
                let dst = self.fresh();
                self.emit(Instruction::RefWrite {
                    reference,
                    value,
                    dst,
                });
                Ok(dst)
            }
        })
    }

    /// A register holding `()`.
    fn unit(&mut self) -> Reg {
        let dst = self.fresh();
        self.emit(Instruction::AllocTuple {
            fields: vec![],
            dst,
        });
        dst
    }

    fn atoms(&mut self, es: &[Expr]) -> Result<Vec<Reg>> {
        es.iter().map(|e| self.expr(e)).collect()
    }

    /// Plans a let-chain's kernel calls before compiling it: scalar kernels, and updates.
    fn plan(&mut self, bindings: &[Binding]) {
        self.plan_scalars(bindings);
        self.plan_updates(bindings);
    }

    /// Finds the calls of a let-chain whose kernel may write over an input
    /// ([`relay_ops::updated_param`]) that the chain kills right after the call (the
    /// `liveness` pass kills a variable right after its last use), so nothing reads it later:
    /// they become `invoke_packed_update`.
    fn plan_updates(&mut self, bindings: &[Binding]) {
        for (k, b) in bindings.iter().enumerate() {
            let ExprKind::Call { callee, args, .. } = b.value.kind() else {
                continue;
            };
            let ExprKind::Function(f) = callee.kind() else {
                continue;
            };
            let Some(ExprKind::Var(x)) = relay_ops::updated_param(f)
                .and_then(|p| args.get(p))
                .map(Expr::kind)
            else {
                continue;
            };
            let killed_after = bindings[k + 1..]
                .iter()
                .map_while(|b| killed(&b.value))
                .any(|v| v == x.id());
            if is_primitive(f) && killed_after {
                self.updates.insert(addr(&b.value));
            }
        }
    }

    /// Finds the scalar kernel calls of a let-chain: `%s = memory.alloc_storage(..)`,
    /// `%x = memory.alloc_tensor(%s, 0, [])` (the storage used for nothing else) and
    /// `vm.invoke_tvm_op(scalar kernel, (ins), (%x,))`. The storage and tensor bindings are
    /// not emitted; the call becomes `invoke_packed_alloc` into `%x`'s register, which the VM
    /// evaluates unboxed.
    fn plan_scalars(&mut self, bindings: &[Binding]) {
        let position: HashMap<VarId, usize> = bindings
            .iter()
            .enumerate()
            .map(|(i, b)| (b.var.id(), i))
            .collect();
        let mut uses: Option<HashMap<VarId, usize>> = None;
        for (k, b) in bindings.iter().enumerate() {
            let Some((func, out)) = scalar_invoke(&b.value) else {
                continue;
            };
            let ExprKind::Function(f) = func.kind() else {
                continue;
            };
            let kernel = self.kernels.index(func, f);
            if self.kernels.entries[kernel as usize].scalar.is_none() {
                continue;
            }
            let Some(&j) = position.get(&out) else {
                continue;
            };
            let Some(storage) = scalar_tensor_alloc(&bindings[j].value) else {
                continue;
            };
            let Some(&i) = position.get(&storage) else {
                continue;
            };
            let is_storage = matches!(bindings[i].value.kind(), ExprKind::Call { callee, .. }
                if matches!(callee.kind(), ExprKind::Op(op) if op.name == "memory.alloc_storage"));
            if !is_storage || i >= j || j >= k {
                continue;
            }
            // The storage serves only this tensor (kills aside), and the tensor is not read
            // before the kernel writes it. The chain's use counts are taken once, at its first
            // candidate.
            let uses = uses.get_or_insert_with(|| {
                let mut uses = HashMap::new();
                for b in bindings {
                    for_each_use(&b.value, &mut |v| *uses.entry(v).or_insert(0usize) += 1);
                }
                uses
            });
            let storage_uses = uses.get(&storage).copied().unwrap_or(0)
                - uses_outside_kills(&bindings[j].value, storage);
            let early_uses: usize = bindings[j + 1..k]
                .iter()
                .map(|b| uses_outside_kills(&b.value, out))
                .sum();
            if storage_uses == 0 && early_uses == 0 {
                self.skipped.insert(addr(&bindings[i].value));
                self.skipped.insert(addr(&bindings[j].value));
                self.scalar_outputs.insert(out);
            }
        }
    }

    /// Compiles one binding of a let-chain.
    fn bind(&mut self, b: &Binding) -> Result<()> {
        if self.skipped.contains(&addr(&b.value)) {
            if self.scalar_outputs.contains(&b.var.id()) {
                let r = self.fresh();
                self.env.insert(b.var.id(), Slot::Reg(r));
            }
            return Ok(());
        }
        if let ExprKind::Call { callee, args, .. } = b.value.kind()
            && let ExprKind::Op(op) = callee.kind()
        {
            match op.name {
                "vm.invoke_tvm_op" => {
                    self.invoke_tvm_op(&b.value, args)?;
                    self.env.insert(b.var.id(), Slot::Unit);
                    return Ok(());
                }
                "memory.kill" => {
                    if let Some(ExprKind::Var(v)) = args.first().map(Expr::kind)
                        && let Some(Slot::Reg(reg)) = self.env.get(&v.id()).copied()
                        && !is_scalar_var(v)
                    {
                        self.emit(Instruction::KillRegister { reg });
                    }
                    self.env.insert(b.var.id(), Slot::Unit);
                    return Ok(());
                }
                _ => {}
            }
        }
        if matches!(b.value.kind(), ExprKind::Constant(_)) {
            self.consts.insert(b.var.id(), b.value.clone());
        }
        let mut r = self.expr(&b.value)?;
        if matches!(b.value.kind(), ExprKind::Var(_)) {
            // An alias gets its own register, so a kill of one name leaves the other.
            let dst = self.fresh();
            self.emit(Instruction::Move { from: r, dst });
            r = dst;
        }
        self.env.insert(b.var.id(), Slot::Reg(r));
        Ok(())
    }

    /// `vm.invoke_tvm_op(fn, (inputs), (outputs))`.
    fn invoke_tvm_op(&mut self, call: &Expr, args: &[Expr]) -> Result<()> {
        let [func, inputs, outputs] = args else {
            return Err(self.error(call.span(), "`vm.invoke_tvm_op` takes 3 arguments".into()));
        };
        let kernel = self.kernel(func)?;
        let inputs = self.tuple_atoms(inputs)?;
        if let ExprKind::Tuple(outs) = outputs.kind()
            && let [out] = outs.as_slice()
            && let ExprKind::Var(x) = out.kind()
            && self.scalar_outputs.contains(&x.id())
        {
            let dst = self.expr(out)?;
            self.emit_at(
                Instruction::InvokePackedAlloc {
                    kernel,
                    inputs,
                    dst,
                },
                kernel_span(call, func),
            );
            return Ok(());
        }
        let outputs = self.tuple_atoms(outputs)?;
        self.emit_at(
            Instruction::InvokePacked {
                kernel,
                inputs,
                outputs,
            },
            kernel_span(call, func),
        );
        Ok(())
    }

    /// The registers of the fields of a tuple literal (or of one atom).
    fn tuple_atoms(&mut self, e: &Expr) -> Result<Vec<Reg>> {
        match e.kind() {
            ExprKind::Tuple(fields) => self.atoms(fields),
            _ => Ok(vec![self.expr(e)?]),
        }
    }

    /// The kernel index of a primitive function literal.
    fn kernel(&mut self, e: &Expr) -> Result<u32> {
        match e.kind() {
            ExprKind::Function(f) if is_primitive(f) => Ok(self.kernels.index(e, f)),
            _ => Err(self.error(
                e.span(),
                "a kernel call's function must be a primitive function literal".into(),
            )),
        }
    }

    fn function_index(&self, g: Symbol, span: Span) -> Result<u32> {
        self.cx
            .indices
            .get(&g)
            .copied()
            .ok_or_else(|| self.error(span, format!("no global function `@{g}`")))
    }

    /// A call in a non-tail position.
    fn call(&mut self, e: &Expr, callee: &Expr, args: &[Expr]) -> Result<Reg> {
        match callee.kind() {
            ExprKind::Op(op) => self.dialect(e, op.name, args),
            ExprKind::Function(f) if is_primitive(f) => {
                let kernel = self.kernels.index(callee, f);
                let inputs = self.atoms(args)?;
                let dst = self.fresh();
                let call = match self.updates.contains(&addr(e)) {
                    true => Instruction::InvokePackedUpdate {
                        kernel,
                        inputs,
                        dst,
                    },
                    false => Instruction::InvokePackedAlloc {
                        kernel,
                        inputs,
                        dst,
                    },
                };
                self.emit_at(call, kernel_span(e, callee));
                Ok(dst)
            }
            ExprKind::Global(g) => {
                let func = self.function_index(*g, callee.span())?;
                let args = self.atoms(args)?;
                let dst = self.fresh();
                let closure = self
                    .cx
                    .module
                    .function(*g)
                    .is_some_and(|f| is_closure(&f.func));
                if closure {
                    self.emit(Instruction::AllocClosure {
                        func,
                        captured: args,
                        dst,
                    });
                } else {
                    self.emit_at(Instruction::Invoke { func, args, dst }, e.span());
                }
                Ok(dst)
            }
            ExprKind::Ctor(c) => {
                let fields = self.atoms(args)?;
                let dst = self.fresh();
                self.emit(Instruction::AllocAdt {
                    tag: c.tag,
                    fields,
                    dst,
                });
                Ok(dst)
            }
            ExprKind::Function(_) => Err(self.error(
                callee.span(),
                "a call of a function literal (run the lambda_lift pass)".into(),
            )),
            _ => {
                let closure = self.expr(callee)?;
                let args = self.atoms(args)?;
                let dst = self.fresh();
                self.emit_at(Instruction::InvokeClosure { closure, args, dst }, e.span());
                Ok(dst)
            }
        }
    }

    /// The memory dialect's operators (the only operators outside primitive functions).
    fn dialect(&mut self, e: &Expr, op: &str, args: &[Expr]) -> Result<Reg> {
        let ExprKind::Call { attrs, .. } = e.kind() else {
            return Err(self.error(e.span(), "not a call".into()));
        };
        let dtype_attr = || {
            attrs
                .get("dtype")
                .and_then(AttrValue::as_str)
                .and_then(DType::parse)
        };
        match (op, args) {
            ("memory.alloc_storage", [size, alignment, ..]) => {
                let size = self.int_operand(size)?;
                let alignment = constant_int(self.resolve(alignment))
                    .and_then(|a| u64::try_from(a).ok())
                    .filter(|a| a.is_power_of_two())
                    .ok_or_else(|| {
                        self.error(
                            e.span(),
                            "`memory.alloc_storage` needs a constant power-of-two alignment".into(),
                        )
                    })?;
                let dst = self.fresh();
                self.emit_at(
                    Instruction::AllocStorage {
                        size,
                        alignment,
                        dtype_hint: dtype_attr().unwrap_or(DType::U8),
                        dst,
                    },
                    e.span(),
                );
                Ok(dst)
            }
            ("memory.alloc_tensor", [storage, offset, shape, ..]) => {
                let storage = self.expr(storage)?;
                let offset = self.int_operand(offset)?;
                let dtype = dtype_attr().ok_or_else(|| {
                    self.error(e.span(), "`memory.alloc_tensor` without a dtype".into())
                })?;
                let dst = self.fresh();
                let static_shape = constant_ints(self.resolve(shape));
                if let (Some(shape), Some(asserted)) = (
                    &static_shape,
                    attrs.get("assert_shape").and_then(AttrValue::as_ints),
                ) && *shape != asserted
                {
                    return Err(self.error(
                        e.span(),
                        format!(
                            "`memory.alloc_tensor`: the shape {shape:?} differs from \
                             `assert_shape` {asserted:?}"
                        ),
                    ));
                }
                let instr = match static_shape {
                    Some(shape) => Instruction::AllocTensor {
                        storage,
                        offset,
                        shape,
                        dtype,
                        dst,
                    },
                    None => Instruction::AllocTensorReg {
                        storage,
                        offset,
                        shape: self.expr(shape)?,
                        dtype,
                        assert_shape: attrs.get("assert_shape").and_then(AttrValue::as_ints),
                        dst,
                    },
                };
                self.emit_at(instr, e.span());
                Ok(dst)
            }
            ("vm.shape_of", [tensor]) => {
                let tensor = self.expr(tensor)?;
                let dst = self.fresh();
                self.emit(Instruction::ShapeOf { tensor, dst });
                Ok(dst)
            }
            ("vm.reshape_tensor", [tensor, shape, ..]) => {
                let tensor = self.expr(tensor)?;
                let shape = self.expr(shape)?;
                let dst = self.fresh();
                self.emit_at(Instruction::ReshapeTensor { tensor, shape, dst }, e.span());
                Ok(dst)
            }
            ("vm.invoke_tvm_op", _) => {
                self.invoke_tvm_op(e, args)?;
                Ok(self.unit())
            }
            ("memory.kill", [arg]) => {
                if let ExprKind::Var(v) = arg.kind()
                    && let Some(Slot::Reg(reg)) = self.env.get(&v.id()).copied()
                {
                    self.emit(Instruction::KillRegister { reg });
                }
                Ok(self.unit())
            }
            _ => Err(self.error(
                e.span(),
                format!(
                    "operator `{op}` outside a primitive function (the fuse_ops pass puts \
                     operators in kernels)"
                ),
            )),
        }
    }

    /// `e`, or the constant a variable `e` is bound to.
    fn resolve<'x>(&'x self, e: &'x Expr) -> &'x Expr {
        match e.kind() {
            ExprKind::Var(v) => self.consts.get(&v.id()).unwrap_or(e),
            _ => e,
        }
    }

    /// An integer operand of the memory dialect: `load_consti` for a constant, else the
    /// register of the (scalar tensor) value.
    fn int_operand(&mut self, e: &Expr) -> Result<Reg> {
        match constant_int(self.resolve(e)) {
            Some(value) => {
                let dst = self.fresh();
                self.emit(Instruction::LoadConsti { value, dst });
                Ok(dst)
            }
            None => self.expr(e),
        }
    }

    /// `if (cond)`: emits the test, returning the position of the `if` whose false offset is
    /// patched to the else branch. The true branch follows.
    fn branch(&mut self, cond: &Expr) -> Result<usize> {
        let test = self.expr(cond)?;
        let target = self.fresh();
        self.emit(Instruction::LoadConsti {
            value: 1,
            dst: target,
        });
        Ok(self.emit(Instruction::If {
            test,
            target,
            true_offset: 1,
            false_offset: 0,
        }))
    }

    /// Points the false offset of the `if` at `at` to the next instruction.
    fn patch_false(&mut self, at: usize) {
        let offset = (self.pc() - at) as i32;
        if let Some(Instruction::If { false_offset, .. }) = self.code.get_mut(at) {
            *false_offset = offset;
        }
    }

    /// Points the `goto` at `at` to the next instruction.
    fn patch_goto(&mut self, at: usize) {
        let target = self.pc() as i32;
        if let Some(Instruction::Goto { offset }) = self.code.get_mut(at) {
            *offset = target - at as i32;
        }
    }

    /// A `match`: each clause's pattern tests (failures jump to the next clause), then its
    /// body — in tail position when `merge` is `None`, else moved into `merge` and jumping to
    /// the end. A `fatal` leaf follows when the last clause can fail.
    fn match_(
        &mut self,
        scrutinee: &Expr,
        clauses: &[Clause],
        span: Span,
        merge: Option<Reg>,
    ) -> Result<()> {
        let s = self.expr(scrutinee)?;
        let mut ends = Vec::new();
        let mut exhaustive = false;
        for clause in clauses {
            let mut fails = Vec::new();
            let mut temps = Vec::new();
            self.pattern(&clause.pattern, s, false, &mut fails, &mut temps);
            // The cells the pattern looked into are not needed in the clause: only the
            // variables it bound.
            for reg in temps {
                self.emit(Instruction::KillRegister { reg });
            }
            match merge {
                None => self.tail(&clause.body)?,
                Some(merge) => {
                    self.merge_branch(&clause.body, merge)?;
                    ends.push(self.emit(Instruction::Goto { offset: 0 }));
                }
            }
            for f in &fails {
                self.patch_false(*f);
            }
            if fails.is_empty() {
                exhaustive = true;
                break;
            }
        }
        if !exhaustive {
            // The location comes from the function's location table, with the function.
            let message = "no match clause matched the value".to_owned();
            self.emit_at(Instruction::Fatal { message }, span);
        }
        if merge.is_some() {
            // The last clause's jump to the end, when nothing follows it, would be a jump by
            // 0; a jump to a real instruction needs one after it.
            let end = self.pc();
            if ends.last() == Some(&(end - 1)) {
                let last = ends.pop();
                if let Some(at) = last {
                    // Replace the trailing `goto +1` by nothing: the code falls through.
                    self.code.truncate(at);
                }
            }
            for at in ends {
                self.patch_goto(at);
            }
        }
        Ok(())
    }

    /// Compiles an `if` branch or `match` clause body for its value and moves it into the
    /// merge register. A value in a register of the branch's own is killed after the move
    /// (nothing outside the branch names it), so the merge register holds the only reference;
    /// scalars are left (a kill costs more than it frees).
    fn merge_branch(&mut self, body: &Expr, merge: Reg) -> Result<()> {
        let first = self.registers;
        let r = self.expr(body)?;
        self.emit(Instruction::Move {
            from: r,
            dst: merge,
        });
        let scalar = body.checked_type().is_some_and(
            |t| matches!(t.kind(), TypeKind::Tensor { shape, .. } if shape.is_empty()),
        );
        if r.0 >= first && !scalar {
            self.emit(Instruction::KillRegister { reg: r });
        }
        Ok(())
    }

    /// Tests `pattern` against register `r`, binding its variables; the positions of the
    /// `if`s that jump away on failure go to `fails`. `owned`: `r` is a register of the
    /// pattern's own (a field it read), which a variable pattern can take over; the
    /// scrutinee's register is not. Registers of cells the pattern looked into and bound to
    /// no variable go to `temps`.
    fn pattern(
        &mut self,
        pattern: &Pattern,
        r: Reg,
        owned: bool,
        fails: &mut Vec<usize>,
        temps: &mut Vec<Reg>,
    ) {
        match &pattern.kind {
            PatternKind::Wildcard => {}
            PatternKind::Var(v) if owned => {
                self.env.insert(v.id(), Slot::Reg(r));
            }
            PatternKind::Var(v) => {
                // Its own register, so a kill of the scrutinee leaves the pattern variable.
                let dst = self.fresh();
                self.emit(Instruction::Move { from: r, dst });
                self.env.insert(v.id(), Slot::Reg(dst));
            }
            PatternKind::Ctor(c, fields) => {
                let alternatives = self.cx.module.type_def(c.adt).map_or(2, |t| t.ctors.len());
                if alternatives > 1 {
                    let tag = self.fresh();
                    self.emit(Instruction::GetTag {
                        object: r,
                        dst: tag,
                    });
                    let target = self.fresh();
                    self.emit(Instruction::LoadConsti {
                        value: i64::from(c.tag),
                        dst: target,
                    });
                    fails.push(self.emit(Instruction::If {
                        test: tag,
                        target,
                        true_offset: 1,
                        false_offset: 0,
                    }));
                }
                self.fields(fields, r, fails, temps);
                if owned {
                    temps.push(r);
                }
            }
            PatternKind::Tuple(fields) => {
                self.fields(fields, r, fails, temps);
                if owned {
                    temps.push(r);
                }
            }
        }
    }

    /// The field patterns of a constructor or tuple pattern on register `r`.
    fn fields(&mut self, fields: &[Pattern], r: Reg, fails: &mut Vec<usize>, temps: &mut Vec<Reg>) {
        for (i, p) in fields.iter().enumerate() {
            if matches!(p.kind, PatternKind::Wildcard) {
                continue;
            }
            let dst = self.fresh();
            self.emit(Instruction::GetField {
                object: r,
                index: i as u32,
                dst,
            });
            self.pattern(p, dst, true, fails, temps);
        }
    }
}

/// Where a kernel call is in the source: the call's span, or (for calls the passes made)
/// the span of the operators the kernel computes.
fn kernel_span(call: &Expr, func: &Expr) -> Span {
    if !call.span().is_dummy() {
        return call.span();
    }
    match func.kind() {
        ExprKind::Function(f) if !f.body.span().is_dummy() => f.body.span(),
        _ => func.span(),
    }
}

/// Whether `v` is a rank-0 tensor: killing it early frees at most one small buffer, and in a
/// scalar loop the kill would cost more than it saves (the register is overwritten or the
/// frame popped soon anyway).
fn is_scalar_var(v: &relay_ir::Var) -> bool {
    v.checked_type()
        .or(v.ty())
        .is_some_and(|t| matches!(t.kind(), TypeKind::Tensor { shape, .. } if shape.is_empty()))
}

/// The address of an expression node (bindings are told apart by their value's node).
fn addr(e: &Expr) -> usize {
    std::ptr::from_ref(e.kind()) as usize
}

/// `memory.kill(%x)`: `%x`.
fn killed(e: &Expr) -> Option<VarId> {
    let ExprKind::Call { callee, args, .. } = e.kind() else {
        return None;
    };
    match (callee.kind(), args.as_slice()) {
        (ExprKind::Op(op), [x]) if op.name == "memory.kill" => match x.kind() {
            ExprKind::Var(x) => Some(x.id()),
            _ => None,
        },
        _ => None,
    }
}

/// `vm.invoke_tvm_op(func, ins, (%x,))`: the function and `%x`.
fn scalar_invoke(e: &Expr) -> Option<(&Expr, VarId)> {
    let ExprKind::Call { callee, args, .. } = e.kind() else {
        return None;
    };
    let ExprKind::Op(op) = callee.kind() else {
        return None;
    };
    let [func, _, outputs] = args.as_slice() else {
        return None;
    };
    if op.name != "vm.invoke_tvm_op" {
        return None;
    }
    match outputs.kind() {
        ExprKind::Tuple(outs) => match outs.as_slice() {
            [out] => match out.kind() {
                ExprKind::Var(x) => Some((func, x.id())),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// `memory.alloc_tensor(%s, 0, [])`: the storage variable `%s`.
fn scalar_tensor_alloc(e: &Expr) -> Option<VarId> {
    let ExprKind::Call { callee, args, .. } = e.kind() else {
        return None;
    };
    let ExprKind::Op(op) = callee.kind() else {
        return None;
    };
    let [storage, offset, shape, ..] = args.as_slice() else {
        return None;
    };
    if op.name != "memory.alloc_tensor"
        || constant_int(offset) != Some(0)
        || constant_ints(shape).is_none_or(|s| !s.is_empty())
    {
        return None;
    }
    match storage.kind() {
        ExprKind::Var(s) => Some(s.id()),
        _ => None,
    }
}

/// Calls `f` with every variable occurrence in `e`, except the arguments of `memory.kill`.
fn for_each_use(e: &Expr, f: &mut impl FnMut(VarId)) {
    relay_ir::ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Var(v) => f(v.id()),
        ExprKind::Call { callee, args, .. } if matches!(callee.kind(), ExprKind::Op(op) if op.name == "memory.kill") => {
            for a in args
                .iter()
                .filter(|a| !matches!(a.kind(), ExprKind::Var(_)))
            {
                for_each_use(a, f);
            }
        }
        _ => relay_ir::visit::for_each_child(e, |c| for_each_use(c, f)),
    })
}

/// How often variable `id` occurs in `e`, not counting `memory.kill(%id)`.
fn uses_outside_kills(e: &Expr, id: VarId) -> usize {
    let mut n = 0;
    for_each_use(e, &mut |v| n += usize::from(v == id));
    n
}

/// Whether call attributes mark a tail call.
fn is_tail(attrs: &relay_ir::Attrs) -> bool {
    attrs.get("tail").and_then(AttrValue::as_bool) == Some(true)
}

/// The binding of a let-chain whose value the chain returns, followed only by kills (which
/// returning makes moot): its value is compiled in tail position, so a tail call in it (or in
/// the branches of an `if` or `match` bound there) replaces the frame.
fn tail_binding(bindings: &[Binding], body: &Expr) -> Option<usize> {
    let ExprKind::Var(v) = body.kind() else {
        return None;
    };
    let i = bindings.iter().rposition(|b| b.var.id() == v.id())?;
    let only_kills = bindings[i + 1..].iter().all(|b| {
        matches!(b.value.kind(), ExprKind::Call { callee, args, .. }
            if matches!(callee.kind(), ExprKind::Op(op) if op.name == "memory.kill")
                && !args.iter().any(|a| matches!(a.kind(), ExprKind::Var(k) if k.id() == v.id())))
    });
    only_kills.then_some(i)
}

/// The value of an integer scalar constant.
fn constant_int(e: &Expr) -> Option<i64> {
    match e.kind() {
        ExprKind::Constant(c) if c.shape().is_empty() => {
            constant_ints_of(c).and_then(|v| v.first().copied())
        }
        _ => None,
    }
}

/// The elements of a 1-D integer constant (a shape).
fn constant_ints(e: &Expr) -> Option<Vec<i64>> {
    match e.kind() {
        ExprKind::Constant(c) if c.shape().len() == 1 => constant_ints_of(c),
        _ => None,
    }
}

/// The elements of an integer tensor, when they fit `i64`.
fn constant_ints_of(c: &relay_ir::NDArray) -> Option<Vec<i64>> {
    if !c.dtype().is_int() {
        return None;
    }
    c.to_i128_vec()
        .into_iter()
        .map(|v| i64::try_from(v).ok())
        .collect()
}

/// `name:line:column` of the start of `span` in the module's source, when it has one.
pub fn location(module: &Module, span: Span) -> Option<String> {
    if span.is_dummy() {
        return None;
    }
    Some(module.source.as_ref()?.location(span))
}
