//! GFLOP/s of the contraction core (`relay_linalg::gemm`) on the shapes of real networks,
//! with the weight operand a constant (packed once, as the VM does) and the
//! other packed per call: BERT-base's dense layers (`a` = activations, `b` = the transposed
//! weight) and the 1×1 / im2col'd 3×3 convolutions of ResNet-50 and MobileNetV2 (`a` = the
//! weight, `b` = the input, read in place).
//!
//! `cargo run --release -p relay-linalg --example gemm_shapes [THREADS] [REPEATS] [FILTER]`
//! prints the best of `REPEATS` timings (default 7) per shape on `THREADS` threads (default
//! 1), and the total time of all shapes; `FILTER` keeps shapes whose name contains it. On
//! one thread (Linux) the time is the process's CPU time, which leaves out the time other
//! processes of a shared machine hold the core; on more it is wall-clock time.
//! `GEMM_PACK_BOTH=1` makes both operands constants (nothing packed per call).

use std::time::Instant;

use std::sync::Arc;

use relay_linalg::KernelContext;
use relay_linalg::gemm::prepacked::PackedConstants;
use relay_linalg::gemm::{Matrix, gemm};

#[path = "common/mod.rs"]
mod common;
use common::{Buffer, cpu_seconds, values};

/// A product `m × k × n`; `dense`: `b` is a transposed `n × k` weight, else `a` is the
/// `m × k` weight and `b` the `k × n` input.
struct Shape {
    name: &'static str,
    m: usize,
    k: usize,
    n: usize,
    dense: bool,
}

const fn dense(name: &'static str, m: usize, k: usize, n: usize) -> Shape {
    Shape {
        name,
        m,
        k,
        n,
        dense: true,
    }
}

const fn conv(name: &'static str, m: usize, k: usize, n: usize) -> Shape {
    Shape {
        name,
        m,
        k,
        n,
        dense: false,
    }
}

const SHAPES: &[Shape] = &[
    dense("bert qkv/out 128x768x768", 128, 768, 768),
    dense("bert ffn1 128x768x3072", 128, 768, 3072),
    dense("bert ffn2 128x3072x768", 128, 3072, 768),
    dense("bert qkv/out 512x768x768", 512, 768, 768),
    dense("bert ffn1 512x768x3072", 512, 768, 3072),
    dense("gpt2 prefill qkv/out 32x768x768", 32, 768, 768),
    dense("gpt2 prefill ffn1 32x768x3072", 32, 768, 3072),
    dense("gpt2 prefill ffn2 32x3072x768", 32, 3072, 768),
    dense("gpt2 lm head 16x256x50257", 16, 256, 50257),
    dense("gpt2 lm head 64x256x50257", 64, 256, 50257),
    dense("gpt2 lm head 512x256x50257", 512, 256, 50257),
    conv("r50 s1 1x1 64x64x3136", 64, 64, 3136),
    conv("r50 s1 3x3 64x576x3136", 64, 576, 3136),
    conv("r50 s1 1x1 256x64x3136", 256, 64, 3136),
    conv("r50 s1 1x1 64x256x3136", 64, 256, 3136),
    conv("r50 s2 3x3 128x1152x784", 128, 1152, 784),
    conv("r50 s2 1x1 512x128x784", 512, 128, 784),
    conv("r50 s2 1x1 128x512x784", 128, 512, 784),
    conv("r50 s3 3x3 256x2304x196", 256, 2304, 196),
    conv("r50 s3 1x1 1024x256x196", 1024, 256, 196),
    conv("r50 s3 1x1 256x1024x196", 256, 1024, 196),
    conv("r50 s4 3x3 512x4608x49", 512, 4608, 49),
    conv("r50 s4 1x1 2048x512x49", 2048, 512, 49),
    conv("r50 s4 1x1 512x2048x49", 512, 2048, 49),
    conv("mnv2 1x1 96x16x12544", 96, 16, 12544),
    conv("mnv2 1x1 24x96x3136", 24, 96, 3136),
    conv("mnv2 1x1 144x24x3136", 144, 24, 3136),
    conv("mnv2 1x1 192x32x784", 192, 32, 784),
    conv("mnv2 1x1 384x64x196", 384, 64, 196),
    conv("mnv2 1x1 96x384x196", 96, 384, 196),
    conv("mnv2 1x1 960x160x49", 960, 160, 49),
    conv("mnv2 1x1 320x960x49", 320, 960, 49),
    conv("mnv2 1x1 1280x320x49", 1280, 320, 49),
];

