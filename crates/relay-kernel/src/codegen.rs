//! Code generation: a loop nest ([`LoopFunc`]) → Cranelift IR → machine code in a JIT module,
//! behind TVM's packed C ABI ([`abi`](crate::abi)).
//!
//! Each kernel becomes two functions:
//! - the **body**, `extern "C" fn(buffers: *const *mut u8) -> i32`: the loop nest over the
//!   buffers' first-element addresses (inputs first, then outputs); it returns 0, or one of the
//!   run-time error codes of [`abi`](crate::abi) (`ERR_DIV_BY_ZERO`, ...);
//! - the **packed entry**, a [`PackedCFunc`](crate::abi::PackedCFunc): it calls the host helper
//!   `relay_kernel_check_args` with the address of the kernel's [`KernelSpec`] (a constant in
//!   the code) to check every argument (count, type codes, and per `DLTensor` device, dtype,
//!   rank, shape, compact strides, 64-byte alignment) and collect the buffer addresses, then
//!   calls the body, and on a failure returns -1 with the message in the kernel context.
//!
//! Semantics are numpy's and the reference evaluation's (`relay-ops`, `relay_runtime::elements`)
//! for every dtype from `int8` to `uint64`, `float32`, `float64` and `bool` (a byte, 0 or 1):
//! integer arithmetic wraps; `Div`/`Mod` truncate and `FloorDiv`/`FloorMod` floor, with
//! `INT_MIN / -1` wrapping instead of trapping; an integer divisor of zero (or a negative
//! integer exponent) returns an error code; shifts by the width or more give 0 (or the sign for
//! an arithmetic right shift); `Round` rounds half to even; float → integer casts truncate and
//! saturate, NaN becoming 0; integer → `float32` converts directly (numpy; the reference goes
//! through `f64`, which can differ by one rounding for integers above 2^24 — rare); anything
//! → `bool` is `!= 0` (NaN is true); comparisons with NaN are false except `Ne`. Float math
//! without a Cranelift instruction calls the [`math`] host functions; `float32`
//! `FloorDiv` and `Rsqrt` compute in `f64`, as the reference does. `float16` values are `i16`
//! bit patterns that are only loaded, stored, assigned, selected and converted: lowering
//! computes every `float16` operation in a wider float and rounds its result (`lower.rs`), so
//! any other operation on one is a malformed kernel; a conversion from `float16` widens exactly
//! to `f32` and goes on from there, one to `float16` rounds once (ties to even) from `f32` or
//! `f64` (anything else converts to `f64` first), both through the [`math`] host functions
//! `relay_f16_to_f32`, `relay_f32_to_f16` and `relay_f64_to_f16`. `bfloat16` is rejected
//! ([`KernelError::UnsupportedDType`]).
//!
//! Loops: `Serial` loops count up; a `Parallel` loop is outlined into a function of its own,
//! `fn(buffers, ctx, lo, hi) -> i32` running iterations `lo..hi` (vectorized like a
//! `Vectorized` loop when it has lanes), which the body hands to the host's
//! `relay_kernel_parallel_for` with the kernel context (the thread pool
//! comes later); `Vectorized { lanes }` loops run a vector main loop over
//! `extent / lanes * lanes` iterations and a scalar tail. In the vector body, an index that is
//! the loop counter plus a loop-invariant base gives contiguous accesses — one Cranelift vector
//! load or store (`f32x4`, `i32x4`, `f64x2`: 128 bits; flags without `aligned`) when the element
//! type times the lanes is 128 bits, else one scalar access per lane; loop-invariant values stay
//! scalar (splatted when combined with vectors); other indices are gathered and scattered lane
//! by lane. Float arithmetic (`+ - * /`, min, max, neg, abs, sqrt) and integer `+ -` and bitwise
//! operations use vector instructions, and so does a select whose condition compares values of
//! the selected values' lane width (a comparison mask and a `bitselect`); everything else
//! (transcendental calls, integer division, other comparisons and selects, casts) runs per lane.
//! Structurally equal compound expressions of a vectorized body share their code until the next
//! assignment. A vectorized loop whose body is not a straight line of stores and assignments,
//! reads a buffer it writes, or reads a local before assigning it, runs serially.
//!
//! Memory safety does not rest on lowering being right: every load and store whose flat index
//! cannot be proven within its buffer by interval arithmetic over the loop bounds gets a
//! run-time check returning `ERR_OUT_OF_BOUNDS`.

use std::collections::HashMap;
use std::sync::Arc;

use cranelift_codegen::Context;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    AbiParam, Block, BlockArg, FuncRef, InstBuilder, MemFlagsData, Signature, StackSlotData,
    StackSlotKind, Type, Value, types,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Linkage, Module};
use relay_ir::te::{BinaryOp, CmpOp, UnaryOp};
use relay_ir::{DType, DTypeCode};

use crate::abi::{
    ArgSpec, DLDataType, ERR_DIV_BY_ZERO, ERR_HOST, ERR_MOD_BY_ZERO, ERR_NEGATIVE_POWER,
    ERR_OUT_OF_BOUNDS, KernelSpec,
};
use crate::error::KernelError;
use crate::host::{DGEMM_SYMBOL, PARALLEL_FOR_SYMBOL, SGEMM_SYMBOL};
use crate::jit::{self, CHECK_ARGS_SYMBOL, REPORT_SYMBOL};
use crate::loops::{BufferId, BufferRole, ForKind, Gemm, LExpr, LocalId, LoopFunc, Stmt};
use crate::math;

/// A kernel defined in a JIT module (not yet finalized).
#[derive(Debug)]
pub struct Defined {
    /// The packed entry.
    pub entry: FuncId,
    /// The body.
    pub body: FuncId,
    /// The spec whose address the entry embeds; it must outlive the code.
    pub spec: Arc<KernelSpec>,
}

/// The Cranelift IR of a kernel's body and packed entry, as text (`relayc build --emit clif`).
pub fn emit_clif(func: &LoopFunc) -> Result<String, KernelError> {
    let mut module = jit::new_module()?;
    let mut text = String::new();
    let defined = define(&mut module, func, 0, Some(&mut text));
    // SAFETY: nothing was finalized, so no pointer into the module exists.
    unsafe { module.free_memory() };
    defined.map(|_| text)
}

/// Compiles `func` into `module` as the `index`-th kernel of the module (which makes its symbol
/// names unique), appending the CLIF text of both functions to `clif` when asked.
pub fn define(
    module: &mut JITModule,
    func: &LoopFunc,
    index: usize,
    mut clif: Option<&mut String>,
) -> Result<Defined, KernelError> {
    let spec = Arc::new(kernel_spec(func)?);
    let codegen_err = |e: &dyn std::fmt::Display| KernelError::Codegen {
        kernel: func.name.clone(),
        message: e.to_string(),
    };
    let ptr = module.target_config().pointer_type();
    let mut fctx = FunctionBuilderContext::new();

    // The body.
    let mut body_sig = module.make_signature();
    body_sig.params.push(AbiParam::new(ptr));
    body_sig.params.push(AbiParam::new(ptr));
    body_sig.returns.push(AbiParam::new(types::I32));
    let body_name = format!("k{index}.{}.body", func.name);
    let body_id = module
        .declare_function(&body_name, Linkage::Local, &body_sig)
        .map_err(|e| codegen_err(&e))?;
    let mut ctx = module.make_context();
    ctx.func.signature = body_sig;
    {
        let config = module.target_config();
        let b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let mut g = Gen::new(func, b, module, ptr)?;
        g.symbol = body_name.clone();
        g.body()?;
        g.b.seal_all_blocks();
        g.b.finalize(config);
        if let Some(text) = clif.as_deref_mut() {
            text.extend(g.outlined_clif.drain(..));
            let mut imports: Vec<String> = g
                .imports
                .iter()
                .map(|(name, f)| format!("; {f} = {name}\n"))
                .collect();
            imports.sort();
            text.push_str(&format!("; kernel {} body\n", func.name));
            text.extend(imports);
        }
    }
    if let Some(text) = clif.as_deref_mut() {
        text.push_str(&format!("{}\n", ctx.func.display()));
    }
    module
        .define_function(body_id, &mut ctx)
        .map_err(|e| codegen_err(&cranelift_module::ModuleError::to_string(&e)))?;
    module.clear_context(&mut ctx);

    // The packed entry.
    let entry_id = define_entry(
        module, func, index, body_id, &spec, &mut ctx, &mut fctx, clif,
    )?;
    Ok(Defined {
        entry: entry_id,
        body: body_id,
        spec,
    })
}

/// The [`KernelSpec`] of a loop nest: its buffers' names, dtypes and shapes.
pub fn kernel_spec(func: &LoopFunc) -> Result<KernelSpec, KernelError> {
    let args = func
        .buffers
        .iter()
        .filter(|b| b.role != BufferRole::Scratch)
        .map(|b| {
            scalar_type(&func.name, b.dtype)?;
            Ok(ArgSpec {
                name: b.name.clone(),
                dtype: DLDataType {
                    code: b.dtype.code as u8,
                    bits: b.dtype.bits,
                    lanes: b.dtype.lanes,
                },
                shape: b.shape.clone(),
            })
        })
        .collect::<Result<_, KernelError>>()?;
    let scratch = func
        .buffers
        .iter()
        .filter(|b| b.role == BufferRole::Scratch)
        .map(|b| {
            let bytes = u64::from(b.dtype.bits.div_ceil(8)).max(1);
            b.shape
                .iter()
                .try_fold(bytes, |n, &d| n.checked_mul(u64::try_from(d).ok()?))
                .ok_or_else(|| malformed(func, format!("scratch buffer {} is too large", b.name)))
        })
        .collect::<Result<_, KernelError>>()?;
    if func
        .buffers
        .iter()
        .skip_while(|b| b.role != BufferRole::Scratch)
        .any(|b| b.role != BufferRole::Scratch)
    {
        return Err(malformed(func, "a scratch buffer before an argument"));
    }
    Ok(KernelSpec {
        name: func.name.clone(),
        args,
        scratch,
    })
}

/// Defines the packed entry of a kernel whose body is `body_id`.
#[allow(clippy::too_many_arguments)]
fn define_entry(
    module: &mut JITModule,
    func: &LoopFunc,
    index: usize,
    body_id: FuncId,
    spec: &Arc<KernelSpec>,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
    clif: Option<&mut String>,
) -> Result<FuncId, KernelError> {
    let codegen_err = |e: String| KernelError::Codegen {
        kernel: func.name.clone(),
        message: e,
    };
    let ptr = module.target_config().pointer_type();
    let mut sig = module.make_signature();
    for ty in [ptr, ptr, types::I32, ptr, ptr, ptr] {
        sig.params.push(AbiParam::new(ty));
    }
    sig.returns.push(AbiParam::new(types::I32));
    let name = format!("k{index}.{}", func.name);
    let id = module
        .declare_function(&name, Linkage::Export, &sig)
        .map_err(|e| codegen_err(e.to_string()))?;

    let mut check_sig = module.make_signature();
    for ty in [ptr, ptr, ptr, types::I32, ptr, ptr] {
        check_sig.params.push(AbiParam::new(ty));
    }
    check_sig.returns.push(AbiParam::new(types::I32));
    let check_id = module
        .declare_function(CHECK_ARGS_SYMBOL, Linkage::Import, &check_sig)
        .map_err(|e| codegen_err(e.to_string()))?;
    let mut report_sig = module.make_signature();
    for ty in [ptr, types::I32, ptr] {
        report_sig.params.push(AbiParam::new(ty));
    }
    let report_id = module
        .declare_function(REPORT_SYMBOL, Linkage::Import, &report_sig)
        .map_err(|e| codegen_err(e.to_string()))?;

    ctx.func.signature = sig;
    {
        let config = module.target_config();
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let check = module.declare_func_in_func(check_id, b.func);
        let report = module.declare_func_in_func(report_id, b.func);
        let body = module.declare_func_in_func(body_id, b.func);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let (args, codes, num, rh) = (params[0], params[1], params[2], params[5]);
        let slot_size = u32::try_from(func.buffers.len().max(1) * 8)
            .map_err(|_| codegen_err("too many buffers".into()))?;
        let slot = b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            slot_size,
            3,
        ));
        let ptrs = b.ins().stack_addr(ptr, slot, 0);
        // Text for `--emit clif` is of code never run: it shows 0 instead of the spec's
        // address, so that it is the same from run to run.
        let address = if clif.is_some() {
            0
        } else {
            Arc::as_ptr(spec) as usize as i64
        };
        let spec_addr = b.ins().iconst(ptr, address);
        let call = b
            .ins()
            .call(check, &[spec_addr, args, codes, num, rh, ptrs]);
        let rc = b.inst_results(call)[0];
        let (fail, ok, report_block, done) = (
            b.create_block(),
            b.create_block(),
            b.create_block(),
            b.create_block(),
        );
        b.ins().brif(rc, fail, &[], ok, &[]);
        b.switch_to_block(ok);
        let call = b.ins().call(body, &[ptrs, rh]);
        let code = b.inst_results(call)[0];
        b.ins()
            .brif(code, report_block, &[BlockArg::Value(code)], done, &[]);
        b.append_block_param(report_block, types::I32);
        b.switch_to_block(report_block);
        let code = b.block_params(report_block)[0];
        b.ins().call(report, &[spec_addr, code, rh]);
        let minus_one = b.ins().iconst(types::I32, -1);
        b.ins().return_(&[minus_one]);
        b.switch_to_block(done);
        let zero = b.ins().iconst(types::I32, 0);
        b.ins().return_(&[zero]);
        b.switch_to_block(fail);
        let minus_one = b.ins().iconst(types::I32, -1);
        b.ins().return_(&[minus_one]);
        b.seal_all_blocks();
        b.finalize(config);
    }
    if let Some(text) = clif {
        text.push_str(&format!(
            "; kernel {} packed entry\n; fn0 = {CHECK_ARGS_SYMBOL}\n; fn1 = {REPORT_SYMBOL}\n\
             ; fn2 = the body\n; (the KernelSpec's address shows as 0)\n{}\n",
            func.name,
            ctx.func.display()
        ));
    }
    module
        .define_function(id, ctx)
        .map_err(|e| codegen_err(e.to_string()))?;
    module.clear_context(ctx);
    Ok(id)
}

/// The Cranelift type of a scalar dtype, or why it is not supported.
fn scalar_type(kernel: &str, d: DType) -> Result<Type, KernelError> {
    let ty = if d.lanes != 1 {
        None
    } else {
        match (d.code, d.bits) {
            (DTypeCode::Bool, 8) | (DTypeCode::Int | DTypeCode::UInt, 8) => Some(types::I8),
            (DTypeCode::Int | DTypeCode::UInt, 16) => Some(types::I16),
            (DTypeCode::Int | DTypeCode::UInt, 32) => Some(types::I32),
            (DTypeCode::Int | DTypeCode::UInt, 64) => Some(types::I64),
            // `float16`: its bits (see the module documentation).
            (DTypeCode::Float, 16) => Some(types::I16),
            (DTypeCode::Float, 32) => Some(types::F32),
            (DTypeCode::Float, 64) => Some(types::F64),
            _ => None,
        }
    };
    ty.ok_or_else(|| KernelError::UnsupportedDType {
        kernel: kernel.to_string(),
        dtype: d.to_string(),
    })
}

/// Whether a dtype is a signed integer.
fn signed(d: DType) -> bool {
    d.code == DTypeCode::Int
}

/// Whether a dtype is a float.
fn is_float(d: DType) -> bool {
    d.code == DTypeCode::Float
}

/// A value of a vectorized loop body: what each of its lanes holds.
#[derive(Clone, Debug)]
enum VVal {
    /// The same scalar in every lane (loop-invariant).
    Uniform(Value),
    /// `base + lane * stride` (`int64` indices).
    Ramp { base: Value, stride: i64 },
    /// A Cranelift vector of all the lanes.
    Vector(Value),
    /// One scalar per lane.
    Lanes(Vec<Value>),
}

/// The state of a vectorized loop body being emitted.
struct VecCx {
    /// The loop counter's local.
    var: LocalId,
    /// Lanes per iteration.
    lanes: u32,
    /// The first lane's counter value.
    counter: Value,
    /// Locals assigned in the body so far.
    locals: HashMap<LocalId, VVal>,
    /// The values of the compound expressions emitted since the last assignment, by
    /// [`expr_key`]: structurally equal pure subexpressions share their code.
    memo: HashMap<String, (VVal, DType)>,
    /// Accumulators (`acc = acc op v`): one variable per lane, combined after the loop.
    accs: HashMap<LocalId, (BinaryOp, Vec<Variable>)>,
}

/// The code generator of one body function.
struct Gen<'a, 'b> {
    func: &'a LoopFunc,
    b: FunctionBuilder<'b>,
    module: &'a mut JITModule,
    ptr: Type,
    /// Each buffer's first-element address.
    bases: Vec<Value>,
    /// Each buffer's element count.
    lens: Vec<i64>,
    /// One variable per local.
    vars: Vec<Variable>,
    /// The value ranges of the loop counters in scope.
    ranges: HashMap<LocalId, (i128, i128)>,
    /// The value ranges of locals assigned once (hoisted indices), over the whole body.
    local_ranges: HashMap<LocalId, (i128, i128)>,
    /// Imported host functions.
    imports: HashMap<String, FuncRef>,
    /// The block returning an error code (its parameter), once needed.
    err: Option<Block>,
    /// Whether vector rounding instructions are native (SSE4.1).
    vector_rounding: bool,
    /// The kernel context (the packed call's resource handle), once the body has begun.
    ctx: Option<Value>,
    /// The buffer address array the function received, once it has begun.
    ptrs: Option<Value>,
    /// The function's symbol (outlined parallel loops are named after it).
    symbol: String,
    /// How many parallel loops have been outlined from this function.
    outlined: usize,
    /// The CLIF text of the outlined functions (for `relayc build --emit clif`).
    outlined_clif: Vec<String>,
}

/// A result of this module.
type R<T> = Result<T, KernelError>;

