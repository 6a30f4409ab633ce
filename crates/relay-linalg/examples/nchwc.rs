//! The convolutions of ResNet-50 and MobileNetV2 two ways, against the measured multiply-add
//! peak of the instruction set (`relay_linalg::peak`): the blocked NCHWc kernel
//! (`relay_linalg::nchwc`) and the GEMM over an implicit im2col (`gemm_window`, the weight a
//! constant packed once; a 1 × 1 with unit strides a plain product, the image read in place).
//!
//! `cargo run --release -p relay-linalg --example nchwc [THREADS] [REPEATS] [FILTER]` prints
//! the best of `REPEATS` (default 7) per layer on `THREADS` threads (default 1) with the ISA
//! of `RELAYC_ISA` (else the best this CPU has), and the totals; on one thread the times are
//! the process's CPU time.

use std::sync::Arc;
use std::time::Instant;

use relay_linalg::gemm::prepacked::PackedConstants;
use relay_linalg::gemm::{Matrix, Window, gemm, gemm_window};
use relay_linalg::nchwc::{NchwcConv, conv_nchwc};
use relay_linalg::{KernelContext, Ops};

#[path = "common/mod.rs"]
mod common;
use common::{Buffer, cpu_seconds, values};

/// A layer: name, input channels, output channels, input size, kernel, stride, padding.
type Layer = (&'static str, usize, usize, usize, usize, usize, usize);

const LAYERS: &[Layer] = &[
    ("r50 stem 7x7/2 3->64 @224", 3, 64, 224, 7, 2, 3),
    ("r50 s1 3x3 64 @56", 64, 64, 56, 3, 1, 1),
    ("r50 s1 1x1 64->256 @56", 64, 256, 56, 1, 1, 0),
    ("r50 s1 1x1 256->64 @56", 256, 64, 56, 1, 1, 0),
    ("r50 s2 3x3/2 128 @56", 128, 128, 56, 3, 2, 1),
    ("r50 s2 3x3 128 @28", 128, 128, 28, 3, 1, 1),
    ("r50 s2 1x1 128->512 @28", 128, 512, 28, 1, 1, 0),
    ("r50 s2 1x1 512->128 @28", 512, 128, 28, 1, 1, 0),
    ("r50 s3 3x3 256 @14", 256, 256, 14, 3, 1, 1),
    ("r50 s3 1x1 256->1024 @14", 256, 1024, 14, 1, 1, 0),
    ("r50 s3 1x1 1024->256 @14", 1024, 256, 14, 1, 1, 0),
    ("r50 s4 3x3 512 @7", 512, 512, 7, 3, 1, 1),
    ("r50 s4 1x1 512->2048 @7", 512, 2048, 7, 1, 1, 0),
    ("r50 s4 1x1 2048->512 @7", 2048, 512, 7, 1, 1, 0),
    ("mnv2 1x1 16->96 @112", 16, 96, 112, 1, 1, 0),
    ("mnv2 1x1 144->24 @56", 144, 24, 56, 1, 1, 0),
    ("mnv2 1x1 32->16 @112", 32, 16, 112, 1, 1, 0),
    ("mnv2 1x1 96->24 @56", 96, 24, 56, 1, 1, 0),
    ("mnv2 1x1 32->192 @28", 32, 192, 28, 1, 1, 0),
    ("mnv2 1x1 960->160 @7", 960, 160, 7, 1, 1, 0),
];

/// The best seconds of `repeats + 1` runs of `f`: CPU time on one thread, else wall-clock.
fn best(repeats: usize, threads: usize, mut f: impl FnMut()) -> f64 {
    (0..=repeats)
        .map(|_| {
            let (t, cpu) = (Instant::now(), cpu_seconds().filter(|_| threads == 1));
            f();
            match (cpu, cpu_seconds()) {
                (Some(c0), Some(c1)) => c1 - c0,
                _ => t.elapsed().as_secs_f64(),
            }
        })
        .fold(f64::INFINITY, f64::min)
}

/// Seconds of the layer by the blocked kernel.
fn blocked(l: &Layer, ctx: &KernelContext, block: usize, repeats: usize) -> f64 {
    let &(_, c, o, size, k, s, pad) = l;
    let out = (size + 2 * pad - k) / s + 1;
    let in_block = if c % block == 0 { block } else { 1 };
    let p = NchwcConv {
        batch: 1,
        groups: 1,
        channels: c,
        in_block,
        out_channels: o.div_ceil(block) * block,
        block,
        input: [size; 2],
        output: [out; 2],
        kernel: [k; 2],
        stride: [s; 2],
        dilation: [1; 2],
        pad: [pad; 2],
    };
    let x = Buffer::from(&values(c * size * size, 1));
    let w = Buffer::from(&values(p.out_channels * c * k * k, 2));
    let mut y = Buffer::zeros(p.out_channels * out * out);
    best(repeats, ctx.threads(), || {
        // SAFETY: the vectors hold the shape's elements.
        let done =
            unsafe { conv_nchwc(Some(ctx), &p, x.as_ptr(), w.as_ptr(), y.as_mut_ptr(), None) };
        if let Err(e) = done {
            eprintln!("{}: {e}", l.0);
            std::process::exit(1);
        }
    })
}

/// Seconds of the layer by the GEMM, its weight packed once.
fn im2col(l: &Layer, ctx: &mut KernelContext, repeats: usize) -> f64 {
    let &(_, c, o, size, k, s, pad) = l;
    let out = (size + 2 * pad - k) / s + 1;
    let (x, w) = (values(c * size * size, 1), values(o * c * k * k, 2));
    let (x, w, mut y) = (
        Buffer::from(&x),
        Buffer::from(&w),
        Buffer::zeros(o * out * out),
    );
    let depth = c * k * k;
    let a = Matrix {
        ptr: w.as_ptr(),
        rows: o,
        cols: depth,
        rs: depth as isize,
        cs: 1,
    };
    let cm = Matrix {
        ptr: y.as_mut_ptr().cast_const(),
        rows: o,
        cols: out * out,
        rs: (out * out) as isize,
        cs: 1,
    };
    // SAFETY: nothing writes the weight while the table lives (this function).
    let constants =
        unsafe { PackedConstants::new(vec![(0, w.as_ptr() as usize, w.len() * 4)], ()) };
    ctx.set_constants(Some(Arc::new(constants)));
    let secs = best(repeats, ctx.threads(), || {
        let rc = if k == 1 && s == 1 {
            let b = Matrix {
                ptr: x.as_ptr(),
                rows: c,
                cols: size * size,
                rs: (size * size) as isize,
                cs: 1,
            };
            // SAFETY: the views address the vectors above.
            unsafe { gemm(Some(&*ctx), a, b, cm, None) }
        } else {
            let b = Window {
                ptr: x.as_ptr(),
                channels: c,
                size: [size; 2],
                kernel: [k; 2],
                stride: [s; 2],
                dilation: [1; 2],
                pad: [pad; 2],
                out: [out; 2],
                transposed: false,
            };
            // SAFETY: as above.
            unsafe { gemm_window(Some(&*ctx), a, b, cm, None) }
        };
        assert_eq!(rc, 0);
    });
    ctx.set_constants(None);
    secs
}

fn main() {
    let arg = |i: usize| std::env::args().nth(i);
    let threads: usize = arg(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    let repeats: usize = arg(2).and_then(|a| a.parse().ok()).unwrap_or(7);
    let filter = arg(3).unwrap_or_default();
    let isa = Ops::process_default().isa;
    let block = if isa == relay_linalg::Isa::Avx512 {
        16
    } else {
        8
    };
    let peak = match relay_linalg::peak::fma_peak(isa, 5) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let mut ctx = KernelContext::with_threads(threads);
    println!("{isa:?}, block {block}, {threads} thread(s): FMA peak {peak:.1} GFLOP/s a core");
    println!("{:<28} {:>22} {:>22}", "layer", "NCHWc", "im2col GEMM");
    let (mut t_blocked, mut t_gemm, mut flops) = (0.0, 0.0, 0.0);
    for l in LAYERS.iter().filter(|l| l.0.contains(&filter)) {
        let &(_, c, o, size, k, s, pad) = l;
        let out = (size + 2 * pad - k) / s + 1;
        let f = 2.0 * (o * out * out * c * k * k) as f64;
        let tb = blocked(l, &ctx, block, repeats);
        let tg = im2col(l, &mut ctx, repeats);
        let pct = |t: f64| f / t / 1e9 / (peak * threads as f64) * 100.0;
        println!(
            "{:<28} {:>8.1} us {:>5.1}% pk {:>8.1} us {:>5.1}% pk",
            l.0,
            tb * 1e6,
            pct(tb),
            tg * 1e6,
            pct(tg)
        );
        t_blocked += tb;
        t_gemm += tg;
        flops += f;
    }
    let pct = |t: f64| flops / t / 1e9 / (peak * threads as f64) * 100.0;
    println!(
        "total: NCHWc {:.2} ms ({:.1}% of peak), GEMM {:.2} ms ({:.1}%)",
        t_blocked * 1e3,
        pct(t_blocked),
        t_gemm * 1e3,
        pct(t_gemm)
    );
}