/// Best seconds of `repeats` products of `s` on `ctx`.
fn time(s: &Shape, ctx: &mut KernelContext, repeats: usize) -> f64 {
    let (a, b) = (values(s.m * s.k, 1), values(s.k * s.n, 2));
    let (a, b, mut c) = (Buffer::from(&a), Buffer::from(&b), Buffer::zeros(s.m * s.n));
    let a_view = Matrix {
        ptr: a.as_ptr(),
        rows: s.m,
        cols: s.k,
        rs: s.k as isize,
        cs: 1,
    };
    // Dense: `b` holds the `n × k` weight row-major, viewed transposed.
    let (rs, cs) = if s.dense {
        (1, s.k as isize)
    } else {
        (s.n as isize, 1)
    };
    let b_view = Matrix {
        ptr: b.as_ptr(),
        rows: s.k,
        cols: s.n,
        rs,
        cs,
    };
    let c_view = Matrix {
        ptr: c.as_mut_ptr().cast_const(),
        rows: s.m,
        cols: s.n,
        rs: s.n as isize,
        cs: 1,
    };
    let weight = if s.dense { &b } else { &a };
    let mut ranges = vec![(0, weight.as_ptr() as usize, weight.len() * 4)];
    if std::env::var_os("GEMM_PACK_BOTH").is_some() {
        let other = if s.dense { &a } else { &b };
        ranges.push((1, other.as_ptr() as usize, other.len() * 4));
    }
    // SAFETY: nothing writes the operands while the table lives (this function).
    ctx.set_constants(Some(Arc::new(unsafe { PackedConstants::new(ranges, ()) })));
    let mut best = f64::INFINITY;
    for _ in 0..repeats + 1 {
        let (t, cpu) = (Instant::now(), cpu_seconds().filter(|_| ctx.threads() == 1));
        // SAFETY: the views address the vectors above; `c` overlaps neither operand.
        let rc = unsafe { gemm(Some(&*ctx), a_view, b_view, c_view, None) };
        assert_eq!(rc, 0);
        let secs = match (cpu, cpu_seconds()) {
            (Some(c0), Some(c1)) => c1 - c0,
            _ => t.elapsed().as_secs_f64(),
        };
        best = best.min(secs);
    }
    ctx.set_constants(None);
    std::hint::black_box(&c);
    best
}

fn main() {
    let arg = |i: usize| std::env::args().nth(i);
    let threads: usize = arg(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    let repeats: usize = arg(2).and_then(|a| a.parse().ok()).unwrap_or(7);
    let filter = arg(3).unwrap_or_default();
    let mut ctx = KernelContext::with_threads(threads);
    let (mut total, mut flops) = (0.0, 0.0);
    for s in SHAPES.iter().filter(|s| s.name.contains(&filter)) {
        let secs = time(s, &mut ctx, repeats);
        let f = 2.0 * (s.m * s.k * s.n) as f64;
        println!(
            "{:<28} {:>9.1} us {:>7.1} GFLOP/s",
            s.name,
            secs * 1e6,
            f / secs / 1e9
        );
        total += secs;
        flops += f;
    }
    println!(
        "total ({threads} thread(s), best of {repeats}) {:.2} ms, {:.1} GFLOP/s",
        total * 1e3,
        flops / total / 1e9
    );
}
