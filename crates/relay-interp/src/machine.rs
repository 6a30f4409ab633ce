//! The evaluation machine: a CEK-style stack machine whose continuation stack and call frames
//! live on the heap, so neither deep recursion in the Relay program nor deep nesting of
//! expressions ever recurses natively.
//!
//! Evaluation alternates between two steps: evaluating an expression ([`Step::Eval`]), which
//! either produces a value at once or pushes a continuation ([`Kont`]) and moves to a
//! subexpression, and returning a value ([`Step::Return`]) to the innermost continuation. A call
//! pushes a [`Kont::PopFrame`] marker and a [`Frame`]; a call in tail position replaces the
//! current frame instead, so tail calls (self, mutual and through closures) run in constant
//! space. A call is in tail position when only the marker is above it, or only `let`
//! continuations that pass its value on unchanged: `let %x = f(...); %x`, as the source and the
//! `tail_call` pass's `tail=True` calls write it (see [`passes_on`] for the exact rule).
//!
//! The memory dialect runs here too: `memory.alloc_storage` and `memory.alloc_tensor` are
//! ordinary operator evaluations making real storage and views into it; `vm.invoke_tvm_op`
//! calls its function on the inputs (through a [`Kont::Invoke`] continuation) and copies the
//! result into the output views; `memory.kill(%x)` unbinds `%x` in the current frame.

use std::any::Any;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

use relay_ir::{
    AttrValue, Attrs, CtorRef, Expr, ExprKind, ExprNode, Function, GlobalFunc, Module, OpRef,
    Pattern, PatternKind, Span, Symbol, Value, Var, VarId,
};

use crate::InterpOptions;
use crate::closure::{Closure, Code};
use crate::error::{RunError, RunErrorKind};
use crate::release::Releaser;

/// The FxHash function over variable ids: the environment's keys are small integers.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Frames with more variables than this get a hash index; smaller ones are searched linearly,
/// which is faster for the few variables most frames hold.
const INDEX_AT: usize = 24;

/// The variables bound in one call frame.
#[derive(Default)]
struct Env {
    /// The bindings (in binding order until `memory.kill` removes one).
    vars: Vec<(VarId, Value)>,
    /// Positions in `vars` by variable, once there are more than [`INDEX_AT`].
    index: Option<HashMap<VarId, usize, BuildHasherDefault<IdHasher>>>,
    /// The variables `memory.kill` unbound, for the message of a later use.
    killed: Vec<VarId>,
}

impl Env {
    /// An environment with room for `n` variables.
    fn with_capacity(n: usize) -> Env {
        Env {
            vars: Vec::with_capacity(n),
            index: None,
            killed: Vec::new(),
        }
    }

    /// Unbinds `var` (for `memory.kill`), returning its value if it was bound.
    fn remove(&mut self, var: VarId) -> Option<Value> {
        let i = self.position(var)?;
        let (_, value) = self.vars.swap_remove(i);
        if let Some(index) = &mut self.index {
            index.remove(&var);
            if let Some((moved, _)) = self.vars.get(i) {
                index.insert(*moved, i);
            }
        }
        self.killed.push(var);
        Some(value)
    }

    /// Adds a binding of a variable known not to be bound yet.
    fn push(&mut self, var: VarId, value: Value) {
        if let Some(index) = &mut self.index {
            index.insert(var, self.vars.len());
        } else if self.vars.len() >= INDEX_AT {
            let mut index: HashMap<VarId, usize, BuildHasherDefault<IdHasher>> = self
                .vars
                .iter()
                .enumerate()
                .map(|(i, (id, _))| (*id, i))
                .collect();
            index.insert(var, self.vars.len());
            self.index = Some(index);
        }
        self.vars.push((var, value));
    }

    /// Binds `var`, returning the value it replaces if it was bound already (a shared
    /// subexpression evaluated twice in one frame).
    fn insert(&mut self, var: VarId, value: Value) -> Option<Value> {
        match self.position(var) {
            Some(i) => Some(std::mem::replace(&mut self.vars[i].1, value)),
            None => {
                self.push(var, value);
                None
            }
        }
    }

    /// Where `var` is in `vars`.
    fn position(&self, var: VarId) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(&var).copied(),
            None => self.vars.iter().rposition(|(id, _)| *id == var),
        }
    }

    /// The value of `var`.
    fn get(&self, var: VarId) -> Option<&Value> {
        self.position(var).map(|i| &self.vars[i].1)
    }
}

/// One live Relay call.
struct Frame {
    /// The frame's variables. Variables are unique by id, so one flat map per frame is enough.
    env: Env,
    /// The global function whose code runs in this frame.
    home: Option<Symbol>,
}

/// What the machine does next.
enum Step {
    /// Evaluate this expression in the current frame.
    Eval(Expr),
    /// Hand this value to the innermost continuation.
    Return(Value),
}

/// What to do with the value of a list of subexpressions (call arguments or tuple fields).
enum Target {
    /// Call a global function.
    Global(Symbol),
    /// Call the function value of the call's callee expression, evaluated after the
    /// arguments (TVM's interpreter and VM evaluate arguments first).
    Callee,
    /// Evaluate an operator with the call's attributes.
    Op(OpRef),
    /// Build an ADT value.
    Ctor(CtorRef),
    /// Build a tuple.
    Tuple,
}

