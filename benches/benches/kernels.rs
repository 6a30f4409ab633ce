//! Kernel benchmarks (BENCHMARKS.md W1–W4, W8): the JIT-compiled kernels of `fuse_ops`'s
//! primitive functions, called through `PackedFunc::call_with` on preallocated arrays with an
//! explicit kernel context (one thread unless the id says otherwise), against Rust peers
//! compiled by rustc/LLVM in the same run; the time to compile one kernel (compose, lower,
//! Cranelift codegen and JIT); and the time from program text to runnable kernels.
//!
//! Groups and benchmarks (criterion ids, read by `benches/run.sh` from
//! `target/criterion/<group>/<bench>/new/estimates.json`):
//! - `W1_2e20`, `W1_2e24`: `ours`, `rust_loop` — `add(%a, %b)` over 2^20 and 2^24 float32;
//! - `W1_2e20_threads2`: `ours` — W1 at 2^20 with a two-thread kernel context;
//! - `W2_2e20`: `ours`, `rust_fused` — `nn.relu(add(multiply(%a, %b), %c))` over 2^20 float32;
//! - `W3_dense`: `ours`, `matrixmultiply` — `nn.dense` of x [128, 512] and w [512, 512];
//! - `W3_matmul`: `ours`, `matrixmultiply` — the 512 × 512 × 512 `nn.matmul`;
//! - `W4_conv2d`: `ours`, `rust_direct` — the 3 × 3 convolution [1, 64, 56, 56] × [64, 64, 3, 3];
//! - `compile`: `W1`, `W2`, `W3`, `W4` — `relay_kernel::compile_primitive` on each primitive
//!   function (`W3` is the dense one); `W8_mlp`, `W8_conv` — W5's MLP (batch 1) and W4's
//!   convolution from text to runnable kernels: parse, type-check, the default pass pipeline,
//!   then every primitive function compiled.
//!
//! A kernel that does not compile yet (an operator without lowering) is reported on stderr and
//! its benchmarks are skipped; the peers still run. Every compiled kernel is checked once
//! against its Rust peer before timing, and a disagreement panics.
//!
//! The elementwise Rust peers use 256-bit AVX2 code when the CPU has it (checked at run time),
//! as a build with `-C target-cpu=native` would; otherwise the baseline x86-64 (128-bit) code.
//! The GEMM peer is the `matrixmultiply` crate's `sgemm`, which selects its AVX-512, AVX2+FMA
//! or SSE kernels at run time. One thread for every peer. Under `cargo test --benches` every
//! benchmark runs once, as a check that it works. With `RELAY_BENCH_PRINT_KERNELS` set, the
//! loop nest of each kernel is printed to stderr first.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use relay_benches::{bench_mode, typed};
use relay_ir::{DType, Expr, ExprKind, Function, NDArray};
use relay_kernel::PackedFunc;
use relay_kernel::abi::KernelContext;
use relay_passes::{PassManager, PipelineConfig, pass_by_name};

/// The text of `benches/programs/<file>`.
fn program(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("programs")
        .join(file);
    match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) => panic!("cannot read {}: {err}", path.display()),
    }
}

