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
//! without a Cranelift instruction calls the [`math`] host functions, but for the functions
//! [`vmath`] computes inline (`float32` `exp`, `log`, `tanh`, `sigmoid`, `erf`, `float64`
//! `exp` of an `f64x2`, `power` by a small constant); `float32`
//! `FloorDiv` and `Rsqrt` compute in `f64`, as the reference does. `float16` values are `i16`
//! bit patterns that are only loaded, stored, assigned, selected and converted: lowering
//! computes every `float16` operation in a wider float and rounds its result (`lower.rs`), so
//! any other operation on one is a malformed kernel; a conversion from `float16` widens exactly
//! to `f32` and goes on from there, one to `float16` rounds once (ties to even) from `f32` or
//! `f64` (anything else converts to `f64` first), both inline and branch-free ([`half`]),
//! bit-exact with the [`math`] host functions `relay_f16_to_f32`, `relay_f32_to_f16` and
//! `relay_f64_to_f16` (which stay the reference); in a vectorized loop of 4 lanes, four
//! `float16` values are the low half of an `i16x8` (one 64-bit load or store), converted to
//! and from `f32x4` as a whole. `bfloat16` and the 8-bit floats are held as their bits and
//! converted by host calls (docs/design.md §7.7).
//!
//! Loops: `Serial` loops count up; a `Parallel` loop is outlined into a function of its own,
//! `fn(buffers, ctx, lo, hi) -> i32` running iterations `lo..hi` (vectorized like a
//! `Vectorized` loop when it has lanes), which the body hands to the host's
//! `relay_kernel_parallel_for` with the kernel context (its thread pool); `Vectorized { lanes }` loops run a vector main loop over
//! `extent / lanes * lanes` iterations and a scalar tail. In the vector body, an index that is
//! the loop counter plus a loop-invariant base gives contiguous accesses — one Cranelift vector
//! load or store (`f32x4`, `i32x4`, `f64x2`: 128 bits; flags without `aligned`) when the element
//! type times the lanes is 128 bits, else one scalar access per lane; loop-invariant values stay
//! scalar (splatted when combined with vectors); other indices are gathered and scattered lane
//! by lane. Float arithmetic (`+ - * /`, min, max, neg, abs, sqrt) and integer `+ -` and bitwise
//! operations use vector instructions, the [`vmath`] functions vector code, and so does a
//! select whose condition compares values of the selected values' lane width (a comparison mask
//! and a `bitselect`); everything else (host math calls, integer division, other comparisons and
//! selects, casts) runs per lane.
//! Structurally equal compound expressions of a vectorized body share their code until the next
//! assignment. A vectorized loop whose body is not a straight line of stores and assignments,
//! reads a buffer it writes, or reads a local before assigning it, runs serially, and so does
//! every loop on a target without vector types (riscv64 without the V extension, for
//! `relayc build --target`).
//!
//! Memory safety does not rest on lowering being right: every load and store whose flat index
//! cannot be proven within its buffer by interval arithmetic over the loop bounds gets a
//! run-time check returning `ERR_OUT_OF_BOUNDS`.

mod bounds;
mod depthwise;
mod entry;
mod gemm;
mod half;
#[cfg(test)]
mod half_tests;
mod loops;
#[cfg(test)]
mod minifloat_tests;
mod scalar;
#[cfg(test)]
mod tests;
mod vector;
mod vmath;
#[cfg(test)]
mod vmath_tests;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
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
    ArgSpec, DATA_ALIGNMENT, DLDataType, ERR_DIV_BY_ZERO, ERR_HOST, ERR_MOD_BY_ZERO,
    ERR_NEGATIVE_POWER, ERR_OUT_OF_BOUNDS, KernelSpec,
};
use crate::analysis::lanes::{accumulation, accumulators, vector_legal, walk_locals};
use crate::error::KernelError;
use crate::host::{DGEMM_SYMBOL, HGEMM_SYMBOL, PARALLEL_FOR_SYMBOL, SGEMM_SYMBOL};
use crate::jit::{self, CHECK_ARGS_SYMBOL, REPORT_SYMBOL};
use crate::loops::range::Ranges;
use crate::loops::{BufferId, BufferRole, ForKind, Gemm, LExpr, LocalId, LoopFunc, Stmt};
use crate::math;
use crate::target::Target;

use entry::*;
use vector::*;

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

/// Which text of a kernel's functions a listing holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeText {
    /// The Cranelift IR as code generation built it, before Cranelift's own passes.
    Clif,
    /// The machine code: Cranelift's listing of the instructions it emitted (its VCode, after
    /// register allocation), with symbolic branch targets and external names.
    Asm,
}

