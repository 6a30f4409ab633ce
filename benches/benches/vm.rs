//! VM benchmarks (BENCHMARKS.md W5–W8, and W9 from issue 7): whole programs run by the
//! register VM with one kernel thread, the time from program text to a runnable executable, and
//! the time to load an executable file.
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
//!   `KernelEntry`, never a cache shared between executables), and drops it;
//! - `W9_load`: `mlp_ro`, `mlp_ro_file`, `mlp_ro_decode` — W5's MLP (batch 1) with its weights
//!   (784×512, 512×512, 10×512 and the biases; seeded random) bound as constants, compiled and
//!   saved as an executable file (`Executable::to_bytes`), then loaded: from the bytes in memory
//!   (`Executable::from_bytes`: decode, validate, re-parse and type-check the primitives, JIT
//!   every static kernel), from the file (`Executable::load`, the read included), and decoded
//!   and validated only (`Executable::decode`, no JIT). Loaded executables share a kernel cache
//!   that holds kernels weakly, so each iteration drops the executable it loaded (outside the
//!   timing) before the next load, which therefore compiles every kernel anew (checked once
//!   before timing: the cache's count of compilations grows by the same positive number at
//!   every load after a drop, and not at a load while a loaded copy is alive). The file size
//!   and the raw size of the constants (the sum of their data's bytes) are printed on stderr,
//!   with one cold load, a load while another loaded copy is alive (kernel cache hits) and a
//!   decode, and appended as a line `SIZE W9_load mlp_ro <file bytes> <constant bytes>` to the
//!   file named by the environment variable `RELAY_BENCH_SIZES` when it is set (as
//!   `benches/run.sh` does).
//!
//! Every result is checked once before timing: W5 and W6 against the reference interpreter on
//! the same inputs (float tolerance), W7 against the exact sums. A program that does not compile
//! or run yet, or whose result disagrees (W9: a loaded executable whose result is not the
//! in-memory one's, bit for bit), is reported on stderr and its benchmark skipped; the
//! others still run (a panic counts as a failure). Under `cargo test --benches` every benchmark
//! runs once, as a check.

use std::hint::black_box;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{Bencher, Criterion, SamplingMode, criterion_group, criterion_main};
use relay_benches::{bind_random_params, executable, lower, program, typed};
use relay_interp::InterpOptions;
use relay_ir::{Function, Module, Value};
use relay_vm::{Executable, Vm, VmOptions};

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

/// W9's executable file: the W5 MLP (batch 1) with its weights bound as constants.
struct ExeFile {
    /// The file's bytes.
    bytes: Vec<u8>,
    /// The raw size of the executable's constants: the sum of their data's bytes.
    constant_bytes: usize,
    /// The input `%x`, and `@main`'s result on it in the executable that was saved.
    args: Vec<Value>,
    expected: Value,
}

/// Compiles `benches/programs/<file>` with every parameter of `@main` but `%x` bound to a
/// seeded random constant, runs it once and saves it as an executable file's bytes.
fn exe_file(file: &str) -> Result<ExeFile, String> {
    let text = program(file)?;
    let module = bind_random_params(typed(&text, file)?, &["x"], SEED)?;
    let main = main_function(&module).ok_or_else(|| format!("{file} has no @main"))?;
    let args = relay_interp::random_inputs(main, SEED)?;
    let exe = relay_vm::compile(&lower(module, file)?)
        .map_err(|err| format!("{file}: the VM compiler fails: {err}"))?;
    let expected = Vm::with_options(&exe, one_thread())
        .invoke("main", &args)
        .map_err(|err| format!("the VM fails: {err}"))?;
    let bytes = exe
        .to_bytes()
        .map_err(|err| format!("the executable does not save: {err}"))?;
    let constant_bytes = exe.constants.iter().map(|c| c.as_bytes().len()).sum();
    Ok(ExeFile {
        bytes,
        constant_bytes,
        args,
        expected,
    })
}

/// `load()` and the time it took.
fn timed<T>(load: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let loaded = load();
    (loaded, start.elapsed())
}

/// Checks that `loaded` computes exactly what the saved executable did.
fn check_loaded(loaded: &Executable, saved: &ExeFile) -> Result<(), String> {
    let result = Vm::with_options(loaded, one_thread())
        .invoke("main", &saved.args)
        .map_err(|err| format!("the loaded executable fails: {err}"))?;
    relay_interp::compare_values(&result, &saved.expected, 0.0, 0.0)
        .map_err(|why| format!("the loaded executable disagrees with the saved one: {why}"))
}

