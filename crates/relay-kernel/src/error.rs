//! Errors of the kernel compiler's back end: compiling a loop nest to machine code and calling
//! the result.

use miette::Diagnostic;
use relay_ir::OpError;
use thiserror::Error;

/// Why a kernel could not be compiled or a call failed.
#[derive(Debug, Clone, PartialEq, Eq, Error, Diagnostic)]
pub enum KernelError {
    /// The kernel uses a dtype the code generator does not handle yet.
    #[error("kernel {kernel}: unsupported dtype {dtype}")]
    #[diagnostic(
        code(relay::kernel::unsupported_dtype),
        help(
            "vector dtypes are not compiled yet; the interpreter runs them (`--executor interp`)"
        )
    )]
    UnsupportedDType {
        /// The kernel's name.
        kernel: String,
        /// The dtype, as TVM spells it.
        dtype: String,
    },
    /// The loop nest is malformed (a bug in lowering).
    #[error("kernel {kernel}: malformed loop nest: {message}")]
    #[diagnostic(
        code(relay::kernel::malformed),
        help(
            "this is a bug in the kernel compiler; `relayc build --emit kernels` shows the loop nest"
        )
    )]
    Malformed {
        /// The kernel's name.
        kernel: String,
        /// What is wrong.
        message: String,
    },
    /// Cranelift rejected the generated code or could not emit it (a bug in code generation).
    #[error("kernel {kernel}: code generation failed: {message}")]
    #[diagnostic(
        code(relay::kernel::codegen),
        help(
            "this is a bug in the kernel compiler; `relayc build --emit clif` shows the Cranelift IR"
        )
    )]
    Codegen {
        /// The kernel's name.
        kernel: String,
        /// Cranelift's message.
        message: String,
    },
    /// Cranelift's backend for the target of a listing (`relayc build --target TARGET --emit
    /// clif|asm`) cannot compile the kernel, though it compiles for the host.
    #[error("kernel {kernel}: cannot be compiled for {target}: {message}")]
    #[diagnostic(
        code(relay::kernel::target),
        help(
            "the target's Cranelift backend lacks an instruction or type the kernel uses (on \
             riscv64, 128-bit vectors need the V extension: `+v`)"
        )
    )]
    Target {
        /// The kernel's name.
        kernel: String,
        /// The target as given.
        target: String,
        /// Cranelift's message.
        message: String,
    },
    /// The host machine is not supported by Cranelift.
    #[error("the host machine is not supported by the JIT: {message}")]
    #[diagnostic(code(relay::kernel::host))]
    Host {
        /// Cranelift's message.
        message: String,
    },
    /// A call passed arguments that do not match the kernel's buffers, or the kernel reported
    /// a run-time error (integer division by zero).
    #[error("{message}")]
    #[diagnostic(code(relay::kernel::call))]
    Call {
        /// The kernel's name.
        kernel: String,
        /// The message from the kernel's error slot (it names the kernel).
        message: String,
    },
    /// The primitive function cannot be compiled yet: an operator without a compute
    /// definition, a dynamic shape, a tensor constant inside it.
    #[error("kernel {kernel}: {message}")]
    #[diagnostic(
        code(relay::kernel::unsupported),
        help(
            "if its operators are defined for these types, the interpreter runs it \
             (`relayc run --executor interp`)"
        )
    )]
    Unsupported {
        /// The kernel's name.
        kernel: String,
        /// What is not supported.
        message: String,
    },
    /// An operator's compute definition rejected the call: a dynamic shape, a dtype or an
    /// attribute it does not handle. Printed, coded and advised as [`KernelError::Unsupported`].
    #[error("kernel {kernel}: operator `{op}`: {error}")]
    #[diagnostic(
        code(relay::kernel::unsupported),
        help(
            "if its operators are defined for these types, the interpreter runs it \
             (`relayc run --executor interp`)"
        )
    )]
    Operator {
        /// The kernel's name.
        kernel: String,
        /// The operator, e.g. `nn.conv2d`.
        op: &'static str,
        /// What its compute definition said, by kind.
        error: OpError,
    },
    /// A tensor or expression past the kernel compiler's limits: a shape whose element count
    /// overflows `int64`, an expression of too many operations once its producers are inlined.
    #[error("kernel {kernel}: too large to compile: {what}")]
    #[diagnostic(
        code(relay::kernel::too_large),
        help("the interpreter runs it (`relayc run --executor interp`)")
    )]
    TooLarge {
        /// The kernel's name.
        kernel: String,
        /// What is too large.
        what: String,
    },
    /// No schedule computes the kernel: a reduction read inside another reduction's body that
    /// stays unschedulable even once materialized.
    #[error("kernel {kernel}: cannot schedule the reduction `{tensor}`")]
    #[diagnostic(
        code(relay::kernel::unschedulable),
        help(
            "this is a bug in the kernel compiler; `relayc build --emit kernels` shows the loop nest"
        )
    )]
    Unschedulable {
        /// The kernel's name.
        kernel: String,
        /// The reduction's tensor.
        tensor: String,
    },
    /// The caller's compile function failed (the kernel cache passes its error on).
    #[error("{message}")]
    #[diagnostic(code(relay::kernel::lower))]
    Lower {
        /// Why.
        message: String,
    },
}

impl KernelError {
    /// Whether the error says the kernel is not supported yet (as opposed to a bug or a failed
    /// call).
    pub fn is_unsupported(&self) -> bool {
        matches!(
            self,
            KernelError::Unsupported { .. }
                | KernelError::UnsupportedDType { .. }
                | KernelError::Operator { .. }
        )
    }
}
