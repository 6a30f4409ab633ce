//! The pass manager: runs a pipeline of passes, re-infers types where a pass needs them, and
//! offers print-before/after, verify-each, time-passes, opt-level gating and skip.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::time::{Duration, Instant};

use miette::{GraphicalReportHandler, GraphicalTheme};
use relay_ir::{Expr, Module, PrintOptions, Symbol};

use crate::config::{find_option, pass_help};
use crate::{
    Invariants, OptionValue, Pass, PassContext, PassError, PipelineConfig, all_passes,
    pass_by_name, verify_module,
};

/// The wall time and statistics of one pass run.
#[derive(Clone, Debug)]
pub struct PassTiming {
    /// The pass.
    pub pass: &'static str,
    /// Wall time.
    pub time: std::time::Duration,
    /// The statistics it reported.
    pub stats: Vec<(String, i64)>,
}

/// A pipeline ready to run.
pub struct PassManager {
    passes: Vec<&'static dyn Pass>,
    opt_level: u32,
    /// The entry function (`@main` by default), given to every pass.
    entry: Symbol,
    /// Option values set for each pass, over the declared defaults.
    options: BTreeMap<&'static str, Vec<(&'static str, OptionValue)>>,
    verify_each: bool,
    time_passes: bool,
    /// Whether the `time_passes` report is JSON.
    time_passes_json: bool,
    stats: bool,
    print_before: Vec<String>,
    print_after: Vec<String>,
    print_after_all: bool,
    skip: Vec<String>,
}

/// Why a pipeline stopped.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum PassManagerError {
    /// A pass failed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Pass(#[from] PassError),
    /// Type inference failed on a pass's output (a bug in the pass).
    #[error("the output of pass `{pass}` does not type-check:\n{rendered}")]
    #[diagnostic(
        code(relay::pass::ill_typed),
        help("this is a bug in pass `{pass}`; `--print-after {pass}` shows its output")
    )]
    IllTyped {
        /// The pass.
        pass: &'static str,
        /// The rendered type errors.
        rendered: String,
    },
    /// The verifier rejected a pass's output (a bug in the pass).
    #[error("the output of pass `{pass}` is malformed:\n{messages}")]
    #[diagnostic(
        code(relay::pass::malformed),
        help("this is a bug in pass `{pass}`; `--print-after {pass}` shows its output")
    )]
    Malformed {
        /// The pass.
        pass: &'static str,
        /// The verifier's messages, one per line.
        messages: String,
    },
}

impl PassManager {
    /// A pipeline of `passes` at `opt_level`.
    pub fn new(passes: Vec<&'static dyn Pass>, opt_level: u32) -> PassManager {
        PassManager {
            passes,
            opt_level,
            entry: Symbol::intern("main"),
            options: BTreeMap::new(),
            verify_each: false,
            time_passes: false,
            time_passes_json: false,
            stats: false,
            print_before: Vec::new(),
            print_after: Vec::new(),
            print_after_all: false,
            skip: Vec::new(),
        }
    }

    /// The pipeline `config` describes, options and debug settings included.
    pub fn from_config(config: &PipelineConfig) -> PassManager {
        let mut manager = PassManager::new(config.passes.clone(), config.opt_level);
        for setting in &config.options {
            manager.set_typed_option(setting.pass, setting.option, setting.value);
        }
        let debug = &config.debug;
        manager.verify_each = debug.verify_each;
        manager.time_passes = debug.time_passes;
        manager.print_before = debug.print_before.iter().map(|s| s.to_string()).collect();
        manager.print_after = debug.print_after.iter().map(|s| s.to_string()).collect();
        manager.print_after_all = debug.print_after_all;
        manager.skip = debug.skip.iter().map(|s| s.to_string()).collect();
        manager
    }

    /// Type-checks and verifies the output of every pass.
    pub fn verify_each(mut self, on: bool) -> PassManager {
        self.verify_each = on;
        self
    }

    /// Reports each pass's wall time and statistics when the pipeline finishes.
    pub fn time_passes(mut self, on: bool) -> PassManager {
        self.time_passes = on;
        self
    }

