//! One executable, many VMs: eight threads each run their own [`Vm`] on a shared
//! [`Executable`] at once, on a program with kernels, ADT values and closures, and every result
//! equals the single-threaded one (which equals the interpreter's).

mod common;

use relay_interp::InterpOptions;
use relay_ir::Value;
use relay_vm::{Executable, Vm, VmOptions};

/// Kernels (fused elementwise chains, a dense layer, a reduction), a list built and mapped
/// with a closure capturing a tensor, a fold through a tail-recursive global, and a tuple of
/// a tensor and a list as the result.
const PROGRAM: &str = r#"#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @build(%n: int32, %x: Tensor[(8), float32], %acc: List[Tensor[(8), float32]]) -> List[Tensor[(8), float32]] {
  if (%n == 0) {
    %acc
  } else {
    @build(%n - 1, add(multiply(%x, 0.9f), 0.1f), Cons(%x, %acc))
  }
}

def @map(%f: fn (Tensor[(8), float32]) -> Tensor[(8), float32], %xs: List[Tensor[(8), float32]]) -> List[Tensor[(8), float32]] {
  match (%xs) {
    Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)),
    Nil => Nil,
  }
}

def @fold(%xs: List[Tensor[(8), float32]], %acc: Tensor[(8), float32]) -> Tensor[(8), float32] {
  match (%xs) {
    Cons(%h, %t) => @fold(%t, add(%acc, %h)),
    Nil => %acc,
  }
}

def @main(%x: Tensor[(8), float32], %w: Tensor[(4, 8), float32], %b: Tensor[(4), float32]) {
  let %scale = sigmoid(%x);
  let %f = fn (%v: Tensor[(8), float32]) -> Tensor[(8), float32] {
    nn.relu(subtract(multiply(%v, %scale), 0.2f))
  };
  let %xs = @build(40, %x, Nil);
  let %ys = @map(%f, %xs);
  let %s = @fold(%ys, zeros_like(%x));
  let %d = nn.bias_add(nn.dense(reshape(%s, newshape=[1, 8]), %w, units=4), %b);
  (nn.softmax(%d, axis=-1), sum(%s), @map(%f, Cons(%x, Nil)))
}
"#;

const THREADS: usize = 8;
const RUNS_PER_THREAD: usize = 50;
const SEEDS: u64 = 4;

/// Runs `@main` of `exe` on `inputs` on a fresh VM with kernels on the calling thread.
fn run(exe: &Executable, inputs: &[Value]) -> Result<Value, String> {
    let options = VmOptions {
        threads: 1,
        ..VmOptions::default()
    };
    Vm::with_options(exe, options)
        .invoke("main", inputs)
        .map_err(|e| e.to_string())
}

#[test]
fn eight_vms_share_one_executable() {
    let module = common::typed(PROGRAM, "threads.relay").expect("the program type-checks");
    let tol = common::tolerance(PROGRAM);
    for config in common::Config::ALL {
        let exe = common::build_with(PROGRAM, "threads.relay", config);
        exe.jit()
            .unwrap_or_else(|errors| panic!("{config}: kernels fail: {errors:?}"));
        let cases: Vec<(Vec<Value>, Value)> = (0..SEEDS)
            .map(|seed| {
                let inputs = common::main_inputs(&module, seed);
                let single = run(&exe, &inputs).unwrap_or_else(|e| panic!("{config}: {e}"));
                let expected =
                    relay_interp::run(&module, "main", inputs.clone(), &InterpOptions::default())
                        .unwrap_or_else(|e| panic!("the interpreter fails: {e}"));
                if let Err(why) = relay_interp::compare_values(&single, &expected, tol.0, tol.1) {
                    panic!("{config}: seed {seed}: the VM differs from the interpreter: {why}");
                }
                (inputs, single)
            })
            .collect();

        let failures: Vec<String> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (exe, cases) = (&exe, &cases);
                    scope.spawn(move || {
                        let mut failures = Vec::new();
                        // One VM per thread, reused across runs, seeds interleaved so the
                        // threads run different inputs at the same time. Even threads run
                        // kernels on the calling thread, odd ones on the shared pool.
                        let kernel_threads = if t % 2 == 0 { 1 } else { 0 };
                        let mut vm = Vm::with_options(
                            exe,
                            VmOptions {
                                threads: kernel_threads,
                                ..VmOptions::default()
                            },
                        );
                        // Calling-thread kernels repeat the single-threaded run bit for bit.
                        let (rtol, atol) = if kernel_threads == 1 { (0.0, 0.0) } else { tol };
                        for r in 0..RUNS_PER_THREAD {
                            let seed = (t + r) % cases.len();
                            let (inputs, single) = &cases[seed];
                            match vm.invoke("main", inputs) {
                                Ok(got) => {
                                    if let Err(why) =
                                        relay_interp::compare_values(&got, single, rtol, atol)
                                    {
                                        failures.push(format!(
                                            "thread {t}, run {r}, seed {seed}: {why}"
                                        ));
                                    }
                                }
                                Err(e) => {
                                    failures.push(format!("thread {t}, run {r}, seed {seed}: {e}"))
                                }
                            }
                        }
                        failures
                    })
                })
                .collect();
            handles
                .into_iter()
                .enumerate()
                .flat_map(|(t, h)| {
                    h.join()
                        .unwrap_or_else(|_| vec![format!("thread {t} panicked")])
                })
                .collect()
        });
        assert!(
            failures.is_empty(),
            "{config}: {} of {} concurrent runs differ from the single-threaded result:\n{}",
            failures.len(),
            THREADS * RUNS_PER_THREAD,
            failures.join("\n")
        );
    }
}
