//! Scale tests of the middle end: programs with 100,000 chained bindings go through the whole
//! default pipeline (`passes.toml`, every pass's output type-checked and verified) on an
//! ordinary 2 MB thread stack, and the interpreter computes the same result before and after.
//!
//! Each test prints the time every pass took, and fails naming the pass if one takes longer
//! than [`PASS_TIME_LIMIT`] (a pass quadratic in the number of bindings would).

use std::path::Path;
use std::time::{Duration, Instant};

use relay_interp::InterpOptions;
use relay_ir::{Module, Symbol};
use relay_passes::{Invariants, PassManager, PipelineConfig, verify_module};

/// Length of the long chains.
const N: usize = 100_000;

/// The most time one pass may take on a 100,000-binding program, even in a debug build on a
/// busy machine; linear passes take well under a second.
const PASS_TIME_LIMIT: Duration = Duration::from_secs(60);

const HEADER: &str = "#[version = \"0.0.5\"]\n";

/// Runs `f` on a thread with a 2 MB stack and propagates its panic, if any.
fn on_small_stack(name: &str, f: impl FnOnce() + Send + 'static) {
    let handle = std::thread::Builder::new()
        .name(name.to_owned())
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn a test thread");
    if let Err(panic) = handle.join() {
        std::panic::resume_unwind(panic);
    }
}

/// Parses and type-checks `text`.
fn typed(text: &str, name: &str) -> Module {
    let module = relay_syntax::parse(text, name).unwrap_or_else(|errors| {
        panic!(
            "{name} does not parse:\n{}",
            relay_syntax::render_plain(&errors)
        )
    });
    if let Err(errors) = relay_types::check_module(&module) {
        panic!(
            "{name} does not type-check:\n{}",
            relay_syntax::render_plain(&errors)
        );
    }
    module
}

/// The default pipeline of the repository's `passes.toml`, verifying every pass's output.
fn default_pipeline() -> PassManager {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../passes.toml");
    let config = PipelineConfig::load(&path).unwrap_or_else(|err| {
        panic!(
            "cannot load {}: {}",
            path.display(),
            relay_syntax::render_plain(&err)
        )
    });
    PassManager::from_config(&config).verify_each(true)
}

/// Runs the default pipeline on the program `text` and checks that `@main` computes the same
/// result on seeded random inputs before and after.
fn check(text: &str, name: &str) {
    let module = typed(text, name);
    let main = module
        .function(Symbol::intern("main"))
        .expect("the generated program has @main");
    let inputs = relay_interp::random_inputs(&main.func, 7).expect("static tensor parameters");
    let opts = InterpOptions::default();
    let expected = relay_interp::run(&module, "main", inputs.clone(), &opts)
        .unwrap_or_else(|e| panic!("{name}: the original run fails: {e}"));

    let start = Instant::now();
    let (transformed, timings) = default_pipeline()
        .run(module)
        .unwrap_or_else(|e| panic!("{name}: the pipeline fails: {e}"));
    let total = start.elapsed();
    eprintln!("{name}: the pipeline took {:.2} s", total.as_secs_f64());
    for timing in &timings {
        eprintln!("  {:<20} {:>8.3} s", timing.pass, timing.time.as_secs_f64());
    }
    for timing in &timings {
        assert!(
            timing.time <= PASS_TIME_LIMIT,
            "{name}: pass `{}` took {:.1} s on {N} bindings",
            timing.pass,
            timing.time.as_secs_f64()
        );
    }

    // What the pipeline's time spent outside the passes goes to: one type inference and one
    // verification of the result, for comparison with the per-pass times.
    let start = Instant::now();
    let checked = relay_types::check_module(&transformed).is_ok();
    let inference = start.elapsed();
    let start = Instant::now();
    let every = Invariants {
        fused: true,
        anf: true,
        lifted: true,
        primitives_inlined: true,
        manifested: true,
        folded: true,
    };
    let verified = verify_module(&transformed, every);
    let verification = start.elapsed();
    eprintln!(
        "  (one type inference of the result {:.3} s, one verification {:.3} s)",
        inference.as_secs_f64(),
        verification.as_secs_f64()
    );
    assert!(checked, "{name}: the result does not type-check");
    if let Err(errors) = verified {
        panic!("{name}: the result is malformed: {}", errors[0].message);
    }

    let actual = relay_interp::run(&transformed, "main", inputs, &opts)
        .unwrap_or_else(|e| panic!("{name}: the transformed run fails: {e}"));
    if let Err(difference) = relay_interp::compare_values(&actual, &expected, 1e-5, 1e-6) {
        panic!("{name}: the pipeline changes the result: {difference}");
    }
    drop(transformed);
}