    /// With [`PassManager::time_passes`], writes the report as JSON ([`timing_json`]) instead
    /// of a table.
    pub fn time_passes_json(mut self, on: bool) -> PassManager {
        self.time_passes_json = on;
        self
    }

    /// Reports each pass's statistics when the pipeline finishes.
    pub fn stats(mut self, on: bool) -> PassManager {
        self.stats = on;
        self
    }

    /// Prints the module before each run of pass `name`.
    pub fn print_before(mut self, name: &str) -> PassManager {
        self.print_before.push(name.to_string());
        self
    }

    /// Prints the module after each run of pass `name`.
    pub fn print_after(mut self, name: &str) -> PassManager {
        self.print_after.push(name.to_string());
        self
    }

    /// Prints the module after every pass.
    pub fn print_after_all(mut self, on: bool) -> PassManager {
        self.print_after_all = on;
        self
    }

    /// Compiles for entry function `name` (with or without `@`) instead of `@main`:
    /// `eliminate_dead_code` keeps what it reaches.
    pub fn entry(mut self, name: &str) -> PassManager {
        self.entry = Symbol::intern(name.strip_prefix('@').unwrap_or(name));
        self
    }

    /// Does not run pass `name`.
    pub fn skip(mut self, name: &str) -> PassManager {
        self.skip.push(name.to_string());
        self
    }

    /// The pipeline's passes, in order (skipped and gated ones included).
    pub fn passes(&self) -> &[&'static dyn Pass] {
        &self.passes
    }

    /// Sets option `option` of pass `pass` from its text (`"256"`, `"true"`), parsed as the
    /// option's declared kind. The error names the valid passes or options.
    pub fn set_option(&mut self, pass: &str, option: &str, value: &str) -> Result<(), String> {
        // The pipeline's own passes first, so a pipeline of passes outside the registry can
        // be configured too.
        let found = self
            .passes
            .iter()
            .copied()
            .find(|p| p.name() == pass)
            .or_else(|| pass_by_name(pass));
        let Some(found) = found else {
            return Err(format!(
                "unknown pass `{pass}`; {}",
                pass_help(pass, all_passes())
            ));
        };
        let declared = find_option(found, option)?;
        let parsed = match declared.default {
            OptionValue::Int(_) => value.trim().parse().map(OptionValue::Int).ok(),
            OptionValue::Bool(_) => match value.trim() {
                "true" => Some(OptionValue::Bool(true)),
                "false" => Some(OptionValue::Bool(false)),
                _ => None,
            },
        };
        let Some(parsed) = parsed else {
            return Err(format!(
                "option `{}.{}` expects {}, found `{value}`",
                found.name(),
                declared.name,
                declared.default.kind()
            ));
        };
        declared
            .check(parsed)
            .map_err(|why| format!("option `{}.{}` expects {why}", found.name(), declared.name))?;
        self.set_typed_option(found.name(), declared.name, parsed);
        Ok(())
    }

    /// Sets an option already checked against the pass's declaration.
    fn set_typed_option(&mut self, pass: &'static str, option: &'static str, value: OptionValue) {
        let options = self.options.entry(pass).or_default();
        match options.iter_mut().find(|(name, _)| *name == option) {
            Some(slot) => slot.1 = value,
            None => options.push((option, value)),
        }
    }

    /// Runs the pipeline on a type-checked module, writing what `print_*`, `time_passes` and
    /// `stats` ask for to stderr. The result is type-checked again (so every node has its
    /// checked type).
    pub fn run(&self, module: Module) -> Result<(Module, Vec<PassTiming>), PassManagerError> {
        self.run_with_output(module, &mut io::stderr().lock())
    }

