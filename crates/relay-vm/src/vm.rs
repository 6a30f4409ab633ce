//! The VM: runs an [`Executable`]'s bytecode (docs/design.md §9).
//!
//! - **Frames on a heap vector**: a call pushes a [`Frame`] and a window of the register
//!   stack sized by the callee's register count; a return pops both. Relay recursion never
//!   recurses natively, and depth is bounded by [`VmOptions::max_frames`].
//! - **Tail calls** (`tail_invoke`, `tail_invoke_closure`) replace the current frame's window
//!   with the callee's, so tail recursion (self, mutual, through closures) runs in constant
//!   frames; a self tail call is a jump and does not even do that.
//! - **Registers** hold values or unboxed integers (`load_consti`, `get_tag`: sizes, offsets,
//!   tags). Overwriting, killing or popping a register gives a storage nothing else holds back
//!   to the [`PooledAllocator`], so a loop's tensors reuse the same buffers.
//! - **Kernels** are called in destination-passing style on views into pooled storage.
//! - Every failure is a [`VmError`] naming the function and the source location; malformed
//!   executables (a register of the wrong kind) are errors too, never panics.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use relay_ir::{NDArray, Type, TypeKind};
use relay_kernel::PackedFunc;
use relay_kernel::abi::KernelContext;
use relay_runtime::{AdtValue, Value};

use crate::allocator::{AllocStats, PooledAllocator};
use crate::bytecode::{Instruction, Reg};
use crate::error::{VmError, VmErrorKind};
use crate::executable::Executable;
use crate::interrupt::{Interrupt, Poll};
use crate::profile::Profile;
use crate::scalar::Scalar;
use crate::trace::{SpanKind, Trace};

/// Settings of a [`Vm`].
#[derive(Clone, Debug)]
pub struct VmOptions {
    /// The most call frames live at once; deeper recursion is "recursion limit exceeded".
    pub max_frames: usize,
    /// Kernel threads: 0 = every core, 1 = the calling thread only, n = n threads.
    pub threads: usize,
    /// Records a [`Profile`] (per kernel and per instruction kind timings).
    pub profile: bool,
    /// With `profile`, also records the timeline ([`crate::trace::Trace`]): a span per VM
    /// function call and per kernel call, on the VM's thread and on each kernel thread.
    pub trace: bool,
    /// The cap on bytes the storage pool keeps cached.
    pub allocator_cap: usize,
    /// Asked at function-call and kernel boundaries whether to stop the run
    /// ([`VmErrorKind::Interrupted`]).
    pub interrupt: Option<Interrupt>,
    /// The host kernels' instruction set ([`relay_linalg::Ops::for_isa`], checked against the
    /// CPU when made); `None` for the process default (`RELAYC_ISA`, else the detected one).
    pub ops: Option<&'static relay_linalg::Ops>,
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            max_frames: 1_000_000,
            threads: 0,
            profile: false,
            trace: false,
            allocator_cap: crate::allocator::DEFAULT_CAP_BYTES,
            interrupt: None,
            ops: None,
        }
    }
}

/// A closure the VM made: a function of the executable and its captured values (passed
/// before the explicit arguments).
#[derive(Clone, Debug)]
pub struct VmClosure {
    /// The function's index in the executable.
    pub func: u32,
    /// The captured values.
    pub captured: Vec<Value>,
}

/// A register's content.
#[derive(Clone, Debug, Default)]
enum Slot {
    /// Nothing (not yet written, or killed).
    #[default]
    Empty,
    /// An unboxed integer (`load_consti`, `get_tag`).
    Int(i64),
    /// An unboxed scalar tensor (the result of a scalar kernel).
    Scalar(Scalar),
    /// A value.
    Value(Value),
}

/// What [`Vm::fast`] did.
enum Flow {
    /// Executed; `pc` is the next instruction of the same frame.
    Next,
    /// Executed; the frame changed (a call or a return).
    Switch,
    /// Not one of the fast instructions.
    Slow,
}

/// A call in progress.
#[derive(Clone, Copy, Debug)]
struct Frame {
    /// The function's index.
    func: u32,
    /// The next instruction.
    pc: usize,
    /// The first register of its window of the register stack.
    base: usize,
    /// The caller's register that gets the result (unused for the first frame).
    dst: Reg,
}

/// A virtual machine running one executable; one per thread (an executable is shared).
pub struct Vm<'e> {
    exe: &'e Executable,
    options: VmOptions,
    frames: Vec<Frame>,
    registers: Vec<Slot>,
    allocator: PooledAllocator,
    context: KernelContext,
    profile: Option<Profile>,
    peak_frames: usize,
    /// Reused argument buffer of calls.
    args: Vec<Slot>,
    /// Reused argument buffer of kernel calls.
    tensors: Vec<Arc<NDArray>>,
    /// The countdown to the next check of `options.interrupt`.
    poll: Poll,
}

type Result<T> = std::result::Result<T, VmError>;

fn bad(message: impl Into<String>) -> VmError {
    VmError::new(VmErrorKind::BadValue, message)
}

