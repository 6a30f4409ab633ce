//! A kernel's tuple of outputs (`split`'s) gives its storages back to the pool when the tuple
//! is killed: a loop over such a kernel allocates fresh storage for its first iterations
//! only (before, three fresh zero-filled buffers per step), and its result equals the interpreter's.

mod common;

use relay_interp::InterpOptions;
use relay_vm::{Vm, VmOptions};

/// W6's LSTM cell (BENCHMARKS.md) run for `ITERATIONS` steps: `split`'s four gates feed two
/// different kernels, so its outputs travel as a tuple that is killed after the second.
const PROGRAM: &str = r#"#[version = "0.0.5"]
def @lstm(%i: int32, %n: int32, %x: Tensor[(1, 128), float32],
          %h: Tensor[(1, 128), float32], %c: Tensor[(1, 128), float32],
          %w: Tensor[(512, 128), float32], %u: Tensor[(512, 128), float32],
          %b: Tensor[(512), float32]) -> (Tensor[(1, 128), float32], Tensor[(1, 128), float32]) {
  if (%i == %n) {
    (%h, %c)
  } else {
    %0 = add(nn.dense(%x, %w, units=512), nn.dense(%h, %u, units=512));
    %1 = split(add(%0, %b), indices_or_sections=4, axis=1);
    %2 = sigmoid(%1.0);
    %3 = sigmoid(%1.1);
    %4 = tanh(%1.2);
    %5 = sigmoid(%1.3);
    %6 = add(multiply(%3, %c), multiply(%2, %4));
    %7 = multiply(%5, tanh(%6));
    @lstm(%i + 1, %n, %x, %7, %6, %w, %u, %b)
  }
}

def @main(%x: Tensor[(1, 128), float32], %h0: Tensor[(1, 128), float32],
          %c0: Tensor[(1, 128), float32], %w: Tensor[(512, 128), float32],
          %u: Tensor[(512, 128), float32], %b: Tensor[(512), float32]) -> (Tensor[(1, 128), float32], Tensor[(1, 128), float32]) {
  @lstm(0, ITERATIONS, %x, %h0, %c0, %w, %u, %b)
}
"#;

/// Runs the program with `iterations` steps on the VM (one kernel thread), checks the result
/// against the interpreter's when `compare`, and returns the VM's allocator statistics.
fn run(iterations: u32, compare: bool) -> relay_vm::allocator::AllocStats {
    let text = PROGRAM.replace("ITERATIONS", &iterations.to_string());
    let module = common::typed(&text, "tuple_storage.relay").expect("the program type-checks");
    let tol = common::tolerance(&text);
    let exe = common::build(&text, "tuple_storage.relay");
    let inputs = common::main_inputs(&module, 3);
    let mut vm = Vm::with_options(
        &exe,
        VmOptions {
            threads: 1,
            ..VmOptions::default()
        },
    );
    let got = vm.invoke("main", &inputs).expect("the VM runs");
    if !compare {
        return vm.allocator_stats();
    }
    let expected = relay_interp::run(&module, "main", inputs, &InterpOptions::default())
        .unwrap_or_else(|e| panic!("the interpreter fails: {e}"));
    relay_interp::compare_values(&got, &expected, tol.0, tol.1)
        .unwrap_or_else(|why| panic!("{iterations} steps: differs from the interpreter: {why}"));
    vm.allocator_stats()
}

#[test]
fn split_outputs_are_recycled() {
    // Few steps: the recurrence amplifies rounding differences, so longer runs are compared
    // for their allocations only.
    let few = run(3, true);
    let many = run(200, false);
    // 200 iterations of several allocations each; only the first ones allocate fresh storage.
    assert!(many.requests >= 1000, "{many:?}");
    assert_eq!(many.fresh, few.fresh, "storage is not recycled: {many:?}");
}