/// `%0 = add(%x, 1f); %1 = add(%0, 1f); ...` with `n` graph bindings.
fn graph_chain(n: usize) -> String {
    let mut s = String::with_capacity(n * 32);
    s.push_str(HEADER);
    s.push_str("def @main(%x: Tensor[(2), float32]) -> Tensor[(2), float32] {\n");
    s.push_str("  %0 = add(%x, 1f);\n");
    for i in 1..n {
        s.push_str(&format!("  %{i} = add(%{}, 1f);\n", i - 1));
    }
    s.push_str(&format!("  %{}\n}}\n", n - 1));
    s
}

/// `let %v0 = ...; let %v1 = ...;` with `n` let bindings mixing operators, tuples and
/// projections, and a few values used far from where they are bound.
fn let_chain(n: usize) -> String {
    let mut s = String::with_capacity(n * 48);
    s.push_str(HEADER);
    s.push_str("def @main(%p: Tensor[(2), float32]) -> Tensor[(2), float32] {\n");
    s.push_str("  let %v0 = add(%p, %p);\n");
    for i in 1..n {
        let prev = i - 1;
        let line = match i % 5 {
            0 => format!("  let %v{i} = multiply(%v{prev}, 0.5f);\n"),
            1 => format!("  let %v{i} = add(%v{prev}, %p);\n"),
            2 => format!("  let %v{i} = (%v{prev}, %p);\n"),
            3 => format!("  let %v{i} = %v{prev}.0;\n"),
            _ => format!("  let %v{i} = tanh(%v{prev});\n"),
        };
        s.push_str(&line);
    }
    s.push_str(&format!("  add(%v{}, %v0)\n}}\n", n - 1));
    s
}

/// A let-chain of `n` bindings in which every 100th value is an `if` and every 100th (offset
/// by 50) a `match`, each with a short chain inside; a `match` sits inside one branch of every
/// tenth `if`.
fn chain_with_branches(n: usize) -> String {
    let mut s = String::with_capacity(n * 64);
    s.push_str(HEADER);
    s.push_str("type Option[A] { Some(A), None }\n");
    s.push_str("def @main(%x: Tensor[(2), float32], %c: bool) -> Tensor[(2), float32] {\n");
    s.push_str("  let %v0 = add(%x, 1f);\n");
    for i in 1..n {
        let prev = i - 1;
        let line = if i % 1000 == 0 {
            format!(
                "  let %v{i} = if (%c) {{\n    let %t{i} = add(%v{prev}, 1f);\n    \
                 match (Some(%t{i})) {{\n      Some(%m{i}) => negative(%m{i}),\n      \
                 None => %t{i},\n    }}\n  }} else {{\n    multiply(%v{prev}, 0.5f)\n  }};\n"
            )
        } else if i % 100 == 0 {
            format!(
                "  let %v{i} = if (%c) {{\n    let %t{i} = add(%v{prev}, 1f);\n    \
                 nn.relu(%t{i})\n  }} else {{\n    %v{prev}\n  }};\n"
            )
        } else if i % 100 == 50 {
            format!(
                "  let %v{i} = (match (Some(%v{prev})) {{\n    Some(%s{i}) => tanh(%s{i}),\n    \
                 None => %v{prev},\n  }});\n"
            )
        } else {
            format!("  let %v{i} = add(%v{prev}, 0.25f);\n")
        };
        s.push_str(&line);
    }
    s.push_str(&format!("  %v{}\n}}\n", n - 1));
    s
}

#[test]
fn graph_chain_of_100000_through_the_pipeline() {
    on_small_stack("graph_chain", || {
        check(&graph_chain(N), "graph_chain.relay")
    });
}

#[test]
fn let_chain_of_100000_through_the_pipeline() {
    on_small_stack("let_chain", || check(&let_chain(N), "let_chain.relay"));
}

#[test]
fn chain_with_nested_if_and_match_through_the_pipeline() {
    on_small_stack("branches", || {
        check(&chain_with_branches(N), "branches.relay")
    });
}