    /// Runs the pipeline on a type-checked module, writing what `print_*`, `time_passes` and
    /// `stats` ask for to `out`. A failed write to `out` is ignored: it only holds debugging
    /// output, and the pipeline's result does not depend on it.
    pub fn run_with_output(
        &self,
        mut module: Module,
        out: &mut dyn io::Write,
    ) -> Result<(Module, Vec<PassTiming>), PassManagerError> {
        let mut timings = Vec::new();
        let mut inference = Duration::ZERO;
        let mut invariants = Invariants::default();
        // The input is type-checked. `changed_by` names the last pass that changed the module
        // since types were last inferred (`None` while the module is typed): a type error found
        // later is that pass's fault.
        let mut changed_by: Option<&'static str> = None;
        for &pass in &self.passes {
            let name = pass.name();
            if self.skip.iter().any(|s| s == name)
                || (pass.opt_level() > self.opt_level && !pass.required())
            {
                continue;
            }
            if pass.needs_types()
                && let Some(culprit) = changed_by.take()
            {
                inference += retype(&module, culprit)?;
            }
            if self.print_before.iter().any(|s| s == name) {
                dump(out, "before", name, &module);
            }
            let mut cx = PassContext::new(pass, self.opt_level);
            cx.entry = self.entry;
            for &(option, value) in self.options.get(name).into_iter().flatten() {
                cx.set_option(option, value);
            }
            let before = module.clone();
            let start = Instant::now();
            module = pass.run(module, &mut cx)?;
            timings.push(PassTiming {
                pass: name,
                time: start.elapsed(),
                stats: cx.take_stats(),
            });
            if !same_module(&before, &module) {
                changed_by = Some(name);
            }
            drop(before);
            invariants = invariants.union(pass.establishes());
            if self.print_after_all || self.print_after.iter().any(|s| s == name) {
                dump(out, "after", name, &module);
            }
            if self.verify_each {
                if let Some(culprit) = changed_by.take() {
                    inference += retype(&module, culprit)?;
                }
                verify(&module, invariants, name)?;
            }
        }
        if let Some(culprit) = changed_by {
            inference += retype(&module, culprit)?;
        }
        if self.time_passes {
            let report = if self.time_passes_json {
                format!("{:#}\n", timing_json(&timings, inference))
            } else {
                timing_table(&timings, inference)
            };
            let _ = out.write_all(report.as_bytes());
        }
        if self.stats {
            let _ = out.write_all(stats_list(&timings).as_bytes());
        }
        Ok((module, timings))
    }
}

/// Writes the module with a header line saying where in the pipeline it is.
fn dump(out: &mut dyn io::Write, when: &str, pass: &str, module: &Module) {
    let text = relay_ir::print_module(module, &PrintOptions::default());
    let _ = writeln!(out, "// {when} pass {pass}");
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = writeln!(out);
    }
}

/// Whether a pass gave back its input: the same functions (by identity of their bodies and
/// parameters) and type definitions. A pass that rebuilt nothing needs no new type inference.
fn same_module(a: &Module, b: &Module) -> bool {
    a.types.len() == b.types.len()
        && a.types.iter().zip(&b.types).all(|(x, y)| x.name == y.name)
        && a.functions.len() == b.functions.len()
        && a.functions.iter().zip(&b.functions).all(|(x, y)| {
            x.name == y.name
                && Expr::ptr_eq(&x.func.body, &y.func.body)
                && x.func.params == y.func.params
                && x.func.attrs == y.func.attrs
                && x.func.type_params.len() == y.func.type_params.len()
                && match (&x.func.ret_type, &y.func.ret_type) {
                    (None, None) => true,
                    (Some(s), Some(t)) => relay_ir::Type::ptr_eq(s, t),
                    _ => false,
                }
        })
}

/// The `--time-passes` table: each pass's wall time, its share of the total, and its
/// statistics; then type inference between passes and the total.
/// The rows of [`timing_table`] as JSON: `passes` (each pass's name, `time_ms`, `share` in
/// percent and `stats`, an object of its statistics), `type_inference_ms` and `total_ms`.
fn timing_json(timings: &[PassTiming], inference: Duration) -> serde_json::Value {
    let total: Duration = timings.iter().map(|t| t.time).sum::<Duration>() + inference;
    let ms = |time: Duration| time.as_secs_f64() * 1000.0;
    let share = |time: Duration| share_of(time, total);
    let passes: Vec<serde_json::Value> = timings
        .iter()
        .map(|t| {
            let stats: serde_json::Map<String, serde_json::Value> = t
                .stats
                .iter()
                .map(|(name, value)| (name.clone(), (*value).into()))
                .collect();
            serde_json::json!({
                "pass": t.pass, "time_ms": ms(t.time), "share": share(t.time), "stats": stats,
            })
        })
        .collect();
    serde_json::json!({
        "passes": passes,
        "type_inference_ms": ms(inference),
        "total_ms": ms(total),
    })
}