/// The Cranelift IR of a kernel's body and packed entry, as text (`relayc build --emit clif`),
/// for the host.
pub fn emit_clif(func: &LoopFunc) -> Result<String, KernelError> {
    emit_text(func, None, CodeText::Clif)
}

/// The Cranelift IR or machine code of a kernel's functions (its parallel loops, body and
/// packed entry), as text, compiled for `target` (the host when `None`): `relayc build --emit
/// clif|asm [--target TARGET]`. The code is compiled, never run, so it goes through the
/// target's backend whatever the target. A kernel another target's backend cannot compile is a
/// [`KernelError::Target`] naming it — also when the backend panics (riscv64's does on vector
/// types without the V extension, which code generation avoids; the panic message still goes to
/// stderr).
pub fn emit_text(
    func: &LoopFunc,
    target: Option<&Target>,
    what: CodeText,
) -> Result<String, KernelError> {
    let mut module = match target {
        Some(target) => jit::new_module_for(target.isa()),
        None => jit::new_module()?,
    };
    let mut listing = Listing {
        what,
        text: String::new(),
    };
    let defined = match target {
        None => define(&mut module, func, 0, DATA_ALIGNMENT, Some(&mut listing)),
        Some(_) => {
            let define = AssertUnwindSafe(|| {
                define(&mut module, func, 0, DATA_ALIGNMENT, Some(&mut listing))
            });
            std::panic::catch_unwind(define).unwrap_or_else(|payload| {
                Err(KernelError::Codegen {
                    kernel: func.name.clone(),
                    message: format!("Cranelift panicked: {}", panic_message(&*payload)),
                })
            })
        }
    };
    // SAFETY: nothing was finalized, so no pointer into the module exists.
    unsafe { module.free_memory() };
    match (defined, target) {
        (Ok(_), _) => Ok(listing.text),
        (Err(KernelError::Codegen { kernel, message }), Some(target)) => Err(KernelError::Target {
            kernel,
            target: target.name().to_owned(),
            message,
        }),
        (Err(error), _) => Err(error),
    }
}

/// The message of a caught panic.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// The text of a kernel's functions, gathered while they are compiled.
#[derive(Debug)]
pub struct Listing {
    /// Which text.
    pub what: CodeText,
    /// The text so far.
    pub text: String,
}

/// Compiles the function in `ctx` into `module` as `id` and clears `ctx`. With a listing
/// asked, returns the function's text after `header`, then a blank line: its Cranelift IR as
/// built (taken before Cranelift's passes change it), or its machine code after a line naming
/// each external function it refers to.
fn compile_function(
    module: &mut JITModule,
    id: FuncId,
    ctx: &mut Context,
    listing: Option<CodeText>,
    header: &str,
) -> Result<String, String> {
    let clif = match listing {
        Some(CodeText::Clif) => format!("{header}{}\n", ctx.func.display()),
        _ => String::new(),
    };
    let names = match listing {
        Some(CodeText::Asm) => external_names(module, &ctx.func),
        _ => String::new(),
    };
    ctx.set_disasm(listing == Some(CodeText::Asm));
    module
        .define_function(id, ctx)
        .map_err(|e| cranelift_module::ModuleError::to_string(&e))?;
    let text = match listing {
        Some(CodeText::Asm) => {
            let code = ctx.compiled_code().and_then(|c| c.vcode.as_deref());
            format!("{header}{names}{}\n", code.unwrap_or_default())
        }
        _ => clif,
    };
    module.clear_context(ctx);
    Ok(text)
}

/// A `; userextnameN = SYMBOL` line for each function of `module` that `func` refers to, as
/// the machine code listing names them.
fn external_names(module: &JITModule, func: &cranelift_codegen::ir::Function) -> String {
    let mut lines = String::new();
    for (name_ref, name) in func.params.user_named_funcs() {
        // cranelift-module puts functions in namespace 0 (and data objects in 1).
        let symbol = if name.namespace == 0 {
            let id = FuncId::from_u32(name.index);
            module
                .declarations()
                .get_function_decl(id)
                .linkage_name(id)
                .into_owned()
        } else {
            format!("u{}:{}", name.namespace, name.index)
        };
        lines.push_str(&format!("; {name_ref} = {symbol}\n"));
    }
    lines
}

