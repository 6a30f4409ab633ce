//! The soak test (`benches/soak.sh`): one executable file shared by several threads, each with
//! its own VM, running `@main` on seeded random inputs again and again. Every run must succeed
//! and give the first run's result, and the process's resident memory, sampled as the runs go,
//! must stay flat after the warm-up.
//!
//! ```text
//! soak EXE.ro [--threads 8] [--runs 100000] [--samples 20]
//! ```
//!
//! `--runs` is the total over all threads. It prints one line per sample (runs done, resident
//! MiB) and a summary: runs, errors, wall time, resident memory after the first sample and at
//! the end. It exits 1 if a run failed or gave another result.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use relay::{Executable, Value, Vm};
use relay_interp::SplitMix64;

/// The command line.
struct Args {
    file: String,
    threads: usize,
    runs: u64,
    samples: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut parsed = Args {
        file: String::new(),
        threads: 8,
        runs: 100_000,
        samples: 20,
    };
    while let Some(a) = args.next() {
        let mut number = |name: &str| {
            args.next()
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{name} takes a positive number"))
        };
        match a.as_str() {
            "--threads" => parsed.threads = number("--threads")? as usize,
            "--runs" => parsed.runs = number("--runs")?,
            "--samples" => parsed.samples = number("--samples")?,
            _ if parsed.file.is_empty() && !a.starts_with('-') => parsed.file = a,
            _ => return Err(format!("unexpected argument `{a}`")),
        }
    }
    if parsed.file.is_empty() {
        return Err("usage: soak EXE.ro [--threads N] [--runs N] [--samples N]".into());
    }
    Ok(parsed)
}

/// The resident set size in MiB (Linux `/proc/self/statm`), or 0 where there is none.
fn resident_mib() -> f64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<f64>().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / (1024.0 * 1024.0)
}

/// Seeded random arguments for `@main`, from the parameter types the file keeps.
fn inputs(exe: &Executable) -> Result<Vec<Value>, String> {
    let (_, main) = exe.global("main").ok_or("the executable has no `@main`")?;
    let mut rng = SplitMix64::new(0);
    main.param_types
        .iter()
        .map(|ty| {
            let array = relay_interp::random_tensor(ty.as_ref(), &mut rng)?;
            Ok(Value::tensor(array))
        })
        .collect()
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let exe = match Executable::load(&args.file) {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let inputs = match inputs(&exe) {
        Ok(inputs) => inputs,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let expected = match Vm::new(&exe).invoke("main", &inputs) {
        Ok(v) => format!("{v:?}"),
        Err(e) => {
            eprintln!("error: the first run failed: {e}");
            return ExitCode::from(1);
        }
    };
    let (done, errors) = (AtomicU64::new(0), AtomicU64::new(0));
    let per_thread = args.runs.div_ceil(args.threads as u64);
    let step = (args.runs / args.samples).max(1);
    let start = Instant::now();
    let mut curve = Vec::new();
    std::thread::scope(|scope| {
        for _ in 0..args.threads {
            scope.spawn(|| {
                let mut vm = Vm::new(&exe);
                for _ in 0..per_thread {
                    match vm.invoke("main", &inputs) {
                        Ok(v) if format!("{v:?}") == expected => {}
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let total = per_thread * args.threads as u64;
        let mut next = step;
        while next <= total {
            while done.load(Ordering::Relaxed) < next {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            let sample = (next, resident_mib());
            println!("{:>10} runs  {:>8.1} MiB", sample.0, sample.1);
            curve.push(sample);
            next += step;
        }
    });
    let runs = done.load(Ordering::Relaxed);
    let errors = errors.load(Ordering::Relaxed);
    let (first, last) = match (curve.first(), curve.last()) {
        (Some(f), Some(l)) => (f.1, l.1),
        _ => (0.0, 0.0),
    };
    println!(
        "{}: {runs} runs on {} threads in {:.1} s, {errors} errors; resident {first:.1} MiB \
         after the first {} runs, {last:.1} MiB at the end",
        args.file,
        args.threads,
        start.elapsed().as_secs_f64(),
        step
    );
    if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
