//! The Relay virtual machine (docs/design.md §9): a register-based bytecode, the compiler from the
//! lowered IR to it, the executable, the VM that runs it and calls the JIT-compiled kernels,
//! and the pooled allocator behind `AllocStorage`.
//!
//! - [`compile`] turns a module lowered by the pass pipeline (fused, ANF, lifted,
//!   manifested) into an [`Executable`]: bytecode per function, the constant pool and the
//!   kernel table.
//! - [`Vm`] runs an executable: frames on a heap stack, register files sized at compile time,
//!   kernels called in destination-passing style on storage from the [`PooledAllocator`].
//!
//! [`PooledAllocator`]: allocator::PooledAllocator

pub mod allocator;
pub mod bytecode;
pub mod compiler;
pub mod error;
pub mod executable;
pub mod file;
pub mod interrupt;
mod prepack;
pub mod profile;
pub mod scalar;
pub mod specialized;
pub mod trace;
pub mod vm;

pub use bytecode::{Instruction, Reg, VmFunction};
pub use compiler::compile;
pub use error::{CompileError, VmError, VmErrorKind};
pub use executable::{Executable, KernelEntry};
pub use file::ExeFileError;
pub use interrupt::Interrupt;
pub use profile::Profile;
pub use vm::{Vm, VmClosure, VmOptions};
