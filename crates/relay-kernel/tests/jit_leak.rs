//! Compiling and dropping kernels does not grow memory (Cranelift's JIT memory is freed when
//! the last `PackedFunc` of a module drops). Alone in its own test binary: it measures the
//! process' resident set, which other tests running in parallel would disturb.

use std::time::Instant;

use relay_ir::{ExprKind, Function};

/// The resident set size in KiB (Linux), if it can be read.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The primitive function of a small fused elementwise kernel.
fn primitive() -> Function {
    let text = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(64), float32]) {
  %0 = fn (%p0: Tensor[(64), float32], Primitive=1) {
    add(exp(%p0), multiply(%p0, 3f))
  };
  %0(%x)
}"#;
    let module = relay_syntax::parse(text, "leak.relay").unwrap_or_else(|e| panic!("{e:?}"));
    relay_types::check_module(&module).unwrap_or_else(|e| panic!("{e:?}"));
    let main = module.functions.iter().find(|f| f.name.as_str() == "main");
    let body = main.map(|f| f.func.body.clone()).expect("a @main");
    let ExprKind::Let { bindings, .. } = body.kind() else {
        panic!("expected a let, got {body:?}");
    };
    match bindings[0].value.kind() {
        ExprKind::Function(f) => f.clone(),
        other => panic!("expected a function, got {other:?}"),
    }
}

#[test]
fn dropping_kernels_frees_their_code() {
    // 10,000 in release builds or when `CI` is set; fewer otherwise to keep debug test runs
    // short (`RELAY_KERNEL_LEAK_ITERATIONS` overrides).
    let iterations: usize = std::env::var("RELAY_KERNEL_LEAK_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(
            if cfg!(debug_assertions) && std::env::var_os("CI").is_none() {
                2_000
            } else {
                10_000
            },
        );
    let Some(_) = rss_kib() else {
        eprintln!("VmRSS is not available; skipping the measurement");
        return;
    };
    let prim = primitive();
    // Warm up allocators and lazily initialized state.
    for _ in 0..200 {
        drop(relay_kernel::compile_primitive(&prim, "small").unwrap());
    }
    let before = rss_kib().unwrap_or(0);
    let start = Instant::now();
    for _ in 0..iterations {
        let f = relay_kernel::compile_primitive(&prim, "small").unwrap();
        drop(f);
    }
    let after = rss_kib().unwrap_or(0);
    let grown = after.saturating_sub(before);
    eprintln!(
        "compiled and dropped {iterations} kernels in {:?}; VmRSS {before} KiB -> {after} KiB",
        start.elapsed()
    );
    // Leaking the code would map at least one page per kernel (4 KiB × iterations, 8 MiB for
    // 2,000); allow 4 MiB of allocator noise.
    assert!(
        grown < 4 * 1024,
        "VmRSS grew by {grown} KiB over {iterations} kernels"
    );
}
