//! The VM's instruction set (docs/design.md §9, TVM's Relay VM in `reference/tvm-vm.md` §1.2, plus
//! tail calls and references): a Rust enum, one instruction per line in text form (`relayc
//! build --emit bytecode`, `relayc disasm`), and a validator that checks every register, jump
//! target and table index of a function — what the compiler asserts and what loading an
//! executable file checks before anything runs.
//!
//! Every instruction is listed once, in the instruction table (`instruction.rs`): its name, its
//! text form and its fields with their operand kinds (`operand.rs`). The enum, the names, the
//! printer, the file encoding and decoding, the register lists and the per-operand checks of
//! the validator (`validate.rs`) all follow from the table (`table.rs` generates them), so a new
//! instruction is one entry.
//!
//! Registers are per frame; a function's parameters occupy registers `0..n`. Jump offsets are
//! relative to the instruction's own position, as in TVM.

use std::fmt;

#[macro_use]
mod operand;
#[macro_use]
mod table;
mod function;
mod instruction;
#[cfg(test)]
mod tests;
mod validate;

pub use function::{SourceLocation, VmFunction};
pub use instruction::{Instruction, Opcode};
pub use operand::{DecodeOperand, EncodeOperand, Operand};
pub use validate::{BytecodeError, Tables, validate};

/// A register of the current frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reg(pub u32);

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "${}", self.0)
    }
}