impl<'a, 'b> Gen<'a, 'b> {
    fn new(
        func: &'a LoopFunc,
        mut b: FunctionBuilder<'b>,
        module: &'a mut JITModule,
        ptr: Type,
    ) -> R<Gen<'a, 'b>> {
        let mut vars = Vec::with_capacity(func.locals.len());
        for l in &func.locals {
            let ty = scalar_type(&func.name, l.dtype)?;
            vars.push(b.declare_var(ty));
        }
        let mut lens = Vec::with_capacity(func.buffers.len());
        for buf in &func.buffers {
            scalar_type(&func.name, buf.dtype)?;
            let mut n: i64 = 1;
            for &d in &buf.shape {
                if d < 0 {
                    return Err(malformed(
                        func,
                        format!("buffer {} has a negative dimension", buf.name),
                    ));
                }
                n = n
                    .checked_mul(d)
                    .ok_or_else(|| malformed(func, format!("buffer {} is too large", buf.name)))?;
            }
            lens.push(n);
        }
        let vector_rounding = module
            .isa()
            .isa_flags()
            .iter()
            .any(|f| f.name == "has_sse41" && f.as_bool() == Some(true));
        Ok(Gen {
            func,
            b,
            module,
            ptr,
            bases: Vec::new(),
            lens,
            vars,
            ranges: HashMap::new(),
            local_ranges: HashMap::new(),
            imports: HashMap::new(),
            err: None,
            vector_rounding,
            ctx: None,
            ptrs: None,
            symbol: String::new(),
            outlined: 0,
            outlined_clif: Vec::new(),
        })
    }

    fn malformed(&self, message: impl Into<String>) -> KernelError {
        malformed(self.func, message)
    }

    /// Emits the whole body function.
    fn body(&mut self) -> R<()> {
        self.prologue()?;
        let func = self.func;
        let mut counts = HashMap::new();
        count_assignments(&func.body, &mut counts);
        self.collect_local_ranges(&func.body, &counts);
        self.stmt(&func.body)?;
        self.epilogue();
        Ok(())
    }

    /// The entry block: the parameters (buffer addresses, kernel context, ...), each buffer's
    /// base address, and every local at zero.
    fn prologue(&mut self) -> R<Vec<Value>> {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let params = self.b.block_params(entry).to_vec();
        let ptrs = params[0];
        self.ptrs = Some(ptrs);
        self.ctx = Some(params[1]);
        for i in 0..self.func.buffers.len() {
            let offset = i32::try_from(i * 8).map_err(|_| self.malformed("too many buffers"))?;
            let base = self
                .b
                .ins()
                .load(self.ptr, MemFlagsData::trusted(), ptrs, offset);
            self.bases.push(base);
        }
        // Locals start at zero, so that reading one before assigning it is defined.
        for (i, l) in self.func.locals.iter().enumerate() {
            let zero = self.zero(l.dtype)?;
            self.b.def_var(self.vars[i], zero);
        }
        Ok(params)
    }

    /// Returns 0, and the error block returns its code.
    fn epilogue(&mut self) {
        let zero = self.b.ins().iconst(types::I32, 0);
        self.b.ins().return_(&[zero]);
        if let Some(err) = self.err {
            self.b.switch_to_block(err);
            let code = self.b.block_params(err)[0];
            self.b.ins().return_(&[code]);
        }
    }

    /// Whether a parallel loop's body can be outlined: it reads no local assigned outside it
    /// (other than its counter), so each chunk can start from zeroed locals.
    fn outlinable(&self, var: LocalId, body: &Stmt) -> bool {
        let (mut read, mut assigned) = (Vec::new(), vec![var]);
        stmt_locals(body, &mut read, &mut assigned);
        read.iter().all(|l| assigned.contains(l))
    }

    /// A parallel loop: its iterations as a function of their range
    /// (`fn(buffers, ctx, lo, hi) -> i32`, vectorized over `lanes` when they allow it), handed
    /// to the host's `relay_kernel_parallel_for`; a chunk's error code fails the kernel.
    fn parallel_loop(&mut self, var: LocalId, extent: i64, lanes: u32, body: &Stmt) -> R<()> {
        let codegen_err = |kernel: &str, e: &dyn std::fmt::Display| KernelError::Codegen {
            kernel: kernel.to_string(),
            message: e.to_string(),
        };
        let mut sig = self.module.make_signature();
        for ty in [self.ptr, self.ptr, types::I64, types::I64] {
            sig.params.push(AbiParam::new(ty));
        }
        sig.returns.push(AbiParam::new(types::I32));
        let name = format!("{}.par{}", self.symbol, self.outlined);
        self.outlined += 1;
        let id = self
            .module
            .declare_function(&name, Linkage::Local, &sig)
            .map_err(|e| codegen_err(&self.func.name, &e))?;
        let mut ctx = self.module.make_context();
        ctx.func.signature = sig;
        let mut fctx = FunctionBuilderContext::new();
        let mut clif = Vec::new();
        {
            let config = self.module.target_config();
            let b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let mut g = Gen::new(self.func, b, &mut *self.module, self.ptr)?;
            g.symbol = name.clone();
            g.ranges = self.ranges.clone();
            g.local_ranges = self.local_ranges.clone();
            let params = g.prologue()?;
            let (lo, hi) = (params[2], params[3]);
            g.loop_between(var, lo, hi, lanes, body)?;
            g.epilogue();
            g.b.seal_all_blocks();
            g.b.finalize(config);
            clif.append(&mut g.outlined_clif);
        }
        clif.push(format!(
            "; kernel {} parallel loop {name}\n{}\n",
            self.func.name,
            ctx.func.display()
        ));
        self.outlined_clif.extend(clif);
        self.module.define_function(id, &mut ctx).map_err(|e| {
            codegen_err(
                &self.func.name,
                &cranelift_module::ModuleError::to_string(&e),
            )
        })?;
        self.module.clear_context(&mut ctx);
        // The call.
        let fref = self.module.declare_func_in_func(id, self.b.func);
        let addr = self.b.ins().func_addr(self.ptr, fref);
        let (ctx_v, ptrs) = (
            self.ctx
                .ok_or_else(|| self.malformed("a parallel loop outside a body"))?,
            self.ptrs
                .ok_or_else(|| self.malformed("a parallel loop outside a body"))?,
        );
        let runner = match self.imports.get(PARALLEL_FOR_SYMBOL) {
            Some(f) => *f,
            None => {
                let mut sig = Signature::new(self.module.isa().default_call_conv());
                for ty in [self.ptr, self.ptr, self.ptr, types::I64] {
                    sig.params.push(AbiParam::new(ty));
                }
                sig.returns.push(AbiParam::new(types::I32));
                let fid = self
                    .module
                    .declare_function(PARALLEL_FOR_SYMBOL, Linkage::Import, &sig)
                    .map_err(|e| codegen_err(&self.func.name, &e))?;
                let f = self.module.declare_func_in_func(fid, self.b.func);
                self.imports.insert(PARALLEL_FOR_SYMBOL.to_string(), f);
                f
            }
        };
        let n = self.b.ins().iconst(types::I64, extent);
        let call = self.b.ins().call(runner, &[ctx_v, addr, ptrs, n]);
        let rc = self.b.inst_results(call)[0];
        self.fail_with(rc);
        Ok(())
    }

    // ----- Statements -----

    fn stmt(&mut self, s: &Stmt) -> R<()> {
        match s {
            Stmt::Seq(items) => items.iter().try_for_each(|s| self.stmt(s)),
            Stmt::Gemm(g) => self.gemm(g),
            Stmt::Range {
                var,
                start,
                end,
                extent,
                kind,
                body,
            } => self.range_loop(*var, start, end, *extent, *kind, body),
            Stmt::Assign { local, value } => {
                let (v, d) = self.expr(value)?;
                let want = self.local_dtype(*local)?;
                if d != want {
                    return Err(self.malformed(format!(
                        "assigning a {d} value to {want} local {}",
                        self.func.locals[local.0 as usize].name
                    )));
                }
                self.b.def_var(self.vars[local.0 as usize], v);
                Ok(())
            }
            Stmt::Store {
                buffer,
                index,
                value,
            } => {
                let (v, d) = self.expr(value)?;
                self.check_store_dtype(*buffer, d)?;
                let addr = self.address(*buffer, index)?;
                self.b
                    .ins()
                    .store(MemFlagsData::new().with_notrap(), v, addr, 0);
                Ok(())
            }
            Stmt::For {
                var,
                extent,
                kind,
                body,
            } => {
                if self.local_dtype(*var)?.code != DTypeCode::Int
                    || self.local_dtype(*var)?.bits != 64
                {
                    return Err(self.malformed("a loop counter must be an int64 local"));
                }
                if *extent <= 0 {
                    return Ok(());
                }
                let saved = self.ranges.insert(*var, (0, i128::from(*extent) - 1));
                let result = match kind {
                    ForKind::Parallel { lanes } if *extent > 1 && self.outlinable(*var, body) => {
                        self.parallel_loop(*var, *extent, *lanes, body)
                    }
                    // A parallel loop that cannot be outlined runs here, vectorized if it can be.
                    ForKind::Parallel { lanes } | ForKind::Vectorized { lanes }
                        if (2..=64).contains(lanes) && self.vectorizable(*var, body) =>
                    {
                        let main = extent / i64::from(*lanes) * i64::from(*lanes);
                        if main > 0 {
                            self.vector_loop(*var, main, *lanes, body)?;
                        }
                        self.serial_loop(*var, main, *extent, body)
                    }
                    _ => self.serial_loop(*var, 0, *extent, body),
                };
                match saved {
                    Some(r) => self.ranges.insert(*var, r),
                    None => self.ranges.remove(var),
                };
                result
            }
        }
    }

    /// A [`Gemm`]: checks that the three matrices lie within their buffers and calls the
    /// host's GEMM, returning its error code if it fails.
    fn gemm(&mut self, g: &Gemm) -> R<()> {
        let d = self.buffer_dtype(g.c.buffer)?;
        if !is_float(d) || (d.bits != 32 && d.bits != 64) {
            return Err(self.malformed(format!("a GEMM on {d} buffers")));
        }
        for m in [&g.a, &g.b, &g.c] {
            if self.buffer_dtype(m.buffer)? != d {
                return Err(self.malformed("a GEMM's buffers have different dtypes"));
            }
        }
        if [
            g.m,
            g.n,
            g.k,
            g.a.row_stride,
            g.a.col_stride,
            g.b.row_stride,
            g.b.col_stride,
            g.c.row_stride,
            g.c.col_stride,
        ]
        .iter()
        .any(|&v| v < 0)
        {
            return Err(self.malformed("a GEMM with a negative size or stride"));
        }
        if g.m == 0 || g.n == 0 {
            return Ok(());
        }
        let size = i64::from(d.bits / 8);
        let mut addrs = Vec::with_capacity(3);
        for (m, rows, cols) in [(&g.a, g.m, g.k), (&g.b, g.k, g.n), (&g.c, g.m, g.n)] {
            let (first, fd) = self.expr(&m.offset)?;
            if fd != DType::I64 {
                return Err(self.malformed("a GEMM offset must be int64"));
            }
            if rows > 0 && cols > 0 {
                let span = (rows - 1)
                    .checked_mul(m.row_stride)
                    .and_then(|r| {
                        (cols - 1)
                            .checked_mul(m.col_stride)
                            .and_then(|c| r.checked_add(c))
                    })
                    .ok_or_else(|| self.malformed("a GEMM matrix is too large"))?;
                self.check_index(m.buffer, first)?;
                let last = self.b.ins().iadd_imm_s(first, span);
                self.check_index(m.buffer, last)?;
            }
            let base = self.bases[m.buffer.0 as usize];
            addrs.push(self.element_addr(base, first, size));
        }
        let ctx = self
            .ctx
            .ok_or_else(|| self.malformed("a GEMM outside the body"))?;
        let symbol = if d.bits == 32 {
            SGEMM_SYMBOL
        } else {
            DGEMM_SYMBOL
        };
        let f = match self.imports.get(symbol) {
            Some(f) => *f,
            None => {
                let mut sig = Signature::new(self.module.isa().default_call_conv());
                sig.params.push(AbiParam::new(self.ptr));
                for _ in 0..3 {
                    sig.params.push(AbiParam::new(types::I64));
                }
                for _ in 0..3 {
                    sig.params.push(AbiParam::new(self.ptr));
                    sig.params.push(AbiParam::new(types::I64));
                    sig.params.push(AbiParam::new(types::I64));
                }
                sig.returns.push(AbiParam::new(types::I32));
                let id = self
                    .module
                    .declare_function(symbol, Linkage::Import, &sig)
                    .map_err(|e| KernelError::Codegen {
                        kernel: self.func.name.clone(),
                        message: e.to_string(),
                    })?;
                let f = self.module.declare_func_in_func(id, self.b.func);
                self.imports.insert(symbol.to_string(), f);
                f
            }
        };
        let mut args = vec![ctx];
        for v in [g.m, g.k, g.n] {
            args.push(self.b.ins().iconst(types::I64, v));
        }
        for (m, addr) in [&g.a, &g.b, &g.c].into_iter().zip(addrs) {
            args.push(addr);
            args.push(self.b.ins().iconst(types::I64, m.row_stride));
            args.push(self.b.ins().iconst(types::I64, m.col_stride));
        }
        let call = self.b.ins().call(f, &args);
        let rc = self.b.inst_results(call)[0];
        let failed = self.b.ins().icmp_imm_s(IntCC::NotEqual, rc, 0);
        self.fail_if(failed, ERR_HOST);
        Ok(())
    }

    /// A loop over `start..end`, bounds clamped to `0 <= start <= end <= extent` (so the
    /// counter's range is `0..extent` for bounds checks), vectorized like a `Vectorized` loop
    /// when asked and possible.
    fn range_loop(
        &mut self,
        var: LocalId,
        start: &LExpr,
        end: &LExpr,
        extent: i64,
        kind: ForKind,
        body: &Stmt,
    ) -> R<()> {
        if self.local_dtype(var)? != DType::I64 {
            return Err(self.malformed("a loop counter must be an int64 local"));
        }
        if extent <= 0 {
            return Ok(());
        }
        let (s, sd) = self.expr(start)?;
        let (e, ed) = self.expr(end)?;
        if sd != DType::I64 || ed != DType::I64 {
            return Err(self.malformed("loop bounds must be int64"));
        }
        let (zero, max) = (
            self.b.ins().iconst(types::I64, 0),
            self.b.ins().iconst(types::I64, extent),
        );
        let s = self.b.ins().smax(s, zero);
        let s = self.b.ins().smin(s, max);
        let e = self.b.ins().smax(e, s);
        let e = self.b.ins().smin(e, max);
        let saved = self.ranges.insert(var, (0, i128::from(extent) - 1));
        let lanes = match kind {
            ForKind::Vectorized { lanes } => lanes,
            _ => 1,
        };
        let result = self.loop_between(var, s, e, lanes, body);
        match saved {
            Some(r) => self.ranges.insert(var, r),
            None => self.ranges.remove(&var),
        };
        result
    }

    /// `for var in start..end { body }`, one iteration after another.
    fn serial_loop(&mut self, var: LocalId, start: i64, end: i64, body: &Stmt) -> R<()> {
        if start >= end {
            return Ok(());
        }
        let v = self.vars[var.0 as usize];
        if end - start == 1 {
            let i = self.b.ins().iconst(types::I64, start);
            self.b.def_var(v, i);
            return self.stmt(body);
        }
        let first = self.b.ins().iconst(types::I64, start);
        let end = self.b.ins().iconst(types::I64, end);
        self.serial_loop_between(var, first, end, body)
    }

    /// `for var in start..end { body }` with bounds known at run time: a vector main loop
    /// over `lanes` (when more than one and the body allows it) and a scalar tail.
    fn loop_between(
        &mut self,
        var: LocalId,
        start: Value,
        end: Value,
        lanes: u32,
        body: &Stmt,
    ) -> R<()> {
        if !(2..=64).contains(&lanes) || !self.vectorizable(var, body) {
            return self.serial_loop_between(var, start, end, body);
        }
        let n = self.b.ins().isub(end, start);
        let whole = self.b.ins().sdiv_imm_s(n, i64::from(lanes));
        let len = self.b.ins().imul_imm_s(whole, i64::from(lanes));
        let main = self.b.ins().iadd(start, len);
        self.vector_loop_between(var, start, main, lanes, body)?;
        self.serial_loop_between(var, main, end, body)
    }

    /// Starts a loop `for i in first..end`: its header (the counter `i` a block parameter,
    /// tested against `end`) and its body block, where it leaves the builder. Returns the
    /// counter, the header (to jump back to) and the exit block.
    fn loop_header(&mut self, first: Value, end: Value) -> (Value, Block, Block) {
        let (header, block, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let i = self.b.append_block_param(header, types::I64);
        self.b.ins().jump(header, &[BlockArg::Value(first)]);
        self.b.switch_to_block(header);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, i, end);
        self.b.ins().brif(more, block, &[], exit, &[]);
        self.b.switch_to_block(block);
        (i, header, exit)
    }

