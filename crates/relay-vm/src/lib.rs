//! The Relay virtual machine (DESIGN §6): a register-based bytecode, the compiler from the
//! lowered IR to it, the executable, the VM that runs it and calls the JIT-compiled kernels,
//! and the pooled allocator behind `AllocStorage`.
//!
//! Status (issue 6, in progress): the instruction set with its printer and validator
//! ([`bytecode`]), the executable ([`executable`]) and the pooled allocator ([`allocator`]); the
//! compiler and the VM follow.

pub mod allocator;
pub mod bytecode;
pub mod executable;
