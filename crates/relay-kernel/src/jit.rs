//! Ownership of JIT-compiled code: a [`JitCode`] owns one Cranelift `JITModule` and frees its
//! memory when dropped (Cranelift leaks it otherwise, `rust-anchors.md` §4). Kernels compiled
//! into a module share it by `Arc`, so the code lives exactly as long as the last kernel that
//! can call it.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use cranelift_codegen::ir::LibCall;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_jit::{JITBuilder, JITModule};

use crate::abi::{KernelSpec, relay_kernel_check_args, relay_kernel_report};
use crate::error::KernelError;
use crate::math;
use crate::target::Target;

/// The symbol of the argument-checking host helper ([`relay_kernel_check_args`]).
pub const CHECK_ARGS_SYMBOL: &str = "relay_kernel_check_args";

/// The symbol of the error-reporting host helper ([`relay_kernel_report`]).
pub const REPORT_SYMBOL: &str = "relay_kernel_report";

/// A new, empty JIT module for the host: `opt_level=speed`, the host's ISA features detected by
/// `cranelift-native` (`has_sse41`, `has_avx`, `has_fma`, ...), the verifier on in debug builds
/// ([`Target::host`]), and every host symbol kernels may import registered ([`new_module_for`]).
pub fn new_module() -> Result<JITModule, KernelError> {
    Ok(new_module_for(Target::host()?.isa()))
}

/// A new, empty JIT module compiling for `isa`, with every host symbol kernels may import
/// registered explicitly (the math functions of [`math`], the ABI helpers; Cranelift's
/// floating-point libcalls map to the math functions too), so nothing is ever resolved through
/// `dlsym`. For another target than the host ([`Target::parse`]) functions can be defined (and
/// their code listed) but the module must never be finalized: the host symbols are only
/// external calls in its code.
pub fn new_module_for(isa: OwnedTargetIsa) -> JITModule {
    let mut builder = JITBuilder::with_isa(isa, libcall_names());
    for s in math::host_symbols() {
        builder.symbol(s.name, s.ptr);
    }
    let check: unsafe extern "C" fn(
        *const KernelSpec,
        *const crate::abi::TVMValue,
        *const i32,
        i32,
        *mut std::ffi::c_void,
        *mut *mut u8,
    ) -> i32 = relay_kernel_check_args;
    let report: unsafe extern "C" fn(*const KernelSpec, i32, *mut std::ffi::c_void) =
        relay_kernel_report;
    for (name, ptr) in crate::host::host_symbols() {
        builder.symbol(name, ptr);
    }
    builder.symbol(CHECK_ARGS_SYMBOL, check as *const u8);
    builder.symbol(REPORT_SYMBOL, report as *const u8);
    JITModule::new(builder)
}

/// Cranelift's libcall names, with the floating-point ones (used when the host lacks SSE4.1 or
/// FMA) mapped to the registered [`math`] functions.
fn libcall_names() -> Box<dyn Fn(LibCall) -> String + Send + Sync> {
    let default = cranelift_module::default_libcall_names();
    Box::new(move |libcall| {
        let name = match libcall {
            LibCall::CeilF32 => "relay_ceilf",
            LibCall::CeilF64 => "relay_ceil",
            LibCall::FloorF32 => "relay_floorf",
            LibCall::FloorF64 => "relay_floor",
            LibCall::TruncF32 => "relay_truncf",
            LibCall::TruncF64 => "relay_trunc",
            LibCall::NearestF32 => "relay_nearestf",
            LibCall::NearestF64 => "relay_nearest",
            LibCall::FmaF32 => "relay_fmaf",
            LibCall::FmaF64 => "relay_fma",
            other => return default(other),
        };
        name.to_owned()
    })
}

/// Finalized machine code: the JIT module it lives in (freed on drop) and the
/// [`KernelSpec`]s whose addresses the code embeds (kept alive as long as the code).
pub struct JitCode {
    /// The module; taken and freed in `Drop`.
    module: ManuallyDrop<JITModule>,
    /// The specs the code points to.
    specs: Vec<Arc<KernelSpec>>,
}

// SAFETY: after finalization the module is never used again except by `Drop`, which has
// exclusive access; the code itself is immutable and may be called from any thread. The specs
// are immutable.
unsafe impl Send for JitCode {}
// SAFETY: as for `Send`: `&JitCode` gives no access to the module.
unsafe impl Sync for JitCode {}

impl JitCode {
    /// Takes ownership of a finalized module and the specs its code embeds.
    pub fn new(module: JITModule, specs: Vec<Arc<KernelSpec>>) -> Arc<JitCode> {
        Arc::new(JitCode {
            module: ManuallyDrop::new(module),
            specs,
        })
    }

    /// The specs of the kernels in this code.
    pub fn specs(&self) -> &[Arc<KernelSpec>] {
        &self.specs
    }
}

impl Drop for JitCode {
    fn drop(&mut self) {
        // SAFETY: `module` is taken exactly once, here, and never used afterwards.
        let module = unsafe { ManuallyDrop::take(&mut self.module) };
        // SAFETY: every function pointer into this module is held by a `PackedFunc` together
        // with an `Arc<JitCode>`; this is the last `Arc`, so no kernel of the module is
        // running or can be called after this point.
        unsafe { module.free_memory() };
    }
}

impl std::fmt::Debug for JitCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JitCode({} kernels)", self.specs.len())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use relay_ir::DType;
    use relay_ir::te::{BinaryOp, UnaryOp};

    use crate::loops::{
        Buffer, BufferId, BufferRole, ForKind, LExpr, Local, LocalId, LoopFunc, Stmt,
    };
    use crate::packed::compile;

    /// `out[i] = exp(a[i]) + a[i] * k` on float32 `[64]` (distinct kernels by `k`).
    fn small_kernel(k: f64) -> LoopFunc {
        let a = || LExpr::Load {
            buffer: BufferId(0),
            index: Box::new(LExpr::Local(LocalId(0))),
        };
        LoopFunc {
            name: format!("small_{k}"),
            buffers: vec![
                Buffer {
                    name: "p0".into(),
                    dtype: DType::F32,
                    shape: vec![64],
                    role: BufferRole::Input,
                },
                Buffer {
                    name: "out".into(),
                    dtype: DType::F32,
                    shape: vec![64],
                    role: BufferRole::Output,
                },
            ],
            locals: vec![Local {
                name: "i".into(),
                dtype: DType::I64,
            }],
            body: Stmt::For {
                var: LocalId(0),
                extent: 64,
                kind: ForKind::Vectorized { lanes: 4 },
                body: Box::new(Stmt::Store {
                    buffer: BufferId(1),
                    index: LExpr::Local(LocalId(0)),
                    value: LExpr::Binary(
                        BinaryOp::Add,
                        Box::new(LExpr::Unary(UnaryOp::Exp, Box::new(a()))),
                        Box::new(LExpr::Binary(
                            BinaryOp::Mul,
                            Box::new(a()),
                            Box::new(LExpr::Float(k, DType::F32)),
                        )),
                    ),
                }),
            },
        }
    }

    #[test]
    fn compiles_a_small_kernel_quickly() {
        let func = small_kernel(2.0);
        compile(&func).unwrap();
        let start = Instant::now();
        let runs = 20;
        for _ in 0..runs {
            compile(&func).unwrap();
        }
        let each = start.elapsed() / runs;
        eprintln!("compile time of one small kernel: {each:?}");
        // Generous: debug builds with the verifier on take a few milliseconds.
        assert!(each.as_millis() < 500, "{each:?}");
    }
}