    /// `for var in start..end { body }` with bounds known at run time only.
    fn serial_loop_between(
        &mut self,
        var: LocalId,
        first: Value,
        end: Value,
        body: &Stmt,
    ) -> R<()> {
        let v = self.vars[var.0 as usize];
        let (i, header, exit) = self.loop_header(first, end);
        self.b.def_var(v, i);
        self.stmt(body)?;
        let next = self.b.ins().iadd_imm_s(i, 1);
        self.b.ins().jump(header, &[BlockArg::Value(next)]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// The vector main loop: `for base in (0..main).step_by(lanes) { body on lanes }`.
    fn vector_loop(&mut self, var: LocalId, main: i64, lanes: u32, body: &Stmt) -> R<()> {
        let first = self.b.ins().iconst(types::I64, 0);
        let main = self.b.ins().iconst(types::I64, main);
        self.vector_loop_between(var, first, main, lanes, body)
    }

    /// `for base in (first..main).step_by(lanes) { body on lanes }` (`main - first` a multiple
    /// of `lanes`), with bounds known at run time only.
    fn vector_loop_between(
        &mut self,
        var: LocalId,
        first: Value,
        main: Value,
        lanes: u32,
        body: &Stmt,
    ) -> R<()> {
        // Accumulators: lane 0 starts from the accumulator's value, the others from the
        // operation's identity (set before the loop, so they enter it as block parameters).
        let mut accs = HashMap::new();
        for (local, op) in accumulators(var, body) {
            let d = self.local_dtype(local)?;
            let ty = scalar_type(&self.func.name, d)?;
            let identity = match op {
                BinaryOp::Mul | BinaryOp::LogicalAnd => {
                    if is_float(d) {
                        self.float_const(1.0, d)?
                    } else {
                        self.iconst(ty, 1)
                    }
                }
                _ => self.zero(d)?,
            };
            let mut vars = Vec::with_capacity(lanes as usize);
            for k in 0..lanes {
                let v = self.b.declare_var(ty);
                let init = if k == 0 {
                    self.b.use_var(self.vars[local.0 as usize])
                } else {
                    identity
                };
                self.b.def_var(v, init);
                vars.push(v);
            }
            accs.insert(local, (op, vars));
        }
        let (i, header, exit) = self.loop_header(first, main);
        let mut cx = VecCx {
            var,
            lanes,
            counter: i,
            locals: HashMap::new(),
            memo: HashMap::new(),
            accs,
        };
        self.vstmt(body, &mut cx)?;
        // The counter holds the last lane's value, as after the corresponding serial iterations.
        let last = self.b.ins().iadd_imm_s(i, i64::from(lanes) - 1);
        self.b.def_var(self.vars[var.0 as usize], last);
        let next = self.b.ins().iadd_imm_s(i, i64::from(lanes));
        self.b.ins().jump(header, &[BlockArg::Value(next)]);
        self.b.switch_to_block(exit);
        // Each accumulator: its lanes combined, in lane order.
        for (local, (op, vars)) in cx.accs {
            let d = self.local_dtype(local)?;
            let mut total = self.b.use_var(vars[0]);
            for v in &vars[1..] {
                let lane = self.b.use_var(*v);
                total = self.binary(op, total, lane, d)?;
            }
            self.b.def_var(self.vars[local.0 as usize], total);
        }
        Ok(())
    }

    /// Whether a loop body can run several iterations at once: a straight line of stores and
    /// assignments that never assigns the counter, reads no local of the body before assigning
    /// it, and reads a buffer it writes only in place (at the index it stores to).
    fn vectorizable(&self, var: LocalId, body: &Stmt) -> bool {
        fn walk(s: &Stmt, out: &mut Vec<Stmt>) -> bool {
            match s {
                Stmt::Seq(items) => items.iter().all(|s| walk(s, out)),
                Stmt::For { .. } | Stmt::Range { .. } | Stmt::Gemm(_) => false,
                other => {
                    out.push(other.clone());
                    true
                }
            }
        }
        fn reads(e: &LExpr, locals: &mut Vec<LocalId>, buffers: &mut Vec<BufferId>) {
            e.visit(&mut |n| match n {
                LExpr::Local(l) => locals.push(*l),
                LExpr::Load { buffer, .. } => buffers.push(*buffer),
                _ => {}
            });
        }
        let mut stmts = Vec::new();
        if !walk(body, &mut stmts) {
            return false;
        }
        // Accumulators are read only by their own accumulation; they count as assigned.
        let accs: Vec<LocalId> = accumulators(var, body)
            .into_iter()
            .map(|(l, _)| l)
            .collect();
        let mut assigned_so_far: Vec<LocalId> = accs.clone();
        let mut assigned_anywhere: Vec<LocalId> = Vec::new();
        let mut stored: Vec<BufferId> = Vec::new();
        let mut loaded: Vec<BufferId> = Vec::new();
        for s in &stmts {
            if let Stmt::Assign { local, .. } = s {
                assigned_anywhere.push(*local);
            }
        }
        for s in &stmts {
            let mut locals = Vec::new();
            match s {
                Stmt::Assign { local, value } => {
                    reads(value, &mut locals, &mut loaded);
                    if *local == var {
                        return false;
                    }
                    if locals
                        .iter()
                        .any(|l| assigned_anywhere.contains(l) && !assigned_so_far.contains(l))
                    {
                        return false;
                    }
                    assigned_so_far.push(*local);
                }
                Stmt::Store {
                    buffer,
                    index,
                    value,
                } => {
                    reads(index, &mut locals, &mut loaded);
                    reads(value, &mut locals, &mut loaded);
                    if locals
                        .iter()
                        .any(|l| assigned_anywhere.contains(l) && !assigned_so_far.contains(l))
                    {
                        return false;
                    }
                    stored.push(*buffer);
                }
                _ => return false,
            }
        }
        // A buffer the body both reads and writes is fine only in place: one store to it,
        // and every load of it at that store's index (the same lanes, in order).
        stored.iter().all(|b| {
            if !loaded.contains(b) {
                return true;
            }
            let stores: Vec<String> = stmts
                .iter()
                .filter_map(|s| match s {
                    Stmt::Store { buffer, index, .. } if buffer == b => Some(expr_key(index)),
                    _ => None,
                })
                .collect();
            let [key] = &stores[..] else {
                return false;
            };
            let mut loads = Vec::new();
            for s in &stmts {
                match s {
                    Stmt::Assign { value, .. } => loads_of(value, *b, &mut loads),
                    Stmt::Store { index, value, .. } => {
                        loads_of(index, *b, &mut loads);
                        loads_of(value, *b, &mut loads);
                    }
                    _ => {}
                }
            }
            loads.iter().all(|k| k == key)
        })
    }

    // ----- Vectorized statements -----

    fn vstmt(&mut self, s: &Stmt, cx: &mut VecCx) -> R<()> {
        match s {
            Stmt::Seq(items) => items.iter().try_for_each(|s| self.vstmt(s, cx)),
            Stmt::Assign { local, value } if cx.accs.contains_key(local) => {
                let Some((op, operand)) = accumulation(*local, value) else {
                    return Err(self.malformed("an accumulator assigned another way"));
                };
                let (v, d) = self.vexpr(operand, cx)?;
                if d != self.local_dtype(*local)? {
                    return Err(self.malformed("an accumulation of another dtype"));
                }
                let lanes = self.lanes_of(&v, cx.lanes)?;
                let vars = cx
                    .accs
                    .get(local)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                for (lane, var) in lanes.into_iter().zip(vars) {
                    let acc = self.b.use_var(var);
                    let next = self.binary(op, acc, lane, d)?;
                    self.b.def_var(var, next);
                }
                cx.memo.clear();
                Ok(())
            }
            Stmt::Assign { local, value } => {
                let (v, d) = self.vexpr(value, cx)?;
                let want = self.local_dtype(*local)?;
                if d != want {
                    return Err(self.malformed(format!("assigning a {d} value to a {want} local")));
                }
                // The variable holds the last lane's value, for code after the loop.
                let lanes = self.lanes_of(&v, cx.lanes)?;
                if let Some(&last) = lanes.last() {
                    self.b.def_var(self.vars[local.0 as usize], last);
                }
                cx.locals.insert(*local, v);
                // Memoized expressions may read the local's previous value.
                cx.memo.clear();
                Ok(())
            }
            Stmt::Store {
                buffer,
                index,
                value,
            } => {
                let (v, d) = self.vexpr(value, cx)?;
                self.check_store_dtype(*buffer, d)?;
                let (idx, _) = self.vexpr(index, cx)?;
                let idx = self.index_to_i64(idx, self.dtype_of(index)?, cx)?;
                let size = i64::from(scalar_type(&self.func.name, d)?.bytes());
                let base = self.bases[buffer.0 as usize];
                let in_bounds = self.index_in_bounds(*buffer, index);
                match idx {
                    VVal::Ramp {
                        base: first,
                        stride: 1,
                    } => {
                        if !in_bounds {
                            self.check_ramp(*buffer, first, cx.lanes)?;
                        }
                        let addr = self.element_addr(base, first, size);
                        match self.vector_type(d, cx.lanes) {
                            Some(vty) => {
                                let vec = self.vector_of(&v, vty, cx.lanes)?;
                                self.b
                                    .ins()
                                    .store(MemFlagsData::new().with_notrap(), vec, addr, 0);
                            }
                            None => {
                                let lanes = self.lanes_of(&v, cx.lanes)?;
                                for (k, lane) in lanes.into_iter().enumerate() {
                                    let off = i32::try_from(k as i64 * size)
                                        .map_err(|_| self.malformed("vector too wide"))?;
                                    self.b.ins().store(
                                        MemFlagsData::new().with_notrap(),
                                        lane,
                                        addr,
                                        off,
                                    );
                                }
                            }
                        }
                    }
                    VVal::Uniform(i) => {
                        // Every lane stores to one element: the last one wins, as serially.
                        if !in_bounds {
                            self.check_index(*buffer, i)?;
                        }
                        let lanes = self.lanes_of(&v, cx.lanes)?;
                        let addr = self.element_addr(base, i, size);
                        if let Some(&last) = lanes.last() {
                            self.b
                                .ins()
                                .store(MemFlagsData::new().with_notrap(), last, addr, 0);
                        }
                    }
                    other => {
                        let idx = self.lanes_of(&other, cx.lanes)?;
                        let lanes = self.lanes_of(&v, cx.lanes)?;
                        for (i, lane) in idx.into_iter().zip(lanes) {
                            if !in_bounds {
                                self.check_index(*buffer, i)?;
                            }
                            let addr = self.element_addr(base, i, size);
                            self.b
                                .ins()
                                .store(MemFlagsData::new().with_notrap(), lane, addr, 0);
                        }
                    }
                }
                Ok(())
            }
            Stmt::For { .. } | Stmt::Range { .. } | Stmt::Gemm(_) => {
                Err(self.malformed("a loop or GEMM inside a vectorized loop"))
            }
        }
    }

    // ----- Vectorized expressions -----

    /// The Cranelift vector type of `lanes` lanes of `d`, when it is 128 bits wide (and not
    /// `bool`, whose lanes need normalizing).
    fn vector_type(&self, d: DType, lanes: u32) -> Option<Type> {
        if d.code == DTypeCode::Bool || d == DType::F16 {
            return None;
        }
        let ty = scalar_type(&self.func.name, d).ok()?;
        (ty.bits() * lanes == 128).then(|| ty.by(lanes)).flatten()
    }

    /// Every lane's scalar.
    fn lanes_of(&mut self, v: &VVal, lanes: u32) -> R<Vec<Value>> {
        Ok(match v {
            VVal::Uniform(x) => vec![*x; lanes as usize],
            VVal::Ramp { base, stride } => (0..i64::from(lanes))
                .map(|k| {
                    if k == 0 {
                        *base
                    } else {
                        self.b.ins().iadd_imm_s(*base, k.wrapping_mul(*stride))
                    }
                })
                .collect(),
            VVal::Vector(x) => (0..lanes)
                .map(|k| self.b.ins().extractlane(*x, k as u8))
                .collect(),
            VVal::Lanes(xs) => xs.clone(),
        })
    }

    /// The lanes as one Cranelift vector of type `vty`.
    fn vector_of(&mut self, v: &VVal, vty: Type, lanes: u32) -> R<Value> {
        match v {
            VVal::Vector(x) => Ok(*x),
            VVal::Uniform(x) => Ok(self.b.ins().splat(vty, *x)),
            other => {
                let xs = self.lanes_of(other, lanes)?;
                let mut vec = self.b.ins().splat(vty, xs[0]);
                for (k, x) in xs.iter().enumerate().skip(1) {
                    vec = self.b.ins().insertlane(vec, *x, k as u8);
                }
                Ok(vec)
            }
        }
    }

    /// An index value as `int64` lanes or a ramp.
    fn index_to_i64(&mut self, v: VVal, d: DType, cx: &VecCx) -> R<VVal> {
        if d == DType::I64 || d == DType::U64 {
            return Ok(v);
        }
        if !d.is_int() && d.code != DTypeCode::Bool {
            return Err(self.malformed(format!("a {d} index")));
        }
        Ok(match v {
            VVal::Uniform(x) => VVal::Uniform(self.extend_index(x, d)),
            other => {
                let xs = self.lanes_of(&other, cx.lanes)?;
                VVal::Lanes(xs.into_iter().map(|x| self.extend_index(x, d)).collect())
            }
        })
    }

    /// A vectorized expression, its code shared with any structurally equal expression emitted
    /// earlier in the body since the last assignment. Sharing is sound because the body is a
    /// straight line that never writes a buffer it reads, every expression is pure (bounds and
    /// division checks fail on the first occurrence), and earlier values dominate later ones.
    fn vexpr(&mut self, e: &LExpr, cx: &mut VecCx) -> R<(VVal, DType)> {
        if matches!(e, LExpr::Local(_) | LExpr::Int(..) | LExpr::Float(..)) {
            return self.vexpr_uncached(e, cx);
        }
        let key = expr_key(e);
        if let Some(v) = cx.memo.get(&key) {
            return Ok(v.clone());
        }
        let v = self.vexpr_uncached(e, cx)?;
        cx.memo.insert(key, v.clone());
        Ok(v)
    }

    /// A vectorized expression emitted anew (its subexpressions may still be shared).
    fn vexpr_uncached(&mut self, e: &LExpr, cx: &mut VecCx) -> R<(VVal, DType)> {
        let d = self.dtype_of(e)?;
        let lanes = cx.lanes;
        let v = match e {
            LExpr::Local(l) if *l == cx.var => VVal::Ramp {
                base: cx.counter,
                stride: 1,
            },
            LExpr::Local(l) => match cx.locals.get(l) {
                Some(v) => v.clone(),
                None => VVal::Uniform(self.expr(e)?.0),
            },
            LExpr::Int(..) | LExpr::Float(..) => VVal::Uniform(self.expr(e)?.0),
            LExpr::Load { buffer, index } => {
                let (idx, _) = self.vexpr(index, cx)?;
                let idx = self.index_to_i64(idx, self.dtype_of(index)?, cx)?;
                let size = i64::from(scalar_type(&self.func.name, d)?.bytes());
                let ty = scalar_type(&self.func.name, d)?;
                let base = self.bases[buffer.0 as usize];
                let in_bounds = self.index_in_bounds(*buffer, index);
                match idx {
                    VVal::Uniform(i) => {
                        if !in_bounds {
                            self.check_index(*buffer, i)?;
                        }
                        let addr = self.element_addr(base, i, size);
                        VVal::Uniform(self.b.ins().load(
                            ty,
                            MemFlagsData::new().with_notrap(),
                            addr,
                            0,
                        ))
                    }
                    VVal::Ramp {
                        base: first,
                        stride: 1,
                    } => {
                        if !in_bounds {
                            self.check_ramp(*buffer, first, lanes)?;
                        }
                        let addr = self.element_addr(base, first, size);
                        match self.vector_type(d, lanes) {
                            Some(vty) => VVal::Vector(self.b.ins().load(
                                vty,
                                MemFlagsData::new().with_notrap(),
                                addr,
                                0,
                            )),
                            None => {
                                let mut xs = Vec::with_capacity(lanes as usize);
                                for k in 0..i64::from(lanes) {
                                    let off = i32::try_from(k * size)
                                        .map_err(|_| self.malformed("vector too wide"))?;
                                    xs.push(self.b.ins().load(
                                        ty,
                                        MemFlagsData::new().with_notrap(),
                                        addr,
                                        off,
                                    ));
                                }
                                VVal::Lanes(xs)
                            }
                        }
                    }
                    other => {
                        let idx = self.lanes_of(&other, lanes)?;
                        let mut xs = Vec::with_capacity(lanes as usize);
                        for i in idx {
                            if !in_bounds {
                                self.check_index(*buffer, i)?;
                            }
                            let addr = self.element_addr(base, i, size);
                            xs.push(self.b.ins().load(
                                ty,
                                MemFlagsData::new().with_notrap(),
                                addr,
                                0,
                            ));
                        }
                        VVal::Lanes(xs)
                    }
                }
            }
            LExpr::Unary(op, a) => {
                let (x, ad) = self.vexpr(a, cx)?;
                if let VVal::Uniform(x) = x {
                    VVal::Uniform(self.unary(*op, x, ad)?)
                } else if let Some(v) = self.vector_unary(*op, &x, ad, lanes)? {
                    VVal::Vector(v)
                } else {
                    let xs = self.lanes_of(&x, lanes)?;
                    let mut out = Vec::with_capacity(xs.len());
                    for x in xs {
                        out.push(self.unary(*op, x, ad)?);
                    }
                    VVal::Lanes(out)
                }
            }
            LExpr::Binary(op, a, b) => {
                let (x, ad) = self.vexpr(a, cx)?;
                let (y, bd) = self.vexpr(b, cx)?;
                if ad != bd {
                    return Err(self.malformed(format!("{op:?} of {ad} and {bd}")));
                }
                match (&x, &y) {
                    (VVal::Uniform(x), VVal::Uniform(y)) => {
                        VVal::Uniform(self.binary(*op, *x, *y, ad)?)
                    }
                    _ => {
                        if let Some(r) = self.ramp_binary(*op, &x, &y, a, b, ad) {
                            r
                        } else if let Some(v) = self.vector_binary(*op, &x, &y, ad, lanes)? {
                            VVal::Vector(v)
                        } else {
                            let xs = self.lanes_of(&x, lanes)?;
                            let ys = self.lanes_of(&y, lanes)?;
                            let mut out = Vec::with_capacity(xs.len());
                            for (x, y) in xs.into_iter().zip(ys) {
                                out.push(self.binary(*op, x, y, ad)?);
                            }
                            VVal::Lanes(out)
                        }
                    }
                }
            }
            LExpr::Compare(op, a, b) => {
                let (x, ad) = self.vexpr(a, cx)?;
                let (y, bd) = self.vexpr(b, cx)?;
                if ad != bd {
                    return Err(self.malformed(format!("{op:?} of {ad} and {bd}")));
                }
                self.no_f16_arithmetic(&format!("{op:?}"), ad)?;
                match (&x, &y) {
                    (VVal::Uniform(x), VVal::Uniform(y)) => {
                        VVal::Uniform(self.compare(*op, *x, *y, ad))
                    }
                    _ => {
                        let xs = self.lanes_of(&x, lanes)?;
                        let ys = self.lanes_of(&y, lanes)?;
                        VVal::Lanes(
                            xs.into_iter()
                                .zip(ys)
                                .map(|(x, y)| self.compare(*op, x, y, ad))
                                .collect(),
                        )
                    }
                }
            }
            LExpr::Select(c, a, b) => {
                if let Some(v) = self.vector_select(c, a, b, cx)? {
                    return Ok((v, d));
                }
                let (cv, cd) = self.vexpr(c, cx)?;
                let (x, ad) = self.vexpr(a, cx)?;
                let (y, bd) = self.vexpr(b, cx)?;
                if ad != bd {
                    return Err(self.malformed(format!("select of {ad} and {bd}")));
                }
                match (&cv, &x, &y) {
                    (VVal::Uniform(c), VVal::Uniform(x), VVal::Uniform(y)) => {
                        VVal::Uniform(self.select(*c, cd, *x, *y))
                    }
                    _ => {
                        let cs = self.lanes_of(&cv, lanes)?;
                        let xs = self.lanes_of(&x, lanes)?;
                        let ys = self.lanes_of(&y, lanes)?;
                        let mut out = Vec::with_capacity(xs.len());
                        for ((c, x), y) in cs.into_iter().zip(xs).zip(ys) {
                            out.push(self.select(c, cd, x, y));
                        }
                        VVal::Lanes(out)
                    }
                }
            }
            LExpr::Cast(to, a) => {
                let (x, ad) = self.vexpr(a, cx)?;
                match x {
                    VVal::Uniform(x) => VVal::Uniform(self.cast(*to, x, ad)?),
                    VVal::Ramp { .. } if *to == DType::I64 || *to == DType::U64 => x,
                    other => {
                        let xs = self.lanes_of(&other, lanes)?;
                        let mut out = Vec::with_capacity(xs.len());
                        for x in xs {
                            out.push(self.cast(*to, x, ad)?);
                        }
                        VVal::Lanes(out)
                    }
                }
            }
        };
        Ok((v, d))
    }

    /// `select(x op y, a, b)` as one vector comparison giving a lane mask (all ones or all
    /// zeros) and one `bitselect`, when the compared and the selected values are vectors of
    /// lanes of one width and not all uniform; `None` otherwise (the caller goes per lane).
    fn vector_select(
        &mut self,
        c: &LExpr,
        a: &LExpr,
        b: &LExpr,
        cx: &mut VecCx,
    ) -> R<Option<VVal>> {
        let LExpr::Compare(op, ca, cb) = c else {
            return Ok(None);
        };
        let lanes = cx.lanes;
        let (cd, vd) = (self.dtype_of(ca)?, self.dtype_of(a)?);
        if cd != self.dtype_of(cb)? || vd != self.dtype_of(b)? {
            return Ok(None);
        }
        let (Some(cty), Some(vty)) = (self.vector_type(cd, lanes), self.vector_type(vd, lanes))
        else {
            return Ok(None);
        };
        if cty.lane_bits() != vty.lane_bits() {
            return Ok(None);
        }
        let (x, _) = self.vexpr(ca, cx)?;
        let (y, _) = self.vexpr(cb, cx)?;
        let (t, _) = self.vexpr(a, cx)?;
        let (f, _) = self.vexpr(b, cx)?;
        if [&x, &y, &t, &f]
            .iter()
            .all(|v| matches!(v, VVal::Uniform(_)))
        {
            return Ok(None);
        }
        let xv = self.vector_of(&x, cty, lanes)?;
        let yv = self.vector_of(&y, cty, lanes)?;
        let mask = self.compare(*op, xv, yv, cd);
        let tv = self.vector_of(&t, vty, lanes)?;
        let fv = self.vector_of(&f, vty, lanes)?;
        let mask = if self.b.func.dfg.value_type(mask) == vty {
            mask
        } else {
            self.b.ins().bitcast(vty, MemFlagsData::new(), mask)
        };
        Ok(Some(VVal::Vector(self.b.ins().bitselect(mask, tv, fv))))
    }

    /// Index arithmetic that keeps a ramp a ramp: `ramp ± uniform`, `ramp ± ramp`,
    /// `ramp * constant`.
    fn ramp_binary(
        &mut self,
        op: BinaryOp,
        x: &VVal,
        y: &VVal,
        a: &LExpr,
        b: &LExpr,
        d: DType,
    ) -> Option<VVal> {
        if d != DType::I64 {
            return None;
        }
        let constant = |e: &LExpr| match e {
            LExpr::Int(v, _) => i64::try_from(*v).ok(),
            _ => None,
        };
        match (op, x, y) {
            (BinaryOp::Add, VVal::Ramp { base, stride }, VVal::Uniform(u))
            | (BinaryOp::Add, VVal::Uniform(u), VVal::Ramp { base, stride }) => Some(VVal::Ramp {
                base: self.b.ins().iadd(*base, *u),
                stride: *stride,
            }),
            (BinaryOp::Sub, VVal::Ramp { base, stride }, VVal::Uniform(u)) => Some(VVal::Ramp {
                base: self.b.ins().isub(*base, *u),
                stride: *stride,
            }),
            (
                BinaryOp::Add,
                VVal::Ramp {
                    base: b1,
                    stride: s1,
                },
                VVal::Ramp {
                    base: b2,
                    stride: s2,
                },
            ) => {
                let stride = s1.checked_add(*s2)?;
                Some(VVal::Ramp {
                    base: self.b.ins().iadd(*b1, *b2),
                    stride,
                })
            }
            (BinaryOp::Mul, VVal::Ramp { base, stride }, VVal::Uniform(_)) => {
                let c = constant(b)?;
                let stride = stride.checked_mul(c)?;
                Some(VVal::Ramp {
                    base: self.b.ins().imul_imm_s(*base, c),
                    stride,
                })
            }
            (BinaryOp::Mul, VVal::Uniform(_), VVal::Ramp { base, stride }) => {
                let c = constant(a)?;
                let stride = stride.checked_mul(c)?;
                Some(VVal::Ramp {
                    base: self.b.ins().imul_imm_s(*base, c),
                    stride,
                })
            }
            _ => None,
        }
    }

    /// A unary operation with one vector instruction, when there is one.
    fn vector_unary(&mut self, op: UnaryOp, x: &VVal, d: DType, lanes: u32) -> R<Option<Value>> {
        let Some(vty) = self.vector_type(d, lanes) else {
            return Ok(None);
        };
        let float = is_float(d);
        let supported = match op {
            UnaryOp::Neg => true,
            UnaryOp::Abs | UnaryOp::Sqrt => float,
            UnaryOp::Ceil | UnaryOp::Floor | UnaryOp::Trunc | UnaryOp::Round => {
                float && self.vector_rounding
            }
            UnaryOp::BitwiseNot => !float,
            _ => false,
        };
        if !supported {
            return Ok(None);
        }
        let v = self.vector_of(x, vty, lanes)?;
        let ins = self.b.ins();
        Ok(Some(match op {
            UnaryOp::Neg if float => ins.fneg(v),
            UnaryOp::Neg => ins.ineg(v),
            UnaryOp::Abs => ins.fabs(v),
            UnaryOp::Sqrt => ins.sqrt(v),
            UnaryOp::Ceil => ins.ceil(v),
            UnaryOp::Floor => ins.floor(v),
            UnaryOp::Trunc => ins.trunc(v),
            UnaryOp::Round => ins.nearest(v),
            _ => ins.bnot(v),
        }))
    }

    /// A binary operation with one vector instruction, when there is one.
    fn vector_binary(
        &mut self,
        op: BinaryOp,
        x: &VVal,
        y: &VVal,
        d: DType,
        lanes: u32,
    ) -> R<Option<Value>> {
        let Some(vty) = self.vector_type(d, lanes) else {
            return Ok(None);
        };
        let float = is_float(d);
        let supported = match op {
            BinaryOp::Add | BinaryOp::Sub => true,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Max | BinaryOp::Min => float,
            BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => !float,
            _ => false,
        };
        if !supported {
            return Ok(None);
        }
        let a = self.vector_of(x, vty, lanes)?;
        let b = self.vector_of(y, vty, lanes)?;
        let ins = self.b.ins();
        Ok(Some(match (op, float) {
            (BinaryOp::Add, true) => ins.fadd(a, b),
            (BinaryOp::Add, false) => ins.iadd(a, b),
            (BinaryOp::Sub, true) => ins.fsub(a, b),
            (BinaryOp::Sub, false) => ins.isub(a, b),
            (BinaryOp::Mul, _) => ins.fmul(a, b),
            (BinaryOp::Div, _) => ins.fdiv(a, b),
            (BinaryOp::Max, _) => ins.fmax(a, b),
            (BinaryOp::Min, _) => ins.fmin(a, b),
            (BinaryOp::BitAnd, _) => ins.band(a, b),
            (BinaryOp::BitOr, _) => ins.bor(a, b),
            _ => ins.bxor(a, b),
        }))
    }

    // ----- Scalar expressions -----

    fn local_dtype(&self, l: LocalId) -> R<DType> {
        self.func
            .locals
            .get(l.0 as usize)
            .map(|l| l.dtype)
            .ok_or_else(|| self.malformed(format!("local {} does not exist", l.0)))
    }

    fn buffer_dtype(&self, b: BufferId) -> R<DType> {
        self.func
            .buffers
            .get(b.0 as usize)
            .map(|b| b.dtype)
            .ok_or_else(|| self.malformed(format!("buffer {} does not exist", b.0)))
    }

    fn check_store_dtype(&self, b: BufferId, d: DType) -> R<()> {
        let want = self.buffer_dtype(b)?;
        if want != d {
            return Err(self.malformed(format!(
                "storing a {d} value into {want} buffer {}",
                self.func.buffers[b.0 as usize].name
            )));
        }
        Ok(())
    }

    /// The dtype of an expression.
    fn dtype_of(&self, e: &LExpr) -> R<DType> {
        Ok(match e {
            LExpr::Local(l) => self.local_dtype(*l)?,
            LExpr::Int(_, d) | LExpr::Float(_, d) | LExpr::Cast(d, _) => *d,
            LExpr::Load { buffer, .. } => self.buffer_dtype(*buffer)?,
            LExpr::Unary(op, a) => match op {
                UnaryOp::IsNan | UnaryOp::IsInf | UnaryOp::IsFinite | UnaryOp::LogicalNot => {
                    DType::BOOL
                }
                _ => self.dtype_of(a)?,
            },
            LExpr::Binary(_, a, _) => self.dtype_of(a)?,
            LExpr::Compare(..) => DType::BOOL,
            LExpr::Select(_, a, _) => self.dtype_of(a)?,
        })
    }

    /// A scalar expression's value and dtype.
    fn expr(&mut self, e: &LExpr) -> R<(Value, DType)> {
        let d = self.dtype_of(e)?;
        let v = match e {
            LExpr::Local(l) => self.b.use_var(self.vars[l.0 as usize]),
            LExpr::Int(v, d) => {
                if is_float(*d) {
                    self.float_const(*v as f64, *d)?
                } else {
                    let ty = scalar_type(&self.func.name, *d)?;
                    let v = if d.code == DTypeCode::Bool {
                        i128::from(*v != 0)
                    } else {
                        *v
                    };
                    self.iconst(ty, v)
                }
            }
            LExpr::Float(v, d) => {
                if is_float(*d) {
                    self.float_const(*v, *d)?
                } else {
                    let f = self.float_const(*v, DType::F64)?;
                    self.cast(*d, f, DType::F64)?
                }
            }
            LExpr::Load { buffer, index } => {
                let ty = scalar_type(&self.func.name, d)?;
                let addr = self.address(*buffer, index)?;
                self.b
                    .ins()
                    .load(ty, MemFlagsData::new().with_notrap(), addr, 0)
            }
            LExpr::Unary(op, a) => {
                let (x, ad) = self.expr(a)?;
                self.unary(*op, x, ad)?
            }
            LExpr::Binary(op, a, b) => {
                let (x, ad) = self.expr(a)?;
                let (y, bd) = self.expr(b)?;
                if ad != bd {
                    return Err(self.malformed(format!("{op:?} of {ad} and {bd}")));
                }
                self.binary(*op, x, y, ad)?
            }
            LExpr::Compare(op, a, b) => {
                let (x, ad) = self.expr(a)?;
                let (y, bd) = self.expr(b)?;
                if ad != bd {
                    return Err(self.malformed(format!("{op:?} of {ad} and {bd}")));
                }
                self.no_f16_arithmetic(&format!("{op:?}"), ad)?;
                self.compare(*op, x, y, ad)
            }
            LExpr::Select(c, a, b) => {
                let (cv, cd) = self.expr(c)?;
                let (x, ad) = self.expr(a)?;
                let (y, bd) = self.expr(b)?;
                if ad != bd {
                    return Err(self.malformed(format!("select of {ad} and {bd}")));
                }
                self.select(cv, cd, x, y)
            }
            LExpr::Cast(to, a) => {
                let (x, ad) = self.expr(a)?;
                self.cast(*to, x, ad)?
            }
        };
        Ok((v, d))
    }

    /// The address of `buffer[index]`, checked to be within the buffer unless provably so.
    fn address(&mut self, buffer: BufferId, index: &LExpr) -> R<Value> {
        let d = self.buffer_dtype(buffer)?;
        let id = self.dtype_of(index)?;
        if !id.is_int() && id.code != DTypeCode::Bool {
            return Err(self.malformed(format!("a {id} index")));
        }
        let (i, _) = self.expr(index)?;
        let i = self.extend_index(i, id);
        if !self.index_in_bounds(buffer, index) {
            self.check_index(buffer, i)?;
        }
        let size = i64::from(scalar_type(&self.func.name, d)?.bytes());
        Ok(self.element_addr(self.bases[buffer.0 as usize], i, size))
    }

    /// `base + index * size`.
    fn element_addr(&mut self, base: Value, index: Value, size: i64) -> Value {
        let offset = self.b.ins().imul_imm_s(index, size);
        self.b.ins().iadd(base, offset)
    }

    /// An integer index as `int64`.
    fn extend_index(&mut self, i: Value, d: DType) -> Value {
        let ty = self.b.func.dfg.value_type(i);
        if ty == types::I64 {
            i
        } else if signed(d) {
            self.b.ins().sextend(types::I64, i)
        } else {
            self.b.ins().uextend(types::I64, i)
        }
    }

    /// Whether interval arithmetic proves `index` within `buffer`.
    fn index_in_bounds(&self, buffer: BufferId, index: &LExpr) -> bool {
        let n = i128::from(self.lens[buffer.0 as usize]);
        self.range(index).is_some_and(|(lo, hi)| lo >= 0 && hi < n)
    }

    /// The range of values of an `int64` index expression, if interval arithmetic over the
    /// loop bounds gives one.
    fn range(&self, e: &LExpr) -> Option<(i128, i128)> {
        let fits = |(lo, hi): (i128, i128)| {
            (lo >= i128::from(i64::MIN) && hi <= i128::from(i64::MAX)).then_some((lo, hi))
        };
        let r = match e {
            LExpr::Int(v, d) if d.is_int() => (*v, *v),
            LExpr::Local(l) => *self.ranges.get(l).or_else(|| self.local_ranges.get(l))?,
            LExpr::Cast(to, a) if *to == DType::I64 && self.dtype_of(a).ok()?.is_int() => {
                self.range(a)?
            }
            LExpr::Binary(op, a, b) if self.dtype_of(e).ok()? == DType::I64 => {
                let (x, y) = (self.range(a)?, self.range(b)?);
                let constant = match **b {
                    LExpr::Int(c, _) if c > 0 => Some(c),
                    _ => None,
                };
                match op {
                    BinaryOp::Add => (x.0 + y.0, x.1 + y.1),
                    BinaryOp::Sub => (x.0 - y.1, x.1 - y.0),
                    BinaryOp::Mul => {
                        let p = [x.0 * y.0, x.0 * y.1, x.1 * y.0, x.1 * y.1];
                        (*p.iter().min()?, *p.iter().max()?)
                    }
                    BinaryOp::Div | BinaryOp::FloorDiv if x.0 >= 0 => {
                        let c = constant?;
                        (x.0 / c, x.1 / c)
                    }
                    BinaryOp::Mod if x.0 >= 0 => {
                        let c = constant?;
                        if x.1 < c { x } else { (0, c - 1) }
                    }
                    BinaryOp::FloorMod => {
                        let c = constant?;
                        if x.0 >= 0 && x.1 < c { x } else { (0, c - 1) }
                    }
                    BinaryOp::Min => (x.0.min(y.0), x.1.min(y.1)),
                    BinaryOp::Max => (x.0.max(y.0), x.1.max(y.1)),
                    _ => return None,
                }
            }
            _ => return None,
        };
        fits(r)
    }

    /// Records the range of every local assigned exactly once whose value has a range (with
    /// the loop counters in scope at the assignment): it holds that value or, before the
    /// assignment, its initial zero.
    fn collect_local_ranges(&mut self, s: &Stmt, counts: &HashMap<LocalId, usize>) {
        match s {
            Stmt::Seq(items) => {
                for s in items {
                    self.collect_local_ranges(s, counts);
                }
            }
            Stmt::For {
                var, extent, body, ..
            }
            | Stmt::Range {
                var, extent, body, ..
            } => {
                if *extent <= 0 {
                    return;
                }
                let saved = self.ranges.insert(*var, (0, i128::from(*extent) - 1));
                self.collect_local_ranges(body, counts);
                match saved {
                    Some(r) => self.ranges.insert(*var, r),
                    None => self.ranges.remove(var),
                };
            }
            Stmt::Assign { local, value } => {
                if counts.get(local) == Some(&1)
                    && !self.ranges.contains_key(local)
                    && let Some((lo, hi)) = self.range(value)
                {
                    self.local_ranges.insert(*local, (lo.min(0), hi.max(0)));
                }
            }
            Stmt::Store { .. } | Stmt::Gemm(_) => {}
        }
    }

    /// Returns `ERR_OUT_OF_BOUNDS` unless `0 <= index < len(buffer)`.
    fn check_index(&mut self, buffer: BufferId, index: Value) -> R<()> {
        let n = self.lens[buffer.0 as usize];
        let out = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, index, n);
        self.fail_if(out, ERR_OUT_OF_BOUNDS);
        Ok(())
    }

    /// Checks `first .. first + lanes` within `buffer`.
    fn check_ramp(&mut self, buffer: BufferId, first: Value, lanes: u32) -> R<()> {
        self.check_index(buffer, first)?;
        let last = self.b.ins().iadd_imm_s(first, i64::from(lanes) - 1);
        self.check_index(buffer, last)
    }

    /// Branches to the error return with `code` (an `i32` value) when it is non-zero.
    fn fail_with(&mut self, code: Value) {
        let err = self.err_block();
        let cont = self.b.create_block();
        self.b
            .ins()
            .brif(code, err, &[BlockArg::Value(code)], cont, &[]);
        self.b.switch_to_block(cont);
    }

    /// The block returning an error code.
    fn err_block(&mut self) -> Block {
        match self.err {
            Some(b) => b,
            None => {
                let b = self.b.create_block();
                self.b.append_block_param(b, types::I32);
                self.err = Some(b);
                b
            }
        }
    }

    /// Branches to the error return with `code` when `cond` is non-zero.
    fn fail_if(&mut self, cond: Value, code: i32) {
        let err = self.err_block();
        let cont = self.b.create_block();
        let code = self.b.ins().iconst(types::I32, i64::from(code));
        self.b
            .ins()
            .brif(cond, err, &[BlockArg::Value(code)], cont, &[]);
        self.b.switch_to_block(cont);
    }

    /// An integer constant of type `ty` (wrapped to its width).
    fn iconst(&mut self, ty: Type, v: i128) -> Value {
        let bits = ty.bits();
        let masked = if bits >= 64 {
            v as i64
        } else {
            ((v as i64 as u64) & ((1u64 << bits) - 1)) as i64
        };
        self.b.ins().iconst(ty, masked)
    }

    fn float_const(&mut self, v: f64, d: DType) -> R<Value> {
        Ok(match d.bits {
            // Rounded once, as the reference rounds a `float16` constant.
            16 if d == DType::F16 => self.iconst(types::I16, math::f64_to_f16(v).into()),
            32 => self.b.ins().f32const(v as f32),
            64 => self.b.ins().f64const(v),
            _ => {
                return Err(KernelError::UnsupportedDType {
                    kernel: self.func.name.clone(),
                    dtype: d.to_string(),
                });
            }
        })
    }

    fn zero(&mut self, d: DType) -> R<Value> {
        if is_float(d) {
            self.float_const(0.0, d)
        } else {
            let ty = scalar_type(&self.func.name, d)?;
            Ok(self.iconst(ty, 0))
        }
    }

    /// `x != 0` as a `bool` (an `i8` 0 or 1; NaN is true).
    fn truthy(&mut self, x: Value, d: DType) -> Value {
        if d == DType::F16 {
            // Any bit but the sign's: not ±0 (NaN is true).
            let magnitude = self.b.ins().band_imm_u(x, 0x7fff);
            self.b.ins().icmp_imm_s(IntCC::NotEqual, magnitude, 0)
        } else if is_float(d) {
            let ty = self.b.func.dfg.value_type(x);
            let zero = if ty == types::F32 {
                self.b.ins().f32const(0.0)
            } else {
                self.b.ins().f64const(0.0)
            };
            self.b.ins().fcmp(FloatCC::NotEqual, x, zero)
        } else {
            self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0)
        }
    }