/// A continuation: what remains to be done once the current subexpression has a value.
enum Kont {
    /// Return from the current frame.
    PopFrame,
    /// The callee of `call` is being evaluated, after its arguments, which are the operands
    /// from `base` on.
    Callee { call: Expr, base: usize },
    /// The subexpressions of `expr` (a call's arguments or a tuple's fields) are being evaluated;
    /// those already done are the operands from `base` on.
    Args {
        expr: Expr,
        target: Target,
        base: usize,
    },
    /// Binding `next` of the `let` chain `expr` is being evaluated.
    Let { expr: Expr, next: usize },
    /// The condition of the `if` expression `expr` is being evaluated.
    If { expr: Expr },
    /// The scrutinee of the match `expr` is being evaluated.
    Match { expr: Expr },
    /// The tuple of the projection `expr` is being evaluated.
    Proj { expr: Expr },
    /// The initial value of `ref(...)` is being evaluated.
    RefNew,
    /// The reference of `ref_read(...)` (`expr`) is being evaluated.
    RefRead { expr: Expr },
    /// The reference of `ref_write(r, v)` (`expr`) is being evaluated.
    RefWriteCell { expr: Expr },
    /// The value of `ref_write(r, v)` (`expr`) is being evaluated; `cell` is `r`'s value.
    RefWriteValue { cell: Arc<Mutex<Value>> },
    /// The function of `vm.invoke_tvm_op` (at `span`) is running; its result goes into the
    /// tensors of `outputs`.
    Invoke { outputs: Value, span: Span },
}

/// The name of the operator that unbinds a variable.
const KILL: &str = "memory.kill";
/// The name of the operator that calls a kernel in destination-passing style.
const INVOKE: &str = "vm.invoke_tvm_op";

/// The interpreter's state during one run.
pub(crate) struct Machine<'m> {
    module: &'m Module,
    max_frames: usize,
    globals: HashMap<Symbol, &'m GlobalFunc, BuildHasherDefault<IdHasher>>,
    ctor_arity: HashMap<(Symbol, u32), usize, BuildHasherDefault<IdHasher>>,
    /// The free variables of each function literal met so far, by node address. The nodes are
    /// kept alive by `free_var_nodes` so that an address is never reused during the run.
    free_vars: HashMap<*const ExprNode, Arc<[Var]>>,
    free_var_nodes: Vec<Expr>,
    frames: Vec<Frame>,
    konts: Vec<Kont>,
    releaser: Releaser,
    /// The evaluated arguments (and tuple fields) of the calls (and tuples) in progress; each
    /// [`Kont::Args`] owns the operands from its `base` on.
    operands: Vec<Value>,
    /// A reusable buffer for the bindings of a pattern being matched.
    scratch: Vec<(VarId, Value)>,
}

impl<'m> Machine<'m> {
    /// A machine for `module`.
    pub(crate) fn new(module: &'m Module, opts: &InterpOptions) -> Machine<'m> {
        let globals = module.functions.iter().map(|f| (f.name, f)).collect();
        let mut ctor_arity = HashMap::default();
        for t in &module.types {
            for (tag, c) in t.ctors.iter().enumerate() {
                ctor_arity.insert((t.name, tag as u32), c.fields.len());
            }
        }
        Machine {
            module,
            max_frames: opts.max_frames.max(1),
            globals,
            ctor_arity,
            free_vars: HashMap::new(),
            free_var_nodes: Vec::new(),
            frames: Vec::new(),
            konts: Vec::new(),
            releaser: Releaser::new(),
            scratch: Vec::new(),
            operands: Vec::new(),
        }
    }

    /// The global function called `name`.
    pub(crate) fn global(&self, name: Symbol) -> Option<&'m GlobalFunc> {
        self.globals.get(&name).copied()
    }

    /// Calls global `func` on `args`.
    pub(crate) fn call_global(
        &mut self,
        func: &'m GlobalFunc,
        args: Vec<Value>,
    ) -> Result<Value, RunError> {
        let step = self.enter_global(func, args, func.span);
        self.start(step)
    }

    /// Calls the function value `callee` on `args`.
    pub(crate) fn call_value(
        &mut self,
        callee: Value,
        args: Vec<Value>,
    ) -> Result<Value, RunError> {
        self.push_base_frame(None);
        let step = self.apply_value(callee, args, Span::DUMMY);
        self.start(step)
    }

    /// Evaluates the closed expression `expr`, as if it were the body of a function `home`.
    pub(crate) fn eval_closed(
        &mut self,
        expr: &Expr,
        home: Option<Symbol>,
    ) -> Result<Value, RunError> {
        self.push_base_frame(home);
        self.execute(Step::Eval(expr.clone()))
    }

    /// Pushes a frame with no variables for a computation that is not a call.
    fn push_base_frame(&mut self, home: Option<Symbol>) {
        self.konts.push(Kont::PopFrame);
        self.frames.push(Frame {
            env: Env::default(),
            home,
        });
    }

    /// Runs the machine from the first step of a computation, if there is one.
    fn start(&mut self, step: Result<Step, RunError>) -> Result<Value, RunError> {
        match step {
            Ok(step) => self.execute(step),
            Err(e) => {
                self.reset();
                Err(e)
            }
        }
    }

    /// Runs the machine from `step` until the outermost continuation returns.
    fn execute(&mut self, mut step: Step) -> Result<Value, RunError> {
        let result = loop {
            step = match step {
                Step::Eval(e) => match self.eval(&e) {
                    Ok(s) => s,
                    Err(err) => break Err(err),
                },
                Step::Return(v) => match self.konts.pop() {
                    None => break Ok(v),
                    Some(k) => match self.resume(k, v) {
                        Ok(s) => s,
                        Err(err) => break Err(err),
                    },
                },
            };
        };
        self.reset();
        result
    }

