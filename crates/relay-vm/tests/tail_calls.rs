//! Tail calls run in constant memory: self, mutual and closure tail-recursive loops of 10^7 to
//! 10^8 iterations keep the frame count and the allocator's live bytes bounded, reusing pooled
//! buffers instead of allocating fresh ones; a non-tail recursion deeper than `max_frames` is a
//! clean `RecursionLimit` error, and one 10^5 deep runs at the default limit.

mod common;

use std::time::Instant;

use relay_ir::{DType, Value};
use relay_vm::{Executable, Instruction, Vm, VmErrorKind, VmOptions};

/// The most frames a tail-recursive loop may hold: `@main`'s and the loop's (and one spare for
/// a closure's trampoline).
const MAX_LOOP_FRAMES: usize = 3;

/// The most fresh buffers a loop may allocate, whatever its iteration count: every buffer
/// after the first few must come from the pool.
const MAX_FRESH: u64 = 64;

/// The most bytes a loop on scalars and small tensors may hold live at once.
const MAX_LIVE_BYTES: usize = 1 << 20;

/// Runs `entry` of `exe` on `args` on a fresh VM, reporting the time per iteration, and checks
/// the frame and allocator bounds of a constant-memory loop. Returns the result.
fn run_loop(exe: &Executable, args: &[Value], iterations: u64, what: &str) -> Value {
    let mut vm = Vm::new(exe);
    let start = Instant::now();
    let result = vm
        .invoke("main", args)
        .unwrap_or_else(|e| panic!("{what}: {e}\n{}", common::disassemble(exe)));
    let time = start.elapsed();
    eprintln!(
        "{what}: {iterations} iterations in {:.2} s ({:.1} ns per iteration)",
        time.as_secs_f64(),
        time.as_secs_f64() * 1e9 / iterations as f64
    );
    let stats = vm.allocator_stats();
    eprintln!(
        "{what}: peak frames {}, allocator: {stats}",
        vm.peak_frames()
    );
    assert!(
        vm.peak_frames() <= MAX_LOOP_FRAMES,
        "{what}: {} frames were live at once, a tail-recursive loop needs at most \
         {MAX_LOOP_FRAMES}\n{}",
        vm.peak_frames(),
        common::disassemble(exe)
    );
    assert!(
        stats.fresh <= MAX_FRESH,
        "{what}: {} fresh allocations for {iterations} iterations (at most {MAX_FRESH}): {stats}",
        stats.fresh
    );
    assert_eq!(
        stats.requests,
        stats.pool_hits + stats.fresh + stats.failures,
        "{what}: {stats}"
    );
    assert_eq!(stats.failures, 0, "{what}: {stats}");
    assert!(
        stats.peak_live_bytes <= MAX_LIVE_BYTES,
        "{what}: {} bytes were live at once (at most {MAX_LIVE_BYTES}): {stats}",
        stats.peak_live_bytes
    );
    result
}

/// Whether some function of `exe` has an instruction `pred` accepts.
fn has_instruction(exe: &Executable, pred: impl Fn(&Instruction) -> bool) -> bool {
    exe.functions.iter().any(|f| f.code.iter().any(&pred))
}

const SUM_TO: &str = r#"#[version = "0.0.5"]
def @sum_to(%i: int64, %n: int64, %acc: int64) -> int64 {
  if (%i == %n) {
    %acc
  } else {
    @sum_to(%i + 1i64, %n, %acc + %i)
  }
}

def @main(%n: int64) -> int64 {
  @sum_to(0i64, %n, 0i64)
}
"#;

#[test]
fn self_tail_recursion_of_1e8_iterations_runs_in_constant_memory() {
    let exe = common::build(SUM_TO, "sum_to.relay");
    let n: i64 = 100_000_000;
    let result = run_loop(
        &exe,
        &[common::scalar(DType::I64, n as f64)],
        n as u64,
        "@sum_to",
    );
    let n = i128::from(n);
    assert_eq!(common::int_of(&result), n * (n - 1) / 2);
}