    /// A 0/1 `i8` as a value of `d`.
    fn bool_to(&mut self, b: Value, d: DType) -> R<Value> {
        let ty = scalar_type(&self.func.name, d)?;
        Ok(if is_float(d) {
            self.b.ins().fcvt_from_uint(ty, b)
        } else if ty == types::I8 {
            b
        } else {
            self.b.ins().uextend(ty, b)
        })
    }

    /// Calls a host function of the given arity and type.
    fn call_host(&mut self, name: &str, args: &[Value], ty: Type) -> R<Value> {
        let f = match self.imports.get(name) {
            Some(f) => *f,
            None => {
                let mut sig = Signature::new(self.module.isa().default_call_conv());
                for _ in args {
                    sig.params.push(AbiParam::new(ty));
                }
                sig.returns.push(AbiParam::new(ty));
                let id = self
                    .module
                    .declare_function(name, Linkage::Import, &sig)
                    .map_err(|e| KernelError::Codegen {
                        kernel: self.func.name.clone(),
                        message: e.to_string(),
                    })?;
                let f = self.module.declare_func_in_func(id, self.b.func);
                self.imports.insert(name.to_string(), f);
                f
            }
        };
        let call = self.b.ins().call(f, args);
        Ok(self.b.inst_results(call)[0])
    }