/// The one primitive function `fuse_ops` makes of `benches/programs/<file>`.
fn primitive(file: &str) -> Function {
    let module = typed(&program(file), file).unwrap_or_else(|message| panic!("{message}"));
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
    match relay_kernel::lower_primitive(prim, "kernel") {
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

/// `prim`'s kernel, or `None` after saying on stderr why the benchmark `what` is skipped.
fn compile_or_skip(prim: &Function, name: &str, what: &str) -> Option<PackedFunc> {
    match relay_kernel::compile_primitive(prim, name) {
        Ok(kernel) => Some(kernel),
        Err(err) => {
            eprintln!("{what}: skipped, the kernel does not compile: {err}");
            None
        }
    }
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

/// A float32 array of `shape` holding `data` (row-major).
fn array(shape: &[i64], data: &[f32]) -> NDArray {
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_ne_bytes()).collect();
    NDArray::from_bytes(DType::F32, shape, &bytes)
        .unwrap_or_else(|err| panic!("not a float32 array of shape {shape:?}: {err}"))
}

/// A one-dimensional float32 array holding `data`.
fn vector(data: &[f32]) -> NDArray {
    let n = i64::try_from(data.len()).expect("the length fits in i64");
    array(&[n], data)
}

/// The float32 values of `a`.
fn floats(a: &NDArray) -> Vec<f32> {
    a.as_bytes()
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Panics unless `got` agrees with `want` element by element within rtol 1e-4 (SPEC §4's
/// tolerance for contractions), with an absolute floor of 1e-4: two float32 summation orders of
/// a few hundred products of values in [-1, 1) differ by up to a few 1e-5 on outputs near 0.
fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: output sizes differ");
    let mismatch = got
        .iter()
        .zip(want)
        .position(|(g, w)| (g - w).abs() > 1e-4 * w.abs().max(1.0) || g.is_nan() != w.is_nan());
    if let Some(i) = mismatch {
        panic!(
            "{what}: the kernel disagrees with the Rust peer at element {i}: {} vs {}",
            got[i], want[i]
        );
    }
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

/// A row-major matrix operand of [`sgemm`]: its data, and whether it is stored transposed
/// (as the `[n, k]` weight of `nn.dense` is for `x · wᵀ`).
struct Operand<'a> {
    /// The elements.
    data: &'a [f32],
    /// Whether `data` holds the transpose of the operand, row-major.
    transposed: bool,
}

/// W3's peer: `c = a · b` with `a` of `m × k`, `b` of `k × n` and `c` of `m × n`, all
/// row-major, by the `matrixmultiply` crate's `sgemm` (one thread).
fn sgemm(m: usize, k: usize, n: usize, a: Operand<'_>, b: Operand<'_>, c: &mut [f32]) {
    assert!(
        a.data.len() == m * k && b.data.len() == k * n && c.len() == m * n,
        "sgemm operands of the wrong sizes"
    );
    let strides = |rows: usize, cols: usize, transposed: bool| {
        let (rows, cols) = (rows as isize, cols as isize);
        // Row and column strides of a `rows × cols` operand stored row-major, or stored as its
        // row-major transpose.
        if transposed { (1, rows) } else { (cols, 1) }
    };
    let (rsa, csa) = strides(m, k, a.transposed);
    let (rsb, csb) = strides(k, n, b.transposed);
    // SAFETY: the sizes were checked above: with these strides every element `sgemm` reads is
    // inside `a.data` or `b.data` and every element it writes is inside `c`, which is
    // exclusively borrowed and does not overlap the inputs.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.data.as_ptr(),
            rsa,
            csa,
            b.data.as_ptr(),
            rsb,
            csb,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// The shape of a stride-1, dilation-1 `nn.conv2d` in NCHW/OIHW layout with symmetric padding.
#[derive(Clone, Copy)]
struct ConvShape {
    /// Batch.
    n: usize,
    /// Input channels.
    c: usize,
    /// Input height.
    h: usize,
    /// Input width.
    w: usize,
    /// Output channels.
    o: usize,
    /// Kernel height.
    kh: usize,
    /// Kernel width.
    kw: usize,
    /// Padding on every side.
    pad: usize,
}

impl ConvShape {
    /// Output height.
    fn oh(&self) -> usize {
        self.h + 2 * self.pad + 1 - self.kh
    }

    /// Output width.
    fn ow(&self) -> usize {
        self.w + 2 * self.pad + 1 - self.kw
    }
}

/// Direct convolution loops: for each output channel, input channel and kernel tap, one
/// multiply-add of a weight into a row of the output, over the range of output columns whose
/// input column is inside the image (the inner loop is contiguous and vectorizes).
#[inline(always)]
fn conv_loops(s: ConvShape, x: &[f32], w: &[f32], out: &mut [f32]) {
    let (oh, ow) = (s.oh(), s.ow());
    out.fill(0.0);
    for n in 0..s.n {
        for o in 0..s.o {
            let plane = &mut out[(n * s.o + o) * oh * ow..][..oh * ow];
            for c in 0..s.c {
                let image = &x[(n * s.c + c) * s.h * s.w..][..s.h * s.w];
                for kh in 0..s.kh {
                    for kw in 0..s.kw {
                        let weight = w[((o * s.c + c) * s.kh + kh) * s.kw + kw];
                        // Output column `x` reads input column `x + kw - pad`.
                        let x0 = s.pad.saturating_sub(kw);
                        let x1 = ow.min((s.w + s.pad).saturating_sub(kw));
                        if x0 >= x1 {
                            continue;
                        }
                        for y in 0..oh {
                            let Some(iy) = (y + kh).checked_sub(s.pad).filter(|&iy| iy < s.h)
                            else {
                                continue;
                            };
                            let src = &image[iy * s.w + x0 + kw - s.pad..][..x1 - x0];
                            let dst = &mut plane[y * ow + x0..][..x1 - x0];
                            for (d, v) in dst.iter_mut().zip(src) {
                                *d += weight * *v;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// [`conv_loops`] compiled for AVX2 (256-bit vectors).
///
/// # Safety
///
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn conv_loops_avx2(s: ConvShape, x: &[f32], w: &[f32], out: &mut [f32]) {
    conv_loops(s, x, w, out);
}

/// W4's peer: [`conv_loops`] with the widest vectors the CPU supports.
fn rust_conv(s: ConvShape, x: &[f32], w: &[f32], out: &mut [f32]) {
    assert!(
        x.len() == s.n * s.c * s.h * s.w
            && w.len() == s.o * s.c * s.kh * s.kw
            && out.len() == s.n * s.o * s.oh() * s.ow(),
        "convolution operands of the wrong sizes"
    );
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 support was just checked at run time.
        unsafe { conv_loops_avx2(s, x, w, out) };
        return;
    }
    conv_loops(s, x, w, out);
}

/// Measurement settings shared by the groups: flat sampling, 30 samples, 4 s of measurement.
fn configure(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
}

/// W1 at `n` elements: our kernel (one thread, and for 2^20 also two threads) and the Rust
/// loop, all checked against the scalar sum.
fn w1(c: &mut Criterion, file: &str, group_name: &str) {
    let prim = primitive(file);
    let kernel = relay_kernel::compile_primitive(&prim, "w1_add")
        .unwrap_or_else(|err| panic!("W1 ({file}) does not compile: {err}"));
    let mut outputs = relay_kernel::output_arrays(&prim).expect("W1 has a tensor result");
    assert_eq!(prim.params.len(), 2, "W1's primitive has two parameters");
    let n = outputs[0].num_elements();
    let (a, b) = (values(n, 1), values(n, 2));
    let (xa, xb) = (vector(&a), vector(&b));
    let mut sum = vec![0.0f32; a.len()];
    rust_add(&a, &b, &mut sum);
    let mut one = KernelContext::with_threads(1);
    let mut two = KernelContext::with_threads(2);
    for ctx in [&mut one, &mut two] {
        outputs[0] = NDArray::zeros(DType::F32, outputs[0].shape()).expect("a float32 array");
        let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
        kernel
            .call_with(ctx, &[&xa, &xb], &mut outs)
            .unwrap_or_else(|err| panic!("W1 kernel call fails: {err}"));
        assert!(
            floats(&outputs[0]) == sum,
            "the W1 kernel disagrees with the Rust loop"
        );
    }

    let mut group = c.benchmark_group(group_name);
    configure(&mut group);
    group.bench_function("ours", |bench| {
        let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
        bench.iter(|| kernel.call_with(&mut one, black_box(&[&xa, &xb]), black_box(&mut outs)))
    });
    group.bench_function("rust_loop", |bench| {
        bench.iter(|| rust_add(black_box(&a), black_box(&b), black_box(&mut sum)))
    });
    group.finish();

    if n == 1 << 20 {
        let mut group = c.benchmark_group(format!("{group_name}_threads2"));
        configure(&mut group);
        group.bench_function("ours", |bench| {
            let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
            bench.iter(|| kernel.call_with(&mut two, black_box(&[&xa, &xb]), black_box(&mut outs)))
        });
        group.finish();
    }
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
    let (xa, xb, xc) = (vector(&a), vector(&b), vector(&cc));
    let mut ctx = KernelContext::with_threads(1);
    {
        let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
        kernel
            .call_with(&mut ctx, &[&xa, &xb, &xc], &mut outs)
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
        bench.iter(|| kernel.call_with(&mut ctx, black_box(&[&xa, &xb, &xc]), black_box(&mut outs)))
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

/// A workload with one float32 output computed by our kernel and by a Rust peer.
struct Workload<'a> {
    /// The criterion group.
    group: &'a str,
    /// The program under `benches/programs/`.
    file: &'a str,
    /// The inputs: shape and row-major values.
    inputs: Vec<(Vec<i64>, Vec<f32>)>,
    /// The peer's benchmark id.
    peer: &'a str,
}

/// Benchmarks `work`: our kernel with a one-thread context (skipped, with a message on
/// stderr, when it does not compile) and `peer`, which computes the output from the inputs'
/// values. Our result is checked against the peer's once before timing.
fn kernel_vs_peer(
    c: &mut Criterion,
    work: Workload<'_>,
    mut peer: impl FnMut(&[Vec<f32>], &mut [f32]),
) {
    let prim = primitive(work.file);
    let kernel = compile_or_skip(&prim, work.group, &format!("{}/ours", work.group));
    let arrays: Vec<NDArray> = work
        .inputs
        .iter()
        .map(|(shape, data)| array(shape, data))
        .collect();
    let data: Vec<Vec<f32>> = work.inputs.into_iter().map(|(_, data)| data).collect();
    let mut outputs = relay_kernel::output_arrays(&prim)
        .unwrap_or_else(|err| panic!("{}: no output arrays: {err}", work.file));
    assert_eq!(outputs.len(), 1, "{}: one output", work.file);
    let mut expected = vec![0.0f32; outputs[0].num_elements()];
    peer(&data, &mut expected);
    let mut ctx = KernelContext::with_threads(1);
    let inputs: Vec<&NDArray> = arrays.iter().collect();
    if let Some(kernel) = &kernel {
        let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
        kernel
            .call_with(&mut ctx, &inputs, &mut outs)
            .unwrap_or_else(|err| panic!("{}: the kernel call fails: {err}", work.group));
        assert_close(work.group, &floats(&outputs[0]), &expected);
    }

    let mut group = c.benchmark_group(work.group);
    configure(&mut group);
    if let Some(kernel) = &kernel {
        group.bench_function("ours", |bench| {
            let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
            bench.iter(|| kernel.call_with(&mut ctx, black_box(&inputs), black_box(&mut outs)))
        });
    }
    group.bench_function(work.peer, |bench| {
        bench.iter(|| peer(black_box(&data), black_box(&mut expected)))
    });
    group.finish();
}

/// W3: `nn.dense` (x [128, 512] · w [512, 512]ᵀ) and the 512³ `nn.matmul`, against
/// `matrixmultiply`'s `sgemm`.
fn w3(c: &mut Criterion) {
    let (m, k, n) = (128, 512, 512);
    let dense = Workload {
        group: "W3_dense",
        file: "W3_dense.relay",
        inputs: vec![
            (vec![m as i64, k as i64], values(m * k, 6)),
            (vec![n as i64, k as i64], values(n * k, 7)),
        ],
        peer: "matrixmultiply",
    };
    kernel_vs_peer(c, dense, |inputs, out| {
        let x = Operand {
            data: &inputs[0],
            transposed: false,
        };
        let w = Operand {
            data: &inputs[1],
            transposed: true,
        };
        sgemm(m, k, n, x, w, out)
    });

    let s = 512;
    let matmul = Workload {
        group: "W3_matmul",
        file: "W3_matmul.relay",
        inputs: vec![
            (vec![s as i64, s as i64], values(s * s, 8)),
            (vec![s as i64, s as i64], values(s * s, 9)),
        ],
        peer: "matrixmultiply",
    };
    kernel_vs_peer(c, matmul, |inputs, out| {
        let a = Operand {
            data: &inputs[0],
            transposed: false,
        };
        let b = Operand {
            data: &inputs[1],
            transposed: false,
        };
        sgemm(s, s, s, a, b, out)
    });
}

/// W4: the 3 × 3 convolution [1, 64, 56, 56] × [64, 64, 3, 3], padding 1, against direct Rust
/// loops.
fn w4(c: &mut Criterion) {
    let s = ConvShape {
        n: 1,
        c: 64,
        h: 56,
        w: 56,
        o: 64,
        kh: 3,
        kw: 3,
        pad: 1,
    };
    let dims = |v: [usize; 4]| v.iter().map(|&d| d as i64).collect::<Vec<i64>>();
    let conv = Workload {
        group: "W4_conv2d",
        file: "W4_conv2d.relay",
        inputs: vec![
            (
                dims([s.n, s.c, s.h, s.w]),
                values(s.n * s.c * s.h * s.w, 10),
            ),
            (
                dims([s.o, s.c, s.kh, s.kw]),
                values(s.o * s.c * s.kh * s.kw, 11),
            ),
        ],
        peer: "rust_direct",
    };
    kernel_vs_peer(c, conv, |inputs, out| {
        rust_conv(s, &inputs[0], &inputs[1], out)
    });
}

/// Program text to runnable kernels, as `relayc` builds them: parse, type-check, the default
/// pass pipeline, then every distinct primitive function compiled.
fn text_to_kernels(text: &str, file: &str) -> Result<Vec<PackedFunc>, String> {
    let module = typed(text, file)?;
    let manager = PassManager::from_config(&PipelineConfig::default_pipeline());
    let (module, _timings) = manager
        .run(module)
        .map_err(|err| format!("{file}: the default pipeline fails: {err}"))?;
    relay_kernel::primitive_functions(&module)
        .iter()
        .map(|(name, f)| {
            relay_kernel::compile_primitive(f, name)
                .map_err(|err| format!("{file}: kernel {name} does not compile: {err}"))
        })
        .collect()
}

/// Compile times: one kernel (compose, lower, codegen and JIT; the target is under 5 ms) for
/// W1–W4, and program text to runnable kernels for W8 (the MLP's target is 20 ms). Each
/// compiled kernel is dropped inside the timed loop, which frees its JIT memory. A kernel that
/// does not compile yet skips its benchmark, with the reason on stderr.
fn compile(c: &mut Criterion) {
    let kernels = [
        ("W1", primitive("W1_add_2e20.relay")),
        ("W2", primitive("W2_fused.relay")),
        ("W3", primitive("W3_dense.relay")),
        ("W4", primitive("W4_conv2d.relay")),
    ];
    let programs = [
        ("W8_mlp", "W5_mlp_b1.relay"),
        ("W8_conv", "W4_conv2d.relay"),
    ];
    let mut group = c.benchmark_group("compile");
    configure(&mut group);
    for (id, prim) in &kernels {
        if compile_or_skip(prim, id, &format!("compile/{id}")).is_none() {
            continue;
        }
        group.bench_function(*id, |bench| {
            bench.iter(|| relay_kernel::compile_primitive(black_box(prim), id))
        });
    }
    for (id, file) in programs {
        let text = program(file);
        if let Err(message) = text_to_kernels(&text, file) {
            eprintln!("compile/{id}: skipped: {message}");
            continue;
        }
        group.bench_function(id, |bench| {
            bench.iter(|| text_to_kernels(black_box(&text), file))
        });
    }
    group.finish();
}

fn kernels(c: &mut Criterion) {
    w1(c, "W1_add_2e20.relay", "W1_2e20");
    // 2^24 elements take 64 MiB per array: measured only by `cargo bench`, not in test mode.
    if bench_mode() {
        w1(c, "W1_add_2e24.relay", "W1_2e24");
    }
    w2(c);
    w3(c);
    w4(c);
    compile(c);
}

criterion_group!(benches, kernels);
criterion_main!(benches);