/// `time` as a percentage of `total` (0 when `total` is zero).
fn share_of(time: Duration, total: Duration) -> f64 {
    if total.is_zero() {
        0.0
    } else {
        100.0 * time.as_secs_f64() / total.as_secs_f64()
    }
}

fn timing_table(timings: &[PassTiming], inference: Duration) -> String {
    let total: Duration = timings.iter().map(|t| t.time).sum::<Duration>() + inference;
    let share = |time: Duration| share_of(time, total);
    let ms = |time: Duration| time.as_secs_f64() * 1000.0;
    let width = timings
        .iter()
        .map(|t| t.pass.len())
        .chain(["type inference".len()])
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<width$}  {:>10}  {:>6}  statistics",
        "pass", "time (ms)", "share"
    );
    for t in timings {
        let stats = t
            .stats
            .iter()
            .map(|(name, value)| format!("{name}: {value}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            out,
            "{:<width$}  {:>10.3}  {:>5.1}%  {stats}",
            t.pass,
            ms(t.time),
            share(t.time)
        );
        // The statistics column is empty for most passes; trim the padding it leaves.
        if stats.is_empty() {
            let trimmed = out.trim_end().len();
            out.truncate(trimmed);
            out.push('\n');
        }
    }
    let _ = writeln!(
        out,
        "{:<width$}  {:>10.3}  {:>5.1}%",
        "type inference",
        ms(inference),
        share(inference)
    );
    let _ = writeln!(
        out,
        "{:<width$}  {:>10.3}  {:>5.1}%",
        "total",
        ms(total),
        100.0
    );
    out
}

/// The `--stats` list: one `pass: statistic = value` line per statistic.
fn stats_list(timings: &[PassTiming]) -> String {
    let mut out = String::new();
    for t in timings {
        for (name, value) in &t.stats {
            let _ = writeln!(out, "{}: {name} = {value}", t.pass);
        }
    }
    if out.is_empty() {
        out.push_str("no pass reported statistics\n");
    }
    out
}

/// Re-runs type inference on the output of `pass`, returning how long it took.
fn retype(module: &Module, pass: &'static str) -> Result<Duration, PassManagerError> {
    let start = Instant::now();
    match relay_types::check_module(module) {
        Ok(_warnings) => Ok(start.elapsed()),
        Err(errors) => Err(PassManagerError::IllTyped {
            pass,
            rendered: render_type_errors(&errors),
        }),
    }
}

/// Renders type errors as `relayc check` would show them without color; errors whose labels lie
/// far along a line (where miette's renderer cannot pad) are listed by message instead.
fn render_type_errors(errors: &relay_types::TypeErrors) -> String {
    let far_line = errors
        .src
        .as_ref()
        .is_some_and(|src| src.inner().lines().any(|line| line.len() > 60_000));
    if !far_line {
        let mut out = String::new();
        let handler =
            GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_width(80);
        if handler.render_report(&mut out, errors).is_ok() {
            return out;
        }
    }
    errors.errors.iter().map(|e| format!("  × {e}\n")).collect()
}