    /// A float math host function applied to `x` (of float dtype `d`).
    fn math(&mut self, name: &str, args: &[Value], d: DType) -> R<Value> {
        let ty = scalar_type(&self.func.name, d)?;
        self.call_host(&math::symbol_for(name, d.bits == 32), args, ty)
    }

    /// Rejects arithmetic on `float16` bits: lowering computes it in a wider float.
    fn no_f16_arithmetic(&self, what: &str, d: DType) -> R<()> {
        if d == DType::F16 {
            return Err(self.malformed(format!(
                "{what} of float16 values (lowering computes float16 operations in float64)"
            )));
        }
        Ok(())
    }

    /// Calls one of the `float16` conversion host functions ([`math::relay_f16_to_f32`],
    /// ...): `x` of type `from` to type `to`, the `i16` bits zero-extended across the call.
    fn convert_host(&mut self, name: &str, x: Value, from: Type, to: Type) -> R<Value> {
        let param = |ty: Type| {
            if ty == types::I16 {
                AbiParam::new(ty).uext()
            } else {
                AbiParam::new(ty)
            }
        };
        let f = match self.imports.get(name) {
            Some(f) => *f,
            None => {
                let mut sig = Signature::new(self.module.isa().default_call_conv());
                sig.params.push(param(from));
                sig.returns.push(param(to));
                let id = self
                    .module
                    .declare_function(name, Linkage::Import, &sig)
                    .map_err(|e| KernelError::Codegen {
                        kernel: self.func.name.clone(),
                        message: e.to_string(),
                    })?;
                let f = self.module.declare_func_in_func(id, self.b.func);
                self.imports.insert(name.to_string(), f);
                f
            }
        };
        let call = self.b.ins().call(f, &[x]);
        Ok(self.b.inst_results(call)[0])
    }

    fn require_float(&self, what: &str, d: DType) -> R<()> {
        if is_float(d) {
            Ok(())
        } else {
            Err(self.malformed(format!("{what} of {d} (a float operation)")))
        }
    }

    fn unary(&mut self, op: UnaryOp, x: Value, d: DType) -> R<Value> {
        self.no_f16_arithmetic(&format!("{op:?}"), d)?;
        let float = is_float(d);
        let ty = scalar_type(&self.func.name, d)?;
        let math_name = match op {
            UnaryOp::Exp => Some("exp"),
            UnaryOp::Log => Some("log"),
            UnaryOp::Log2 => Some("log2"),
            UnaryOp::Log10 => Some("log10"),
            UnaryOp::Erf => Some("erf"),
            UnaryOp::Sigmoid => Some("sigmoid"),
            UnaryOp::Tanh => Some("tanh"),
            UnaryOp::Sin => Some("sin"),
            UnaryOp::Cos => Some("cos"),
            UnaryOp::Tan => Some("tan"),
            _ => None,
        };
        if let Some(name) = math_name {
            self.require_float(name, d)?;
            return self.math(name, &[x], d);
        }
        Ok(match op {
            UnaryOp::Neg if float => self.b.ins().fneg(x),
            UnaryOp::Neg => {
                let r = self.b.ins().ineg(x);
                self.normalize(r, d)
            }
            UnaryOp::Abs if float => self.b.ins().fabs(x),
            UnaryOp::Abs if signed(d) => self.b.ins().iabs(x),
            UnaryOp::Abs => x,
            UnaryOp::Sign => {
                if float {
                    let zero = self.zero(d)?;
                    let one = self.float_const(1.0, d)?;
                    let minus_one = self.float_const(-1.0, d)?;
                    let gt = self.b.ins().fcmp(FloatCC::GreaterThan, x, zero);
                    let lt = self.b.ins().fcmp(FloatCC::LessThan, x, zero);
                    // Zero keeps its sign and NaN stays NaN: `x * 0`.
                    let same = self.b.ins().fmul(x, zero);
                    let r = self.b.ins().select(lt, minus_one, same);
                    self.b.ins().select(gt, one, r)
                } else if signed(d) {
                    let gt = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, x, 0);
                    let lt = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
                    let (gt, lt) = (self.bool_to(gt, d)?, self.bool_to(lt, d)?);
                    self.b.ins().isub(gt, lt)
                } else {
                    let nz = self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0);
                    self.bool_to(nz, d)?
                }
            }
            UnaryOp::Sqrt => {
                self.require_float("sqrt", d)?;
                self.b.ins().sqrt(x)
            }
            UnaryOp::Rsqrt => {
                self.require_float("rsqrt", d)?;
                let wide = if ty == types::F32 {
                    self.b.ins().fpromote(types::F64, x)
                } else {
                    x
                };
                let s = self.b.ins().sqrt(wide);
                let one = self.b.ins().f64const(1.0);
                let r = self.b.ins().fdiv(one, s);
                if ty == types::F32 {
                    self.b.ins().fdemote(types::F32, r)
                } else {
                    r
                }
            }
            UnaryOp::Ceil if float => self.b.ins().ceil(x),
            UnaryOp::Floor if float => self.b.ins().floor(x),
            UnaryOp::Round if float => self.b.ins().nearest(x),
            UnaryOp::Trunc if float => self.b.ins().trunc(x),
            UnaryOp::Ceil | UnaryOp::Floor | UnaryOp::Round | UnaryOp::Trunc => x,
            UnaryOp::LogicalNot => {
                let t = self.truthy(x, d);
                self.b.ins().bxor_imm_s(t, 1)
            }
            UnaryOp::BitwiseNot if d.code == DTypeCode::Bool => {
                let t = self.truthy(x, d);
                self.b.ins().bxor_imm_s(t, 1)
            }
            UnaryOp::BitwiseNot => {
                self.require_int("bitwise_not", d)?;
                self.b.ins().bnot(x)
            }
            UnaryOp::IsNan if float => self.b.ins().fcmp(FloatCC::Unordered, x, x),
            UnaryOp::IsInf if float => {
                let a = self.b.ins().fabs(x);
                let inf = self.float_const(f64::INFINITY, d)?;
                self.b.ins().fcmp(FloatCC::Equal, a, inf)
            }
            UnaryOp::IsFinite if float => {
                let a = self.b.ins().fabs(x);
                let inf = self.float_const(f64::INFINITY, d)?;
                self.b.ins().fcmp(FloatCC::LessThan, a, inf)
            }
            UnaryOp::IsNan | UnaryOp::IsInf => self.b.ins().iconst(types::I8, 0),
            UnaryOp::IsFinite => self.b.ins().iconst(types::I8, 1),
            // The transcendental functions returned above.
            _ => return Err(self.malformed(format!("{op:?} of {d}"))),
        })
    }

    fn require_int(&self, what: &str, d: DType) -> R<()> {
        if d.is_int() || d.code == DTypeCode::Bool {
            Ok(())
        } else {
            Err(self.malformed(format!("{what} of {d} (an integer operation)")))
        }
    }

    /// `x` zero-extended to `ty` (unchanged if it has that type).
    fn uext(&mut self, ty: Type, x: Value) -> Value {
        if self.b.func.dfg.value_type(x) == ty {
            x
        } else {
            self.b.ins().uextend(ty, x)
        }
    }

    /// `x` sign-extended to `ty` (unchanged if it has that type).
    fn sext(&mut self, ty: Type, x: Value) -> Value {
        if self.b.func.dfg.value_type(x) == ty {
            x
        } else {
            self.b.ins().sextend(ty, x)
        }
    }

    /// A `bool` result of integer arithmetic as 0 or 1; other dtypes unchanged.
    fn normalize(&mut self, v: Value, d: DType) -> Value {
        if d.code == DTypeCode::Bool {
            self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0)
        } else {
            v
        }
    }

    /// `y` with -1 replaced by 1, and whether it was -1 (signed division overflows only for
    /// `INT_MIN / -1`, which wraps to `INT_MIN` in numpy and traps in Cranelift).
    fn safe_divisor(&mut self, y: Value) -> (Value, Value) {
        let ty = self.b.func.dfg.value_type(y);
        let is_m1 = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
        let one = self.b.ins().iconst(ty, 1);
        (self.b.ins().select(is_m1, one, y), is_m1)
    }

    /// Truncating quotient and remainder of signed or unsigned integers, after checking the
    /// divisor (`code` on zero).
    fn divrem(&mut self, x: Value, y: Value, d: DType, code: i32) -> (Value, Value) {
        let zero = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
        self.fail_if(zero, code);
        if signed(d) {
            let (ys, is_m1) = self.safe_divisor(y);
            let q = self.b.ins().sdiv(x, ys);
            let neg = self.b.ins().ineg(x);
            let q = self.b.ins().select(is_m1, neg, q);
            let r = self.b.ins().srem(x, ys);
            (q, r)
        } else {
            (self.b.ins().udiv(x, y), self.b.ins().urem(x, y))
        }
    }

    /// Whether a signed remainder `r` of division by `y` needs flooring: non-zero with a sign
    /// different from the divisor's.
    fn needs_floor(&mut self, r: Value, y: Value) -> Value {
        let nz = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
        let xor = self.b.ins().bxor(r, y);
        let differ = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, xor, 0);
        self.b.ins().band(nz, differ)
    }

    fn binary(&mut self, op: BinaryOp, x: Value, y: Value, d: DType) -> R<Value> {
        self.no_f16_arithmetic(&format!("{op:?}"), d)?;
        let float = is_float(d);
        let ty = scalar_type(&self.func.name, d)?;
        let v = match op {
            BinaryOp::Add if float => self.b.ins().fadd(x, y),
            BinaryOp::Sub if float => self.b.ins().fsub(x, y),
            BinaryOp::Mul if float => self.b.ins().fmul(x, y),
            BinaryOp::Div if float => self.b.ins().fdiv(x, y),
            BinaryOp::Add => self.b.ins().iadd(x, y),
            BinaryOp::Sub => self.b.ins().isub(x, y),
            BinaryOp::Mul => self.b.ins().imul(x, y),
            BinaryOp::Div => self.divrem(x, y, d, ERR_DIV_BY_ZERO).0,
            BinaryOp::Mod if float => self.math("fmod", &[x, y], d)?,
            BinaryOp::Mod => self.divrem(x, y, d, ERR_MOD_BY_ZERO).1,
            BinaryOp::FloorDiv if float => {
                // In f64 for float32, as the reference: the f64 quotient of two f32s floors
                // exactly where the f32 quotient could round up to an integer.
                if ty == types::F32 {
                    let (a, b) = (
                        self.b.ins().fpromote(types::F64, x),
                        self.b.ins().fpromote(types::F64, y),
                    );
                    let q = self.b.ins().fdiv(a, b);
                    let q = self.b.ins().floor(q);
                    self.b.ins().fdemote(types::F32, q)
                } else {
                    let q = self.b.ins().fdiv(x, y);
                    self.b.ins().floor(q)
                }
            }
            BinaryOp::FloorDiv => {
                let (q, r) = self.divrem(x, y, d, ERR_DIV_BY_ZERO);
                if signed(d) {
                    let adjust = self.needs_floor(r, y);
                    let adjust = self.uext(ty, adjust);
                    self.b.ins().isub(q, adjust)
                } else {
                    q
                }
            }
            BinaryOp::FloorMod if float => self.math("floor_mod", &[x, y], d)?,
            BinaryOp::FloorMod => {
                let (_, r) = self.divrem(x, y, d, ERR_MOD_BY_ZERO);
                if signed(d) {
                    let adjust = self.needs_floor(r, y);
                    let plus = self.b.ins().iadd(r, y);
                    self.b.ins().select(adjust, plus, r)
                } else {
                    r
                }
            }
            BinaryOp::Pow if float => self.math("pow", &[x, y], d)?,
            BinaryOp::Pow => {
                let (base, exp) = if signed(d) {
                    let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, y, 0);
                    self.fail_if(neg, ERR_NEGATIVE_POWER);
                    (self.sext(types::I64, x), self.sext(types::I64, y))
                } else {
                    (self.uext(types::I64, x), self.uext(types::I64, y))
                };
                let r = self.call_host("relay_ipow", &[base, exp], types::I64)?;
                if ty == types::I64 {
                    r
                } else {
                    self.b.ins().ireduce(ty, r)
                }
            }
            BinaryOp::Max if float => self.b.ins().fmax(x, y),
            BinaryOp::Min if float => self.b.ins().fmin(x, y),
            BinaryOp::Max if signed(d) => self.b.ins().smax(x, y),
            BinaryOp::Min if signed(d) => self.b.ins().smin(x, y),
            BinaryOp::Max => self.b.ins().umax(x, y),
            BinaryOp::Min => self.b.ins().umin(x, y),
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr | BinaryOp::LogicalXor => {
                let (a, b) = (self.truthy(x, d), self.truthy(y, d));
                let r = match op {
                    BinaryOp::LogicalAnd => self.b.ins().band(a, b),
                    BinaryOp::LogicalOr => self.b.ins().bor(a, b),
                    _ => self.b.ins().bxor(a, b),
                };
                return self.bool_to(r, d);
            }
            BinaryOp::BitAnd
            | BinaryOp::BitOr
            | BinaryOp::BitXor
            | BinaryOp::Shl
            | BinaryOp::Shr => {
                self.require_int(&format!("{op:?}"), d)?;
                let bits = i64::from(ty.bits());
                match op {
                    BinaryOp::BitAnd => self.b.ins().band(x, y),
                    BinaryOp::BitOr => self.b.ins().bor(x, y),
                    BinaryOp::BitXor => self.b.ins().bxor(x, y),
                    BinaryOp::Shl => {
                        // Shifting every bit out (or by a negative amount) gives 0.
                        let in_range = self.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, y, bits);
                        let r = self.b.ins().ishl(x, y);
                        let zero = self.b.ins().iconst(ty, 0);
                        self.b.ins().select(in_range, r, zero)
                    }
                    _ if signed(d) => {
                        // An arithmetic shift past every bit leaves the sign.
                        let in_range = self.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, y, bits);
                        let max = self.b.ins().iconst(ty, bits - 1);
                        let amount = self.b.ins().select(in_range, y, max);
                        self.b.ins().sshr(x, amount)
                    }
                    _ => {
                        let in_range = self.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, y, bits);
                        let r = self.b.ins().ushr(x, y);
                        let zero = self.b.ins().iconst(ty, 0);
                        self.b.ins().select(in_range, r, zero)
                    }
                }
            }
        };
        Ok(if float { v } else { self.normalize(v, d) })
    }

    fn compare(&mut self, op: CmpOp, x: Value, y: Value, d: DType) -> Value {
        if is_float(d) {
            let cc = match op {
                CmpOp::Eq => FloatCC::Equal,
                CmpOp::Ne => FloatCC::NotEqual,
                CmpOp::Lt => FloatCC::LessThan,
                CmpOp::Le => FloatCC::LessThanOrEqual,
                CmpOp::Gt => FloatCC::GreaterThan,
                CmpOp::Ge => FloatCC::GreaterThanOrEqual,
            };
            self.b.ins().fcmp(cc, x, y)
        } else {
            let s = signed(d);
            let cc = match op {
                CmpOp::Eq => IntCC::Equal,
                CmpOp::Ne => IntCC::NotEqual,
                CmpOp::Lt if s => IntCC::SignedLessThan,
                CmpOp::Le if s => IntCC::SignedLessThanOrEqual,
                CmpOp::Gt if s => IntCC::SignedGreaterThan,
                CmpOp::Ge if s => IntCC::SignedGreaterThanOrEqual,
                CmpOp::Lt => IntCC::UnsignedLessThan,
                CmpOp::Le => IntCC::UnsignedLessThanOrEqual,
                CmpOp::Gt => IntCC::UnsignedGreaterThan,
                CmpOp::Ge => IntCC::UnsignedGreaterThanOrEqual,
            };
            self.b.ins().icmp(cc, x, y)
        }
    }

    fn select(&mut self, c: Value, cd: DType, x: Value, y: Value) -> Value {
        let c = if is_float(cd) { self.truthy(c, cd) } else { c };
        self.b.ins().select(c, x, y)
    }

    /// `x` (of `from`) converted to `to` with numpy's `astype` rules.
    fn cast(&mut self, to: DType, x: Value, from: DType) -> R<Value> {
        if to == from {
            return Ok(x);
        }
        let tty = scalar_type(&self.func.name, to)?;
        let fty = scalar_type(&self.func.name, from)?;
        if from == DType::F16 {
            // Exactly to `f32`, then on from there.
            let wide = self.convert_host(math::F16_TO_F32, x, types::I16, types::F32)?;
            return self.cast(to, wide, DType::F32);
        }
        if to == DType::F16 {
            // One rounding, from `f32` or `f64` (integers convert to `f64` first, exactly up
            // to 2^53 and rounded to nearest beyond, as the reference's `as f64`).
            if from == DType::F32 {
                return self.convert_host(math::F32_TO_F16, x, types::F32, types::I16);
            }
            let wide = self.cast(DType::F64, x, from)?;
            return self.convert_host(math::F64_TO_F16, wide, types::F64, types::I16);
        }
        if to.code == DTypeCode::Bool {
            return Ok(self.truthy(x, from));
        }
        if is_float(from) {
            if is_float(to) {
                return Ok(if tty.bits() > fty.bits() {
                    self.b.ins().fpromote(tty, x)
                } else {
                    self.b.ins().fdemote(tty, x)
                });
            }
            // Truncate toward zero, saturate, NaN → 0 (the `_sat` conversions do all three).
            let bits = tty.bits();
            if bits >= 32 {
                return Ok(if signed(to) {
                    self.b.ins().fcvt_to_sint_sat(tty, x)
                } else {
                    self.b.ins().fcvt_to_uint_sat(tty, x)
                });
            }
            let wide = if signed(to) {
                let w = self.b.ins().fcvt_to_sint_sat(types::I32, x);
                let lo = self.b.ins().iconst(types::I32, -(1i64 << (bits - 1)));
                let hi = self.b.ins().iconst(types::I32, (1i64 << (bits - 1)) - 1);
                let w = self.b.ins().smax(w, lo);
                self.b.ins().smin(w, hi)
            } else {
                let w = self.b.ins().fcvt_to_uint_sat(types::I32, x);
                let hi = self.b.ins().iconst(types::I32, (1i64 << bits) - 1);
                self.b.ins().umin(w, hi)
            };
            return Ok(self.b.ins().ireduce(tty, wide));
        }
        // From an integer or bool (bool is unsigned 0/1).
        let from_signed = signed(from);
        if is_float(to) {
            let x = if fty.bits() < 32 {
                if from_signed {
                    self.b.ins().sextend(types::I32, x)
                } else {
                    self.b.ins().uextend(types::I32, x)
                }
            } else {
                x
            };
            return Ok(if from_signed {
                self.b.ins().fcvt_from_sint(tty, x)
            } else {
                self.b.ins().fcvt_from_uint(tty, x)
            });
        }
        Ok(match tty.bits().cmp(&fty.bits()) {
            std::cmp::Ordering::Less => self.b.ins().ireduce(tty, x),
            std::cmp::Ordering::Greater if from_signed => self.b.ins().sextend(tty, x),
            std::cmp::Ordering::Greater => self.b.ins().uextend(tty, x),
            std::cmp::Ordering::Equal => x,
        })
    }
}

