//! VM benchmarks (BENCHMARKS.md W5–W8): whole programs run by the register VM with one kernel
//! thread, and the time from program text to a runnable executable.
//!
//! Each program of `benches/programs/` is parsed, type-checked, lowered by the default pass
//! pipeline (as `relayc build` does), compiled to bytecode (`relay_vm::compile`) and its
//! kernels JIT-compiled (`Executable::jit`); a `Vm` with one kernel thread then runs `@main` on
//! seeded random inputs (`relay_interp::random_inputs`, seed 0). Criterion times one
//! `vm.invoke("main", &args)`; `benches/run.sh` divides by the work per call (100 LSTM steps,
//! 10^6 loop iterations, 242,785 calls of `@fib`).
//!
//! Groups and benchmarks (criterion ids, read by `benches/run.sh` from
//! `target/criterion/<group>/<bench>/new/estimates.json`):
//! - `W5_b1`, `W5_b64`: `ours` — the MLP 784 → 512 relu → 512 relu → 10 softmax, batch 1 and 64;
//! - `W6`: `ours` — 100 steps of an LSTM cell (input 128, hidden 128, batch 1) by tail recursion;
//! - `W7_sum_to`: `ours` — `@sum_to` over 0..10^6 by tail recursion on int64 scalars;
//! - `W7_fib`: `ours`, `rust_native` — recursive `fib(25)` on int64 scalars (242,785 calls), and
//!   the same recursion compiled by rustc/LLVM;
//! - `W8`: `mlp_text_to_exe`, `conv_text_to_exe` — W5's MLP (batch 1) and W4's convolution from
//!   text to a runnable executable: parse, type-check, the default pipeline, bytecode
//!   compilation and the JIT compilation of every kernel. Each iteration builds a fresh
//!   executable, whose kernels compile anew (a static kernel compiles through its own
//!   `KernelEntry`, never a cache shared between executables), and drops it.
//!
//! Every result is checked once before timing: W5 and W6 against the reference interpreter on
//! the same inputs (float tolerance), W7 against the exact sums. A program that does not compile
//! or run yet, or whose result disagrees, is reported on stderr and its benchmark skipped; the
//! others still run (a panic counts as a failure). Under `cargo test --benches` every benchmark
//! runs once, as a check.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use relay_benches::{executable, program, typed};
use relay_interp::InterpOptions;
use relay_ir::{Function, Module, Value};
use relay_vm::{Vm, VmOptions};

/// The seed of every random input.
const SEED: u64 = 0;

/// How a program's result is checked before it is timed.
enum Check {
    /// Against the reference interpreter on the same inputs, within `rtol` and `atol`.
    Interp { rtol: f64, atol: f64 },
    /// An int64 scalar equal to this value.
    Int(i128),
}

/// Criterion settings shared by every group: flat sampling (the calls take from about a
/// hundred microseconds to tens of milliseconds), 30 samples.
fn configure(group: &mut Group<'_>) {
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
}

/// `f()`, with a panic turned into an error (its message is on stderr already): a VM that is
/// not finished skips its benchmarks instead of ending the run.
fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err("it panics (see above)".to_owned()))
}

/// The global function `@main` of `module`.
fn main_function(module: &Module) -> Option<&Function> {
    module
        .functions
        .iter()
        .find(|f| f.name.as_str() == "main")
        .map(|f| &f.func)
}

/// The VM options of every run: one kernel thread, the rest the defaults.
fn one_thread() -> VmOptions {
    VmOptions {
        threads: 1,
        ..Default::default()
    }
}

/// Checks the VM's `result` for `args` against `check`; the error says how it differs.
fn check_result(
    module: &Module,
    args: &[Value],
    result: &Value,
    check: &Check,
) -> Result<(), String> {
    match check {
        Check::Interp { rtol, atol } => {
            let expected =
                relay_interp::run(module, "main", args.to_vec(), &InterpOptions::default())
                    .map_err(|err| format!("the reference interpreter fails: {err}"))?;
            relay_interp::compare_values(result, &expected, *rtol, *atol)
                .map_err(|why| format!("the VM disagrees with the reference interpreter: {why}"))
        }
        Check::Int(want) => {
            let got = result.as_tensor().map(|t| t.to_i128_vec());
            match got.as_deref() {
                Some([value]) if value == want => Ok(()),
                _ => Err(format!("the VM returns {result:?}, expected {want}")),
            }
        }
    }
}

