//! Kernel benchmarks (BENCHMARKS.md W1, W2): the JIT-compiled kernels of `fuse_ops`'s primitive
//! functions, called through `PackedFunc::call` on preallocated arrays, against plain Rust
//! loops compiled by rustc/LLVM in the same run; and the time to compile one kernel (compose,
//! lower, Cranelift codegen and JIT).
//!
//! Groups and benchmarks (criterion ids, read by `benches/run.sh` from
//! `target/criterion/<group>/<bench>/new/estimates.json`):
//! - `W1_2e20`, `W1_2e24`: `ours`, `rust_loop` — `add(%a, %b)` over 2^20 and 2^24 float32;
//! - `W2_2e20`: `ours`, `rust_fused` — `nn.relu(add(multiply(%a, %b), %c))` over 2^20 float32;
//! - `compile`: `W1`, `W2` — `relay_kernel::compile_primitive` on each primitive function.
//!
//! The Rust peers use 256-bit AVX2 code when the CPU has it (checked at run time), as a build
//! with `-C target-cpu=native` would; otherwise the baseline x86-64 (128-bit) code. One thread.
//! Under `cargo test --benches` every benchmark runs once, as a check that it works. With
//! `RELAY_BENCH_PRINT_KERNELS` set, the loop nest of each kernel is printed to stderr first.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use relay_benches::bench_mode;
use relay_ir::{DType, Expr, ExprKind, Function, NDArray};
use relay_passes::{PassManager, pass_by_name};

/// The one primitive function `fuse_ops` makes of `benches/programs/<file>`.
fn primitive(file: &str) -> Function {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("programs")
        .join(file);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) => panic!("cannot read {}: {err}", path.display()),
    };
    let module = match relay_syntax::parse(&text, file) {
        Ok(module) => module,
        Err(errors) => panic!(
            "{file} does not parse:\n{}",
            relay_syntax::render_plain(&errors)
        ),
    };
    if let Err(errors) = relay_types::check_module(&module) {
        panic!(
            "{file} does not type-check:\n{}",
            relay_syntax::render_plain(&errors)
        );
    }
    let fuse = pass_by_name("fuse_ops").expect("fuse_ops is registered");
    let fused = match PassManager::new(vec![fuse], 2).run(module) {
        Ok((module, _timings)) => module,
        Err(err) => panic!("fuse_ops fails on {file}: {err}"),
    };
    let main = fused
        .functions
        .iter()
        .find(|f| f.name.as_str() == "main")
        .unwrap_or_else(|| panic!("{file} has no @main"));
    let mut found = Vec::new();
    primitives(&main.func.body, &mut found);
    let prim = match found.len() {
        1 => found.remove(0),
        n => panic!("{file}: expected one primitive function after fuse_ops, found {n}"),
    };
    if std::env::var_os("RELAY_BENCH_PRINT_KERNELS").is_some() {
        print_loops(&prim, file);
    }
    prim
}

/// Prints the loop nest `prim` lowers to (set `RELAY_BENCH_PRINT_KERNELS` to see it).
fn print_loops(prim: &Function, file: &str) {
    match relay_kernel::compose::compose(prim)
        .and_then(|composed| relay_kernel::lower::lower("kernel", &composed))
    {
        Ok(loops) => eprintln!("{file}:\n{loops}"),
        Err(err) => eprintln!("{file}: cannot lower: {err}"),
    }
}

/// Every primitive function literal in `e`.
fn primitives(e: &Expr, out: &mut Vec<Function>) {
    if let ExprKind::Function(f) = e.kind()
        && relay_ir::visit::is_primitive(f)
    {
        out.push(f.clone());
        return;
    }
    relay_ir::visit::for_each_child(e, |c| primitives(c, out));
}

/// Deterministic float32 values in [-1, 1) (a 32-bit LCG), `n` of them.
fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// A one-dimensional float32 array holding `data`.
fn array(data: &[f32]) -> NDArray {
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_ne_bytes()).collect();
    let n = i64::try_from(data.len()).expect("the length fits in i64");
    NDArray::from_bytes(DType::F32, &[n], &bytes).expect("a valid float32 array")
}

/// The float32 values of `a`.
fn floats(a: &NDArray) -> Vec<f32> {
    a.as_bytes()
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `c[i] = a[i] + b[i]`: the plain Rust loop (W1's peer), generic over the target features it
/// is compiled with.
#[inline(always)]
fn add_loop(a: &[f32], b: &[f32], c: &mut [f32]) {
    for ((c, a), b) in c.iter_mut().zip(a).zip(b) {
        *c = *a + *b;
    }
}

/// [`add_loop`] compiled for AVX2 (256-bit vectors).
///
/// # Safety
///
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn add_loop_avx2(a: &[f32], b: &[f32], c: &mut [f32]) {
    add_loop(a, b, c);
}

/// W1's peer: [`add_loop`] with the widest vectors the CPU supports.
fn rust_add(a: &[f32], b: &[f32], c: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 support was just checked at run time.
        unsafe { add_loop_avx2(a, b, c) };
        return;
    }
    add_loop(a, b, c);
}

/// `d[i] = max(a[i] * b[i] + c[i], 0)` in one pass: the fused Rust loop (W2's peer). The
/// multiply and add stay separate operations (no contraction into an FMA), as in the Relay
/// program.
#[inline(always)]
fn fused_loop(a: &[f32], b: &[f32], c: &[f32], d: &mut [f32]) {
    for (((d, a), b), c) in d.iter_mut().zip(a).zip(b).zip(c) {
        *d = (*a * *b + *c).max(0.0);
    }
}

/// [`fused_loop`] compiled for AVX2 (256-bit vectors).
///
/// # Safety
///
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fused_loop_avx2(a: &[f32], b: &[f32], c: &[f32], d: &mut [f32]) {
    fused_loop(a, b, c, d);
}

/// W2's peer: [`fused_loop`] with the widest vectors the CPU supports.
fn rust_fused(a: &[f32], b: &[f32], c: &[f32], d: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 support was just checked at run time.
        unsafe { fused_loop_avx2(a, b, c, d) };
        return;
    }
    fused_loop(a, b, c, d);
}