    /// The global function whose code is running.
    fn home(&self) -> Option<Symbol> {
        self.frames.last().and_then(|f| f.home)
    }

    /// An error of `kind` at `span` in the running function.
    fn error(&self, kind: RunErrorKind, message: impl Into<String>, span: Span) -> RunError {
        RunError::new(kind, message, self.module, self.home(), span)
    }

    /// Binds `var` in the current frame.
    fn bind(&mut self, var: VarId, value: Value) {
        if let Some(frame) = self.frames.last_mut()
            && let Some(old) = frame.env.insert(var, value)
        {
            self.releaser.release(old);
        }
    }

    /// Lets go of the values of a frame that ended.
    fn release_frame(&mut self, frame: Frame) {
        for (_, v) in frame.env.vars {
            self.releaser.release(v);
        }
    }

    /// Lets go of every frame and continuation (at the end of a run, or after an error).
    fn reset(&mut self) {
        while let Some(frame) = self.frames.pop() {
            self.release_frame(frame);
        }
        while let Some(v) = self.operands.pop() {
            self.releaser.release(v);
        }
        while let Some(k) = self.konts.pop() {
            match k {
                Kont::Args { .. } | Kont::Callee { .. } => {}
                Kont::RefWriteValue { cell } => self.releaser.release(Value::Ref(cell)),
                Kont::Invoke { outputs, .. } => self.releaser.release(outputs),
                _ => {}
            }
        }
    }

    /// The value of `var` in the current frame.
    fn lookup(&self, var: &Var, span: Span) -> Result<Value, RunError> {
        self.frames
            .last()
            .and_then(|f| f.env.get(var.id()))
            .cloned()
            .ok_or_else(|| {
                let killed = self
                    .frames
                    .last()
                    .is_some_and(|f| f.env.killed.contains(&var.id()));
                let why = if killed {
                    " (`memory.kill` killed it)"
                } else {
                    ""
                };
                self.error(
                    RunErrorKind::UnboundVariable,
                    format!("variable `%{}` is not bound{why}", var.name()),
                    span,
                )
            })
    }

    /// `memory.kill(%var)`: checks that `var` is bound (evaluating the argument), then unbinds
    /// it in the current frame.
    fn kill(&mut self, var: &Var, span: Span) -> Result<Step, RunError> {
        let value = self.lookup(var, span)?;
        self.releaser.release(value);
        if let Some(frame) = self.frames.last_mut()
            && let Some(old) = frame.env.remove(var.id())
        {
            self.releaser.release(old);
        }
        Ok(Step::Return(Value::tuple(Vec::new())))
    }

    /// The value of an expression that needs no continuation (a variable, a constant, or a
    /// constructor applied to variables and constants), or `None` for any other expression.
    /// This shortcut only saves pushing and popping continuations.
    fn atom(&self, e: &Expr) -> Option<Result<Value, RunError>> {
        match e.kind() {
            ExprKind::Constant(a) => Some(Ok(Value::Tensor(a.clone()))),
            ExprKind::Var(v) => Some(self.lookup(v, e.span())),
            ExprKind::Call { callee, args, .. }
                if matches!(callee.kind(), ExprKind::Ctor(_))
                    && args
                        .iter()
                        .all(|a| matches!(a.kind(), ExprKind::Var(_) | ExprKind::Constant(_))) =>
            {
                let ExprKind::Ctor(c) = callee.kind() else {
                    return None;
                };
                let arity = match self.ctor_arity(*c, e.span()) {
                    Ok(arity) => arity,
                    Err(err) => return Some(Err(err)),
                };
                if arity != args.len() {
                    return None;
                }
                let mut fields = Vec::with_capacity(args.len());
                for a in args {
                    match a.kind() {
                        ExprKind::Constant(t) => fields.push(Value::Tensor(t.clone())),
                        ExprKind::Var(v) => match self.lookup(v, a.span()) {
                            Ok(value) => fields.push(value),
                            Err(err) => return Some(Err(err)),
                        },
                        _ => return None,
                    }
                }
                Some(Ok(Value::adt(c.tag, fields)))
            }
            _ => None,
        }
    }

