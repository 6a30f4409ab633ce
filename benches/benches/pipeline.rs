//! Middle-end speed: the whole default pipeline of `passes.toml` on a generated 10,000-binding
//! program of the kind a small network lowers to (dense/bias/relu/tanh chains, tuples and
//! projections, calls of a local closure, an `if`), in wall time per run. The target is under
//! one second in a release build.
//!
//! `cargo bench -p relay-benches --bench pipeline` measures; under `cargo test` (criterion's
//! test mode) the program has 1,000 bindings so the single test-mode iteration stays fast in
//! debug builds.

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use relay_benches::bench_mode;
use relay_ir::Module;
use relay_passes::{PassManager, PipelineConfig};

/// Bindings in one repeated block of [`program`].
const BLOCK: usize = 10;

/// A program of about `bindings` let bindings: a local closure, then blocks of
/// `nn.dense`/`nn.bias_add`/`nn.relu`/`add`/`tanh` with a tuple, a projection and a closure
/// call, and an `if` halfway through.
fn program(bindings: usize) -> String {
    let mut s = String::with_capacity(bindings * 48);
    s.push_str("#[version = \"0.0.5\"]\n");
    s.push_str(
        "def @main(%x: Tensor[(1, 64), float32], %w: Tensor[(64, 64), float32], \
         %b: Tensor[(64), float32], %c: bool) -> Tensor[(1, 64), float32] {\n",
    );
    s.push_str(
        "  let %scale = fn (%t: Tensor[(1, 64), float32]) -> Tensor[(1, 64), float32] {\n    \
         let %u = multiply(%t, 0.5f);\n    add(%u, %b)\n  };\n",
    );
    s.push_str("  let %h0 = %x;\n");
    let blocks = bindings / BLOCK;
    for i in 0..blocks {
        let prev = format!("%h{i}");
        let next = format!("%h{}", i + 1);
        // Formatting into a String cannot fail.
        let _ = write!(
            s,
            "  let %d{i} = nn.dense({prev}, %w, units=64);\n  \
             let %a{i} = nn.bias_add(%d{i}, %b);\n  \
             let %r{i} = nn.relu(%a{i});\n  \
             let %s{i} = add(%r{i}, {prev});\n  \
             let %t{i} = tanh(%s{i});\n  \
             let %p{i} = (%t{i}, %r{i});\n  \
             let %q{i} = %p{i}.0;\n  \
             let %k{i} = %scale(%q{i});\n  \
             let %m{i} = multiply(%k{i}, %p{i}.1);\n"
        );
        if i == blocks / 2 {
            let _ = writeln!(
                s,
                "  let {next} = if (%c) {{ nn.relu(%m{i}) }} else {{ negative(%m{i}) }};"
            );
        } else {
            let _ = writeln!(s, "  let {next} = subtract(%m{i}, 0.125f);");
        }
    }
    let _ = writeln!(s, "  %h{blocks}\n}}");
    s
}

/// The parsed and type-checked program.
fn typed(text: &str) -> Module {
    let module = match relay_syntax::parse(text, "pipeline.relay") {
        Ok(module) => module,
        Err(errors) => panic!(
            "the generated program does not parse:\n{}",
            relay_syntax::render_plain(&errors)
        ),
    };
    if let Err(errors) = relay_types::check_module(&module) {
        panic!(
            "the generated program does not type-check:\n{}",
            relay_syntax::render_plain(&errors)
        );
    }
    module
}

fn pipeline(c: &mut Criterion) {
    let bindings = if bench_mode() { 10_000 } else { 1_000 };
    let module = typed(&program(bindings));
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../passes.toml");
    let config = match PipelineConfig::load(&path) {
        Ok(config) => config,
        Err(err) => panic!(
            "cannot load {}:\n{}",
            path.display(),
            relay_syntax::render_plain(&err)
        ),
    };
    let manager = PassManager::from_config(&config);
    // Benchmarking a failing pipeline would measure nothing useful: make sure it succeeds.
    if let Err(err) = manager.run(module.clone()) {
        panic!("the default pipeline fails on the generated program: {err}");
    }

    let mut group = c.benchmark_group("pipeline");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(10));
    group.bench_function(format!("default_{bindings}_bindings"), |b| {
        b.iter(|| manager.run(black_box(module.clone())))
    });
    group.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