const EVEN_ODD: &str = r#"#[version = "0.0.5"]
def @even(%n: int64) -> bool {
  if (%n == 0i64) { True } else { @odd(%n - 1i64) }
}

def @odd(%n: int64) -> bool {
  if (%n == 0i64) { False } else { @even(%n - 1i64) }
}

def @main(%n: int64) -> (bool, bool) {
  (@even(%n), @odd(%n))
}
"#;

#[test]
fn mutual_tail_recursion_of_1e7_iterations_runs_in_constant_memory() {
    let exe = common::build(EVEN_ODD, "even_odd.relay");
    assert!(
        has_instruction(&exe, |i| matches!(i, Instruction::TailInvoke { .. })),
        "@even and @odd call each other with TailInvoke\n{}",
        common::disassemble(&exe)
    );
    for n in [10_000_000i64, 10_000_001] {
        let result = run_loop(
            &exe,
            &[common::scalar(DType::I64, n as f64)],
            2 * n as u64,
            "@even/@odd",
        );
        let fields = result.as_tuple().expect("a pair of booleans");
        let even = n % 2 == 0;
        assert_eq!(common::int_of(&fields[0]), i128::from(even), "@even({n})");
        assert_eq!(common::int_of(&fields[1]), i128::from(!even), "@odd({n})");
    }
}

/// Each step builds a closure over the loop's state and tail-calls it; the closure tail-calls
/// the loop again. `%inc` is called through a closure in non-tail position.
const CLOSURE_LOOP: &str = r#"#[version = "0.0.5"]
def @loop(%i: int64, %acc: int64, %inc: fn (int64) -> int64) -> int64 {
  if (%i == 0i64) {
    %acc
  } else {
    let %next = fn (%a: int64) -> int64 { @loop(%i - 1i64, %a, %inc) };
    %next(%inc(%acc))
  }
}

def @main(%n: int64) -> int64 {
  let %step = 3i64;
  @loop(%n, 0i64, fn (%x: int64) -> int64 { %x + %step })
}
"#;

#[test]
fn tail_calls_through_closures_run_in_constant_memory() {
    let exe = common::build(CLOSURE_LOOP, "closure_loop.relay");
    assert!(
        has_instruction(&exe, |i| matches!(i, Instruction::TailInvokeClosure { .. })),
        "`%next(...)` is a TailInvokeClosure\n{}",
        common::disassemble(&exe)
    );
    let n: i64 = 10_000_000;
    let result = run_loop(
        &exe,
        &[common::scalar(DType::I64, n as f64)],
        n as u64,
        "closure loop",
    );
    assert_eq!(common::int_of(&result), 3 * i128::from(n));
}

/// A loop whose state is a tensor: every iteration's kernel output needs storage, which must
/// come from the pool once the loop is warm.
const TENSOR_LOOP: &str = r#"#[version = "0.0.5"]
def @loop(%i: int64, %acc: Tensor[(16), float32], %x: Tensor[(16), float32]) -> Tensor[(16), float32] {
  if (%i == 0i64) {
    %acc
  } else {
    @loop(%i - 1i64, add(multiply(%acc, 0.5f), %x), %x)
  }
}

def @main(%n: int64, %x: Tensor[(16), float32]) -> Tensor[(16), float32] {
  @loop(%n, %x, %x)
}
"#;