    /// One evaluation step of `e`.
    fn eval(&mut self, e: &Expr) -> Result<Step, RunError> {
        match e.kind() {
            ExprKind::Constant(a) => Ok(Step::Return(Value::Tensor(a.clone()))),
            ExprKind::Var(v) => Ok(Step::Return(self.lookup(v, e.span())?)),
            ExprKind::Global(name) => {
                self.expect_global(*name, e.span())?;
                Ok(Step::Return(self.closure(
                    Code::Global(*name),
                    Vec::new(),
                    None,
                )))
            }
            ExprKind::Op(op) => {
                let attrs = default_attrs(op);
                Ok(Step::Return(self.closure(
                    Code::Op(op, attrs),
                    Vec::new(),
                    None,
                )))
            }
            ExprKind::Ctor(c) => {
                let arity = self.ctor_arity(*c, e.span())?;
                if arity == 0 {
                    Ok(Step::Return(Value::adt(c.tag, Vec::new())))
                } else {
                    Ok(Step::Return(self.closure(
                        Code::Ctor(*c, arity),
                        Vec::new(),
                        None,
                    )))
                }
            }
            ExprKind::Function(_) => Ok(Step::Return(self.make_lambda(e, None)?)),
            ExprKind::Call { callee, .. } => {
                if let Some((v, span)) = kill_of_var(e) {
                    return self.kill(v, span);
                }
                let target = match callee.kind() {
                    ExprKind::Global(name) => {
                        self.expect_global(*name, callee.span())?;
                        Target::Global(*name)
                    }
                    ExprKind::Op(op) => Target::Op(op),
                    ExprKind::Ctor(c) => Target::Ctor(*c),
                    _ => Target::Callee,
                };
                let base = self.operands.len();
                self.continue_args(e, target, base)
            }
            ExprKind::Tuple(_) => {
                let base = self.operands.len();
                self.continue_args(e, Target::Tuple, base)
            }
            ExprKind::Let { .. } => self.continue_let(e, 0),
            ExprKind::If { cond, .. } => {
                self.konts.push(Kont::If { expr: e.clone() });
                Ok(Step::Eval(cond.clone()))
            }
            ExprKind::Match { scrutinee, .. } => {
                if let Some(v) = self.atom(scrutinee) {
                    return self.select_clause(e, v?);
                }
                self.konts.push(Kont::Match { expr: e.clone() });
                Ok(Step::Eval(scrutinee.clone()))
            }
            ExprKind::Proj { tuple, .. } => {
                self.konts.push(Kont::Proj { expr: e.clone() });
                Ok(Step::Eval(tuple.clone()))
            }
            ExprKind::RefNew(inner) => {
                self.konts.push(Kont::RefNew);
                Ok(Step::Eval(inner.clone()))
            }
            ExprKind::RefRead(r) => {
                self.konts.push(Kont::RefRead { expr: e.clone() });
                Ok(Step::Eval(r.clone()))
            }
            ExprKind::RefWrite(r, _) => {
                self.konts.push(Kont::RefWriteCell { expr: e.clone() });
                Ok(Step::Eval(r.clone()))
            }
        }
    }

    /// Hands `v` to the continuation `k`.
    fn resume(&mut self, k: Kont, v: Value) -> Result<Step, RunError> {
        match k {
            Kont::PopFrame => {
                if let Some(frame) = self.frames.pop() {
                    self.release_frame(frame);
                }
                Ok(Step::Return(v))
            }
            Kont::Callee { call, base } => {
                let vals = self.take_operands(base);
                self.apply_value(v, vals, call.span())
            }
            Kont::Args { expr, target, base } => {
                self.operands.push(v);
                self.continue_args(&expr, target, base)
            }
            Kont::Let { expr, next } => {
                if let ExprKind::Let { bindings, .. } = expr.kind()
                    && let Some(b) = bindings.get(next)
                {
                    self.bind(b.var.id(), v);
                }
                self.continue_let(&expr, next + 1)
            }
            Kont::If { expr } => {
                let ExprKind::If {
                    cond,
                    then_branch,
                    else_branch,
                } = expr.kind()
                else {
                    return Err(self.not_expected(&expr));
                };
                let taken = self.condition(&v, cond.span())?;
                Ok(Step::Eval(if taken {
                    then_branch.clone()
                } else {
                    else_branch.clone()
                }))
            }
            Kont::Match { expr } => self.select_clause(&expr, v),
            Kont::Proj { expr } => {
                let ExprKind::Proj { index, .. } = expr.kind() else {
                    return Err(self.not_expected(&expr));
                };
                match &v {
                    Value::Tuple(fields) => match fields.get(*index as usize) {
                        Some(field) => {
                            let field = field.clone();
                            self.releaser.release(v);
                            Ok(Step::Return(field))
                        }
                        None => Err(self.error(
                            RunErrorKind::BadValue,
                            format!(
                                "projection `.{index}` out of range for a tuple of {} fields",
                                fields.len()
                            ),
                            expr.span(),
                        )),
                    },
                    other => Err(self.error(
                        RunErrorKind::BadValue,
                        format!(
                            "projection `.{index}` expects a tuple, got {}",
                            other.kind_name()
                        ),
                        expr.span(),
                    )),
                }
            }
            Kont::RefNew => Ok(Step::Return(Value::Ref(Arc::new(Mutex::new(v))))),
            Kont::RefRead { expr } => {
                let cell = self.expect_ref(v, &expr, "ref_read")?;
                let inner = cell.lock().unwrap_or_else(|e| e.into_inner()).clone();
                self.releaser.release(Value::Ref(cell));
                Ok(Step::Return(inner))
            }
            Kont::RefWriteCell { expr } => {
                let cell = self.expect_ref(v, &expr, "ref_write")?;
                let ExprKind::RefWrite(_, value) = expr.kind() else {
                    return Err(self.not_expected(&expr));
                };
                let value = value.clone();
                self.konts.push(Kont::RefWriteValue { cell });
                Ok(Step::Eval(value))
            }
            Kont::RefWriteValue { cell } => {
                let old =
                    std::mem::replace(&mut *cell.lock().unwrap_or_else(|e| e.into_inner()), v);
                self.releaser.release(old);
                Ok(Step::Return(Value::tuple(Vec::new())))
            }
            Kont::Invoke { outputs, span } => {
                let written = self.write_outputs(&v, &outputs, span);
                self.releaser.release(v);
                self.releaser.release(outputs);
                written.map(|()| Step::Return(Value::tuple(Vec::new())))
            }
        }
    }