/// A structural key of an expression: equal keys mean equal expressions (float constants by
/// their bits).
fn expr_key(e: &LExpr) -> String {
    fn walk(e: &LExpr, out: &mut String) {
        use std::fmt::Write;
        // Writing to a `String` cannot fail.
        let _ = match e {
            LExpr::Local(l) => write!(out, "l{}", l.0),
            LExpr::Int(v, d) => write!(out, "i{v}:{d}"),
            LExpr::Float(v, d) => write!(out, "f{:x}:{d}", v.to_bits()),
            LExpr::Load { buffer, index } => {
                let _ = write!(out, "ld{}[", buffer.0);
                walk(index, out);
                write!(out, "]")
            }
            LExpr::Unary(op, a) => {
                let _ = write!(out, "{op:?}(");
                walk(a, out);
                write!(out, ")")
            }
            LExpr::Cast(d, a) => {
                let _ = write!(out, "cast<{d}>(");
                walk(a, out);
                write!(out, ")")
            }
            LExpr::Binary(op, a, b) => {
                let _ = write!(out, "{op:?}(");
                walk(a, out);
                out.push(',');
                walk(b, out);
                write!(out, ")")
            }
            LExpr::Compare(op, a, b) => {
                let _ = write!(out, "cmp{op:?}(");
                walk(a, out);
                out.push(',');
                walk(b, out);
                write!(out, ")")
            }
            LExpr::Select(c, a, b) => {
                out.push_str("sel(");
                walk(c, out);
                out.push(',');
                walk(a, out);
                out.push(',');
                walk(b, out);
                write!(out, ")")
            }
        };
    }
    let mut out = String::new();
    walk(e, &mut out);
    out
}

/// `local op operand` (either order) when `value` accumulates into `local` with an
/// associative operation vector lanes may split: integer `+ *`, float `+ *` (reordering float
/// sums within SPEC §4's reduction tolerance), and `&& ||`.
fn accumulation(local: LocalId, value: &LExpr) -> Option<(BinaryOp, &LExpr)> {
    let LExpr::Binary(
        op @ (BinaryOp::Add | BinaryOp::Mul | BinaryOp::LogicalAnd | BinaryOp::LogicalOr),
        a,
        b,
    ) = value
    else {
        return None;
    };
    match (a.as_ref(), b.as_ref()) {
        (LExpr::Local(l), other) | (other, LExpr::Local(l)) if *l == local => {
            let mut reads = Vec::new();
            walk_locals(other, &mut reads);
            (!reads.contains(&local)).then_some((*op, other))
        }
        _ => None,
    }
}

/// The locals an expression reads.
fn walk_locals(e: &LExpr, out: &mut Vec<LocalId>) {
    e.visit(&mut |n| {
        if let LExpr::Local(l) = n {
            out.push(*l);
        }
    });
}

/// The accumulators of a loop body (a straight line): locals other than the counter assigned
/// exactly once, by an [`accumulation`], and read nowhere else in the body.
fn accumulators(var: LocalId, body: &Stmt) -> Vec<(LocalId, BinaryOp)> {
    let mut stmts: Vec<&Stmt> = Vec::new();
    fn flat<'s>(s: &'s Stmt, out: &mut Vec<&'s Stmt>) {
        match s {
            Stmt::Seq(items) => items.iter().for_each(|s| flat(s, out)),
            other => out.push(other),
        }
    }
    flat(body, &mut stmts);
    let mut out = Vec::new();
    for s in &stmts {
        let Stmt::Assign { local, value } = s else {
            continue;
        };
        if *local == var {
            continue;
        }
        let Some((op, _)) = accumulation(*local, value) else {
            continue;
        };
        let assigned = stmts
            .iter()
            .filter(|t| matches!(t, Stmt::Assign { local: l, .. } if l == local))
            .count();
        let mut reads = Vec::new();
        for t in &stmts {
            match t {
                Stmt::Assign { local: l, value } if l == local => {
                    if let Some((_, operand)) = accumulation(*local, value) {
                        walk_locals(operand, &mut reads);
                    }
                }
                Stmt::Assign { value, .. } => walk_locals(value, &mut reads),
                Stmt::Store { index, value, .. } => {
                    walk_locals(index, &mut reads);
                    walk_locals(value, &mut reads);
                }
                _ => {}
            }
        }
        if assigned == 1 && !reads.contains(local) {
            out.push((*local, op));
        }
    }
    out
}

/// The keys ([`expr_key`]) of the indices at which `e` loads buffer `b`.
fn loads_of(e: &LExpr, b: BufferId, out: &mut Vec<String>) {
    e.visit(&mut |n| {
        if let LExpr::Load { buffer, index } = n
            && *buffer == b
        {
            out.push(expr_key(index));
        }
    });
}

/// The locals a statement reads and those it assigns (loop counters included).
fn stmt_locals(s: &Stmt, read: &mut Vec<LocalId>, assigned: &mut Vec<LocalId>) {
    s.exprs(&mut |e| walk_locals(e, read));
    fn assigns(s: &Stmt, assigned: &mut Vec<LocalId>) {
        match s {
            Stmt::Seq(items) => items.iter().for_each(|s| assigns(s, assigned)),
            Stmt::For { var, body, .. } | Stmt::Range { var, body, .. } => {
                assigned.push(*var);
                assigns(body, assigned);
            }
            Stmt::Assign { local, .. } => assigned.push(*local),
            Stmt::Store { .. } | Stmt::Gemm(_) => {}
        }
    }
    assigns(s, assigned);
}

/// How many times each local is assigned (loop counters count once per loop).
fn count_assignments(s: &Stmt, counts: &mut HashMap<LocalId, usize>) {
    match s {
        Stmt::Seq(items) => items.iter().for_each(|s| count_assignments(s, counts)),
        Stmt::For { var, body, .. } | Stmt::Range { var, body, .. } => {
            *counts.entry(*var).or_default() += 1;
            count_assignments(body, counts);
        }
        Stmt::Assign { local, .. } => *counts.entry(*local).or_default() += 1,
        Stmt::Store { .. } | Stmt::Gemm(_) => {}
    }
}

