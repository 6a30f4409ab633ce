//! Speed of the host depthwise convolutions on MobileNetV2's 3×3 shapes, one thread, no
//! epilogue, the best of 200 calls each: the NCHW kernel per instruction set, and the blocked
//! one (`nchwc`, data `[1, C/B, H, W, B]`) with the ISA of `RELAYC_ISA` (else the best this
//! CPU has).
//! `cargo run --release -p relay-linalg --example depthwise`.

use std::time::Instant;

use relay_linalg::depthwise::{DepthwiseEpilogue, DepthwiseParams, Isa, depthwise_f32};
use relay_linalg::gemm::epilogue::{Lower, Step};
use relay_linalg::nchwc::{NchwcConv, NchwcEpilogue, StepOperand, conv_nchwc};

#[path = "common/mod.rs"]
#[allow(dead_code)]
mod common;
use common::{Buffer, values};

/// A 3×3, padding-1 depthwise convolution of `c` channels of `hw × hw` with stride `s`.
fn params(c: i64, hw: i64, s: i64) -> DepthwiseParams {
    let out = (hw + 2 - 3) / s + 1;
    DepthwiseParams {
        batch: 1,
        channels: c,
        multiplier: 1,
        height: hw,
        width: hw,
        out_height: out,
        out_width: out,
        kernel_h: 3,
        kernel_w: 3,
        stride_h: s,
        stride_w: s,
        dilation_h: 1,
        dilation_w: 1,
        pad_top: 1,
        pad_left: 1,
        group_channels: 1,
    }
}

/// Best time in seconds of 200 calls of `p` on `isa`.
fn best_of(p: &DepthwiseParams, isa: Isa) -> Option<f64> {
    let len = |n: Option<i64>| usize::try_from(n?).ok();
    let x: Vec<f32> = (0..len(p.data_len())?)
        .map(|i| (i % 17) as f32 * 0.1 - 0.8)
        .collect();
    let w: Vec<f32> = (0..len(p.weight_len())?)
        .map(|i| (i % 5) as f32 * 0.2 - 0.4)
        .collect();
    let mut y = vec![0.0f32; len(p.out_len())?];
    let mut best = f64::INFINITY;
    for _ in 0..200 {
        let t = Instant::now();
        // SAFETY: the buffers have the lengths `p` gives; no context means one thread.
        let rc = unsafe {
            depthwise_f32(
                std::ptr::null_mut(),
                p,
                &DepthwiseEpilogue::NONE,
                isa,
                x.as_ptr(),
                w.as_ptr(),
                y.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return None;
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    Some(best)
}

/// Best time in seconds of 200 calls of the blocked depthwise kernel on `p`'s shape with
/// blocks of `b` (`None` when the kernel refuses it), with MobileNetV2's epilogue (batch norm's
/// multiply and add, `clip(0, 6)`) when `epilogue`.
fn best_blocked(p: &DepthwiseParams, b: usize, epilogue: bool) -> Option<f64> {
    let u = |v: i64| usize::try_from(v).ok();
    let c = u(p.channels)?;
    let shape = NchwcConv {
        batch: 1,
        groups: c,
        channels: c,
        in_block: b,
        out_channels: c,
        block: b,
        input: [u(p.height)?, u(p.width)?],
        output: [u(p.out_height)?, u(p.out_width)?],
        kernel: [u(p.kernel_h)?, u(p.kernel_w)?],
        stride: [u(p.stride_h)?, u(p.stride_w)?],
        dilation: [1, 1],
        pad: [u(p.pad_top)?, u(p.pad_left)?],
    };
    let x = Buffer::from(&values(c * shape.input[0] * shape.input[1], 1));
    let w = Buffer::from(&values(c * 9, 2));
    let mut y = Buffer::zeros(c * shape.output[0] * shape.output[1]);
    let (scale, shift) = (Buffer::from(&values(c, 3)), Buffer::from(&values(c, 4)));
    let e = NchwcEpilogue {
        steps: [
            Some((Step::Mul, StepOperand::Channel(scale.as_ptr()))),
            Some((Step::Add, StepOperand::Channel(shift.as_ptr()))),
            None,
            None,
        ],
        upper: Some(6.0),
        lower: Lower::Clip(0.0),
    };
    let e = epilogue.then_some(&e);
    let mut best = f64::INFINITY;
    for _ in 0..200 {
        let t = Instant::now();
        // SAFETY: the buffers hold the shape's elements, the epilogue's operands `c` values;
        // no context means one thread.
        let done = unsafe { conv_nchwc(None, &shape, x.as_ptr(), w.as_ptr(), y.as_mut_ptr(), e) };
        done.ok()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Some(best)
}

fn main() {
    let block = if relay_linalg::Ops::process_default().isa == Isa::Avx512 {
        16
    } else {
        8
    };
    for (c, hw, s) in [
        (32, 112, 1),
        (96, 112, 2),
        (144, 56, 1),
        (384, 14, 1),
        (960, 7, 1),
    ] {
        let p = params(c, hw, s);
        let flops = 2.0 * 9.0 * (c * p.out_height * p.out_width) as f64;
        for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
            if !isa.runs_here() {
                continue;
            }
            match best_of(&p, isa) {
                Some(t) => println!(
                    "{c}x{hw}² stride {s} {isa:?}: {:.1} µs, {:.1} GFLOP/s",
                    t * 1e6,
                    flops / t / 1e9
                ),
                None => println!("{c}x{hw}² stride {s} {isa:?}: refused"),
            }
        }
        for (epilogue, with) in [(false, ""), (true, " + batch norm, clip")] {
            match best_blocked(&p, block, epilogue) {
                Some(t) => println!(
                    "{c}x{hw}² stride {s} NCHW{block}c{with}: {:.1} µs, {:.1} GFLOP/s",
                    t * 1e6,
                    flops / t / 1e9
                ),
                None => println!("{c}x{hw}² stride {s} NCHW{block}c{with}: refused"),
            }
        }
    }
}