    /// `vm.invoke_tvm_op(func, inputs, outputs)`: calls `func` on the fields of `inputs`; the
    /// [`Kont::Invoke`] continuation writes its result into `outputs`.
    fn invoke(&mut self, vals: Vec<Value>, span: Span) -> Result<Step, RunError> {
        let given = vals.len();
        let Ok([func, inputs, outputs]) = <[Value; 3]>::try_from(vals) else {
            return Err(self.error(
                RunErrorKind::Arity,
                format!("`{INVOKE}` takes 3 arguments, got {given}"),
                span,
            ));
        };
        let args = match &inputs {
            Value::Tuple(fields) => fields.to_vec(),
            other => {
                return Err(self.error(
                    RunErrorKind::BadValue,
                    format!(
                        "`{INVOKE}` expects a tuple of inputs, got {}",
                        other.kind_name()
                    ),
                    span,
                ));
            }
        };
        self.releaser.release(inputs);
        self.konts.push(Kont::Invoke { outputs, span });
        self.apply_value(func, args, span)
    }

    /// Copies the result of a `vm.invoke_tvm_op` function (a tensor, or a tuple of them) into
    /// the output views.
    fn write_outputs(&self, result: &Value, outputs: &Value, span: Span) -> Result<(), RunError> {
        let bad = |message: String| self.error(RunErrorKind::BadValue, message, span);
        let results: &[Value] = match result {
            Value::Tuple(fields) => fields,
            single => std::slice::from_ref(single),
        };
        let Value::Tuple(outputs) = outputs else {
            return Err(bad(format!(
                "`{INVOKE}` expects a tuple of outputs, got {}",
                outputs.kind_name()
            )));
        };
        if results.len() != outputs.len() {
            return Err(bad(format!(
                "`{INVOKE}`: the function returned {} results for {} outputs",
                results.len(),
                outputs.len()
            )));
        }
        for (i, (r, o)) in results.iter().zip(outputs.iter()).enumerate() {
            let (Value::Tensor(r), Value::Tensor(o)) = (r, o) else {
                return Err(bad(format!(
                    "`{INVOKE}`: result {i} is {} and output {i} is {}, expected tensors",
                    r.kind_name(),
                    o.kind_name()
                )));
            };
            if r.dtype() != o.dtype() || r.shape() != o.shape() {
                return Err(bad(format!(
                    "`{INVOKE}`: output {i} is `{}`, but the function returned `{}`",
                    relay_ir::Type::tensor(o.shape(), o.dtype()),
                    relay_ir::Type::tensor(r.shape(), r.dtype())
                )));
            }
            if !o.is_view() {
                return Err(bad(format!(
                    "`{INVOKE}`: output {i} is not a tensor made by `memory.alloc_tensor`"
                )));
            }
            // A result that is itself a view may share bytes with the output: copy it out
            // first, so that no slice of the storage is alive during the write.
            let copy;
            let bytes = if r.is_view() {
                copy = r.as_bytes().to_vec();
                &copy[..]
            } else {
                r.as_bytes()
            };
            // SAFETY: the aliasing contract of `NDArray::view`: the interpreter runs on one
            // thread and holds no slice of any storage here (`bytes` is an owned buffer, not
            // part of a storage), so nothing else reads or writes the output's bytes meanwhile.
            unsafe { o.write_view(bytes) }
                .map_err(|e| bad(format!("`{INVOKE}`: output {i}: {e}")))?;
        }
        Ok(())
    }

    /// An internal error: a continuation met an expression of another kind than the one that
    /// pushed it. The machine never does this.
    fn not_expected(&self, expr: &Expr) -> RunError {
        self.error(
            RunErrorKind::BadValue,
            "internal interpreter error: continuation does not match its expression (this is a bug)",
            expr.span(),
        )
    }

    /// The cell of a reference value.
    fn expect_ref(&self, v: Value, expr: &Expr, what: &str) -> Result<Arc<Mutex<Value>>, RunError> {
        match v {
            Value::Ref(cell) => Ok(cell),
            other => Err(self.error(
                RunErrorKind::BadValue,
                format!("`{what}` expects a reference, got {}", other.kind_name()),
                expr.span(),
            )),
        }
    }

    /// The truth of an `if` condition: a tensor of one element.
    fn condition(&self, v: &Value, span: Span) -> Result<bool, RunError> {
        match v {
            Value::Tensor(t) if t.num_elements() == 1 => {
                Ok(t.to_bool_vec().first().copied().unwrap_or(false))
            }
            Value::Tensor(t) => Err(self.error(
                RunErrorKind::BadValue,
                format!(
                    "`if` condition must be a scalar, got a tensor of shape {:?}",
                    t.shape()
                ),
                span,
            )),
            other => Err(self.error(
                RunErrorKind::BadValue,
                format!(
                    "`if` condition must be a boolean scalar, got {}",
                    other.kind_name()
                ),
                span,
            )),
        }
    }