/// A criterion group measuring wall time.
type Group<'a> = criterion::BenchmarkGroup<'a, criterion::measurement::WallTime>;

/// Compiles `benches/programs/<file>`, runs `@main` once on random inputs and checks the
/// result, then times `vm.invoke("main", ...)` as `<group_name>/ours` and runs `peers` in the
/// same group. A failure at any step skips our benchmark, with the reason on stderr; the peers
/// still run.
fn run_program(
    c: &mut Criterion,
    group_name: &str,
    file: &str,
    check: Check,
    peers: impl FnOnce(&mut Group<'_>),
) {
    let what = format!("{group_name}/ours");
    let prepared = program(file).and_then(|text| {
        let module = typed(&text, file)?;
        let exe = guarded(|| executable(&text, file))?;
        let main = main_function(&module).ok_or_else(|| format!("{file} has no @main"))?;
        let args = relay_interp::random_inputs(main, SEED)?;
        Ok((module, exe, args))
    });
    let mut group = c.benchmark_group(group_name);
    configure(&mut group);
    match prepared {
        Ok((module, exe, args)) => {
            let mut vm = Vm::with_options(&exe, one_thread());
            let checked = guarded(|| {
                vm.invoke("main", &args)
                    .map_err(|err| format!("the VM fails: {err}"))
            })
            .and_then(|result| check_result(&module, &args, &result, &check));
            match checked {
                Ok(()) => {
                    group.bench_function("ours", |bench| {
                        bench.iter(|| vm.invoke("main", black_box(&args)))
                    });
                }
                Err(message) => eprintln!("{what}: skipped: {file}: {message}"),
            }
        }
        Err(message) => eprintln!("{what}: skipped: {message}"),
    }
    peers(&mut group);
    group.finish();
}

/// `fib(n)` by the same double recursion as `W7_fib.relay`, compiled by rustc/LLVM.
fn fib(n: i64) -> i64 {
    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
}

/// W8: program text to a runnable executable, a fresh one per iteration (dropped inside the
/// timed loop, which frees its kernels' JIT memory).
fn text_to_exe(c: &mut Criterion) {
    let programs = [
        ("mlp_text_to_exe", "W5_mlp_b1.relay"),
        ("conv_text_to_exe", "W4_conv2d.relay"),
    ];
    let mut group = c.benchmark_group("W8");
    configure(&mut group);
    for (id, file) in programs {
        let built =
            program(file).and_then(|text| guarded(|| executable(&text, file)).map(|_| text));
        let text = match built {
            Ok(text) => text,
            Err(message) => {
                eprintln!("W8/{id}: skipped: {message}");
                continue;
            }
        };
        group.bench_function(id, |bench| {
            bench.iter(|| executable(black_box(&text), file))
        });
    }
    group.finish();
}

fn vm(c: &mut Criterion) {
    // float32 kernels and the interpreter sum in different orders: the MLP's logits reach
    // magnitudes near 10^3 (softmax then amplifies their absolute error into relative error of
    // the probabilities), and the LSTM's cell state grows to magnitudes near 100 over 100
    // recurrent steps.
    let mlp = || Check::Interp {
        rtol: 1e-3,
        atol: 1e-5,
    };
    run_program(c, "W5_b1", "W5_mlp_b1.relay", mlp(), |_| {});
    run_program(c, "W5_b64", "W5_mlp_b64.relay", mlp(), |_| {});
    run_program(
        c,
        "W6",
        "W6_lstm.relay",
        Check::Interp {
            rtol: 1e-3,
            atol: 1e-3,
        },
        |_| {},
    );
    // 0 + 1 + ... + (10^6 - 1) and fib(25).
    run_program(
        c,
        "W7_sum_to",
        "W7_sum_to.relay",
        Check::Int(999_999 * 1_000_000 / 2),
        |_| {},
    );
    run_program(c, "W7_fib", "W7_fib.relay", Check::Int(75_025), |group| {
        assert_eq!(fib(25), 75_025, "the native fib");
        group.bench_function("rust_native", |bench| bench.iter(|| fib(black_box(25))));
    });
    text_to_exe(c);
}

criterion_group!(benches, vm);
criterion_main!(benches);