#[test]
fn a_tensor_loop_reuses_pooled_storage() {
    let n: i64 = 1_000_000;
    let values: Vec<f64> = (0..16).map(f64::from).collect();
    let x = common::tensor(DType::F32, &[16], &values);
    for config in common::Config::ALL {
        let exe = common::build_with(TENSOR_LOOP, "tensor_loop.relay", config);
        let what = format!("tensor loop ({config})");
        let mut vm = Vm::new(&exe);
        vm.invoke("main", &[common::scalar(DType::I64, 1.0), x.clone()])
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let warm = vm.allocator_stats();
        let result = vm
            .invoke("main", &[common::scalar(DType::I64, n as f64), x.clone()])
            .unwrap_or_else(|e| panic!("{what}: {e}\n{}", common::disassemble(&exe)));
        let stats = vm.allocator_stats();
        eprintln!(
            "{what}: peak frames {}, allocator: {stats}",
            vm.peak_frames()
        );
        assert!(
            vm.peak_frames() <= MAX_LOOP_FRAMES,
            "{what}: {} frames",
            vm.peak_frames()
        );
        // Every iteration allocates its output; all but the first few come from the pool.
        assert!(
            stats.pool_hits + MAX_FRESH >= warm.pool_hits + n as u64,
            "{what}: {n} iterations, each allocating its output, gave only {} pool hits: \
             {stats}\n{}",
            stats.pool_hits - warm.pool_hits,
            common::disassemble(&exe)
        );
        assert!(
            stats.fresh <= MAX_FRESH,
            "{what}: {} fresh allocations: {stats}",
            stats.fresh
        );
        assert!(
            stats.peak_live_bytes <= MAX_LIVE_BYTES,
            "{what}: {} bytes live at once: {stats}",
            stats.peak_live_bytes
        );
        // The loop converges to 2x: acc = acc / 2 + x.
        let got = result.as_tensor().expect("a tensor").to_f64_vec();
        for (i, (g, v)) in got.iter().zip(&values).enumerate() {
            assert!(
                (g - 2.0 * v).abs() <= 1e-5 * (2.0 * v).abs() + 1e-6,
                "{what}: element {i} is {g}"
            );
        }
    }
}

const NON_TAIL: &str = r#"#[version = "0.0.5"]
def @sum_to(%n: int64) -> int64 {
  if (%n == 0i64) { 0i64 } else { %n + @sum_to(%n - 1i64) }
}

def @main(%n: int64) -> int64 {
  @sum_to(%n)
}
"#;

#[test]
fn non_tail_recursion_deeper_than_max_frames_is_a_recursion_limit_error() {
    let exe = common::build(NON_TAIL, "non_tail.relay");
    let options = VmOptions {
        max_frames: 1000,
        ..VmOptions::default()
    };
    let mut vm = Vm::with_options(&exe, options.clone());
    let err = vm
        .invoke("main", &[common::scalar(DType::I64, 5000.0)])
        .expect_err("5000 frames exceed a limit of 1000");
    assert_eq!(err.kind, VmErrorKind::RecursionLimit, "{err}");
    assert!(
        err.to_string().contains("recursion limit exceeded"),
        "{err}"
    );
    assert_eq!(err.function.as_deref(), Some("sum_to"), "{err}");
    assert!(vm.peak_frames() <= 1000, "{} frames", vm.peak_frames());

    // Within the limit the same VM still works.
    let mut vm = Vm::with_options(&exe, options);
    let ok = vm
        .invoke("main", &[common::scalar(DType::I64, 900.0)])
        .unwrap_or_else(|e| panic!("900 frames fit in 1000: {e}"));
    assert_eq!(common::int_of(&ok), 900 * 901 / 2);
    let again = vm
        .invoke("main", &[common::scalar(DType::I64, 1001.0)])
        .expect_err("1001 frames exceed 1000");
    assert_eq!(again.kind, VmErrorKind::RecursionLimit, "{again}");
}

#[test]
fn non_tail_recursion_1e5_deep_runs_at_the_default_limit() {
    let exe = common::build(NON_TAIL, "non_tail.relay");
    let mut vm = Vm::new(&exe);
    let n: i64 = 100_000;
    let result = vm
        .invoke("main", &[common::scalar(DType::I64, n as f64)])
        .unwrap_or_else(|e| panic!("10^5 frames fit the default limit: {e}"));
    let n = i128::from(n);
    assert_eq!(common::int_of(&result), n * (n + 1) / 2);
    assert!(
        vm.peak_frames() > 100_000,
        "a non-tail recursion 10^5 deep holds 10^5 frames, peak {}",
        vm.peak_frames()
    );
}
