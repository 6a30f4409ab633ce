//! The Relay reference interpreter: runs a module's IR directly. It is the oracle every pass,
//! kernel and the VM are tested against, so it is written for clarity and robustness first.
//!
//! Semantics (SPEC §3): strict, call-by-value, lexical scope; closures capture by value;
//! `match` tries clauses in order; references are the only mutable state. Types are irrelevant
//! at run time: the interpreter never reads checked types, so it runs modules that were not
//! type-checked as long as they are well-typed.
//!
//! Invariants:
//! - Relay calls never recurse natively: frames and continuations live on heap stacks
//!   (`machine.rs`), so recursion depth is bounded only by memory and
//!   [`InterpOptions::max_frames`]; calls in tail position replace the caller's frame, so tail
//!   recursion runs in constant space. A call whose value a `let` chain binds and returns
//!   (`let %x = f(...); %x`, with at most aliases and `memory.kill`s of other variables
//!   between) is in tail position too, so a module runs in constant frames after the pass
//!   pipeline (`tail_call`'s `tail=True` calls are written so) as it did before.
//! - Every failure is a [`RunError`] naming the global function and the source location;
//!   no input makes the interpreter panic.

mod closure;
mod error;
mod format;
mod inputs;
mod machine;
mod release;

use relay_ir::{Expr, Module, Symbol, Type, Value};

pub use error::{RunError, RunErrorKind};
pub use format::{format_tensor, format_value};
pub use inputs::{
    MAX_RANDOM_ELEMENTS, SplitMix64, compare_tensors, compare_values, floats_close, random_inputs,
    random_tensor,
};
pub use release::drop_value;

/// Settings of a run.
#[derive(Clone, Debug)]
pub struct InterpOptions {
    /// The most call frames live at once; deeper recursion is "recursion limit exceeded".
    pub max_frames: usize,
}

impl Default for InterpOptions {
    fn default() -> Self {
        InterpOptions {
            max_frames: 1_000_000,
        }
    }
}

/// Runs global function `entry` (with or without its `@`) of a module on `args`.
///
/// Tensor and tuple arguments are checked against the parameters' annotations (dtype, rank and
/// every known dimension); other values are taken as they are.
pub fn run(
    module: &Module,
    entry: &str,
    args: Vec<Value>,
    opts: &InterpOptions,
) -> Result<Value, RunError> {
    let name = Symbol::intern(entry.strip_prefix('@').unwrap_or(entry));
    let mut machine = machine::Machine::new(module, opts);
    let Some(func) = machine.global(name) else {
        return Err(RunError::new(
            RunErrorKind::UnknownFunction,
            format!("no global function `@{name}` in the module"),
            module,
            None,
            relay_ir::Span::DUMMY,
        ));
    };
    let params = &func.func.params;
    if params.len() != args.len() {
        let count = |n: usize| {
            if n == 1 {
                "1 argument".to_owned()
            } else {
                format!("{n} arguments")
            }
        };
        return Err(RunError::new(
            RunErrorKind::Arity,
            format!(
                "`@{name}` takes {}, got {}",
                count(params.len()),
                args.len()
            ),
            module,
            None,
            func.span,
        ));
    }
    for (param, arg) in params.iter().zip(&args) {
        if let Some(ty) = param.ty()
            && let Some(problem) = relay_ir::value_mismatch(ty, arg)
        {
            return Err(RunError::new(
                RunErrorKind::BadArgument,
                format!(
                    "argument `%{}` of `@{name}` expects `{ty}`, got {problem}",
                    param.name()
                ),
                module,
                None,
                param.span(),
            ));
        }
    }
    machine.call_global(func, args)
}

/// Evaluates `expr`, an expression with no free variables, in the context of `module` (its
/// globals and constructors).
pub fn run_expr(module: &Module, expr: &Expr, opts: &InterpOptions) -> Result<Value, RunError> {
    machine::Machine::new(module, opts).eval_closed(expr, None)
}

/// Calls the function value `callee` (a closure the interpreter made, e.g. one a run returned)
/// on `args`.
pub fn apply(
    module: &Module,
    callee: Value,
    args: Vec<Value>,
    opts: &InterpOptions,
) -> Result<Value, RunError> {
    machine::Machine::new(module, opts).call_value(callee, args)
}

/// The result type of global function `entry` as far as it is known: its annotation, else the
/// checked type of its body. [`format_value`] uses it to name constructors.
pub fn result_type(module: &Module, entry: &str) -> Option<Type> {
    let name = Symbol::intern(entry.strip_prefix('@').unwrap_or(entry));
    let func = module.function(name)?;
    func.func
        .ret_type
        .clone()
        .or_else(|| func.func.body.checked_type().cloned())
}