fn malformed(func: &LoopFunc, message: impl Into<String>) -> KernelError {
    KernelError::Malformed {
        kernel: func.name.clone(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use relay_ir::te::{BinaryOp as B, CmpOp as C, UnaryOp as U};
    use relay_runtime::NDArray;

    use super::*;
    use crate::loops::{Buffer, BufferRole, Local};
    use crate::packed::compile;

    /// A buffer.
    fn buf(name: &str, dtype: DType, shape: &[i64], role: BufferRole) -> Buffer {
        Buffer {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
            role,
        }
    }

    fn i64l(name: &str) -> Local {
        Local {
            name: name.into(),
            dtype: DType::I64,
        }
    }

    fn load(b: u32, index: LExpr) -> LExpr {
        LExpr::Load {
            buffer: BufferId(b),
            index: Box::new(index),
        }
    }

    fn var(l: u32) -> LExpr {
        LExpr::Local(LocalId(l))
    }

    fn idx(v: i64) -> LExpr {
        LExpr::Int(i128::from(v), DType::I64)
    }

    fn bin(op: B, a: LExpr, b: LExpr) -> LExpr {
        LExpr::Binary(op, Box::new(a), Box::new(b))
    }

    /// `out[i] = body(i)` over `n` elements with the given inputs (all of shape `[n]` unless
    /// given), the loop of `kind`.
    fn map_kernel(
        inputs: &[(DType, Vec<i64>)],
        out: DType,
        n: i64,
        kind: ForKind,
        body: LExpr,
    ) -> LoopFunc {
        let mut buffers: Vec<Buffer> = inputs
            .iter()
            .enumerate()
            .map(|(k, (d, s))| buf(&format!("p{k}"), *d, s, BufferRole::Input))
            .collect();
        buffers.push(buf("out", out, &[n], BufferRole::Output));
        let out_id = BufferId(inputs.len() as u32);
        LoopFunc {
            name: "test_kernel".into(),
            buffers,
            locals: vec![i64l("i")],
            body: Stmt::For {
                var: LocalId(0),
                extent: n,
                kind,
                body: Box::new(Stmt::Store {
                    buffer: out_id,
                    index: var(0),
                    value: body,
                }),
            },
        }
    }

    fn run(func: &LoopFunc, inputs: &[&NDArray]) -> Result<NDArray, KernelError> {
        let out = func.buffers.last().unwrap();
        let mut result = NDArray::zeros(out.dtype, &out.shape).unwrap();
        let f = compile(func)?;
        f.call(inputs, &mut [&mut result])?;
        Ok(result)
    }

    /// A unary reference function.
    type F1 = fn(f64) -> f64;
    /// A binary reference function.
    type F2 = fn(f64, f64) -> f64;
    /// A comparison's truth from an ordering.
    type Cmp = fn(Option<std::cmp::Ordering>) -> bool;

    const KINDS: [ForKind; 3] = [
        ForKind::Serial,
        ForKind::Vectorized { lanes: 4 },
        ForKind::Parallel { lanes: 4 },
    ];

    /// Float values equal bit for bit, or both NaN.
    fn same_f64(a: f64, b: f64) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
    }

    #[test]
    fn adds_float32_with_vector_tails() {
        for n in [0i64, 1, 3, 4, 5, 17, 1000] {
            for kind in KINDS {
                let a: Vec<f64> = (0..n).map(|i| i as f64 * 0.37 - 5.0).collect();
                let b: Vec<f64> = (0..n).map(|i| (i as f64).sin() * 100.0).collect();
                let a = NDArray::from_f64_slice(DType::F32, &[n], &a).unwrap();
                let b = NDArray::from_f64_slice(DType::F32, &[n], &b).unwrap();
                let f = map_kernel(
                    &[(DType::F32, vec![n]), (DType::F32, vec![n])],
                    DType::F32,
                    n,
                    kind,
                    bin(B::Add, load(0, var(0)), load(1, var(0))),
                );
                let out = run(&f, &[&a, &b]).unwrap();
                let want: Vec<f32> = a
                    .to_f64_vec()
                    .iter()
                    .zip(b.to_f64_vec())
                    .map(|(x, y)| *x as f32 + y as f32)
                    .collect();
                let got: Vec<f32> = out.to_f64_vec().iter().map(|&v| v as f32).collect();
                assert_eq!(got, want, "n = {n}, {kind:?}");
            }
        }
    }

    #[test]
    fn broadcasts_rows_scalars_and_gathers() {
        // out[i, j] = a[i, j] * b[j] + c[0] - a[i, (j * 2) % 5], a vectorized inner loop.
        let (rows, cols) = (3i64, 5i64);
        let a: Vec<f64> = (0..rows * cols).map(|i| i as f64 * 1.5).collect();
        let a = NDArray::from_f64_slice(DType::F32, &[rows, cols], &a).unwrap();
        let b = NDArray::from_f64_slice(DType::F32, &[cols], &[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        let c = NDArray::from_f64_slice(DType::F32, &[1], &[0.25]).unwrap();
        let flat = bin(B::Add, bin(B::Mul, var(0), idx(cols)), var(1));
        let gathered = bin(
            B::Add,
            bin(B::Mul, var(0), idx(cols)),
            bin(B::FloorMod, bin(B::Mul, var(1), idx(2)), idx(cols)),
        );
        let value = bin(
            B::Sub,
            bin(
                B::Add,
                bin(B::Mul, load(0, flat.clone()), load(1, var(1))),
                load(2, idx(0)),
            ),
            load(0, gathered),
        );
        for kind in KINDS {
            let func = LoopFunc {
                name: "fused_broadcast".into(),
                buffers: vec![
                    buf("a", DType::F32, &[rows, cols], BufferRole::Input),
                    buf("b", DType::F32, &[cols], BufferRole::Input),
                    buf("c", DType::F32, &[1], BufferRole::Input),
                    buf("out", DType::F32, &[rows, cols], BufferRole::Output),
                ],
                locals: vec![i64l("i"), i64l("j")],
                body: Stmt::For {
                    var: LocalId(0),
                    extent: rows,
                    kind: ForKind::Serial,
                    body: Box::new(Stmt::For {
                        var: LocalId(1),
                        extent: cols,
                        kind,
                        body: Box::new(Stmt::Store {
                            buffer: BufferId(3),
                            index: flat.clone(),
                            value: value.clone(),
                        }),
                    }),
                },
            };
            let out = run(&func, &[&a, &b, &c]).unwrap().to_f64_vec();
            let av = a.to_f64_vec();
            for i in 0..rows as usize {
                for j in 0..cols as usize {
                    let k = i * cols as usize + j;
                    let g = i * cols as usize + (j * 2) % cols as usize;
                    let want = (av[k] as f32 * (j + 1) as f32 + 0.25f32) - av[g] as f32;
                    assert_eq!(out[k] as f32, want, "{kind:?} at {i}, {j}");
                }
            }
        }
    }

    /// The reference's integer binary operations (`relay-ops`): in `i128`, wrapped to `d`.
    fn int_reference(op: B, x: i128, y: i128, d: DType) -> Result<i128, &'static str> {
        let wrap = |v: i128| {
            NDArray::from_i128_slice(d, &[1], &[v])
                .unwrap()
                .to_i128_vec()[0]
        };
        let div = |x: i128, y: i128| -> Result<(i128, i128), &'static str> {
            if y == 0 {
                Err("integer division by zero")
            } else {
                Ok((x / y, x % y))
            }
        };
        let fdiv = |x: i128, y: i128| -> Result<(i128, i128), &'static str> {
            let (q, r) = div(x, y)?;
            Ok(if r != 0 && (r < 0) != (y < 0) {
                (q - 1, r + y)
            } else {
                (q, r)
            })
        };
        let modz = |y: i128| {
            if y == 0 {
                Err("integer modulo by zero")
            } else {
                Ok(())
            }
        };
        Ok(wrap(match op {
            B::Div => div(x, y)?.0,
            B::Mod => {
                modz(y)?;
                div(x, y)?.1
            }
            B::FloorDiv => fdiv(x, y)?.0,
            B::FloorMod => {
                modz(y)?;
                fdiv(x, y)?.1
            }
            B::Add => x + y,
            B::Sub => x - y,
            B::Mul => x.wrapping_mul(y),
            B::Max => x.max(y),
            B::Min => x.min(y),
            B::Shl => {
                if (0..128).contains(&y) {
                    x.wrapping_shl(y as u32)
                } else {
                    0
                }
            }
            B::Shr => x >> if (0..128).contains(&y) { y as u32 } else { 127 },
            B::BitAnd => x & y,
            B::BitOr => x | y,
            B::BitXor => x ^ y,
            B::Pow => {
                if y < 0 {
                    return Err("integers to negative integer powers are not allowed");
                }
                let mut r = 1i128;
                for _ in 0..y {
                    r = wrap(r.wrapping_mul(x));
                }
                r
            }
            _ => unreachable!("not an integer test operation"),
        }))
    }

    /// Runs `op` elementwise on pairs, compiled (serially and vectorized), against the
    /// reference, one pair per kernel call so errors are per pair.
    fn check_int_op(op: B, d: DType, pairs: &[(i128, i128)]) {
        let xs: Vec<i128> = pairs.iter().map(|p| p.0).collect();
        let ys: Vec<i128> = pairs.iter().map(|p| p.1).collect();
        let n = pairs.len() as i64;
        let a = NDArray::from_i128_slice(d, &[n], &xs).unwrap();
        let b = NDArray::from_i128_slice(d, &[n], &ys).unwrap();
        let (xs, ys) = (a.to_i128_vec(), b.to_i128_vec());
        let want: Vec<Result<i128, &str>> = xs
            .iter()
            .zip(&ys)
            .map(|(&x, &y)| int_reference(op, x, y, d))
            .collect();
        for kind in KINDS {
            let func = map_kernel(
                &[(d, vec![n]), (d, vec![n])],
                d,
                n,
                kind,
                bin(op, load(0, var(0)), load(1, var(0))),
            );
            match want.iter().find_map(|w| w.err()) {
                Some(message) => {
                    let err = run(&func, &[&a, &b]).unwrap_err().to_string();
                    assert!(err.contains(message), "{op:?} {d}: {err}");
                    assert!(err.starts_with("kernel test_kernel: "), "{err}");
                }
                None => {
                    let got = run(&func, &[&a, &b]).unwrap().to_i128_vec();
                    let want: Vec<i128> = want.iter().map(|w| *w.as_ref().unwrap()).collect();
                    assert_eq!(got, want, "{op:?} on {d} ({kind:?}) of {xs:?} and {ys:?}");
                }
            }
        }
    }

    #[test]
    fn integer_division_truncates_and_floors() {
        let pairs = [
            (7, 2),
            (-7, 2),
            (7, -2),
            (-7, -2),
            (6, 3),
            (-6, 3),
            (0, -5),
            (i128::from(i32::MIN), -1),
            (i128::from(i32::MIN), 1),
            (i128::from(i32::MAX), -1),
            (1, i128::from(i32::MIN)),
        ];
        for op in [B::Div, B::Mod, B::FloorDiv, B::FloorMod] {
            check_int_op(op, DType::I32, &pairs);
            check_int_op(op, DType::I8, &[(-128, -1), (-7, 2), (100, -3), (5, 7)]);
            check_int_op(
                op,
                DType::I64,
                &[(i128::from(i64::MIN), -1), (-9, 4), (9, -4)],
            );
            check_int_op(
                op,
                DType::U32,
                &[(7, 2), (4_000_000_000, 3), (1, 4_000_000_000)],
            );
            check_int_op(op, DType::U8, &[(255, 2), (7, 200)]);
        }
    }

    #[test]
    fn integer_division_by_zero_is_an_error() {
        for op in [B::Div, B::Mod, B::FloorDiv, B::FloorMod] {
            for d in [DType::I32, DType::U8, DType::I64] {
                check_int_op(op, d, &[(1, 1), (5, 0), (3, 2)]);
            }
        }
    }

    #[test]
    fn integer_arithmetic_shifts_and_powers() {
        let pairs = [
            (1, 0),
            (1, 1),
            (-3, 2),
            (100, 7),
            (-128, 8),
            (127, 100),
            (-1, -1),
            (64, 3),
        ];
        for d in [
            DType::I8,
            DType::U8,
            DType::I16,
            DType::I32,
            DType::U32,
            DType::I64,
            DType::U64,
        ] {
            for op in [
                B::Add,
                B::Sub,
                B::Mul,
                B::Max,
                B::Min,
                B::Shl,
                B::Shr,
                B::BitAnd,
                B::BitOr,
                B::BitXor,
            ] {
                check_int_op(op, d, &pairs);
            }
            check_int_op(B::Pow, d, &[(3, 4), (-2, 7), (2, 70), (7, 0), (0, 0)]);
        }
        check_int_op(B::Pow, DType::I32, &[(2, 3), (2, -1)]);
    }

    /// Sample values of `d`: extremes, fractions, NaN and infinities for floats.
    fn samples(d: DType) -> NDArray {
        if is_float(d) {
            let v = [
                0.0,
                -0.0,
                1.0,
                -1.5,
                1.5,
                2.5,
                -2.5,
                0.49999997,
                127.9,
                -128.9,
                255.5,
                300.7,
                -300.7,
                65535.9,
                3e9,
                -3e9,
                1e20,
                -1e20,
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
            ];
            NDArray::from_f64_slice(d, &[v.len() as i64], &v).unwrap()
        } else {
            let v: [i128; 14] = [
                0,
                1,
                -1,
                2,
                127,
                -128,
                255,
                256,
                65535,
                -32768,
                i128::from(i32::MAX),
                i128::from(i32::MIN),
                i128::from(i64::MIN),
                i128::from(u64::MAX),
            ];
            NDArray::from_i128_slice(d, &[v.len() as i64], &v).unwrap()
        }
    }

    /// numpy's `astype`, as the reference evaluates `cast`.
    fn reference_cast(a: &NDArray, to: DType) -> NDArray {
        let shape = a.shape();
        if a.dtype().is_float() {
            NDArray::from_f64_slice(to, shape, &a.to_f64_vec()).unwrap()
        } else {
            NDArray::from_i128_slice(to, shape, &a.to_i128_vec()).unwrap()
        }
    }

    fn assert_same(got: &NDArray, want: &NDArray, what: &str) {
        assert_eq!(got.dtype(), want.dtype());
        if got.dtype().is_float() {
            let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
            for (k, (x, y)) in g.iter().zip(&w).enumerate() {
                assert!(same_f64(*x, *y), "{what}: element {k}: got {x}, want {y}");
            }
        } else {
            assert_eq!(got.to_i128_vec(), want.to_i128_vec(), "{what}");
        }
    }

    #[test]
    fn casts_follow_numpy_in_every_direction() {
        let dtypes = [
            DType::BOOL,
            DType::I8,
            DType::U8,
            DType::I16,
            DType::U16,
            DType::I32,
            DType::U32,
            DType::I64,
            DType::U64,
            DType::F32,
            DType::F64,
        ];
        for from in dtypes {
            let input = samples(from);
            let n = input.num_elements() as i64;
            for to in dtypes {
                let want = reference_cast(&input, to);
                for kind in [ForKind::Serial, ForKind::Vectorized { lanes: 4 }] {
                    let func = map_kernel(
                        &[(from, vec![n])],
                        to,
                        n,
                        kind,
                        LExpr::Cast(to, Box::new(load(0, var(0)))),
                    );
                    let got = run(&func, &[&input]).unwrap();
                    assert_same(&got, &want, &format!("{from} -> {to} ({kind:?})"));
                }
            }
        }
    }

    /// Distance in units in the last place between two `f32`s.
    fn ulps(a: f32, b: f32) -> u64 {
        if a == b || (a.is_nan() && b.is_nan()) {
            return 0;
        }
        let key = |x: f32| {
            let bits = x.to_bits() as i64;
            if bits < 0 {
                i64::from(i32::MIN) - bits
            } else {
                bits
            }
        };
        let (ka, kb) = (key(a), key(b));
        if a.is_sign_negative() != b.is_sign_negative() {
            return u64::MAX;
        }
        (ka - kb).unsigned_abs()
    }

    #[test]
    fn transcendental_functions_are_within_two_ulp() {
        let n = 2001i64;
        let xs: Vec<f64> = (0..n).map(|i| (i - 1000) as f64 * 0.0123).collect();
        let a = NDArray::from_f64_slice(DType::F32, &[n], &xs).unwrap();
        let cases: [(U, F1); 9] = [
            (U::Exp, f64::exp),
            (U::Tanh, f64::tanh),
            (U::Erf, math::erf),
            (U::Sigmoid, math::sigmoid),
            (U::Sin, f64::sin),
            (U::Cos, f64::cos),
            (U::Tan, f64::tan),
            (U::Log, |x| x.abs().ln()),
            (U::Rsqrt, |x| 1.0 / x.abs().sqrt()),
        ];
        for (op, reference) in cases {
            let arg = match op {
                U::Log | U::Rsqrt => LExpr::Unary(U::Abs, Box::new(load(0, var(0)))),
                _ => load(0, var(0)),
            };
            for d in [DType::F32, DType::F64] {
                let input = reference_cast(&a, d);
                let func = map_kernel(
                    &[(d, vec![n])],
                    d,
                    n,
                    ForKind::Vectorized { lanes: 4 },
                    LExpr::Unary(op, Box::new(arg.clone())),
                );
                let got = run(&func, &[&input]).unwrap().to_f64_vec();
                for (k, x) in input.to_f64_vec().iter().enumerate() {
                    let want = reference(*x);
                    if d == DType::F32 {
                        let u = ulps(got[k] as f32, want as f32);
                        assert!(u <= 2, "{op:?}({x}) = {}, want {want} ({u} ulp)", got[k]);
                    } else {
                        let tol = 4.0 * f64::EPSILON * want.abs();
                        assert!(
                            same_f64(got[k], want) || (got[k] - want).abs() <= tol,
                            "{op:?}({x}) = {}, want {want}",
                            got[k]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn float_unary_and_binary_operations_match_the_reference() {
        let input = samples(DType::F32);
        let n = input.num_elements() as i64;
        let xs = input.to_f64_vec();
        let sign = |x: f64| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x * 0.0
            }
        };
        let unary: [(U, F1); 9] = [
            (U::Neg, |x| -x),
            (U::Abs, f64::abs),
            (U::Sign, sign),
            (U::Ceil, f64::ceil),
            (U::Floor, f64::floor),
            (U::Round, f64::round_ties_even),
            (U::Trunc, f64::trunc),
            (U::Sqrt, f64::sqrt),
            (U::Log2, f64::log2),
        ];
        for (op, f) in unary {
            for kind in KINDS {
                let func = map_kernel(
                    &[(DType::F32, vec![n])],
                    DType::F32,
                    n,
                    kind,
                    LExpr::Unary(op, Box::new(load(0, var(0)))),
                );
                let got = run(&func, &[&input]).unwrap();
                let want: Vec<f64> = xs.iter().map(|&x| f(x)).collect();
                let want = NDArray::from_f64_slice(DType::F32, &[n], &want).unwrap();
                assert_same(&got, &want, &format!("{op:?} ({kind:?})"));
            }
        }
        // Binary operations against a rotated copy.
        let ys: Vec<f64> = xs.iter().cycle().skip(3).take(xs.len()).copied().collect();
        let b = NDArray::from_f64_slice(DType::F32, &[n], &ys).unwrap();
        let nan_max = |x: f64, y: f64| {
            if x.is_nan() || y.is_nan() {
                f64::NAN
            } else {
                x.max(y)
            }
        };
        let nan_min = |x: f64, y: f64| {
            if x.is_nan() || y.is_nan() {
                f64::NAN
            } else {
                x.min(y)
            }
        };
        let binary: [(B, F2); 10] = [
            (B::Add, |x, y| x + y),
            (B::Sub, |x, y| x - y),
            (B::Mul, |x, y| x * y),
            (B::Div, |x, y| x / y),
            (B::Mod, |x, y| x % y),
            (B::FloorDiv, |x, y| (x / y).floor()),
            (B::FloorMod, math::floor_mod),
            (B::Pow, f64::powf),
            (B::Max, nan_max),
            (B::Min, nan_min),
        ];
        for (op, f) in binary {
            for kind in KINDS {
                let func = map_kernel(
                    &[(DType::F32, vec![n]), (DType::F32, vec![n])],
                    DType::F32,
                    n,
                    kind,
                    bin(op, load(0, var(0)), load(1, var(0))),
                );
                let got = run(&func, &[&input, &b]).unwrap();
                let want: Vec<f64> = xs.iter().zip(&ys).map(|(&x, &y)| f(x, y)).collect();
                let want = NDArray::from_f64_slice(DType::F32, &[n], &want).unwrap();
                if matches!(op, B::Max | B::Min) {
                    // max(-0, +0) may be either zero.
                    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
                    assert!(
                        g.iter()
                            .zip(&w)
                            .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()))
                    );
                } else {
                    assert_same(&got, &want, &format!("{op:?} ({kind:?})"));
                }
            }
        }
    }

    /// Sample values of `d` for comparisons: signed zeros, infinities and NaN for floats,
    /// extremes for integers.
    fn select_samples(d: DType, n: i64, shift: usize) -> NDArray {
        let pool: Vec<f64> = if is_float(d) {
            vec![
                f64::NAN,
                -0.0,
                0.0,
                f64::INFINITY,
                f64::NEG_INFINITY,
                1.5,
                -2.0,
                3.0,
                1.5,
            ]
        } else if signed(d) {
            let max = if d == DType::I8 { 127.0 } else { 2147483647.0 };
            vec![-max - 1.0, -5.0, 0.0, 7.0, max, 7.0, -1.0]
        } else {
            vec![0.0, 5.0, 4294967295.0, 2147483648.0, 1.0, 5.0]
        };
        let xs: Vec<f64> = (0..n as usize)
            .map(|k| pool[(k * 3 + shift) % pool.len()])
            .collect();
        NDArray::from_f64_slice(d, &[n], &xs).unwrap()
    }

    #[test]
    fn vectorized_selects_match_the_serial_loop() {
        // (compared dtype, selected dtype, lanes); the last case mixes lane widths and so
        // runs per lane.
        let cases = [
            (DType::F32, DType::F32, 4),
            (DType::F64, DType::F64, 2),
            (DType::I32, DType::I32, 4),
            (DType::U32, DType::U32, 4),
            (DType::I32, DType::F32, 4),
            (DType::F32, DType::I32, 4),
            (DType::I8, DType::I8, 16),
            (DType::I64, DType::F64, 2),
            (DType::U64, DType::I64, 2),
            (DType::F64, DType::F32, 4),
        ];
        let ops = [C::Eq, C::Ne, C::Lt, C::Le, C::Gt, C::Ge];
        for (cd, vd, lanes) in cases {
            for n in [0i64, 1, 3, 4, 5, 17] {
                let inputs = [
                    select_samples(cd, n, 0),
                    select_samples(cd, n, 1),
                    select_samples(vd, n, 2),
                    select_samples(vd, n, 4),
                ];
                let refs: Vec<&NDArray> = inputs.iter().collect();
                let shapes = [(cd, vec![n]), (cd, vec![n]), (vd, vec![n]), (vd, vec![n])];
                for op in ops {
                    let body = LExpr::Select(
                        Box::new(LExpr::Compare(
                            op,
                            Box::new(load(0, var(0))),
                            Box::new(load(1, var(0))),
                        )),
                        Box::new(load(2, var(0))),
                        Box::new(load(3, var(0))),
                    );
                    let serial = map_kernel(&shapes, vd, n, ForKind::Serial, body.clone());
                    let vector = map_kernel(&shapes, vd, n, ForKind::Vectorized { lanes }, body);
                    let mixed = cd == DType::F64 && vd == DType::F32;
                    let clif = emit_clif(&vector).unwrap();
                    assert_eq!(
                        clif.contains("bitselect"),
                        !mixed && n >= i64::from(lanes),
                        "{clif}"
                    );
                    let want = run(&serial, &refs).unwrap().to_f64_vec();
                    let got = run(&vector, &refs).unwrap().to_f64_vec();
                    assert_eq!(got.len(), want.len());
                    for (g, w) in got.iter().zip(&want) {
                        assert!(
                            same_f64(*g, *w),
                            "{op:?} {cd}->{vd} n={n}: {got:?} vs {want:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn relu_of_a_repeated_subexpression_is_one_vector_select() {
        // relu(a * b + c) as nn.relu computes it: select(x > 0, x, 0) with x written twice.
        let n = 17i64;
        let x = || {
            bin(
                B::Add,
                bin(B::Mul, load(0, var(0)), load(1, var(0))),
                load(2, var(0)),
            )
        };
        let body = LExpr::Select(
            Box::new(LExpr::Compare(
                C::Gt,
                Box::new(x()),
                Box::new(LExpr::Float(0.0, DType::F32)),
            )),
            Box::new(x()),
            Box::new(LExpr::Float(0.0, DType::F32)),
        );
        let shapes = [
            (DType::F32, vec![n]),
            (DType::F32, vec![n]),
            (DType::F32, vec![n]),
        ];
        let func = map_kernel(
            &shapes,
            DType::F32,
            n,
            ForKind::Vectorized { lanes: 4 },
            body,
        );
        let clif = emit_clif(&func).unwrap();
        assert_eq!(clif.matches("load.f32x4").count(), 3, "{clif}");
        // One multiply in the vector body, two in the (unshared) scalar tail.
        assert_eq!(clif.matches("= fmul ").count(), 3, "{clif}");
        assert!(clif.contains("bitselect"), "{clif}");
        let a = select_samples(DType::F32, n, 0);
        let b = select_samples(DType::F32, n, 1);
        let c = select_samples(DType::F32, n, 2);
        let got = run(&func, &[&a, &b, &c]).unwrap().to_f64_vec();
        let (a, b, c) = (a.to_f64_vec(), b.to_f64_vec(), c.to_f64_vec());
        for k in 0..n as usize {
            let x = (a[k] as f32) * (b[k] as f32) + (c[k] as f32);
            let want = if x > 0.0 { x } else { 0.0 };
            assert!(
                same_f64(got[k], f64::from(want)),
                "{k}: {} vs {want}",
                got[k]
            );
        }
    }

    #[test]
    fn comparisons_with_nan_are_false_except_not_equal() {
        let xs = [1.0, f64::NAN, 2.0, f64::NAN, -0.0, 3.0, f64::INFINITY];
        let ys = [1.0, 1.0, f64::NAN, f64::NAN, 0.0, 2.0, f64::INFINITY];
        let n = xs.len() as i64;
        for d in [DType::F32, DType::F64] {
            let a = NDArray::from_f64_slice(d, &[n], &xs).unwrap();
            let b = NDArray::from_f64_slice(d, &[n], &ys).unwrap();
            let cases: [(C, Cmp); 6] = [
                (C::Eq, |o| o == Some(std::cmp::Ordering::Equal)),
                (C::Ne, |o| o != Some(std::cmp::Ordering::Equal)),
                (C::Lt, |o| o == Some(std::cmp::Ordering::Less)),
                (C::Le, |o| {
                    matches!(
                        o,
                        Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
                    )
                }),
                (C::Gt, |o| o == Some(std::cmp::Ordering::Greater)),
                (C::Ge, |o| {
                    matches!(
                        o,
                        Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
                    )
                }),
            ];
            for (op, f) in cases {
                for kind in KINDS {
                    let func = map_kernel(
                        &[(d, vec![n]), (d, vec![n])],
                        DType::BOOL,
                        n,
                        kind,
                        LExpr::Compare(op, Box::new(load(0, var(0))), Box::new(load(1, var(0)))),
                    );
                    let got = run(&func, &[&a, &b]).unwrap().to_i128_vec();
                    let want: Vec<i128> = xs
                        .iter()
                        .zip(&ys)
                        .map(|(x, y)| i128::from(f(x.partial_cmp(y))))
                        .collect();
                    assert_eq!(got, want, "{op:?} on {d} ({kind:?})");
                }
            }
        }
        // Predicates.
        let a = NDArray::from_f64_slice(DType::F32, &[n], &xs).unwrap();
        for (op, f) in [
            (U::IsNan, f64::is_nan as fn(f64) -> bool),
            (U::IsInf, f64::is_infinite),
            (U::IsFinite, f64::is_finite),
            (U::LogicalNot, |x| x == 0.0),
        ] {
            let func = map_kernel(
                &[(DType::F32, vec![n])],
                DType::BOOL,
                n,
                ForKind::Vectorized { lanes: 4 },
                LExpr::Unary(op, Box::new(load(0, var(0)))),
            );
            let got = run(&func, &[&a]).unwrap().to_i128_vec();
            let want: Vec<i128> = xs.iter().map(|&x| i128::from(f(x))).collect();
            assert_eq!(got, want, "{op:?}");
        }
    }

    #[test]
    fn select_picks_per_element() {
        // relu-like: out[i] = a[i] > 0 ? a[i] : b[i] * 0.5, for float32 and int32.
        for d in [DType::F32, DType::I32, DType::F64, DType::I8] {
            let n = 11i64;
            let xs: Vec<f64> = (0..n).map(|i| (i - 5) as f64).collect();
            let ys: Vec<f64> = (0..n).map(|i| (i * 3) as f64).collect();
            let a = NDArray::from_f64_slice(d, &[n], &xs).unwrap();
            let b = NDArray::from_f64_slice(d, &[n], &ys).unwrap();
            let zero = if is_float(d) {
                LExpr::Float(0.0, d)
            } else {
                LExpr::Int(0, d)
            };
            let two = if is_float(d) {
                LExpr::Float(2.0, d)
            } else {
                LExpr::Int(2, d)
            };
            for kind in KINDS {
                let func = map_kernel(
                    &[(d, vec![n]), (d, vec![n])],
                    d,
                    n,
                    kind,
                    LExpr::Select(
                        Box::new(LExpr::Compare(
                            C::Gt,
                            Box::new(load(0, var(0))),
                            Box::new(zero.clone()),
                        )),
                        Box::new(load(0, var(0))),
                        Box::new(bin(B::Mul, load(1, var(0)), two.clone())),
                    ),
                );
                let got = run(&func, &[&a, &b]).unwrap().to_f64_vec();
                let want: Vec<f64> = xs
                    .iter()
                    .zip(&ys)
                    .map(|(&x, &y)| if x > 0.0 { x } else { y * 2.0 })
                    .collect();
                assert_eq!(got, want, "{d} ({kind:?})");
            }
        }
    }

    #[test]
    fn bool_logic_and_locals() {
        // t = a[i] && !b[i]; out[i] = t ^ (a[i] | b[i]), with a body-local temporary.
        let n = 9i64;
        let xs: Vec<bool> = (0..n).map(|i| i % 2 == 0).collect();
        let ys: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
        let a = NDArray::from_bool_slice(&[n], &xs).unwrap();
        let b = NDArray::from_bool_slice(&[n], &ys).unwrap();
        for kind in KINDS {
            let func = LoopFunc {
                name: "logic".into(),
                buffers: vec![
                    buf("a", DType::BOOL, &[n], BufferRole::Input),
                    buf("b", DType::BOOL, &[n], BufferRole::Input),
                    buf("out", DType::BOOL, &[n], BufferRole::Output),
                ],
                locals: vec![
                    i64l("i"),
                    Local {
                        name: "t".into(),
                        dtype: DType::BOOL,
                    },
                ],
                body: Stmt::For {
                    var: LocalId(0),
                    extent: n,
                    kind,
                    body: Box::new(Stmt::Seq(vec![
                        Stmt::Assign {
                            local: LocalId(1),
                            value: bin(
                                B::LogicalAnd,
                                load(0, var(0)),
                                LExpr::Unary(U::LogicalNot, Box::new(load(1, var(0)))),
                            ),
                        },
                        Stmt::Store {
                            buffer: BufferId(2),
                            index: var(0),
                            value: bin(
                                B::LogicalXor,
                                var(1),
                                bin(B::BitOr, load(0, var(0)), load(1, var(0))),
                            ),
                        },
                    ])),
                },
            };
            let got = run(&func, &[&a, &b]).unwrap().to_i128_vec();
            let want: Vec<i128> = xs
                .iter()
                .zip(&ys)
                .map(|(&x, &y)| i128::from((x && !y) ^ (x | y)))
                .collect();
            assert_eq!(got, want, "{kind:?}");
        }
    }

    #[test]
    fn vectorizes_other_widths() {
        // int8 (16 lanes would be native; 4 are per lane), float64 with 2 and 4 lanes.
        for (d, lanes) in [
            (DType::I8, 4),
            (DType::F64, 2),
            (DType::F64, 4),
            (DType::I64, 2),
            (DType::I32, 4),
        ] {
            let n = 23i64;
            let xs: Vec<f64> = (0..n).map(|i| (i * 7 % 11) as f64 - 3.0).collect();
            let a = NDArray::from_f64_slice(d, &[n], &xs).unwrap();
            let func = map_kernel(
                &[(d, vec![n])],
                d,
                n,
                ForKind::Vectorized { lanes },
                bin(
                    B::Sub,
                    bin(B::Add, load(0, var(0)), load(0, var(0))),
                    LExpr::Unary(U::Neg, Box::new(load(0, var(0)))),
                ),
            );
            let got = run(&func, &[&a]).unwrap().to_f64_vec();
            let want: Vec<f64> = xs.iter().map(|x| 3.0 * x).collect();
            assert_eq!(got, want, "{d} x{lanes}");
        }
    }

    #[test]
    fn hoisted_indices_need_no_bounds_checks() {
        // for i in 0..3 { base = i * 5; for j in 0..5 (vectorized) { out[base + j] = a[base + j] * 2 } }
        let flat = bin(B::Add, var(1), var(2));
        let func = LoopFunc {
            name: "hoisted".into(),
            buffers: vec![
                buf("a", DType::F32, &[3, 5], BufferRole::Input),
                buf("out", DType::F32, &[3, 5], BufferRole::Output),
            ],
            locals: vec![i64l("i"), i64l("base"), i64l("j")],
            body: Stmt::For {
                var: LocalId(0),
                extent: 3,
                kind: ForKind::Serial,
                body: Box::new(Stmt::Seq(vec![
                    Stmt::Assign {
                        local: LocalId(1),
                        value: bin(B::Mul, var(0), idx(5)),
                    },
                    Stmt::For {
                        var: LocalId(2),
                        extent: 5,
                        kind: ForKind::Vectorized { lanes: 4 },
                        body: Box::new(Stmt::Store {
                            buffer: BufferId(1),
                            index: flat.clone(),
                            value: bin(B::Mul, load(0, flat), LExpr::Float(2.0, DType::F32)),
                        }),
                    },
                ])),
            },
        };
        let xs: Vec<f64> = (0..15).map(f64::from).collect();
        let a = NDArray::from_f64_slice(DType::F32, &[3, 5], &xs).unwrap();
        let got = run(&func, &[&a]).unwrap().to_f64_vec();
        assert_eq!(got, xs.iter().map(|x| x * 2.0).collect::<Vec<_>>());
        let text = emit_clif(&func).unwrap();
        assert!(!text.contains(" uge "), "{text}");
        assert!(text.contains("f32x4"), "{text}");
    }

    #[test]
    fn out_of_bounds_indices_are_errors_not_crashes() {
        // out[i] = a[i + 1]: the last iteration reads past `a`.
        for kind in KINDS {
            let func = map_kernel(
                &[(DType::F32, vec![8])],
                DType::F32,
                8,
                kind,
                load(0, bin(B::Add, var(0), idx(1))),
            );
            let a = NDArray::zeros(DType::F32, &[8]).unwrap();
            let err = run(&func, &[&a]).unwrap_err().to_string();
            assert!(err.contains("buffer index out of bounds"), "{err}");
        }
    }

    #[test]
    fn rejects_unsupported_and_malformed_kernels() {
        let bf16 = DType::scalar(DTypeCode::BFloat, 16);
        let bf16 = map_kernel(
            &[(bf16, vec![4])],
            bf16,
            4,
            ForKind::Serial,
            load(0, var(0)),
        );
        assert!(matches!(
            compile(&bf16),
            Err(KernelError::UnsupportedDType { .. })
        ));
        let mixed = map_kernel(
            &[(DType::F32, vec![4]), (DType::I32, vec![4])],
            DType::F32,
            4,
            ForKind::Serial,
            bin(B::Add, load(0, var(0)), load(1, var(0))),
        );
        let err = compile(&mixed).unwrap_err();
        assert!(matches!(err, KernelError::Malformed { .. }), "{err}");
        let exp_int = map_kernel(
            &[(DType::I32, vec![4])],
            DType::I32,
            4,
            ForKind::Serial,
            LExpr::Unary(U::Exp, Box::new(load(0, var(0)))),
        );
        assert!(matches!(
            compile(&exp_int),
            Err(KernelError::Malformed { .. })
        ));
    }

    /// `float16` samples: the float samples (rounded) and subnormals, the largest finite
    /// value, values next to ties.
    fn f16_samples() -> NDArray {
        let mut v = samples(DType::F32).to_f64_vec();
        v.extend([
            2f64.powi(-24),
            -3.0 * 2f64.powi(-24),
            1023.0 * 2f64.powi(-24),
            2f64.powi(-14),
            65504.0,
            -65504.0,
            1.0 + 2f64.powi(-10),
            0.1,
            -7.25,
            2049.0,
        ]);
        NDArray::from_f64_slice(DType::F16, &[v.len() as i64], &v).unwrap()
    }

    #[test]
    fn float16_casts_round_once_in_every_direction() {
        let dtypes = [
            DType::BOOL,
            DType::I8,
            DType::U8,
            DType::I16,
            DType::U16,
            DType::I32,
            DType::U32,
            DType::I64,
            DType::U64,
            DType::F16,
            DType::F32,
            DType::F64,
        ];
        // Values that round to float16 at or next to ties, beyond its range and below its
        // smallest subnormal (and one that rounding twice, through f32, would get wrong).
        let near_ties = [
            1.0 + 2f64.powi(-11),
            1.0 + 3.0 * 2f64.powi(-11),
            1.0 + 2f64.powi(-11) + 2f64.powi(-40),
            65519.0,
            65520.0,
            -65520.0,
            2f64.powi(-25),
            3.0 * 2f64.powi(-25),
            2f64.powi(-26),
            -(2f64.powi(-14) - 2f64.powi(-25)),
            1e-30,
            2049.0,
            2051.0,
            -2051.0,
        ];
        for from in dtypes {
            let mut inputs = vec![if from == DType::F16 {
                f16_samples()
            } else {
                samples(from)
            }];
            if from == DType::F32 || from == DType::F64 {
                let n = near_ties.len() as i64;
                inputs.push(NDArray::from_f64_slice(from, &[n], &near_ties).unwrap());
            }
            for to in dtypes {
                if from != DType::F16 && to != DType::F16 {
                    continue;
                }
                for input in &inputs {
                    let n = input.num_elements() as i64;
                    let want = reference_cast(input, to);
                    for kind in KINDS {
                        let func = map_kernel(
                            &[(from, vec![n])],
                            to,
                            n,
                            kind,
                            LExpr::Cast(to, Box::new(load(0, var(0)))),
                        );
                        let got = run(&func, &[input]).unwrap();
                        assert_same(&got, &want, &format!("{from} -> {to} ({kind:?})"));
                    }
                }
            }
        }
    }

    #[test]
    fn float16_operations_computed_wider_round_per_operation() {
        // What lowering makes of a float16 `add`, `multiply` and `exp`: the operation in
        // float64 on exactly widened operands, the result rounded to float16.
        let a = f16_samples();
        let n = a.num_elements() as i64;
        let b_values: Vec<f64> = (0..n).map(|i| (i as f64 * 0.7).sin() * 3.0).collect();
        let b = NDArray::from_f64_slice(DType::F16, &[n], &b_values).unwrap();
        let wide = |e: LExpr| LExpr::Cast(DType::F64, Box::new(e));
        let round = |e: LExpr| LExpr::Cast(DType::F16, Box::new(e));
        let cases: [(LExpr, F2); 3] = [
            (
                round(bin(B::Add, wide(load(0, var(0))), wide(load(1, var(0))))),
                |x, y| x + y,
            ),
            (
                round(bin(B::Mul, wide(load(0, var(0))), wide(load(1, var(0))))),
                |x, y| x * y,
            ),
            (
                round(LExpr::Unary(U::Exp, Box::new(wide(load(1, var(0)))))),
                |_, y| y.exp(),
            ),
        ];
        for (body, f) in cases {
            let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
            let expected: Vec<f64> = x.iter().zip(&y).map(|(x, y)| f(*x, *y)).collect();
            let want = NDArray::from_f64_slice(DType::F16, &[n], &expected).unwrap();
            for kind in KINDS {
                let func = map_kernel(
                    &[(DType::F16, vec![n]), (DType::F16, vec![n])],
                    DType::F16,
                    n,
                    kind,
                    body.clone(),
                );
                let got = run(&func, &[&a, &b]).unwrap();
                assert_same(&got, &want, &format!("{body:?} ({kind:?})"));
            }
        }
    }

    #[test]
    fn float16_bits_are_loaded_selected_and_stored_unchanged() {
        // NaN payloads and signed zeros pass through selects, loads and stores bit for bit;
        // constants are rounded once; a float16 condition is true unless ±0.
        let bits: [u16; 8] = [
            0x7e01, 0xfd00, 0x8000, 0x0000, 0x0001, 0x7bff, 0xfc00, 0x3555,
        ];
        let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_ne_bytes()).collect();
        let x = NDArray::from_bytes(DType::F16, &[8], &bytes).unwrap();
        let even = LExpr::Compare(
            C::Eq,
            Box::new(bin(B::Mod, var(0), idx(2))),
            Box::new(idx(0)),
        );
        let cases = [
            (
                LExpr::Select(
                    Box::new(even.clone()),
                    Box::new(load(0, var(0))),
                    Box::new(LExpr::Float(0.1, DType::F16)),
                ),
                [
                    0x7e01, 0x2e66, 0x8000, 0x2e66, 0x0001, 0x2e66, 0xfc00, 0x2e66,
                ],
            ),
            (
                LExpr::Select(
                    Box::new(even),
                    Box::new(LExpr::Int(3, DType::F16)),
                    Box::new(LExpr::Float(1e6, DType::F16)),
                ),
                [
                    0x4200, 0x7c00, 0x4200, 0x7c00, 0x4200, 0x7c00, 0x4200, 0x7c00,
                ],
            ),
            (
                LExpr::Select(
                    Box::new(load(0, var(0))),
                    Box::new(LExpr::Float(1.0, DType::F16)),
                    Box::new(LExpr::Float(-0.0, DType::F16)),
                ),
                [
                    0x3c00, 0x3c00, 0x8000, 0x8000, 0x3c00, 0x3c00, 0x3c00, 0x3c00,
                ],
            ),
        ];
        for (body, want) in cases {
            for kind in KINDS {
                let func = map_kernel(&[(DType::F16, vec![8])], DType::F16, 8, kind, body.clone());
                let got = run(&func, &[&x]).unwrap();
                let got: Vec<u16> = got
                    .as_bytes()
                    .chunks(2)
                    .map(|c| u16::from_ne_bytes([c[0], c[1]]))
                    .collect();
                assert_eq!(got, want, "{body:?} ({kind:?})");
            }
        }
    }

    #[test]
    fn float16_arithmetic_is_malformed() {
        let f16 =
            |e: LExpr| map_kernel(&[(DType::F16, vec![4])], DType::F16, 4, ForKind::Serial, e);
        let x = || Box::new(load(0, var(0)));
        let kernels = [
            f16(LExpr::Binary(B::Add, x(), x())),
            f16(LExpr::Unary(U::Neg, x())),
            map_kernel(
                &[(DType::F16, vec![4])],
                DType::BOOL,
                4,
                ForKind::Serial,
                LExpr::Compare(C::Lt, x(), x()),
            ),
            map_kernel(
                &[(DType::F16, vec![8])],
                DType::F16,
                8,
                ForKind::Vectorized { lanes: 4 },
                LExpr::Binary(B::Mul, x(), x()),
            ),
        ];
        for k in kernels {
            let err = compile(&k).unwrap_err();
            assert!(matches!(err, KernelError::Malformed { .. }), "{err}");
        }
    }

    #[test]
    fn emits_clif_text() {
        let func = map_kernel(
            &[(DType::F32, vec![8]), (DType::F32, vec![8])],
            DType::F32,
            8,
            ForKind::Vectorized { lanes: 4 },
            LExpr::Unary(
                U::Exp,
                Box::new(bin(B::Add, load(0, var(0)), load(1, var(0)))),
            ),
        );
        let text = emit_clif(&func).unwrap();
        assert!(text.contains("; kernel test_kernel body"), "{text}");
        assert!(text.contains("; kernel test_kernel packed entry"), "{text}");
        assert!(text.contains("f32x4"), "{text}");
        assert!(text.contains("= relay_expf"), "{text}");
        assert!(text.contains("relay_kernel_check_args"), "{text}");
    }
}