/// Compiles `func` into `module` as the `index`-th kernel of the module (which makes its symbol
/// names unique), appending the text of its functions to `listing` when asked.
pub fn define(
    module: &mut JITModule,
    func: &LoopFunc,
    index: usize,
    alignment: u64,
    mut listing: Option<&mut Listing>,
) -> Result<Defined, KernelError> {
    let spec = Arc::new(KernelSpec {
        alignment,
        ..kernel_spec(func)?
    });
    let codegen_err = |message: String| KernelError::Codegen {
        kernel: func.name.clone(),
        message,
    };
    let ptr = module.target_config().pointer_type();
    let mut fctx = FunctionBuilderContext::new();
    let what = listing.as_ref().map(|l| l.what);

    // The body.
    let mut body_sig = module.make_signature();
    body_sig.params.push(AbiParam::new(ptr));
    body_sig.params.push(AbiParam::new(ptr));
    body_sig.returns.push(AbiParam::new(types::I32));
    let body_name = format!("k{index}.{}.body", func.name);
    let body_id = module
        .declare_function(&body_name, Linkage::Local, &body_sig)
        .map_err(|e| codegen_err(e.to_string()))?;
    let mut ctx = module.make_context();
    ctx.func.signature = body_sig;
    let mut header = format!("; kernel {} body\n", func.name);
    {
        let config = module.target_config();
        let b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let mut g = Gen::new(func, b, module, ptr)?;
        g.symbol = body_name.clone();
        g.listing = what;
        g.body()?;
        g.b.seal_all_blocks();
        g.b.finalize(config);
        if let Some(listing) = listing.as_deref_mut() {
            listing.text.extend(g.outlined_text.drain(..));
        }
        if what == Some(CodeText::Clif) {
            let mut lines: Vec<String> = g
                .imports
                .iter()
                .map(|(name, f)| format!("; {f} = {name}\n"))
                .collect();
            lines.sort();
            header.extend(lines);
        }
    }
    let text = compile_function(module, body_id, &mut ctx, what, &header).map_err(codegen_err)?;
    if let Some(listing) = listing.as_deref_mut() {
        listing.text.push_str(&text);
    }

    // The packed entry.
    let entry_id = define_entry(
        module, func, index, body_id, &spec, &mut ctx, &mut fctx, listing,
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
        alignment: DATA_ALIGNMENT,
    })
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
            // `bfloat16` and the 8-bit floats: their bits, converted by host calls.
            _ if d.minifloat().is_some() => Some(Type::int(u16::from(d.bits)).unwrap_or(types::I8)),
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
    /// The value ranges of the loop counters in scope and of the locals assigned once
    /// (hoisted indices), for bounds checks.
    ranges: Ranges,
    /// Imported host functions.
    imports: HashMap<String, FuncRef>,
    /// The block returning an error code (its parameter), once needed.
    err: Option<Block>,
    /// Whether the target compiles 128-bit vector types ([`crate::target::has_vectors`]):
    /// without them every loop runs serially.
    vectors: bool,
    /// Whether vector rounding instructions are native (on x86-64, SSE4.1).
    vector_rounding: bool,
    /// Whether the target has fused multiply-add (on x86-64, `has_avx` and `has_fma`): the
    /// inline math's polynomials use it (one rounding per step instead of two, half the
    /// operations).
    fma: bool,
    /// The kernel context (the packed call's resource handle), once the body has begun.
    ctx: Option<Value>,
    /// The buffer address array the function received, once it has begun.
    ptrs: Option<Value>,
    /// The function's symbol (outlined parallel loops are named after it).
    symbol: String,
    /// How many parallel loops have been outlined from this function.
    outlined: usize,
    /// Which text of the functions a listing asks for (`relayc build --emit clif|asm`).
    listing: Option<CodeText>,
    /// The text of the outlined functions, when a listing asks for it.
    outlined_text: Vec<String>,
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
        let isa = module.isa();
        let (vector_rounding, fma) = (isa.has_round(), isa.has_native_fma());
        let vectors = crate::target::has_vectors(isa);
        Ok(Gen {
            func,
            b,
            module,
            ptr,
            bases: Vec::new(),
            lens,
            vars,
            ranges: Ranges::default(),
            imports: HashMap::new(),
            err: None,
            vector_rounding,
            fma,
            vectors,
            ctx: None,
            ptrs: None,
            symbol: String::new(),
            outlined: 0,
            listing: None,
            outlined_text: Vec::new(),
        })
    }

    fn malformed(&self, message: impl Into<String>) -> KernelError {
        malformed(self.func, message)
    }

    /// Emits the whole body function.
    fn body(&mut self) -> R<()> {
        self.prologue()?;
        self.ranges = Ranges::of(self.func);
        self.stmt(&self.func.body)?;
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
}

fn malformed(func: &LoopFunc, message: impl Into<String>) -> KernelError {
    KernelError::Malformed {
        kernel: func.name.clone(),
        message: message.into(),
    }
}
