//! The pass-preservation property: on a program that type-checks and has `@main`, every
//! registered pass run alone, and the whole default pipeline, produce (with every pass's
//! output type-checked and verified) a module that prints as re-parsable, type-checking text
//! and whose `@main` computes what the original's does on the same seeded random inputs.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

use relay_ir::{Module, Symbol, Value};
use relay_passes::PassManager;

use crate::test_pass::{INPUT_SEED, check_printed, compare_with, run_main};
use crate::{Failure, test_pipeline};

/// Programs whose original run takes longer than this are skipped (with a note on stderr), so
/// the property stays fast enough for every `cargo test`.
pub const MAX_ORIGINAL_RUN: Duration = Duration::from_secs(2);

/// Programs whose original run takes longer than this are checked against the default
/// pipeline only, not against every pass alone.
pub const MAX_RUN_PER_PASS: Duration = Duration::from_millis(250);

/// What a program has to be for the property to apply to it, and what it does.
enum Oracle {
    /// The program does not parse or type-check, or has no `@main`: nothing to preserve.
    NotApplicable,
    /// `@main` takes a parameter that random inputs cannot fill: only the passes' own checks
    /// (type-checking, verification, printing) apply.
    NoInputs,
    /// The original's run took too long to repeat for every pass.
    TooSlow(Duration),
    /// The inputs, what the original computes on them (or its run-time error), and how long
    /// that took.
    Run {
        inputs: Vec<Value>,
        expected: Result<Value, String>,
        time: Duration,
    },
}

/// Checks the property on the program in `path` (whose contents are `text`). Every pass runs
/// whatever fails before it; the failure lists every pass that broke the program. Programs
/// whose original run is slow are checked against the default pipeline only
/// ([`MAX_RUN_PER_PASS`]) or skipped ([`MAX_ORIGINAL_RUN`]), with a note on stderr.
pub fn check_program(path: &Path, text: &str) -> Result<(), Failure> {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let Ok(module) = relay_syntax::parse(text, &name) else {
        return Ok(());
    };
    let oracle = oracle(&module);
    match &oracle {
        Oracle::NotApplicable => return Ok(()),
        Oracle::TooSlow(time) => {
            eprintln!(
                "note: {}: skipped, the original run takes {:.1} s (more than {} s)",
                crate::display_path(path),
                time.as_secs_f64(),
                MAX_ORIGINAL_RUN.as_secs()
            );
            return Ok(());
        }
        Oracle::NoInputs | Oracle::Run { .. } => {}
    }

    let mut problems = Vec::new();
    let passes = match &oracle {
        Oracle::Run { time, .. } if *time > MAX_RUN_PER_PASS => {
            eprintln!(
                "note: {}: the original run takes {:.2} s, so only the default pipeline runs",
                crate::display_path(path),
                time.as_secs_f64()
            );
            &[]
        }
        _ => relay_passes::all_passes(),
    };
    for &pass in passes {
        let manager = PassManager::new(vec![pass], 2).verify_each(true);
        if let Err(problem) = check_one(&module, &manager, &oracle) {
            problems.push(format!("pass `{}`: {problem}", pass.name()));
        }
    }
    match test_pipeline::default_pipeline() {
        Ok(manager) => {
            if let Err(problem) = check_one(&module, &manager, &oracle) {
                problems.push(format!("the default pipeline: {problem}"));
            }
        }
        Err(failure) => problems.push(failure.message().to_owned()),
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(problems.join("\n\n")))
    }
}

/// Type-checks `module`, makes random inputs for its `@main` and runs it once.
fn oracle(module: &Module) -> Oracle {
    if relay_types::check_module(module).is_err() {
        return Oracle::NotApplicable;
    }
    let Some(main) = module.function(Symbol::intern("main")) else {
        return Oracle::NotApplicable;
    };
    let Ok(inputs) = relay_interp::random_inputs(&main.func, INPUT_SEED) else {
        return Oracle::NoInputs;
    };
    let start = Instant::now();
    let expected = run_main(module, inputs.clone());
    let time = start.elapsed();
    if time > MAX_ORIGINAL_RUN {
        return Oracle::TooSlow(time);
    }
    Oracle::Run {
        inputs,
        expected,
        time,
    }
}

/// Runs `manager` on `module` and checks its output against the oracle. A panic in a pass is
/// reported as a failure of that pass.
fn check_one(module: &Module, manager: &PassManager, oracle: &Oracle) -> Result<(), String> {
    let ran = catch_unwind(AssertUnwindSafe(|| manager.run(module.clone())));
    let transformed = match ran {
        Ok(Ok((transformed, _))) => transformed,
        Ok(Err(error)) => return Err(format!("{error}")),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            return Err(format!("panicked: {message}"));
        }
    };
    check_printed(&transformed, "transformed").map_err(|failure| failure.message().to_owned())?;
    let Oracle::Run {
        inputs, expected, ..
    } = oracle
    else {
        return Ok(());
    };
    compare_with(&transformed, inputs.clone(), expected)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn programs_without_main_or_types_are_skipped() {
        let path = Path::new("x.relay");
        check_program(path, "not relay").unwrap();
        check_program(path, "#[version = \"0.0.5\"]\ndef @f() { add(1, 2f) }\n").unwrap();
        check_program(path, "#[version = \"0.0.5\"]\ndef @f() { 1 }\n").unwrap();
    }

    #[test]
    fn a_changed_result_is_reported() {
        let module = relay_syntax::parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(3), float32]) { add(%x, 1f) }\n",
            "x.relay",
        )
        .unwrap();
        let Oracle::Run { inputs, .. } = oracle(&module) else {
            panic!("the module runs");
        };
        let manager = PassManager::new(vec![], 2).verify_each(true);
        let wrong = Oracle::Run {
            inputs: inputs.clone(),
            expected: Ok(Value::tuple(vec![])),
            time: Duration::ZERO,
        };
        let err = check_one(&module, &manager, &wrong).unwrap_err();
        assert!(err.contains("computes a different result"), "{err}");
        let arity = Oracle::Run {
            inputs: vec![],
            expected: Ok(Value::tuple(vec![])),
            time: Duration::ZERO,
        };
        let err = check_one(&module, &manager, &arity).unwrap_err();
        assert!(err.contains("the transformed one fails"), "{err}");
        let failed = Oracle::Run {
            inputs,
            expected: Err("boom".to_owned()),
            time: Duration::ZERO,
        };
        let err = check_one(&module, &manager, &failed).unwrap_err();
        assert!(err.contains("the transformed one runs"), "{err}");
    }
}