    /// Checks that global `name` exists.
    fn expect_global(&self, name: Symbol, span: Span) -> Result<&'m GlobalFunc, RunError> {
        self.global(name).ok_or_else(|| {
            self.error(
                RunErrorKind::UnknownFunction,
                format!("no global function `@{name}` in the module"),
                span,
            )
        })
    }

    /// The number of fields of constructor `c`.
    fn ctor_arity(&self, c: CtorRef, span: Span) -> Result<usize, RunError> {
        self.ctor_arity
            .get(&(c.adt, c.tag))
            .copied()
            .ok_or_else(|| {
                self.error(
                    RunErrorKind::UnknownFunction,
                    format!("no constructor `{}` in type `{}`", c.name, c.adt),
                    span,
                )
            })
    }

    /// A closure value.
    fn closure(&self, code: Code, captured: Vec<(VarId, Value)>, self_var: Option<VarId>) -> Value {
        Value::Closure(Arc::new(Closure {
            code,
            captured,
            self_var,
            home: self.home(),
        }))
    }

    /// The closure of the function literal `e`, capturing its free variables (all but
    /// `self_var`, which the closure binds to itself when called).
    fn make_lambda(&mut self, e: &Expr, self_var: Option<&Var>) -> Result<Value, RunError> {
        let key: *const ExprNode = &**e;
        let free = match self.free_vars.get(&key) {
            Some(free) => free.clone(),
            None => {
                let free: Arc<[Var]> = relay_ir::visit::free_vars(e).into();
                self.free_vars.insert(key, free.clone());
                self.free_var_nodes.push(e.clone());
                free
            }
        };
        let self_id = self_var.map(Var::id);
        let mut captured = Vec::with_capacity(free.len());
        for var in free.iter() {
            if Some(var.id()) == self_id {
                continue;
            }
            captured.push((var.id(), self.lookup(var, e.span())?));
        }
        Ok(self.closure(Code::Lambda(e.clone()), captured, self_id))
    }

    /// Evaluates the remaining subexpressions of `expr` (a call's arguments or a tuple's
    /// fields) after the `vals.len()` already done, then acts on them.
    fn continue_args(
        &mut self,
        expr: &Expr,
        target: Target,
        base: usize,
    ) -> Result<Step, RunError> {
        let (subexprs, callee): (&[Expr], Option<&Expr>) = match expr.kind() {
            ExprKind::Call { args, callee, .. } => (args, Some(callee)),
            ExprKind::Tuple(fields) => (fields, None),
            _ => (&[], None),
        };
        while let Some(sub) = subexprs.get(self.operands.len().saturating_sub(base)) {
            match self.atom(sub) {
                Some(v) => self.operands.push(v?),
                None => {
                    let sub = sub.clone();
                    self.konts.push(Kont::Args {
                        expr: expr.clone(),
                        target,
                        base,
                    });
                    return Ok(Step::Eval(sub));
                }
            }
        }
        if let (Target::Callee, Some(callee)) = (&target, callee)
            && self.atom(callee).is_none()
        {
            // The callee needs evaluating: the arguments wait on the operand stack.
            let callee = callee.clone();
            self.konts.push(Kont::Callee {
                call: expr.clone(),
                base,
            });
            return Ok(Step::Eval(callee));
        }
        let vals = self.take_operands(base);
        self.apply(expr, target, vals)
    }

    /// Takes the operands from `base` on off the operand stack.
    fn take_operands(&mut self, base: usize) -> Vec<Value> {
        let base = base.min(self.operands.len());
        self.operands.split_off(base)
    }

    /// Acts on the evaluated subexpressions of `expr`.
    fn apply(&mut self, expr: &Expr, target: Target, vals: Vec<Value>) -> Result<Step, RunError> {
        let span = expr.span();
        match target {
            Target::Tuple => Ok(Step::Return(Value::tuple(vals))),
            Target::Op(op) => {
                let attrs = match expr.kind() {
                    ExprKind::Call { attrs, .. } => attrs.clone(),
                    _ => default_attrs(op),
                };
                self.eval_op(op, vals, &attrs, span)
            }
            Target::Ctor(c) => {
                let arity = self.ctor_arity(c, span)?;
                self.construct(c, arity, vals, span)
            }
            Target::Global(name) => {
                let func = self.expect_global(name, span)?;
                self.enter_global(func, vals, span)
            }
            Target::Callee => {
                let ExprKind::Call { callee, .. } = expr.kind() else {
                    return Err(self.not_expected(expr));
                };
                match self.atom(callee) {
                    Some(f) => self.apply_value(f?, vals, span),
                    // `continue_args` evaluates a callee that is not an atom before this.
                    None => Err(self.not_expected(expr)),
                }
            }
        }
    }

    /// Evaluates operator `op`.
    fn eval_op(
        &mut self,
        op: OpRef,
        vals: Vec<Value>,
        attrs: &Attrs,
        span: Span,
    ) -> Result<Step, RunError> {
        match op.name {
            INVOKE => return self.invoke(vals, span),
            // `memory.kill` of something other than a variable (or used as a value) has
            // nothing to unbind.
            KILL => {
                for v in vals {
                    self.releaser.release(v);
                }
                return Ok(Step::Return(Value::tuple(Vec::new())));
            }
            _ => {}
        }
        let Some(eval) = op.eval else {
            return Err(self.error(
                RunErrorKind::UnsupportedOperator,
                format!("operator `{}` cannot be evaluated", op.name),
                span,
            ));
        };
        let result = eval(&vals, attrs).map(Step::Return).map_err(|error| {
            self.error(
                RunErrorKind::Operator,
                format!("operator `{}`: {error}", op.name),
                span,
            )
            .with_op_error(error)
        });
        for v in vals {
            self.releaser.release(v);
        }
        result
    }

    /// Builds the ADT value of constructor `c`.
    fn construct(
        &self,
        c: CtorRef,
        arity: usize,
        vals: Vec<Value>,
        span: Span,
    ) -> Result<Step, RunError> {
        if vals.len() != arity {
            return Err(self.error(
                RunErrorKind::Arity,
                format!(
                    "constructor `{}` takes {}, got {}",
                    c.name,
                    count(arity, "field"),
                    vals.len()
                ),
                span,
            ));
        }
        Ok(Step::Return(Value::adt(c.tag, vals)))
    }

    /// Calls the function value `callee`.
    fn apply_value(
        &mut self,
        callee: Value,
        vals: Vec<Value>,
        span: Span,
    ) -> Result<Step, RunError> {
        let Value::Closure(any) = callee else {
            return Err(self.error(
                RunErrorKind::NotAFunction,
                format!("cannot call {}: expected a function", callee.kind_name()),
                span,
            ));
        };
        let result = self.apply_closure(&any, vals, span);
        self.releaser.release(Value::Closure(any));
        result
    }

    /// Calls the closure `any`.
    fn apply_closure(
        &mut self,
        any: &Arc<dyn Any + Send + Sync>,
        vals: Vec<Value>,
        span: Span,
    ) -> Result<Step, RunError> {
        let Some(closure) = any.downcast_ref::<Closure>() else {
            return Err(self.error(
                RunErrorKind::NotAFunction,
                "cannot call a closure made by another executor",
                span,
            ));
        };
        match &closure.code {
            Code::Global(name) => {
                let func = self.expect_global(*name, span)?;
                self.enter_global(func, vals, span)
            }
            Code::Ctor(c, arity) => self.construct(*c, *arity, vals, span),
            Code::Op(op, attrs) => {
                let attrs = attrs.clone();
                self.eval_op(op, vals, &attrs, span)
            }
            Code::Lambda(lambda) => {
                let ExprKind::Function(func) = lambda.kind() else {
                    return Err(self.not_expected(lambda));
                };
                self.check_arity(func, None, vals.len(), span)?;
                let mut env = Env::with_capacity(closure.captured.len() + vals.len() + 1);
                for (id, v) in &closure.captured {
                    env.push(*id, v.clone());
                }
                if let Some(id) = closure.self_var {
                    env.insert(id, Value::Closure(any.clone()));
                }
                for (param, v) in func.params.iter().zip(vals) {
                    env.insert(param.id(), v);
                }
                let body = func.body.clone();
                self.push_frame(
                    Frame {
                        env,
                        home: closure.home,
                    },
                    span,
                )?;
                Ok(Step::Eval(body))
            }
        }
    }

    /// Calls global function `func`.
    fn enter_global(
        &mut self,
        func: &'m GlobalFunc,
        vals: Vec<Value>,
        span: Span,
    ) -> Result<Step, RunError> {
        self.check_arity(&func.func, Some(func.name), vals.len(), span)?;
        let mut env = Env::with_capacity(vals.len() + 4);
        for (param, v) in func.func.params.iter().zip(vals) {
            env.insert(param.id(), v);
        }
        self.push_frame(
            Frame {
                env,
                home: Some(func.name),
            },
            span,
        )?;
        Ok(Step::Eval(func.func.body.clone()))
    }

    /// Checks the number of arguments of a call of `func` (global `name`, or a closure).
    fn check_arity(
        &self,
        func: &Function,
        name: Option<Symbol>,
        given: usize,
        span: Span,
    ) -> Result<(), RunError> {
        if func.params.len() == given {
            return Ok(());
        }
        let what = match name {
            Some(name) => format!("`@{name}`"),
            None => "the function".to_owned(),
        };
        Err(self.error(
            RunErrorKind::Arity,
            format!(
                "{what} takes {}, got {given}",
                count(func.params.len(), "argument")
            ),
            span,
        ))
    }

    /// Makes `frame` the current frame: in place of the current one for a call in tail position
    /// ([`Machine::tail_position`]), on top of it otherwise.
    fn push_frame(&mut self, frame: Frame, span: Span) -> Result<(), RunError> {
        if let Some(depth) = self.tail_position()
            && let Some(top) = self.frames.last_mut()
        {
            // The `let` continuations above the frame's marker would only pass the value on.
            self.konts.truncate(depth);
            let old = std::mem::replace(top, frame);
            self.release_frame(old);
            return Ok(());
        }
        if self.frames.len() >= self.max_frames {
            return Err(self
                .error(
                    RunErrorKind::RecursionLimit,
                    format!("recursion limit exceeded ({} frames)", self.max_frames),
                    span,
                )
                .with_help("raise the limit with `--max-frames`"));
        }
        self.konts.push(Kont::PopFrame);
        self.frames.push(frame);
        Ok(())
    }

    /// Whether a call made now is in tail position: whether the value it returns is, unchanged,
    /// what the current frame returns. If so, the length of the continuation stack up to and
    /// including the frame's [`Kont::PopFrame`] marker; the continuations above the marker are
    /// all `let` chains that pass the value on ([`passes_on`]), and a tail call drops them.
    fn tail_position(&self) -> Option<usize> {
        let env = &self.frames.last()?.env;
        let mut killed = Vec::new();
        for (i, k) in self.konts.iter().enumerate().rev() {
            match k {
                Kont::PopFrame => return Some(i + 1),
                Kont::Let { expr, next } if passes_on(expr, *next, env, &mut killed) => {}
                _ => return None,
            }
        }
        None
    }

    /// Evaluates the bindings of the `let` chain `e` from binding `next` on, then its body.
    fn continue_let(&mut self, e: &Expr, mut next: usize) -> Result<Step, RunError> {
        let ExprKind::Let { bindings, body } = e.kind() else {
            return Err(self.not_expected(e));
        };
        while let Some(b) = bindings.get(next) {
            let value = if matches!(b.value.kind(), ExprKind::Function(_)) {
                self.make_lambda(&b.value, Some(&b.var))?
            } else if let Some(v) = self.atom(&b.value) {
                v?
            } else {
                self.konts.push(Kont::Let {
                    expr: e.clone(),
                    next,
                });
                return Ok(Step::Eval(b.value.clone()));
            };
            self.bind(b.var.id(), value);
            next += 1;
        }
        Ok(Step::Eval(body.clone()))
    }

    /// Picks the first clause of match `expr` whose pattern matches `v`, binds its variables
    /// and continues with its body.
    fn select_clause(&mut self, expr: &Expr, v: Value) -> Result<Step, RunError> {
        let ExprKind::Match { clauses, .. } = expr.kind() else {
            return Err(self.not_expected(expr));
        };
        let mut bound = std::mem::take(&mut self.scratch);
        for clause in clauses {
            bound.clear();
            if match_pattern(&clause.pattern, &v, &mut bound) {
                for (id, value) in bound.drain(..) {
                    self.bind(id, value);
                }
                self.scratch = bound;
                self.releaser.release(v);
                return Ok(Step::Eval(clause.body.clone()));
            }
        }
        bound.clear();
        self.scratch = bound;
        self.releaser.release(v);
        Err(self.error(
            RunErrorKind::NoMatch,
            "no match clause matched",
            expr.span(),
        ))
    }
}

