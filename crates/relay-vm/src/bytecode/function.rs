//! A function of an executable: its parameters and their types, its register count, its
//! bytecode and the source locations of the instructions that can fail.

use std::fmt;

use relay_ir::{Span, Type};

use super::Instruction;

/// One function of an executable: its bytecode and the size of its register file.
#[derive(Clone, Debug)]
pub struct VmFunction {
    /// Its name (a global's name, or a lifted function's).
    pub name: String,
    /// Its parameters' names, in order; they occupy registers `0..params.len()`.
    pub params: Vec<String>,
    /// How many registers a frame of it has.
    pub register_count: u32,
    /// The instructions.
    pub code: Vec<Instruction>,
    /// Each parameter's type, when known (an entry function's arguments are checked against
    /// it: tensors and tuples of tensors).
    pub param_types: Vec<Option<Type>>,
    /// The type of its result, when known (how `relayc run` prints a result: constructor
    /// names).
    pub ret_type: Option<Type>,
    /// Source locations of the instructions that can fail at run time (calls, kernel calls,
    /// `fatal`), by instruction position, sorted.
    pub locations: Vec<(u32, SourceLocation)>,
}

/// Where an instruction came from in the program's source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceLocation {
    /// `file:line:column` (1-based, the column in characters): what run-time errors print,
    /// and what an executable file keeps.
    pub text: String,
    /// The byte range in the source text of the module the function was compiled from. A
    /// function loaded from an executable file has none: the file keeps only the text.
    pub span: Option<Span>,
}

impl PartialEq for VmFunction {
    /// Equal code, names, register counts and location texts (spans are not compared: a
    /// function loaded from a file has none), and structurally equal parameter types.
    fn eq(&self, other: &VmFunction) -> bool {
        let same_locations = self.locations.len() == other.locations.len()
            && (self.locations.iter().zip(&other.locations))
                .all(|((p, a), (q, b))| p == q && a.text == b.text);
        self.name == other.name
            && self.params == other.params
            && self.register_count == other.register_count
            && self.code == other.code
            && same_locations
            && self.param_types.len() == other.param_types.len()
            && self
                .param_types
                .iter()
                .zip(&other.param_types)
                .chain([(&self.ret_type, &other.ret_type)])
                .all(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) => relay_ir::type_eq(a, b),
                    (None, None) => true,
                    _ => false,
                })
    }
}

impl VmFunction {
    /// The most registers the function can use: its parameters or the highest register its
    /// instructions name plus one, whichever is larger, and at most one register per parameter
    /// and per register operand. The compiler numbers registers densely, so its functions
    /// never ask for more; a larger `register_count` (from a corrupt file) would only make
    /// every call allocate a huge frame.
    pub fn registers_named(&self) -> u64 {
        let (mut highest, mut operands) = (0u64, 0u64);
        for instr in &self.code {
            let (reads, write) = instr.registers();
            for r in reads.iter().chain(&write) {
                highest = highest.max(u64::from(r.0) + 1);
                operands += 1;
            }
        }
        let params = self.params.len() as u64;
        highest.max(params).min(params + operands)
    }

    /// The source location of instruction `pc`, when known.
    pub fn location(&self, pc: usize) -> Option<&SourceLocation> {
        let i = self
            .locations
            .binary_search_by_key(&(pc as u32), |(p, _)| *p)
            .ok()?;
        Some(&self.locations[i].1)
    }
}

impl fmt::Display for VmFunction {
    /// `VMFunc name(%a, %b) registers=N` then one numbered instruction per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let params: Vec<String> = self.params.iter().map(|p| format!("%{p}")).collect();
        writeln!(
            f,
            "VMFunc {}({}) registers={}",
            self.name,
            params.join(", "),
            self.register_count
        )?;
        let width = self.code.len().saturating_sub(1).to_string().len();
        for (pc, instr) in self.code.iter().enumerate() {
            writeln!(f, "  {pc:>width$}: {instr}")?;
        }
        Ok(())
    }
}