impl<'e> Vm<'e> {
    /// A VM with the default options.
    pub fn new(exe: &'e Executable) -> Vm<'e> {
        Vm::with_options(exe, VmOptions::default())
    }

    /// A VM with `options`.
    pub fn with_options(exe: &'e Executable, options: VmOptions) -> Vm<'e> {
        let profile = options.profile.then(|| {
            let mut profile = Profile::new(exe.kernels.iter().map(|k| k.name.clone()));
            profile.trace = options.trace.then(Trace::new);
            profile
        });
        // Starts the kernels' thread pool now (the shared pool of every core on first use), so
        // the first kernel call of the first run does not pay for it.
        let mut context = KernelContext::with_threads(options.threads);
        if let Some(ops) = options.ops {
            context = context.with_ops(ops);
        }
        context.set_constants(Some(exe.packed_constants().clone()));
        // Packs the constant weights of products now, so the first call does not.
        exe.prepack(&context);
        if let (true, Some(pool)) = (options.profile && options.trace, context.pool()) {
            pool.set_tracing(true);
        }
        Vm {
            exe,
            allocator: PooledAllocator::new(options.allocator_cap),
            context,
            options,
            frames: Vec::new(),
            registers: Vec::new(),
            profile,
            peak_frames: 0,
            args: Vec::new(),
            tensors: Vec::new(),
            poll: Poll::new(),
        }
    }

    /// The options.
    pub fn options(&self) -> &VmOptions {
        &self.options
    }

    /// Runs global function `entry` (with or without `@`) on `args`, checked against its
    /// parameters (count, and each tensor's dtype and shape).
    pub fn invoke(&mut self, entry: &str, args: &[Value]) -> Result<Value> {
        let name = entry.strip_prefix('@').unwrap_or(entry);
        let Some((index, func)) = self.exe.global(name) else {
            let mut names: Vec<&str> = self.exe.globals.keys().map(String::as_str).collect();
            names.sort_unstable();
            return Err(VmError::new(
                VmErrorKind::UnknownFunction,
                format!(
                    "no global function `@{name}` in the executable (it has {})",
                    names
                        .iter()
                        .map(|n| format!("`@{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        if func.params.len() != args.len() {
            return Err(VmError::new(
                VmErrorKind::Arity,
                format!(
                    "`@{name}` takes {}, got {}",
                    count(func.params.len()),
                    args.len()
                ),
            ));
        }
        for ((param, ty), arg) in func.params.iter().zip(&func.param_types).zip(args) {
            if let Some(ty) = ty
                && let Some(problem) = relay_ir::value_mismatch(ty, arg)
            {
                return Err(VmError::new(
                    VmErrorKind::BadArgument,
                    format!("argument `%{param}` of `@{name}` expects `{ty}`, got {problem}"),
                ));
            }
        }
        self.run(index, args.iter().cloned().map(Slot::Value).collect())
    }

    /// Calls a closure this VM (or another VM of the same executable) returned.
    pub fn call_closure(&mut self, closure: &Value, args: &[Value]) -> Result<Value> {
        let Value::Closure(c) = closure else {
            return Err(bad(format!(
                "called a {}, not a closure",
                closure.kind_name()
            )));
        };
        let Some(c) = c.downcast_ref::<VmClosure>() else {
            return Err(bad("called a closure the VM did not make"));
        };
        let arity = self
            .exe
            .functions
            .get(c.func as usize)
            .map(|f| f.params.len())
            .ok_or_else(|| bad(format!("closure of missing function {}", c.func)))?;
        if c.captured.len() + args.len() != arity {
            return Err(VmError::new(
                VmErrorKind::Arity,
                format!(
                    "the closure takes {}, got {}",
                    count(arity.saturating_sub(c.captured.len())),
                    args.len()
                ),
            ));
        }
        let all = c
            .captured
            .iter()
            .chain(args)
            .cloned()
            .map(Slot::Value)
            .collect();
        self.run(c.func, all)
    }

    /// The profile recorded so far, when profiling is on.
    pub fn profile(&self) -> Option<&Profile> {
        self.profile.as_ref()
    }

    /// Takes the profile recorded so far, leaving an empty one.
    pub fn take_profile(&mut self) -> Option<Profile> {
        let fresh = self
            .profile
            .as_ref()
            .map(|_| Profile::new(self.exe.kernels.iter().map(|k| k.name.clone())));
        std::mem::replace(&mut self.profile, fresh)
    }

    /// The storage allocator's counters.
    pub fn allocator_stats(&self) -> AllocStats {
        self.allocator.stats()
    }

    /// The timeline being recorded, when tracing.
    #[inline]
    fn trace(&mut self) -> Option<&mut Trace> {
        self.profile.as_mut()?.trace.as_mut()
    }

    /// The most frames that were live at once.
    pub fn peak_frames(&self) -> usize {
        self.peak_frames
    }

    /// Runs function `func` on `args` to its return.
    fn run(&mut self, func: u32, args: Vec<Slot>) -> Result<Value> {
        self.frames.clear();
        self.registers.clear();
        let start = Instant::now();
        let mut args = args;
        self.push_frame(func, &mut args, Reg(0))?;
        let result = self.execute();
        if let Some(p) = &mut self.profile {
            p.run_time += start.elapsed();
            if let Some(t) = &mut p.trace {
                t.exit_all();
            }
        }
        // On error, the frames and registers of the failed run go (buffers back to the pool).
        while let Some(slot) = self.registers.pop() {
            release(&self.allocator, slot);
        }
        self.frames.clear();
        result
    }

    /// Pushes a frame for `func` with `args` in its first registers.
    fn push_frame(&mut self, func: u32, args: &mut Vec<Slot>, dst: Reg) -> Result<()> {
        let f = self
            .exe
            .functions
            .get(func as usize)
            .ok_or_else(|| bad(format!("call of missing function {func}")))?;
        if self.frames.len() >= self.options.max_frames {
            return Err(VmError::new(
                VmErrorKind::RecursionLimit,
                format!(
                    "recursion limit exceeded ({} frames; raise it with --max-frames)",
                    self.options.max_frames
                ),
            ));
        }
        if args.len() != f.params.len() {
            return Err(bad(format!(
                "`@{}` takes {}, got {}",
                f.name,
                count(f.params.len()),
                args.len()
            )));
        }
        let base = self.registers.len();
        self.registers.append(args);
        self.registers
            .resize(base + f.register_count as usize, Slot::Empty);
        self.frames.push(Frame {
            func,
            pc: 0,
            base,
            dst,
        });
        if let Some(t) = self.trace() {
            t.enter(func);
        }
        self.peak_frames = self.peak_frames.max(self.frames.len());
        Ok(())
    }

    /// Replaces the current frame by a call of `func` on the arguments in `self.args`.
    fn replace_frame(&mut self, func: u32) -> Result<()> {
        let f = self
            .exe
            .functions
            .get(func as usize)
            .ok_or_else(|| bad(format!("call of missing function {func}")))?;
        if self.args.len() != f.params.len() {
            return Err(bad(format!(
                "`@{}` takes {}, got {}",
                f.name,
                count(f.params.len()),
                self.args.len()
            )));
        }
        let Some(frame) = self.frames.last_mut() else {
            return Err(bad("tail call without a frame"));
        };
        let base = frame.base;
        frame.func = func;
        frame.pc = 0;
        if let Some(t) = self.trace() {
            t.exit();
            t.enter(func);
        }
        self.pop_registers(base);
        self.registers.append(&mut self.args);
        self.registers
            .resize(base + f.register_count as usize, Slot::Empty);
        Ok(())
    }

    /// The dispatch loop: runs until the first frame returns.
    fn execute(&mut self) -> Result<Value> {
        let exe = self.exe;
        loop {
            let Some(&Frame { func, pc, base, .. }) = self.frames.last() else {
                return Err(bad("no frame to run"));
            };
            let Some(function) = exe.functions.get(func as usize) else {
                return Err(bad(format!("missing function {func}")));
            };
            // The frame's instructions run here until one that changes frames (or anything
            // when profiling), which goes through `step` with the frame's `pc` up to date.
            let code = function.code.as_slice();
            let mut pc = pc;
            let outcome = loop {
                let Some(instr) = code.get(pc) else {
                    return Err(bad(format!("`@{}` ran past its end", function.name)));
                };
                let at = pc;
                if self.profile.is_none() {
                    match self.fast(instr, base, &mut pc) {
                        Ok(Flow::Next) => continue,
                        Ok(Flow::Switch) => break Ok(None),
                        Ok(Flow::Slow) => {
                            if let Some(f) = self.frames.last_mut() {
                                f.pc = pc;
                            }
                            break self.step(instr, base, pc);
                        }
                        Err(e) => return Err(e.at(&function.name, function.location(at))),
                    }
                }
                // Profiling: the same, timed.
                let started = Instant::now();
                let outcome = match self.fast_outlined(instr, base, &mut pc) {
                    Ok(Flow::Next) => None,
                    Ok(Flow::Switch) => Some(Ok(None)),
                    Ok(Flow::Slow) => {
                        if let Some(f) = self.frames.last_mut() {
                            f.pc = pc;
                        }
                        Some(self.step(instr, base, pc))
                    }
                    Err(e) => Some(Err(e)),
                };
                if let Some(p) = &mut self.profile {
                    p.record_instruction(instr.kind(), started.elapsed());
                }
                match outcome {
                    None => {}
                    Some(Err(e)) => return Err(e.at(&function.name, function.location(at))),
                    Some(result) => break result,
                }
            };
            match outcome {
                Ok(Some(value)) => return Ok(value),
                Ok(None) => {}
                Err(e) => return Err(e.at(&function.name, function.location(pc))),
            }
        }
    }

    /// [`Vm::fast`] as a function of its own, for the profiling path (so the dispatch loop
    /// holds one copy of it).
    #[inline(never)]
    fn fast_outlined(&mut self, instr: &Instruction, base: usize, pc: &mut usize) -> Result<Flow> {
        self.fast(instr, base, pc)
    }

    /// Executes `instr` if it is one of the frequent instructions, advancing `pc`
    /// ([`Flow::Next`]) or changing frames ([`Flow::Switch`]); [`Flow::Slow`] leaves it to
    /// [`Vm::step`].
    #[inline(always)]
    fn fast(&mut self, instr: &Instruction, base: usize, pc: &mut usize) -> Result<Flow> {
        match instr {
            Instruction::Invoke { func, args, dst } => {
                self.poll()?;
                if let Some(f) = self.frames.last_mut() {
                    f.pc = *pc;
                }
                self.call(base, *func, args, *dst)?;
                return Ok(Flow::Switch);
            }
            Instruction::Ret { result } if self.frames.len() > 1 => {
                self.ret(base, *result)?;
                return Ok(Flow::Switch);
            }
            Instruction::Move { from, dst } => {
                let v = self.reg(base, *from)?.clone();
                self.set(base, *dst, v)?;
            }
            Instruction::LoadConsti { value, dst } => self.set(base, *dst, Slot::Int(*value))?,
            Instruction::KillRegister { reg } => self.set(base, *reg, Slot::Empty)?,
            Instruction::If {
                test,
                target,
                true_offset,
                false_offset,
            } => {
                let equal = self.int(base, *test)? == self.int(base, *target)?;
                let offset = if equal { *true_offset } else { *false_offset };
                *pc = (*pc as i64 + i64::from(offset)) as usize;
                return Ok(Flow::Next);
            }
            Instruction::Goto { offset } => {
                if *offset < 0 {
                    // A loop: a self tail call made a jump.
                    self.poll()?;
                }
                *pc = (*pc as i64 + i64::from(*offset)) as usize;
                return Ok(Flow::Next);
            }
            Instruction::InvokePackedAlloc {
                kernel,
                inputs,
                dst,
            } => match self.invoke_scalar(base, *kernel, inputs)? {
                Some(x) => self.set(base, *dst, Slot::Scalar(x))?,
                None => return Ok(Flow::Slow),
            },
            _ => return Ok(Flow::Slow),
        }
        *pc += 1;
        Ok(Flow::Next)
    }

    /// Counts a function-call or kernel boundary, and stops the run when the options'
    /// interrupt says so.
    #[inline(always)]
    fn poll(&mut self) -> Result<()> {
        match &self.options.interrupt {
            Some(interrupt) if self.poll.stop(interrupt) => Err(VmError::new(
                VmErrorKind::Interrupted,
                "the run was interrupted",
            )),
            _ => Ok(()),
        }
    }

    /// `invoke`: pushes a frame for `func` on the argument registers `args`; its result goes
    /// to `dst` of this frame.
    #[inline]
    fn call(&mut self, base: usize, func: u32, args: &[Reg], dst: Reg) -> Result<()> {
        let mut values = std::mem::take(&mut self.args);
        values.clear();
        let mut read = Ok(());
        for r in args {
            match self.reg(base, *r) {
                Ok(v) => values.push(v.clone()),
                Err(e) => {
                    read = Err(e);
                    break;
                }
            }
        }
        let pushed = read.and_then(|()| self.push_frame(func, &mut values, dst));
        values.clear();
        self.args = values;
        pushed
    }

    /// `ret`: pops the frame (its registers go, buffers back to the pool) and gives `result`
    /// to the caller; `Some(value)` when the first frame returned.
    #[inline]
    fn ret(&mut self, base: usize, result: Reg) -> Result<Option<Value>> {
        let slot = std::mem::take(
            self.registers
                .get_mut(base + result.0 as usize)
                .ok_or_else(|| bad(format!("register {result} outside the frame")))?,
        );
        let Some(frame) = self.frames.pop() else {
            return Err(bad("return without a frame"));
        };
        if let Some(t) = self.trace() {
            t.exit();
        }
        self.pop_registers(frame.base);
        let Some(caller) = self.frames.last() else {
            return Ok(Some(slot_value(slot)?));
        };
        let caller_base = caller.base;
        self.set(caller_base, frame.dst, slot)?;
        self.advance();
        Ok(None)
    }

    /// Drops the registers from `base` on, giving pooled storage back.
    #[inline]
    fn pop_registers(&mut self, base: usize) {
        let base = base.min(self.registers.len());
        for slot in self.registers.drain(base..) {
            if let Slot::Value(_) = slot {
                release(&self.allocator, slot);
            }
        }
    }

    /// Register `r` of the frame whose window starts at `base`.
    #[inline]
    fn reg(&self, base: usize, r: Reg) -> Result<&Slot> {
        self.registers
            .get(base + r.0 as usize)
            .ok_or_else(|| bad(format!("register {r} outside the frame")))
    }

    #[inline]
    fn set(&mut self, base: usize, r: Reg, value: Slot) -> Result<()> {
        let slot = self
            .registers
            .get_mut(base + r.0 as usize)
            .ok_or_else(|| bad(format!("register {r} outside the frame")))?;
        let old = std::mem::replace(slot, value);
        release(&self.allocator, old);
        Ok(())
    }

    /// Empties register `r`, returning what it held.
    fn take(&mut self, base: usize, r: Reg) -> Result<Slot> {
        let slot = self
            .registers
            .get_mut(base + r.0 as usize)
            .ok_or_else(|| bad(format!("register {r} outside the frame")))?;
        Ok(std::mem::take(slot))
    }

    fn value(&self, base: usize, r: Reg) -> Result<Value> {
        match self.reg(base, r)? {
            Slot::Value(v) => Ok(v.clone()),
            Slot::Int(i) => int_scalar(*i),
            Slot::Scalar(x) => scalar_tensor(*x),
            Slot::Empty => Err(bad(format!("register {r} is empty (killed or never set)"))),
        }
    }

    fn tensor(&self, base: usize, r: Reg) -> Result<&Arc<NDArray>> {
        match self.reg(base, r)? {
            Slot::Value(Value::Tensor(t)) => Ok(t),
            other => Err(bad(format!(
                "register {r} holds {}, not a tensor",
                slot_kind(other)
            ))),
        }
    }

    /// An integer operand: an unboxed integer or an integer/boolean scalar tensor.
    #[inline]
    fn int(&self, base: usize, r: Reg) -> Result<i64> {
        match self.reg(base, r)? {
            Slot::Int(i) => Ok(*i),
            Slot::Scalar(x) => Ok(x.as_i64()),
            Slot::Value(Value::Tensor(t)) if t.num_elements() == 1 => {
                let v = relay_runtime::elements::read_i128(t.dtype(), t.as_bytes());
                i64::try_from(v).map_err(|_| bad(format!("register {r}: {v} does not fit int64")))
            }
            other => Err(bad(format!(
                "register {r} holds {}, not an integer scalar",
                slot_kind(other)
            ))),
        }
    }

    fn advance(&mut self) {
        if let Some(f) = self.frames.last_mut() {
            f.pc += 1;
        }
    }

    /// Executes one instruction; `Some(result)` when the first frame returned.
    fn step(&mut self, instr: &'e Instruction, base: usize, pc: usize) -> Result<Option<Value>> {
        let _ = pc;
        if matches!(
            instr,
            Instruction::InvokeClosure { .. }
                | Instruction::TailInvoke { .. }
                | Instruction::TailInvokeClosure { .. }
                | Instruction::InvokePacked { .. }
                | Instruction::InvokePackedAlloc { .. }
                | Instruction::InvokePackedUpdate { .. }
        ) {
            self.poll()?;
        }
        match instr {
            Instruction::Ret { result } => return self.ret(base, *result),
            // Always executed by `fast`.
            Instruction::Move { .. }
            | Instruction::LoadConsti { .. }
            | Instruction::KillRegister { .. }
            | Instruction::If { .. }
            | Instruction::Goto { .. }
            | Instruction::Invoke { .. } => {
                return Err(bad(format!("`{instr}` reached the general step")));
            }
            Instruction::Fatal { message } => {
                return Err(VmError::new(VmErrorKind::NoMatch, message.clone()));
            }
            Instruction::InvokeClosure { closure, args, dst } => {
                let mut all = std::mem::take(&mut self.args);
                let pushed = self
                    .closure_args(base, *closure, args, &mut all)
                    .and_then(|func| self.push_frame(func, &mut all, *dst));
                all.clear();
                self.args = all;
                pushed?;
            }
            Instruction::TailInvoke { func, args } => {
                self.args.clear();
                for r in args {
                    let v = self.reg(base, *r)?.clone();
                    self.args.push(v);
                }
                self.replace_frame(*func)?;
            }
            Instruction::TailInvokeClosure { closure, args } => {
                let mut all = std::mem::take(&mut self.args);
                let func = self.closure_args(base, *closure, args, &mut all);
                self.args = all;
                self.replace_frame(func?)?;
            }
            Instruction::InvokePacked {
                kernel,
                inputs,
                outputs,
            } => {
                self.invoke_packed(base, *kernel, inputs, outputs)?;
                self.advance();
            }
            Instruction::InvokePackedAlloc {
                kernel,
                inputs,
                dst,
            }
            | Instruction::InvokePackedUpdate {
                kernel,
                inputs,
                dst,
            } => {
                // `fast` ran an `invoke_packed_alloc` already when the kernel and its inputs
                // are scalars.
                let update = matches!(instr, Instruction::InvokePackedUpdate { .. });
                let result = self.invoke_packed_alloc(base, *kernel, inputs, update)?;
                self.set(base, *dst, Slot::Value(result))?;
                self.advance();
            }
            Instruction::AllocTensor {
                storage,
                offset,
                shape,
                dtype,
                dst,
            } => {
                let t = self.alloc_tensor(base, *storage, *offset, shape, *dtype)?;
                self.set(base, *dst, Slot::Value(Value::Tensor(Arc::new(t))))?;
                self.advance();
            }
            Instruction::AllocTensorReg {
                storage,
                offset,
                shape,
                dtype,
                assert_shape,
                dst,
            } => {
                let dims = shape_of_tensor(self.tensor(base, *shape)?)?;
                if let Some(want) = assert_shape {
                    let fits = want.len() == dims.len()
                        && want.iter().zip(&dims).all(|(w, d)| *w < 0 || w == d);
                    if !fits {
                        return Err(VmError::new(
                            VmErrorKind::Alloc,
                            format!(
                                "`memory.alloc_tensor`: the shape {dims:?} differs from `assert_shape` {want:?}"
                            ),
                        ));
                    }
                }
                let t = self.alloc_tensor(base, *storage, *offset, &dims, *dtype)?;
                self.set(base, *dst, Slot::Value(Value::Tensor(Arc::new(t))))?;
                self.advance();
            }
            Instruction::AllocStorage {
                size,
                alignment,
                dst,
                ..
            } => {
                let size = self.int(base, *size)?;
                let size = usize::try_from(size).map_err(|_| {
                    VmError::new(
                        VmErrorKind::Alloc,
                        format!("storage size {size} is negative"),
                    )
                })?;
                let alignment = usize::try_from(*alignment).unwrap_or(usize::MAX);
                let storage = self
                    .allocator
                    .alloc(size, alignment)
                    .map_err(|e| VmError::new(VmErrorKind::Alloc, e.to_string()))?;
                self.set(base, *dst, Slot::Value(Value::Storage(storage)))?;
                self.advance();
            }
            Instruction::AllocAdt { tag, fields, dst } => {
                let fields = self.values(base, fields)?;
                let v = Value::Adt(Arc::new(AdtValue { tag: *tag, fields }));
                self.set(base, *dst, Slot::Value(v))?;
                self.advance();
            }
            Instruction::AllocTuple { fields, dst } => {
                let fields = self.values(base, fields)?;
                self.set(base, *dst, Slot::Value(Value::Tuple(fields.into())))?;
                self.advance();
            }
            Instruction::AllocClosure {
                func,
                captured,
                dst,
            } => {
                let captured = self.values(base, captured)?;
                let c = VmClosure {
                    func: *func,
                    captured,
                };
                self.set(base, *dst, Slot::Value(Value::Closure(Arc::new(c))))?;
                self.advance();
            }
            Instruction::GetField { object, index, dst } => {
                let field = match self.reg(base, *object)? {
                    Slot::Value(Value::Tuple(fields)) => fields.get(*index as usize).cloned(),
                    Slot::Value(Value::Adt(adt)) => adt.fields.get(*index as usize).cloned(),
                    other => {
                        return Err(bad(format!(
                            "get_field of {}, not a tuple or constructed value",
                            slot_kind(other)
                        )));
                    }
                };
                let field = field.ok_or_else(|| bad(format!("field {index} out of range")))?;
                self.set(base, *dst, Slot::Value(field))?;
                self.advance();
            }
            Instruction::GetTag { object, dst } => {
                let tag = match self.reg(base, *object)? {
                    Slot::Value(Value::Adt(adt)) => adt.tag,
                    other => {
                        return Err(bad(format!(
                            "get_tag of {}, not a constructed value",
                            slot_kind(other)
                        )));
                    }
                };
                self.set(base, *dst, Slot::Int(i64::from(tag)))?;
                self.advance();
            }
            Instruction::LoadConst { index, dst } => {
                let c = self
                    .exe
                    .constants
                    .get(*index as usize)
                    .ok_or_else(|| bad(format!("constant {index} out of range")))?;
                // A scalar constant is loaded unboxed (scalar kernels read it directly).
                let slot = match c.shape().is_empty().then(|| Scalar::of_tensor(c)).flatten() {
                    Some(x) => Slot::Scalar(x),
                    None => Slot::Value(Value::Tensor(c.clone())),
                };
                self.set(base, *dst, slot)?;
                self.advance();
            }
            Instruction::ShapeOf { tensor, dst } => {
                let t = self.tensor(base, *tensor)?;
                let shape: Vec<i128> = t.shape().iter().map(|&d| i128::from(d)).collect();
                let s =
                    NDArray::from_i128_slice(relay_ir::DType::I64, &[shape.len() as i64], &shape)
                        .map_err(|e| VmError::new(VmErrorKind::Alloc, e.to_string()))?;
                self.set(base, *dst, Slot::Value(Value::Tensor(Arc::new(s))))?;
                self.advance();
            }
            Instruction::ReshapeTensor { tensor, shape, dst } => {
                // An unboxed scalar (a scalar kernel's result) is boxed first.
                let Value::Tensor(t) = self.value(base, *tensor)? else {
                    return Err(bad(format!("register {tensor} holds no tensor to reshape")));
                };
                let dims = view_shape(self.tensor(base, *shape)?, t.num_elements())?;
                let reshaped = reshape(&self.allocator, &t, &dims)?;
                self.set(base, *dst, Slot::Value(Value::Tensor(Arc::new(reshaped))))?;
                self.advance();
            }
            Instruction::AllocRef { value, dst } => {
                let v = self.value(base, *value)?;
                self.set(base, *dst, Slot::Value(Value::Ref(Arc::new(Mutex::new(v)))))?;
                self.advance();
            }
            Instruction::RefRead { reference, dst } => {
                let v = match self.reg(base, *reference)? {
                    Slot::Value(Value::Ref(cell)) => {
                        cell.lock().unwrap_or_else(|e| e.into_inner()).clone()
                    }
                    other => {
                        return Err(bad(format!(
                            "ref_read of {}, not a reference",
                            slot_kind(other)
                        )));
                    }
                };
                self.set(base, *dst, Slot::Value(v))?;
                self.advance();
            }
            Instruction::RefWrite {
                reference,
                value,
                dst,
            } => {
                let v = self.value(base, *value)?;
                let old = match self.reg(base, *reference)? {
                    Slot::Value(Value::Ref(cell)) => {
                        std::mem::replace(&mut *cell.lock().unwrap_or_else(|e| e.into_inner()), v)
                    }
                    other => {
                        return Err(bad(format!(
                            "ref_write of {}, not a reference",
                            slot_kind(other)
                        )));
                    }
                };
                drop(old);
                self.set(base, *dst, Slot::Value(Value::Tuple(Arc::from(Vec::new()))))?;
                self.advance();
            }
        }
        Ok(None)
    }

    /// The values of `regs`.
    fn values(&self, base: usize, regs: &[Reg]) -> Result<Vec<Value>> {
        regs.iter().map(|r| self.value(base, *r)).collect()
    }

    /// A closure call's function; its arguments (captured values first) go to `all`.
    fn closure_args(
        &self,
        base: usize,
        closure: Reg,
        args: &[Reg],
        all: &mut Vec<Slot>,
    ) -> Result<u32> {
        let c = match self.reg(base, closure)? {
            Slot::Value(Value::Closure(c)) => c
                .downcast_ref::<VmClosure>()
                .ok_or_else(|| bad("called a closure the VM did not make"))?,
            other => {
                return Err(bad(format!("called {}, not a closure", slot_kind(other))));
            }
        };
        all.clear();
        all.extend(c.captured.iter().cloned().map(Slot::Value));
        for r in args {
            all.push(self.reg(base, *r)?.clone());
        }
        Ok(c.func)
    }

    /// A tensor view of `shape` and `dtype` in a storage register at an offset register.
    fn alloc_tensor(
        &self,
        base: usize,
        storage: Reg,
        offset: Reg,
        shape: &[i64],
        dtype: relay_ir::DType,
    ) -> Result<NDArray> {
        let storage = match self.reg(base, storage)? {
            Slot::Value(Value::Storage(s)) => s.clone(),
            other => {
                return Err(bad(format!(
                    "alloc_tensor in {}, not a storage",
                    slot_kind(other)
                )));
            }
        };
        let offset = self.int(base, offset)?;
        let offset = usize::try_from(offset)
            .map_err(|_| VmError::new(VmErrorKind::Alloc, format!("negative offset {offset}")))?;
        // SAFETY: the VM runs on one thread and accesses views only through kernel calls,
        // which read their inputs and write their outputs; the memory plan never gives a
        // kernel's output bytes that one of its live inputs uses.
        unsafe { NDArray::view(storage, offset, dtype, shape) }
            .map_err(|e| VmError::new(VmErrorKind::Alloc, e.to_string()))
    }

    /// The tensors a kernel reads: tensors as they are, tuples flattened.
    fn flatten_inputs(&self, base: usize, regs: &[Reg], out: &mut Vec<Arc<NDArray>>) -> Result<()> {
        for r in regs {
            match self.reg(base, *r)? {
                Slot::Value(v) => flatten(v, out)?,
                Slot::Int(i) => match int_scalar(*i)? {
                    Value::Tensor(t) => out.push(t),
                    _ => return Err(bad("an integer that is not a tensor")),
                },
                Slot::Scalar(x) => match scalar_tensor(*x)? {
                    Value::Tensor(t) => out.push(t),
                    _ => return Err(bad("a scalar that is not a tensor")),
                },
                Slot::Empty => {
                    return Err(bad(format!(
                        "kernel input {r} is empty (killed or never set)"
                    )));
                }
            }
        }
        Ok(())
    }

    /// `invoke_packed`: calls the kernel on the inputs, writing the outputs.
    fn invoke_packed(
        &mut self,
        base: usize,
        kernel: u32,
        inputs: &[Reg],
        outputs: &[Reg],
    ) -> Result<()> {
        // The argument list is a buffer kept across calls: no allocation per kernel call.
        let mut tensors = std::mem::take(&mut self.tensors);
        tensors.clear();
        let result = (|| {
            self.flatten_inputs(base, inputs, &mut tensors)?;
            let num_inputs = tensors.len();
            self.flatten_inputs(base, outputs, &mut tensors)?;
            let func = self.kernel(kernel, &tensors[..num_inputs])?;
            let moved = self.realign(&mut tensors, num_inputs)?;
            self.call_kernel(kernel, &func, &tensors)?;
            for (i, original) in moved {
                // SAFETY: the kernel has finished; the VM holds no slice of the output's
                // bytes, and this thread is the only one running the program.
                unsafe { original.write_view(tensors[i].as_bytes()) }
                    .map_err(|e| VmError::new(VmErrorKind::Alloc, e.to_string()))?;
            }
            Ok(())
        })();
        tensors.clear();
        self.tensors = tensors;
        result
    }

    /// Kernels require 64-byte aligned data. A view a program placed at an unaligned offset
    /// is passed as an aligned copy: an input is copied before the call; an output is
    /// replaced by a fresh buffer whose contents are copied into the view after the call
    /// (the returned list: argument position and the original view).
    fn realign(
        &self,
        tensors: &mut [Arc<NDArray>],
        num_inputs: usize,
    ) -> Result<Vec<(usize, Arc<NDArray>)>> {
        let mut moved = Vec::new();
        for (i, t) in tensors.iter_mut().enumerate() {
            if t.num_elements() == 0
                || (t.as_bytes().as_ptr() as usize).is_multiple_of(relay_runtime::ALIGNMENT)
            {
                continue;
            }
            let alloc =
                |e: relay_runtime::NDArrayError| VmError::new(VmErrorKind::Alloc, e.to_string());
            if i < num_inputs {
                *t = Arc::new(
                    NDArray::from_bytes(t.dtype(), t.shape(), t.as_bytes()).map_err(alloc)?,
                );
            } else {
                let storage = self
                    .allocator
                    .alloc(t.as_bytes().len(), relay_runtime::ALIGNMENT)
                    .map_err(|e| VmError::new(VmErrorKind::Alloc, e.to_string()))?;
                // SAFETY: a fresh storage only this view uses.
                let fresh =
                    unsafe { NDArray::view(storage, 0, t.dtype(), t.shape()) }.map_err(alloc)?;
                moved.push((i, std::mem::replace(t, Arc::new(fresh))));
            }
        }
        Ok(moved)
    }

    /// `invoke_packed_alloc` of a scalar kernel on scalar inputs: evaluated unboxed. `None`
    /// when the kernel or an input is not scalar (the packed call is made instead).
    #[inline(always)]
    fn invoke_scalar(
        &mut self,
        base: usize,
        kernel: u32,
        inputs: &[Reg],
    ) -> Result<Option<Scalar>> {
        let Some(k) = self
            .exe
            .kernels
            .get(kernel as usize)
            .and_then(|k| k.scalar.as_ref())
        else {
            return Ok(None);
        };
        const MAX_ARGS: usize = 4;
        let mut args = [Scalar::int(relay_ir::DType::BOOL, 0); MAX_ARGS];
        if inputs.len() > MAX_ARGS || inputs.len() != k.params() {
            return Ok(None);
        }
        for (slot, r) in args.iter_mut().zip(inputs) {
            *slot = match self.reg(base, *r)? {
                Slot::Scalar(x) => *x,
                Slot::Value(Value::Tensor(t)) => match Scalar::of_tensor(t) {
                    Some(x) => x,
                    None => return Ok(None),
                },
                _ => return Ok(None),
            };
        }
        let started = self.profile.is_some().then(Instant::now);
        let result = k.eval(&args[..inputs.len()]);
        if let (Some(t), Some(p)) = (started, &mut self.profile) {
            p.record_kernel(kernel as usize, t, || "scalar (unboxed)".to_owned());
        }
        result.map(Some).map_err(|e| {
            let name = self
                .exe
                .kernels
                .get(kernel as usize)
                .map_or("?", |k| k.name.as_str());
            VmError::new(VmErrorKind::Kernel, format!("kernel {name}: {}", e.0))
        })
    }

    /// `invoke_packed_alloc`: allocates the kernel's outputs, then calls it. With `update`
    /// (`invoke_packed_update`), the first input's register is emptied first, and its tensor is
    /// the output when the kernel may write over it and nothing else holds its buffer.
    fn invoke_packed_alloc(
        &mut self,
        base: usize,
        kernel: u32,
        inputs: &[Reg],
        update: bool,
    ) -> Result<Value> {
        let mut tensors = Vec::with_capacity(inputs.len() + 1);
        self.flatten_inputs(base, inputs, &mut tensors)?;
        let num_inputs = tensors.len();
        let func = self.kernel(kernel, &tensors)?;
        if update
            && func.updates_input() == Some(0)
            && let Some(&first) = inputs.first()
        {
            // The register's reference goes (the input is dead after the call), so the call's
            // is the only one when nothing else holds the tensor.
            drop(self.take(base, first)?);
            if let Some(data) = tensors.first().filter(|t| writable_alone(t)) {
                let out = data.clone();
                tensors.push(out);
                self.call_kernel(kernel, &func, &tensors)?;
                return tensors
                    .pop()
                    .map(Value::Tensor)
                    .ok_or_else(|| bad("kernel without outputs"));
            }
        }
        // A generic kernel's outputs are shaped by its shape function; a specialized or static
        // one's are its spec's (nothing to allocate for them here).
        let shaped = match func.is_generic() {
            true => {
                let shapes: Vec<&[i64]> = tensors.iter().map(|t| t.shape()).collect();
                let bytes: Vec<&[u8]> = match func.reads_values() {
                    true => tensors.iter().map(|t| t.as_bytes()).collect(),
                    false => Vec::new(),
                };
                let out = func.output_shapes(&shapes, &bytes);
                Some(out.map_err(|e| VmError::new(VmErrorKind::Kernel, e.to_string()))?)
            }
            false => None,
        };
        if let (Some(source), Some([shape])) = (func.view_source(), shaped.as_deref()) {
            let data = tensors
                .get(source)
                .ok_or_else(|| bad(format!("kernel {kernel}: no argument {source} to view")))?;
            return Ok(Value::Tensor(Arc::new(reshape(
                &self.allocator,
                data,
                shape,
            )?)));
        }
        let outputs = &func.spec().args[func.num_inputs().min(func.spec().args.len())..];
        for (i, out) in outputs.iter().enumerate() {
            let shape = match &shaped {
                Some(shapes) => shapes
                    .get(i)
                    .ok_or_else(|| bad(format!("kernel {kernel}: no shape for output {i}")))?,
                None => &out.shape,
            };
            let dtype = relay_kernel::abi::dtype_of(out.dtype)
                .ok_or_else(|| bad(format!("kernel output of unknown dtype {}", out.name)))?;
            let size = NDArray::byte_len(dtype, shape)
                .map_err(|e| VmError::new(VmErrorKind::Alloc, e.to_string()))?;
            let storage = self
                .allocator
                .alloc(size, relay_runtime::ALIGNMENT)
                .map_err(|e| VmError::new(VmErrorKind::Alloc, e.to_string()))?;
            // SAFETY: a fresh storage, only this view uses it.
            let t = unsafe { NDArray::view(storage, 0, dtype, shape) }
                .map_err(|e| VmError::new(VmErrorKind::Alloc, e.to_string()))?;
            tensors.push(Arc::new(t));
        }
        self.call_kernel(kernel, &func, &tensors)?;
        let outputs: Vec<Value> = tensors.drain(num_inputs..).map(Value::Tensor).collect();
        let result_type = self.exe.kernels.get(kernel as usize).and_then(|k| {
            let f = k.function()?;
            f.body.checked_type().or(f.ret_type.as_ref()).cloned()
        });
        let mut outputs = outputs.into_iter();
        match result_type {
            Some(ty) if !matches!(ty.kind(), TypeKind::Tensor { .. }) => rebuild(&ty, &mut outputs)
                .ok_or_else(|| bad("kernel outputs do not fit its result type")),
            _ => outputs.next().ok_or_else(|| bad("kernel without outputs")),
        }
    }

    /// The compiled kernel `kernel` for these input tensors.
    fn kernel(&self, kernel: u32, inputs: &[Arc<NDArray>]) -> Result<Arc<PackedFunc>> {
        let entry = self
            .exe
            .kernels
            .get(kernel as usize)
            .ok_or_else(|| bad(format!("kernel {kernel} out of range")))?;
        let result = entry.get_for(&self.exe.cache, inputs);
        result.map_err(|e| VmError::new(VmErrorKind::Kernel, format!("kernel {}: {e}", entry.name)))
    }

    /// Calls `func` (kernel `kernel`) on `tensors` (inputs, then outputs).
    fn call_kernel(
        &mut self,
        kernel: u32,
        func: &PackedFunc,
        tensors: &[Arc<NDArray>],
    ) -> Result<()> {
        const STACK_ARGS: usize = 16;
        let mut on_stack: [&NDArray; STACK_ARGS] = match tensors.first() {
            Some(t) => [&**t; STACK_ARGS],
            None => return Err(bad("a kernel call without arguments")),
        };
        let on_heap: Vec<&NDArray>;
        let refs: &[&NDArray] = if tensors.len() <= STACK_ARGS {
            for (r, t) in on_stack.iter_mut().zip(tensors) {
                *r = t;
            }
            &on_stack[..tensors.len()]
        } else {
            on_heap = tensors.iter().map(|t| &**t).collect();
            &on_heap
        };
        let started = self.profile.is_some().then(Instant::now);
        // SAFETY: the outputs are views into pooled storage that no input overlaps while the
        // kernel runs (the memory plan reuses storage only between disjoint lifetimes), but
        // for an updating kernel's output, which is exactly its first input, as the kernel
        // allows (`PackedFunc::updates_input`); the VM holds no slice of their bytes during
        // the call.
        let result = unsafe { func.call_views_with(&mut self.context, refs) };
        if let (Some(t), Some(p)) = (started, &mut self.profile) {
            p.record_kernel(kernel as usize, t, || shapes(tensors, func.num_inputs()));
            if let (Some(trace), Some(pool)) = (&mut p.trace, self.context.pool()) {
                for (thread, joined, left) in pool.take_spans() {
                    trace.record(SpanKind::Kernel(kernel), thread, joined, left);
                }
            }
        }
        result.map_err(|e| VmError::new(VmErrorKind::Kernel, e.to_string()))
    }
}

/// `1 argument`, `2 arguments`.
fn count(n: usize) -> String {
    if n == 1 {
        "1 argument".to_owned()
    } else {
        format!("{n} arguments")
    }
}

/// `[1, 784], [784, 512] -> [1, 512]`.
fn shapes(tensors: &[Arc<NDArray>], inputs: usize) -> String {
    let list = |ts: &[Arc<NDArray>]| {
        ts.iter()
            .map(|t| format!("{:?}", t.shape()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let inputs = inputs.min(tensors.len());
    format!(
        "{} -> {}",
        list(&tensors[..inputs]),
        list(&tensors[inputs..])
    )
}

/// Whether `t` is the only holder of its bytes and may be written: no other `Arc` of it (a
/// register, tuple, reference or caller), no other view of its storage, and memory of its own
/// (not an array someone else allocated).
fn writable_alone(t: &Arc<NDArray>) -> bool {
    Arc::strong_count(t) == 1
        && !t.is_foreign()
        && t.storage().is_none_or(|(s, _)| Arc::strong_count(s) == 1)
}

/// Gives a dropped register's storage back to the pool when nothing else holds it.
#[inline]
fn release(allocator: &PooledAllocator, slot: Slot) {
    match slot {
        Slot::Value(Value::Tensor(t)) => {
            if let Ok(array) = Arc::try_unwrap(t)
                && let Some(storage) = array.into_storage()
                && Arc::strong_count(&storage) == 1
            {
                allocator.recycle(storage);
            }
        }
        Slot::Value(Value::Storage(s)) if Arc::strong_count(&s) == 1 => allocator.recycle(s),
        Slot::Value(Value::Tuple(fields)) if Arc::strong_count(&fields) == 1 => {
            release_tuple(allocator, fields)
        }
        _ => {}
    }
}

/// Gives the storages of a dropped tuple's tensors back to the pool when nothing else holds
/// them (a kernel's tuple of outputs, `split`'s for instance, is killed as a whole).
fn release_tuple(allocator: &PooledAllocator, fields: Arc<[Value]>) {
    const MAX: usize = 16;
    let mut storages: [Option<Arc<relay_runtime::Storage>>; MAX] = Default::default();
    let mut count = 0;
    for field in fields.iter() {
        let Value::Tensor(t) = field else { continue };
        let Some((storage, _)) = t.storage() else {
            continue;
        };
        let seen = storages[..count]
            .iter()
            .flatten()
            .any(|s| Arc::ptr_eq(s, storage));
        if Arc::strong_count(t) == 1 && !seen && count < MAX {
            storages[count] = Some(storage.clone());
            count += 1;
        }
    }
    drop(fields);
    for storage in storages.into_iter().flatten() {
        if Arc::strong_count(&storage) == 1 {
            allocator.recycle(storage);
        }
    }
}

/// The value of a slot leaving the VM.
fn slot_value(slot: Slot) -> Result<Value> {
    match slot {
        Slot::Value(v) => Ok(v),
        Slot::Int(i) => int_scalar(i),
        Slot::Scalar(x) => scalar_tensor(x),
        Slot::Empty => Err(bad("returned an empty register")),
    }
}

/// The rank-0 tensor of an unboxed scalar.
fn scalar_tensor(x: Scalar) -> Result<Value> {
    x.to_tensor()
        .map(Value::tensor)
        .map_err(|e| bad(e.to_string()))
}

/// An `int64` scalar tensor.
fn int_scalar(i: i64) -> Result<Value> {
    NDArray::scalar_i128(relay_ir::DType::I64, i128::from(i))
        .map(Value::tensor)
        .map_err(|e| bad(e.to_string()))
}

fn slot_kind(slot: &Slot) -> &'static str {
    match slot {
        Slot::Empty => "nothing (a killed or unset register)",
        Slot::Int(_) => "an integer",
        Slot::Scalar(_) => "a scalar",
        Slot::Value(v) => v.kind_name(),
    }
}

/// The tensor leaves of a value, depth first.
fn flatten(v: &Value, out: &mut Vec<Arc<NDArray>>) -> Result<()> {
    match v {
        Value::Tensor(t) => out.push(t.clone()),
        Value::Tuple(fields) => {
            for f in fields.iter() {
                flatten(f, out)?;
            }
        }
        other => {
            return Err(bad(format!(
                "a kernel input is {}, not a tensor or tuple of tensors",
                other.kind_name()
            )));
        }
    }
    Ok(())
}

/// A value of type `ty` from the tensor leaves `outputs` (depth first).
fn rebuild(ty: &Type, outputs: &mut impl Iterator<Item = Value>) -> Option<Value> {
    match ty.kind() {
        TypeKind::Tuple(fields) => {
            let values: Option<Vec<Value>> = fields.iter().map(|f| rebuild(f, outputs)).collect();
            Some(Value::Tuple(values?.into()))
        }
        _ => outputs.next(),
    }
}

/// The dimensions in a 1-D integer tensor.
fn shape_of_tensor(t: &NDArray) -> Result<Vec<i64>> {
    if t.ndim() != 1 || !t.dtype().is_int() {
        return Err(bad(format!(
            "a shape must be a 1-D integer tensor, got a {:?} {} tensor",
            t.shape(),
            t.dtype()
        )));
    }
    t.to_i128_vec()
        .into_iter()
        .map(|d| {
            i64::try_from(d)
                .ok()
                .filter(|d| *d >= 0)
                .ok_or_else(|| bad(format!("dimension {d} is not a valid extent")))
        })
        .collect()
}

/// The shape a `reshape_tensor` of `count` elements gives: the dimensions in the 1-D integer
/// tensor `t`, one of which may be `-1`, inferred from the element count (numpy's rule). A
/// shape that does not fit, like a reshape kernel's bad argument, is a `Kernel` error.
fn view_shape(t: &NDArray, count: usize) -> Result<Vec<i64>> {
    if t.ndim() != 1 || !t.dtype().is_int() {
        return Err(bad(format!(
            "a shape must be a 1-D integer tensor, got a {:?} {} tensor",
            t.shape(),
            t.dtype()
        )));
    }
    let values = t.to_i128_vec();
    let cannot = |why: &str| {
        VmError::new(
            VmErrorKind::Kernel,
            format!("cannot reshape {count} elements to {values:?}{why}"),
        )
    };
    let mut inferred = None;
    let mut dims = Vec::with_capacity(values.len());
    for (i, &d) in values.iter().enumerate() {
        match i64::try_from(d) {
            Ok(-1) if inferred.is_none() => {
                inferred = Some(i);
                dims.push(1);
            }
            Ok(-1) => return Err(cannot(": more than one -1")),
            Ok(d) if d >= 0 => dims.push(d),
            _ => return Err(cannot(&format!(": {d} is not a valid extent"))),
        }
    }
    if let Some(i) = inferred {
        let known = dims
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
            .filter(|&known| known > 0 && count.is_multiple_of(known))
            .ok_or_else(|| cannot(""))?;
        dims[i] = i64::try_from(count / known).map_err(|_| cannot(""))?;
    }
    Ok(dims)
}

/// `t` with the shape `dims` (the same element count, else an error): a view of the same
/// storage, or, for an array the VM does not own (an argument, a constant), a copy in storage
/// from `allocator`.
fn reshape(allocator: &PooledAllocator, t: &NDArray, dims: &[i64]) -> Result<NDArray> {
    let count = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?));
    if count != Some(t.num_elements()) {
        return Err(VmError::new(
            VmErrorKind::Kernel,
            format!(
                "cannot reshape {:?} ({} elements) to {dims:?}",
                t.shape(),
                t.num_elements()
            ),
        ));
    }
    let result = match t.storage() {
        // SAFETY: the new view covers exactly the bytes of `t`, which is immutable from here
        // on like every tensor the VM has finished writing.
        Some((storage, offset)) => unsafe {
            NDArray::view(storage.clone(), offset, t.dtype(), dims)
        },
        None => {
            let storage = allocator
                .alloc(t.as_bytes().len(), relay_runtime::ALIGNMENT)
                .map_err(|e| VmError::new(VmErrorKind::Alloc, e.to_string()))?;
            // SAFETY: a fresh storage, only this view uses it; `t`'s bytes are not in it.
            unsafe {
                NDArray::view(storage, 0, t.dtype(), dims)
                    .and_then(|view| view.write_view(t.as_bytes()).map(|()| view))
            }
        }
    };
    result.map_err(|e| {
        VmError::new(
            VmErrorKind::Kernel,
            format!("cannot reshape {:?} to {dims:?}: {e}", t.shape()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use relay_ir::DType;

    fn shape(dims: &[i128]) -> NDArray {
        NDArray::from_i128_slice(DType::I64, &[dims.len() as i64], dims).expect("a shape")
    }

    #[test]
    fn a_single_minus_one_is_inferred_from_the_element_count() {
        assert_eq!(
            view_shape(&shape(&[-1, 2, 3]), 24).ok(),
            Some(vec![4, 2, 3])
        );
        assert_eq!(view_shape(&shape(&[1, -1]), 0).ok(), Some(vec![1, 0]));
        assert_eq!(view_shape(&shape(&[-1]), 7).ok(), Some(vec![7]));
        assert_eq!(view_shape(&shape(&[2, 3]), 6).ok(), Some(vec![2, 3]));
        assert_eq!(view_shape(&shape(&[]), 1).ok(), Some(vec![]));
    }

    #[test]
    fn bad_shapes_are_typed_errors() {
        let kind = |dims: &[i128], count: usize| {
            let err = view_shape(&shape(dims), count).expect_err("rejected");
            (err.kind, err.to_string())
        };
        let (k, text) = kind(&[-1, -1], 6);
        assert_eq!(k, VmErrorKind::Kernel, "{text}");
        assert!(text.contains("more than one -1"), "{text}");
        let (k, text) = kind(&[-1, 4], 6);
        assert_eq!(k, VmErrorKind::Kernel, "{text}");
        assert!(text.contains("cannot reshape 6 elements"), "{text}");
        // A zero beside the -1 leaves it undetermined.
        assert_eq!(kind(&[-1, 0], 0).0, VmErrorKind::Kernel);
        let (k, text) = kind(&[-2, 3], 6);
        assert_eq!(k, VmErrorKind::Kernel, "{text}");
        assert!(text.contains("-2 is not a valid extent"), "{text}");
        let floats = NDArray::from_f64_slice(DType::F32, &[2], &[2.0, 3.0]).expect("a tensor");
        assert_eq!(
            view_shape(&floats, 6).expect_err("rejected").kind,
            VmErrorKind::BadValue
        );
    }

    #[test]
    fn a_reshape_keeps_the_element_count() {
        let t = NDArray::from_f64_slice(DType::F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
            .expect("a tensor");
        let pool = PooledAllocator::new(1 << 20);
        // An owned array is copied into pooled storage.
        let r = reshape(&pool, &t, &[3, 2]).expect("reshaped");
        assert_eq!(r.shape(), [3, 2]);
        assert_eq!(r.to_f64_vec(), t.to_f64_vec());
        assert!(r.is_view());
        assert_eq!(pool.stats().requests, 1);
        let err = reshape(&pool, &t, &[2, 2]).expect_err("4 elements are not 6");
        assert_eq!(err.kind, VmErrorKind::Kernel, "{err}");
        // A view of pooled storage stays a view of the same bytes.
        let storage = Arc::new(relay_runtime::Storage::new(24, 64).expect("a storage"));
        // SAFETY: nothing writes the storage while the views live.
        let view = unsafe { NDArray::view(storage.clone(), 0, DType::F32, &[6]) }.expect("a view");
        let r = reshape(&pool, &view, &[1, 6]).expect("reshaped");
        assert!(r.is_view());
        assert!(r.storage().is_some_and(|(s, _)| Arc::ptr_eq(s, &storage)));
        assert_eq!(pool.stats().requests, 1, "a view allocates nothing");
        assert!(reshape(&pool, &view, &[7]).is_err());
    }
}
