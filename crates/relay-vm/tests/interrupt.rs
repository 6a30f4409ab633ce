//! A VM given an `Interrupt` stops at the next function-call or kernel boundary once it says
//! so: in a self tail-recursive loop (a jump), a mutual recursion, a loop of kernel calls on
//! tensors; the VM then runs again; and a VM without one, or whose interrupt never fires, runs
//! to the end.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use relay_ir::{DType, Value};
use relay_vm::{Executable, Interrupt, Vm, VmErrorKind, VmOptions};

/// Counts up forever: a self tail call, compiled to a backward jump.
const FOREVER: &str = r#"#[version = "0.0.5"]
def @spin(%i: int64) -> int64 {
  if (%i < 0i64) { %i } else { @spin(%i + 1i64) }
}
def @main(%n: int64) -> int64 { @spin(%n) }
"#;

/// Forever through two functions, a kernel on a 4,096-element tensor each step.
const PING_PONG: &str = r#"#[version = "0.0.5"]
def @ping(%x: Tensor[(4096), float32], %i: int64) -> Tensor[(4096), float32] {
  if (%i < 0i64) { %x } else { @pong(%x * 0.5f + 1f, %i + 1i64) }
}
def @pong(%x: Tensor[(4096), float32], %i: int64) -> Tensor[(4096), float32] {
  @ping(exp(%x) * 0.1f, %i + 1i64)
}
def @main(%x: Tensor[(4096), float32]) -> Tensor[(4096), float32] { @ping(%x, 0i64) }
"#;

fn options(interrupt: Interrupt) -> VmOptions {
    VmOptions {
        threads: 1,
        interrupt: Some(interrupt),
        ..VmOptions::default()
    }
}

/// Runs `main` of `exe` on `args` with a flag set `after` the start; returns the error kind
/// and how long after the flag the run stopped.
fn stop_after(exe: &Executable, args: &[Value], after: Duration) -> (VmErrorKind, Duration) {
    let flag = Arc::new(AtomicBool::new(false));
    let mut vm = Vm::with_options(exe, options(Interrupt::flag(flag.clone())));
    stop_vm_after(&mut vm, &flag, args, after)
}

/// [`stop_after`] on a given VM whose interrupt is `flag`.
fn stop_vm_after(
    vm: &mut Vm,
    flag: &Arc<AtomicBool>,
    args: &[Value],
    after: Duration,
) -> (VmErrorKind, Duration) {
    let setter = {
        let flag = flag.clone();
        thread::spawn(move || {
            thread::sleep(after);
            flag.store(true, Ordering::Relaxed);
            Instant::now()
        })
    };
    let error = vm.invoke("main", args).expect_err("the loop never ends");
    let stopped = Instant::now();
    let set = setter.join().expect("the setter thread");
    (error.kind, stopped.saturating_duration_since(set))
}

#[test]
fn a_tail_recursive_loop_stops_at_its_next_jump() {
    let exe = common::build(FOREVER, "forever.relay");
    let (kind, late) = stop_after(
        &exe,
        &[common::scalar(DType::I64, 0.0)],
        Duration::from_millis(50),
    );
    assert_eq!(kind, VmErrorKind::Interrupted);
    assert!(
        late < Duration::from_secs(1),
        "stopped {late:?} after the flag"
    );
}

#[test]
fn a_recursion_through_kernels_stops_and_the_vm_runs_again() {
    let exe = common::build(PING_PONG, "ping_pong.relay");
    let x = common::tensor(DType::F32, &[4096], &[0.5; 4096]);
    let flag = Arc::new(AtomicBool::new(false));
    let mut vm = Vm::with_options(&exe, options(Interrupt::flag(flag.clone())));
    let (kind, late) = stop_vm_after(
        &mut vm,
        &flag,
        std::slice::from_ref(&x),
        Duration::from_millis(50),
    );
    assert_eq!(kind, VmErrorKind::Interrupted);
    assert!(
        late < Duration::from_secs(1),
        "stopped {late:?} after the flag"
    );

    // The same VM, its flag cleared, runs again: `@ping` at -1 returns its input.
    flag.store(false, Ordering::Relaxed);
    let minus_one = common::scalar(DType::I64, -1.0);
    let back = vm
        .invoke("ping", &[x.clone(), minus_one])
        .expect("the VM runs again after an interrupted run");
    let Value::Tensor(back) = back else {
        panic!("expected a tensor, got {back:?}")
    };
    let Value::Tensor(input) = &x else {
        unreachable!()
    };
    assert_eq!(back.as_bytes(), input.as_bytes());

    // A VM whose interrupt never fires runs to the end, and is asked rarely.
    let exe = common::build(
        "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(4096), float32]) { exp(%x) }",
        "exp.relay",
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let quiet = Interrupt::new(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        false
    });
    let mut vm = Vm::with_options(&exe, options(quiet));
    for _ in 0..1000 {
        vm.invoke("main", std::slice::from_ref(&x))
            .expect("a quiet interrupt never stops a run");
    }
    // One kernel call per run: asked once per 256 boundaries.
    let asked = calls.load(Ordering::Relaxed);
    assert!(
        (1..=1000 / 256 + 1).contains(&asked),
        "asked {asked} times in 1000 kernel calls"
    );
}

#[test]
fn the_interrupted_error_names_itself() {
    let exe = common::build(FOREVER, "forever.relay");
    let mut vm = Vm::with_options(&exe, options(Interrupt::new(|| true)));
    let error = vm
        .invoke("main", &[common::scalar(DType::I64, 0.0)])
        .expect_err("interrupted at once");
    assert_eq!(error.kind, VmErrorKind::Interrupted);
    assert_eq!(error.kind.code(), "relay::vm::interrupted");
    assert!(error.to_string().contains("interrupted"), "{error}");
}