/// Whether the `let` chain `expr`, whose binding `next` is being evaluated, returns that
/// binding's value unchanged and does nothing observable after it, so that a call computing the
/// value may replace the frame `env` belongs to (the rule of tail position for `let`).
///
/// The rule: the chain's body (or the body of the `let` chain that is its body, and so on) is
/// the variable holding the value, and every binding after `next` on the way is one of
/// - an alias `let %y = %x` of the variable `%x` holding the value; `%y` then holds it;
/// - `memory.kill(%w)` of another variable `%w` bound in `env` now and not killed by an earlier
///   such binding (`killed` collects them across the chains of one frame): it would only release
///   `%w`, and replacing the frame releases it too.
///
/// Anything else keeps the call a non-tail call: an operator or call (`memory.alloc_storage`,
/// `vm.invoke_tvm_op`, ...), which may fail or have effects; a kill of the value itself, of a
/// variable not bound now or a second kill of one variable, which fail when they run (a kill of
/// an earlier holder of the value, after an alias, would not, but is left out for simplicity);
/// any other binding, even a pure one; and a body that uses the value (`g(%x)`, `(%x, 1)`).
fn passes_on(expr: &Expr, next: usize, env: &Env, killed: &mut Vec<VarId>) -> bool {
    let ExprKind::Let { bindings, body } = expr.kind() else {
        return false;
    };
    let Some(first) = bindings.get(next) else {
        return false;
    };
    let mut holder = first.var.id();
    let (mut rest, mut body) = (&bindings[next + 1..], body);
    loop {
        for b in rest {
            match b.value.kind() {
                ExprKind::Var(v) if v.id() == holder => holder = b.var.id(),
                _ => match kill_of_var(&b.value) {
                    Some((w, _))
                        if w.id() != holder
                            && env.get(w.id()).is_some()
                            && !killed.contains(&w.id()) =>
                    {
                        killed.push(w.id());
                    }
                    _ => return false,
                },
            }
        }
        match body.kind() {
            ExprKind::Var(v) => return v.id() == holder,
            ExprKind::Let {
                bindings,
                body: inner,
            } => (rest, body) = (bindings, inner),
            _ => return false,
        }
    }
}

