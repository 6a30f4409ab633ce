//! The text of a module's kernels, as `relayc build --emit schedule|kernels|clif|asm` prints
//! it and the `test schedule`, `test kernels` and `test clif` files of `ir-tests/kernels/` pin
//! it: each kernel's schedule, loop nest, Cranelift IR or machine code after a `// kernel NAME`
//! line, one blank line between kernels. The Cranelift IR and the machine code are for the host
//! or for another target ([`print_kernels_for`]).

use std::fmt::Write as _;

use relay_ir::Function;

use crate::codegen::CodeText;
use crate::schedule::Schedule;
use crate::target::Target;
use crate::{KernelError, codegen, is_dynamic, lower_primitive};

/// Which text of each kernel a listing holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelText {
    /// The loop nest ([`crate::loops::LoopFunc`] printed).
    LoopNest,
    /// The Cranelift IR of the kernel's body and its packed entry ([`codegen::emit_text`]).
    Clif,
    /// The machine code of the kernel's functions, as Cranelift lists it
    /// ([`codegen::emit_text`]).
    Asm,
    /// The decisions lowering made ([`crate::schedule::Schedule`] printed).
    Schedule,
}

/// What a listing says of a kernel with dynamic (`?`) dimensions instead of its text, and what
/// `relayc build` reports of it.
pub const DYNAMIC_NOTE: &str = "dynamic shapes; compiled when called, for the argument shapes \
                                (relay_kernel::compile_primitive_for)";

/// What a listing says of a kernel the kernel library computes whole (`crate::host_op`: the
/// recurrences, softmax), which has no loop nest.
pub const HOST_NOTE: &str = "computed by the kernel library (no loop nest)";

/// What a listing says of a kernel with `?` dimensions the kernel library computes whole: one
/// kernel for every shape (`crate::compile_generic`).
pub const GENERIC_NOTE: &str =
    "computed by the kernel library at every shape (no loop nest, no specialization)";

/// What a listing says of a kernel with `?` dimensions that are rows it computes
/// independently: loop nests compiled once for chunks of rows (`crate::rows`).
pub const ROWS_NOTE: &str = "rows of any number: loop nests compiled once for chunks of rows \
                             (no specialization per shape)";

/// What a listing says of a kernel with `?` dimensions whose operators broadcast
/// elementwise: loop nests compiled once for spans of the innermost dimension
/// (`crate::broadcast`).
pub const BROADCAST_NOTE: &str = "any shape that broadcasts: loop nests compiled once for spans \
                                  of the innermost dimension (no specialization per shape)";

/// The listing of `kernels` (as [`crate::primitive_functions`] lists a module's), in their
/// order: for each, a `// kernel NAME` line and its text, or a `// kernel NAME: ` line with
/// [`DYNAMIC_NOTE`] for a kernel with dynamic shapes; kernels are separated by one blank line.
/// Every kernel is attempted; when some fail, the error is each failing kernel's index in
/// `kernels` with why. The Cranelift IR and machine code are the host's.
pub fn print_kernels(
    kernels: &[(String, Function)],
    text: KernelText,
) -> Result<String, Vec<(usize, KernelError)>> {
    print_kernels_for(kernels, text, None)
}

/// The listing of `kernels` as [`print_kernels`] makes it, with their Cranelift IR and machine
/// code compiled for `target` (the host when `None`); a kernel that target's backend cannot
/// compile is a [`KernelError::Target`].
pub fn print_kernels_for(
    kernels: &[(String, Function)],
    text: KernelText,
    target: Option<&Target>,
) -> Result<String, Vec<(usize, KernelError)>> {
    let mut listing = String::new();
    let mut failures = Vec::new();
    for (index, (name, func)) in kernels.iter().enumerate() {
        if let Some(op) = crate::host_op::host_op(func) {
            match op {
                Ok(_) => {
                    if !listing.is_empty() {
                        listing.push('\n');
                    }
                    let note = if is_dynamic(func) {
                        GENERIC_NOTE
                    } else {
                        HOST_NOTE
                    };
                    let _ = writeln!(listing, "// kernel {name}: {note}");
                }
                Err(error) => failures.push((index, error)),
            }
            continue;
        }
        if is_dynamic(func) {
            if !listing.is_empty() {
                listing.push('\n');
            }
            let note = if crate::rows::is_row_function(func) {
                ROWS_NOTE
            } else if crate::broadcast::is_broadcast_function(func) {
                BROADCAST_NOTE
            } else {
                DYNAMIC_NOTE
            };
            let _ = writeln!(listing, "// kernel {name}: {note}");
            continue;
        }
        let printed = lower_primitive(func, name).and_then(|loops| match text {
            KernelText::LoopNest => Ok(loops.to_string()),
            KernelText::Clif => codegen::emit_text(&loops, target, CodeText::Clif),
            KernelText::Asm => codegen::emit_text(&loops, target, CodeText::Asm),
            KernelText::Schedule => Ok(Schedule::of(&loops).to_string()),
        });
        match printed {
            Ok(body) => {
                if !listing.is_empty() {
                    listing.push('\n');
                }
                let _ = writeln!(listing, "// kernel {name}");
                listing.push_str(&body);
                if !body.ends_with('\n') {
                    listing.push('\n');
                }
            }
            Err(error) => failures.push((index, error)),
        }
    }
    if failures.is_empty() {
        Ok(listing)
    } else {
        Err(failures)
    }
}
