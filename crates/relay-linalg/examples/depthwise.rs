//! Speed of the host depthwise convolution on MobileNetV2's 3×3 shapes, per instruction set,
//! one thread, no epilogue: the best of 200 calls each.
//! `cargo run --release -p relay-linalg --example depthwise`.

use std::time::Instant;

use relay_linalg::depthwise::{DepthwiseEpilogue, DepthwiseParams, Isa, depthwise_f32};

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

fn main() {
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
    }
}
