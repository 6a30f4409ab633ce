//! The VM's hot path for scalar work allocates nothing: a tail-recursive loop on scalars, and
//! recursive calls on scalars, make a number of heap allocations that does not grow with the
//! number of iterations or calls (counted by a global allocator that wraps the system's).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use relay_ir::DType;
use relay_vm::{Vm, VmOptions};

/// The system allocator, counting allocations.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded from the caller.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded from the caller.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded from the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A tail-recursive loop.
const LOOP: &str = r#"#[version = "0.0.5"]
def @sum_to(%i: int64, %n: int64, %acc: int64) -> int64 {
  if (%i == %n) {
    %acc
  } else {
    @sum_to(%i + 1i64, %n, %acc + %i * 2i64)
  }
}

def @main(%n: int64) -> int64 {
  @sum_to(0i64, %n, 0i64)
}
"#;

/// Recursive calls.
const FIB: &str = r#"#[version = "0.0.5"]
def @main(%n: int64) -> int64 {
  if (%n < 2i64) {
    %n
  } else {
    @main(%n - 1i64) + @main(%n - 2i64)
  }
}
"#;

/// The allocations one call of `entry` on `n` makes (after a warm-up run that grows the
/// VM's buffers), and its result.
fn allocations(vm: &mut Vm<'_>, entry: &str, n: i64) -> (u64, i128) {
    let arg = common::scalar(DType::I64, n as f64);
    vm.invoke(entry, std::slice::from_ref(&arg))
        .expect("the warm-up run");
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let result = vm.invoke(entry, &[arg]).expect("the run");
    let after = ALLOCATIONS.load(Ordering::Relaxed);
    (after - before, common::int_of(&result))
}

#[test]
fn scalar_loops_and_calls_allocate_nothing_per_iteration() {
    let options = VmOptions {
        threads: 1,
        ..VmOptions::default()
    };
    for config in common::Config::ALL {
        let exe = common::build_with(LOOP, "loop.relay", config);
        let mut vm = Vm::with_options(&exe, options.clone());
        let (small, r) = allocations(&mut vm, "main", 10);
        assert_eq!(r, 90, "{config}");
        let (large, r) = allocations(&mut vm, "main", 100_000);
        assert_eq!(r, 100_000 * 99_999, "{config}");
        assert_eq!(
            small, large,
            "{config}: a loop of 10 iterations made {small} allocations, of 100,000 made {large}"
        );

        let exe = common::build_with(FIB, "fib.relay", config);
        let mut vm = Vm::with_options(&exe, options.clone());
        let (small, r) = allocations(&mut vm, "main", 10);
        assert_eq!(r, 55, "{config}");
        let (large, r) = allocations(&mut vm, "main", 20);
        assert_eq!(r, 6765, "{config}");
        assert_eq!(
            small, large,
            "{config}: fib(10) made {small} allocations, fib(20) {large}"
        );
    }
}