/// Loads `saved` once cold, once again while that copy is alive (its kernels are hits in the
/// shared kernel cache), and once more cold after dropping both (the cache holds kernels
/// weakly), decodes it once, and prints the times with the file and constant sizes on stderr.
/// The shared cache's count of compilations must grow by the same positive number at each cold
/// load and not at the cache-hit one, or the timed loads would not be compiling their kernels.
fn report_loads(saved: &ExeFile) -> Result<(), String> {
    let load = || Executable::from_bytes(&saved.bytes);
    let error = |err| format!("the executable file does not load: {err}");
    // The shared kernel cache, from an executable that compiled nothing.
    let cache = Executable::decode(&saved.bytes).map_err(error)?.cache;
    let before = cache.compiled();
    let (first, cold) = timed(load);
    let first = first.map_err(error)?;
    check_loaded(&first, saved)?;
    let after_first = cache.compiled();
    let (second, hits) = timed(load);
    drop(second.map_err(error)?);
    let after_hits = cache.compiled();
    drop(first);
    let (third, recold) = timed(load);
    drop(third.map_err(error)?);
    let after_third = cache.compiled();
    let (decoded, decode) = timed(|| Executable::decode(&saved.bytes));
    drop(decoded.map_err(error)?);
    let per_load = after_first.saturating_sub(before);
    if per_load == 0
        || after_hits != after_first
        || after_third.saturating_sub(after_hits) != per_load
    {
        return Err(format!(
            "the kernel cache compiled {per_load} kernel(s) at the first load, {} while that \
             copy was alive and {} after dropping it: loads after a drop must compile every \
             kernel anew",
            after_hits.saturating_sub(after_first),
            after_third.saturating_sub(after_hits),
        ));
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    eprintln!(
        "W9_load/mlp_ro: {per_load} kernels compiled per load; first load {:.2} ms; again after \
         dropping it {:.2} ms; while a loaded copy is alive (kernel cache hits) {:.2} ms; \
         decode only {:.2} ms; file {} bytes, constants {} bytes (file / constants = {:.4})",
        ms(cold),
        ms(recold),
        ms(hits),
        ms(decode),
        saved.bytes.len(),
        saved.constant_bytes,
        saved.bytes.len() as f64 / saved.constant_bytes as f64,
    );
    Ok(())
}

/// Appends `SIZE <group> <bench> <file bytes> <constant bytes>` to the file named by
/// `RELAY_BENCH_SIZES`, when set: how `benches/run.sh` learns the file size, which is not a
/// time criterion could record.
fn record_sizes(group: &str, bench: &str, saved: &ExeFile) -> Result<(), String> {
    let Some(path) = std::env::var_os("RELAY_BENCH_SIZES") else {
        return Ok(());
    };
    let path = PathBuf::from(path);
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .and_then(|mut out| {
            writeln!(
                out,
                "SIZE {group} {bench} {} {}",
                saved.bytes.len(),
                saved.constant_bytes
            )
        })
        .map_err(|err| format!("cannot append to {}: {err}", path.display()))
}

/// Times `load()` once per iteration, dropping what it loaded outside the timing and before
/// the next load: no loaded executable is alive when a load starts, so none finds its kernels
/// in the shared kernel cache.
fn time_loads<T>(bench: &mut Bencher<'_>, mut load: impl FnMut() -> T) {
    bench.iter_custom(|iters| {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            let (loaded, took) = timed(&mut load);
            total += took;
            drop(black_box(loaded));
        }
        total
    });
}

/// W9: loading the W5 MLP's executable file, its weights included, with and without the JIT
/// compilation of its kernels.
fn load_exe(c: &mut Criterion) {
    let file = "W5_mlp_b1.relay";
    let path = std::env::temp_dir().join(format!("relay-bench-W9-{}.ro", std::process::id()));
    let prepared = guarded(|| {
        let saved = exe_file(file)?;
        report_loads(&saved)?;
        record_sizes("W9_load", "mlp_ro", &saved)?;
        std::fs::write(&path, &saved.bytes)
            .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
        Ok(saved)
    });
    let saved = match prepared {
        Ok(saved) => saved,
        Err(message) => {
            eprintln!("W9_load: skipped: {file}: {message}");
            return;
        }
    };
    let mut group = c.benchmark_group("W9_load");
    configure(&mut group);
    group.bench_function("mlp_ro", |bench| {
        time_loads(bench, || Executable::from_bytes(black_box(&saved.bytes)))
    });
    group.bench_function("mlp_ro_file", |bench| {
        time_loads(bench, || Executable::load(black_box(&path)))
    });
    group.bench_function("mlp_ro_decode", |bench| {
        time_loads(bench, || Executable::decode(black_box(&saved.bytes)))
    });
    group.finish();
    if let Err(err) = std::fs::remove_file(&path) {
        eprintln!("W9_load: cannot remove {}: {err}", path.display());
    }
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
    load_exe(c);
}

criterion_group!(benches, vm);
criterion_main!(benches);