/// Verifies the output of `pass`.
fn verify(
    module: &Module,
    invariants: Invariants,
    pass: &'static str,
) -> Result<(), PassManagerError> {
    verify_module(module, invariants).map_err(|errors| PassManagerError::Malformed {
        pass,
        messages: errors
            .iter()
            .map(|e| e.message.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    })
}

#[cfg(test)]
mod tests {
    use relay_ir::{ExprKind, Span};

    use super::*;

    const PROGRAM: &str = "#[version = \"0.0.5\"]\ndef @main(%x: int32) -> int32 {\n  %x\n}\n";

    /// The parsed program, type-checked if `typed`.
    fn program(typed: bool) -> Module {
        let module = relay_syntax::parse(PROGRAM, "test.relay").unwrap();
        if typed {
            relay_types::check_module(&module).unwrap();
        }
        module
    }

    /// `@main`'s body.
    fn main_body(module: &Module) -> &Expr {
        &module.functions[0].func.body
    }

    /// Replaces `@main`'s body `b` with `(b,).index`, new nodes without types.
    fn wrap_main(mut module: Module, index: u32) -> Module {
        let body = main_body(&module).clone();
        let tuple = Expr::new(ExprKind::Tuple(vec![body]), Span::DUMMY);
        module.functions[0].func.body = Expr::new(ExprKind::Proj { tuple, index }, Span::DUMMY);
        module
    }

    /// Changes the module: `(b,).0`.
    struct Rewrap;

    impl Pass for Rewrap {
        fn name(&self) -> &'static str {
            "rewrap"
        }
        fn description(&self) -> &'static str {
            "wraps @main's body in a one-tuple and projects it back out"
        }
        fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
            Ok(wrap_main(module, 0))
        }
    }

    /// Claims A-normal form but wraps the body as [`Rewrap`] does, which is not.
    struct FalseAnf;

    impl Pass for FalseAnf {
        fn name(&self) -> &'static str {
            "false_anf"
        }
        fn description(&self) -> &'static str {
            "claims A-normal form without producing it"
        }
        fn establishes(&self) -> Invariants {
            Invariants {
                anf: true,
                ..Invariants::default()
            }
        }
        fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
            Ok(wrap_main(module, 0))
        }
    }

    /// Makes the module ill-typed: `(b,).1`.
    struct Break;

    impl Pass for Break {
        fn name(&self) -> &'static str {
            "break"
        }
        fn description(&self) -> &'static str {
            "projects a field a one-tuple does not have"
        }
        fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
            Ok(wrap_main(module, 1))
        }
    }

    /// Needs types; reports whether `@main`'s body has one as the statistic `typed`.
    struct ReadsTypes;

    impl Pass for ReadsTypes {
        fn name(&self) -> &'static str {
            "reads_types"
        }
        fn description(&self) -> &'static str {
            "reports whether @main's body is typed"
        }
        fn needs_types(&self) -> bool {
            true
        }
        fn run(&self, module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
            cx.stat(
                "typed",
                i64::from(main_body(&module).checked_type().is_some()),
            );
            Ok(module)
        }
    }

    /// Leaves the module alone.
    struct Identity;

    impl Pass for Identity {
        fn name(&self) -> &'static str {
            "identity"
        }
        fn description(&self) -> &'static str {
            "does nothing"
        }
        fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
            Ok(module)
        }
    }

    /// Runs only at opt level 3.
    struct Aggressive;

    impl Pass for Aggressive {
        fn name(&self) -> &'static str {
            "aggressive"
        }
        fn description(&self) -> &'static str {
            "an opt-level-3 pass"
        }
        fn opt_level(&self) -> u32 {
            3
        }
        fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
            Ok(module)
        }
    }

    /// An opt-level-3 pass the VM requires.
    struct Lowering;

    impl Pass for Lowering {
        fn name(&self) -> &'static str {
            "lowering"
        }
        fn description(&self) -> &'static str {
            "a required opt-level-3 pass"
        }
        fn opt_level(&self) -> u32 {
            3
        }
        fn required(&self) -> bool {
            true
        }
        fn run(&self, module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
            Ok(module)
        }
    }

    /// Always fails.
    struct Fails;

    impl Pass for Fails {
        fn name(&self) -> &'static str {
            "fails"
        }
        fn description(&self) -> &'static str {
            "fails"
        }
        fn run(&self, _module: Module, _cx: &mut PassContext) -> Result<Module, PassError> {
            Err(PassError::new("fails", "cannot do this", Span::DUMMY))
        }
    }

    /// The names of the passes that ran.
    fn ran(timings: &[PassTiming]) -> Vec<&'static str> {
        timings.iter().map(|t| t.pass).collect()
    }

    /// The `typed` statistic each run of `ReadsTypes` reported.
    fn typed_stats(timings: &[PassTiming]) -> Vec<i64> {
        timings
            .iter()
            .filter(|t| t.pass == "reads_types")
            .map(|t| t.stats[0].1)
            .collect()
    }

    /// Runs `manager`, returning the result and what it wrote.
    fn run_capturing(
        manager: &PassManager,
        module: Module,
    ) -> (Result<(Module, Vec<PassTiming>), PassManagerError>, String) {
        let mut out = Vec::new();
        let result = manager.run_with_output(module, &mut out);
        (result, String::from_utf8(out).unwrap())
    }

    #[test]
    fn opt_level_gates_passes_unless_required() {
        let passes: Vec<&'static dyn Pass> = vec![&Identity, &Aggressive, &Lowering];
        for (level, expected) in [
            (0, vec!["identity", "lowering"]),
            (2, vec!["identity", "lowering"]),
            (3, vec!["identity", "aggressive", "lowering"]),
        ] {
            let (_, timings) = PassManager::new(passes.clone(), level)
                .run(program(true))
                .unwrap();
            assert_eq!(ran(&timings), expected, "opt level {level}");
        }
    }

    #[test]
    fn skipped_passes_do_not_run() {
        let manager = PassManager::new(vec![&Identity, &Lowering, &Identity], 3)
            .skip("identity")
            .skip("lowering");
        let (_, timings) = manager.run(program(true)).unwrap();
        assert!(timings.is_empty());
    }

    #[test]
    fn types_are_inferred_again_before_a_pass_that_needs_them() {
        // After a change, the pass that needs types sees them.
        let manager = PassManager::new(vec![&Rewrap, &ReadsTypes], 2);
        let (_, timings) = manager.run(program(true)).unwrap();
        assert_eq!(typed_stats(&timings), [1]);

        // A pass that changed nothing does not trigger inference: the untyped input (which
        // breaks the manager's precondition on purpose) reaches the pass untyped.
        let manager = PassManager::new(vec![&Identity, &ReadsTypes], 2);
        let (_, timings) = manager.run(program(false)).unwrap();
        assert_eq!(typed_stats(&timings), [0]);

        // Two changes in a row, then two passes that need types: both see them.
        let manager = PassManager::new(vec![&Rewrap, &Rewrap, &ReadsTypes, &ReadsTypes], 2);
        let (_, timings) = manager.run(program(true)).unwrap();
        assert_eq!(typed_stats(&timings), [1, 1]);
    }

    #[test]
    fn the_result_is_typed() {
        let (module, _) = PassManager::new(vec![&Rewrap], 2)
            .run(program(true))
            .unwrap();
        assert!(main_body(&module).checked_type().is_some());
        assert!(matches!(main_body(&module).kind(), ExprKind::Proj { .. }));
    }

    #[test]
    fn an_ill_typed_output_names_the_pass_that_produced_it() {
        // Found by verify-each right after the pass.
        let manager = PassManager::new(vec![&Break, &Identity], 2).verify_each(true);
        let err = manager.run(program(true)).unwrap_err();
        let PassManagerError::IllTyped { pass, rendered } = &err else {
            panic!("expected an ill-typed error, got {err:?}");
        };
        assert_eq!(*pass, "break");
        assert!(rendered.contains("has no field 1"), "{rendered}");
        assert!(
            err.to_string()
                .starts_with("the output of pass `break` does not type-check")
        );

        // Found before a later pass that needs types, or at the end: still `break`'s fault.
        for passes in [
            vec![&Break as &'static dyn Pass, &Identity, &ReadsTypes],
            vec![&Break, &Identity],
        ] {
            let err = PassManager::new(passes, 2).run(program(true)).unwrap_err();
            assert!(
                matches!(err, PassManagerError::IllTyped { pass: "break", .. }),
                "{err:?}"
            );
        }
    }

    #[test]
    fn verify_each_checks_what_the_passes_so_far_established() {
        // `rewrap`'s output is well-formed; once `false_anf` has claimed A-normal form, the
        // same shape is not, and the error names the pass whose output broke the promise.
        let manager = PassManager::new(vec![&Rewrap, &FalseAnf, &Identity], 2).verify_each(true);
        let err = manager.run(program(true)).unwrap_err();
        let PassManagerError::Malformed { pass, messages } = &err else {
            panic!("expected a malformed error, got {err:?}");
        };
        assert_eq!(*pass, "false_anf");
        assert!(messages.contains("A-normal form"), "{messages}");

        // Without verify-each nothing checks the promise.
        let manager = PassManager::new(vec![&Rewrap, &FalseAnf, &Identity], 2);
        assert!(manager.run(program(true)).is_ok());
    }

    #[test]
    fn a_pass_error_stops_the_pipeline() {
        let manager = PassManager::new(vec![&Fails, &Rewrap], 2).print_after_all(true);
        let (result, out) = run_capturing(&manager, program(true));
        let err = result.unwrap_err();
        assert_eq!(err.to_string(), "pass `fails`: cannot do this");
        assert!(out.is_empty(), "{out}");
    }

    #[test]
    fn print_before_and_after() {
        let manager = PassManager::new(vec![&Identity, &Rewrap, &Identity], 2)
            .print_before("rewrap")
            .print_after("rewrap");
        let (result, out) = run_capturing(&manager, program(true));
        result.unwrap();
        let expected = format!(
            "// before pass rewrap\n{PROGRAM}// after pass rewrap\n\
             #[version = \"0.0.5\"]\ndef @main(%x: int32) -> int32 {{\n  (%x,).0\n}}\n"
        );
        assert_eq!(out, expected);

        let manager =
            PassManager::new(vec![&Identity, &Rewrap, &Aggressive], 2).print_after_all(true);
        let (_, out) = run_capturing(&manager, program(true));
        let headers: Vec<&str> = out.lines().filter(|l| l.starts_with("//")).collect();
        // The gated pass did not run, so it prints nothing.
        assert_eq!(headers, ["// after pass identity", "// after pass rewrap"]);
    }

    #[test]
    fn time_passes_and_stats() {
        let manager = PassManager::new(vec![&Rewrap, &ReadsTypes], 2)
            .time_passes(true)
            .stats(true);
        let (result, out) = run_capturing(&manager, program(true));
        result.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 6, "{out}");
        assert!(lines[0].starts_with("pass "), "{out}");
        assert!(lines[0].contains("time (ms)") && lines[0].ends_with("statistics"));
        assert!(lines[1].starts_with("rewrap "), "{out}");
        assert!(lines[2].starts_with("reads_types "), "{out}");
        assert!(lines[2].ends_with("%  typed: 1"), "{out}");
        assert!(lines[3].starts_with("type inference "), "{out}");
        assert!(
            lines[4].starts_with("total ") && lines[4].ends_with("100.0%"),
            "{out}"
        );
        assert_eq!(lines[5], "reads_types: typed = 1");
    }

    #[test]
    fn nothing_is_written_unless_asked() {
        let manager = PassManager::new(vec![&Rewrap, &ReadsTypes], 2).verify_each(true);
        let (result, out) = run_capturing(&manager, program(true));
        result.unwrap();
        assert!(out.is_empty(), "{out}");
    }

    #[test]
    fn from_config_takes_the_debug_settings() {
        let config = PipelineConfig {
            passes: vec![&Identity, &Aggressive, &Rewrap],
            opt_level: 3,
            options: Vec::new(),
            debug: crate::DebugConfig {
                skip: vec!["identity"],
                print_after: vec!["aggressive"],
                ..crate::DebugConfig::default()
            },
        };
        let manager = PassManager::from_config(&config);
        let (result, out) = run_capturing(&manager, program(true));
        let (_, timings) = result.unwrap();
        assert_eq!(ran(&timings), ["aggressive", "rewrap"]);
        assert!(out.starts_with("// after pass aggressive\n"), "{out}");
        assert_eq!(out.matches("// after pass").count(), 1);
    }
}
