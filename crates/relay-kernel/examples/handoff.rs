//! Hand-off latency of the kernel thread pool: a parallel loop with almost no work, called
//! back to back through `relay_kernel_parallel_for` on a two-thread context, and the same on
//! one thread. `cargo run --release -p relay-kernel --example handoff [CALLS]`.

use std::ffi::c_void;
use std::time::Instant;

use relay_kernel::abi::KernelContext;
use relay_kernel::host::relay_kernel_parallel_for;

/// A parallel body that touches nothing.
unsafe extern "C" fn nothing(_: *const *mut u8, _: *mut c_void, lo: i64, hi: i64) -> i32 {
    std::hint::black_box(hi - lo);
    0
}

fn main() {
    let calls: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    for threads in [1, 2] {
        let mut ctx = KernelContext::with_threads(threads);
        let ptr = (&mut ctx as *mut KernelContext).cast::<c_void>();
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..calls {
                // SAFETY: the body touches no buffer; `ptr` is a live context.
                unsafe { relay_kernel_parallel_for(ptr, nothing, std::ptr::null(), 64) };
            }
            best = best.min(t.elapsed().as_secs_f64() / f64::from(calls));
        }
        println!(
            "threads {threads}: {:.0} ns per parallel call (best of 5)",
            best * 1e9
        );
    }
}