/// The variable (and the argument's span) of `memory.kill(%var)`, if `e` is that.
fn kill_of_var(e: &Expr) -> Option<(&Var, Span)> {
    let ExprKind::Call { callee, args, .. } = e.kind() else {
        return None;
    };
    match (callee.kind(), args.as_slice()) {
        (ExprKind::Op(op), [arg]) if op.name == KILL => match arg.kind() {
            ExprKind::Var(v) => Some((v, arg.span())),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `p` matches `v`; on success its variables' values are appended to `out`.
fn match_pattern(p: &Pattern, v: &Value, out: &mut Vec<(VarId, Value)>) -> bool {
    // Leaves need no stack check; only nested patterns recurse.
    match &p.kind {
        PatternKind::Wildcard => return true,
        PatternKind::Var(var) => {
            out.push((var.id(), v.clone()));
            return true;
        }
        _ => {}
    }
    relay_ir::ensure_sufficient_stack(|| match &p.kind {
        PatternKind::Wildcard => true,
        PatternKind::Var(var) => {
            out.push((var.id(), v.clone()));
            true
        }
        PatternKind::Ctor(c, subs) => match v {
            Value::Adt(adt) => {
                adt.tag == c.tag
                    && adt.fields.len() == subs.len()
                    && subs
                        .iter()
                        .zip(&adt.fields)
                        .all(|(sp, sv)| match_pattern(sp, sv, out))
            }
            _ => false,
        },
        PatternKind::Tuple(subs) => match v {
            Value::Tuple(fields) => {
                fields.len() == subs.len()
                    && subs
                        .iter()
                        .zip(fields.iter())
                        .all(|(sp, sv)| match_pattern(sp, sv, out))
            }
            _ => false,
        },
    })
}

/// The attributes of an operator used as a value: every field at its default (`None` for
/// required fields).
fn default_attrs(op: OpRef) -> Attrs {
    Attrs::new(
        op.attrs
            .iter()
            .map(|f| {
                (
                    Symbol::intern(f.name),
                    f.default.value().unwrap_or(AttrValue::Null),
                )
            })
            .collect(),
    )
}

/// "1 argument", "2 arguments".
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