/// Measurement settings shared by the groups: flat sampling, 30 samples, 4 s of measurement.
fn configure(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
}

/// W1 at `n` elements: our kernel and the Rust loop, both checked against the scalar sum.
fn w1(c: &mut Criterion, file: &str, group_name: &str) {
    let prim = primitive(file);
    let kernel = relay_kernel::compile_primitive(&prim, "w1_add")
        .unwrap_or_else(|err| panic!("W1 ({file}) does not compile: {err}"));
    let mut outputs = relay_kernel::output_arrays(&prim).expect("W1 has a tensor result");
    assert_eq!(prim.params.len(), 2, "W1's primitive has two parameters");
    let n = outputs[0].num_elements();
    let (a, b) = (values(n, 1), values(n, 2));
    let (xa, xb) = (array(&a), array(&b));
    {
        let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
        kernel
            .call(&[&xa, &xb], &mut outs)
            .unwrap_or_else(|err| panic!("W1 kernel call fails: {err}"));
    }
    let mut sum = vec![0.0f32; a.len()];
    rust_add(&a, &b, &mut sum);
    assert!(
        floats(&outputs[0]) == sum,
        "the W1 kernel disagrees with the Rust loop"
    );

    let mut group = c.benchmark_group(group_name);
    configure(&mut group);
    group.bench_function("ours", |bench| {
        let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
        bench.iter(|| kernel.call(black_box(&[&xa, &xb]), black_box(&mut outs)))
    });
    group.bench_function("rust_loop", |bench| {
        bench.iter(|| rust_add(black_box(&a), black_box(&b), black_box(&mut sum)))
    });
    group.finish();
}

/// W2: our fused kernel and the fused Rust loop, checked against each other.
fn w2(c: &mut Criterion) {
    let prim = primitive("W2_fused.relay");
    let kernel = relay_kernel::compile_primitive(&prim, "w2_fused")
        .unwrap_or_else(|err| panic!("W2 does not compile: {err}"));
    let mut outputs = relay_kernel::output_arrays(&prim).expect("W2 has a tensor result");
    assert_eq!(prim.params.len(), 3, "W2's primitive has three parameters");
    let n = outputs[0].num_elements();
    let (a, b, cc) = (values(n, 3), values(n, 4), values(n, 5));
    let (xa, xb, xc) = (array(&a), array(&b), array(&cc));
    {
        let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
        kernel
            .call(&[&xa, &xb, &xc], &mut outs)
            .unwrap_or_else(|err| panic!("W2 kernel call fails: {err}"));
    }
    let mut d = vec![0.0f32; n];
    rust_fused(&a, &b, &cc, &mut d);
    let got = floats(&outputs[0]);
    // The kernel may contract the multiply-add into an FMA: compare within SPEC §4's tolerance.
    let mismatch = got
        .iter()
        .zip(&d)
        .position(|(g, w)| (g - w).abs() > 1e-6 + 1e-5 * w.abs());
    assert!(
        mismatch.is_none(),
        "the W2 kernel disagrees with the Rust loop at {mismatch:?}"
    );

    let mut group = c.benchmark_group("W2_2e20");
    configure(&mut group);
    group.bench_function("ours", |bench| {
        let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
        bench.iter(|| kernel.call(black_box(&[&xa, &xb, &xc]), black_box(&mut outs)))
    });
    group.bench_function("rust_fused", |bench| {
        bench.iter(|| {
            rust_fused(
                black_box(&a),
                black_box(&b),
                black_box(&cc),
                black_box(&mut d),
            )
        })
    });
    group.finish();
}

/// The time to compile one kernel: compose, lower, codegen and JIT (the target is under 5 ms).
/// Each compiled kernel is dropped inside the timed loop, which frees its JIT memory.
fn compile(c: &mut Criterion) {
    let w1 = primitive("W1_add_2e20.relay");
    let w2 = primitive("W2_fused.relay");
    let mut group = c.benchmark_group("compile");
    configure(&mut group);
    group.bench_function("W1", |bench| {
        bench.iter(|| relay_kernel::compile_primitive(black_box(&w1), "w1_add"))
    });
    group.bench_function("W2", |bench| {
        bench.iter(|| relay_kernel::compile_primitive(black_box(&w2), "w2_fused"))
    });
    group.finish();
}

fn kernels(c: &mut Criterion) {
    w1(c, "W1_add_2e20.relay", "W1_2e20");
    // 2^24 elements take 64 MiB per array: measured only by `cargo bench`, not in test mode.
    if bench_mode() {
        w1(c, "W1_add_2e24.relay", "W1_2e24");
    }
    w2(c);
    compile(c);
}

criterion_group!(benches, kernels);
criterion_main!(benches);
