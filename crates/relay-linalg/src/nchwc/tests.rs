//! The blocked convolution against a naive reference in float64, every instruction set this
//! machine has, blocks of 8 and 16: ResNet-50's and MobileNet's layers, the NCHW stem,
//! groups, strides, dilations, paddings on every side, widths that leave partial tiles, and
//! every epilogue step.

use super::*;

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The output extent along an axis with padding `lo` and `hi`.
fn out_size(n: usize, k: usize, s: usize, d: usize, lo: usize, hi: usize) -> usize {
    (n + lo + hi - d * (k - 1) - 1) / s + 1
}

/// A convolution's shape: `(N, C, bi, O, B, groups, [H, W], [KH, KW], strides, dilations,
/// [top, left, bottom, right])`.
#[allow(clippy::type_complexity)]
type Case = (
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    [usize; 2],
    [usize; 2],
    [usize; 2],
    [usize; 2],
    [usize; 4],
);

fn shape(c: &Case) -> NchwcConv {
    let &(
        batch,
        channels,
        in_block,
        out_channels,
        block,
        groups,
        input,
        kernel,
        stride,
        dilation,
        pad,
    ) = c;
    let output = [0, 1].map(|i| {
        out_size(
            input[i],
            kernel[i],
            stride[i],
            dilation[i],
            pad[i],
            pad[i + 2],
        )
    });
    NchwcConv {
        batch,
        groups,
        channels,
        in_block,
        out_channels,
        block,
        input,
        output,
        kernel,
        stride,
        dilation,
        pad: [pad[0], pad[1]],
    }
}

/// `(result, per element the sum of |w·x|)` of the convolution in float64, in the blocked
/// layouts.
fn reference(p: &NchwcConv, x: &[f32], w: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let (bi, b) = (p.in_block, p.block);
    let [h, wd] = p.input;
    let [oh, ow] = p.output;
    let [kh, kw] = p.kernel;
    let cg = p.channels / p.groups;
    let og = p.out_channels / p.groups;
    let len = p.batch * p.out_channels * oh * ow;
    let (mut out, mut mag) = (vec![0.0; len], vec![0.0; len]);
    for n in 0..p.batch {
        for o in 0..p.out_channels {
            let g = o / og;
            for y in 0..oh {
                for z in 0..ow {
                    let (mut acc, mut m) = (0.0f64, 0.0f64);
                    for ci in 0..cg {
                        let c = g * cg + ci;
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (y * p.stride[0] + ky * p.dilation[0]) as isize
                                    - p.pad[0] as isize;
                                let ix = (z * p.stride[1] + kx * p.dilation[1]) as isize
                                    - p.pad[1] as isize;
                                if iy < 0 || ix < 0 || iy as usize >= h || ix as usize >= wd {
                                    continue;
                                }
                                let (iy, ix) = (iy as usize, ix as usize);
                                let xi = (((n * p.channels / bi + c / bi) * h + iy) * wd + ix) * bi
                                    + c % bi;
                                // A depthwise filter is `OIHW1i{B}o`: one input lane.
                                let wb = if p.is_depthwise() { 1 } else { bi };
                                let wi = ((((o / b) * (cg / wb) + ci / wb) * kh + ky) * kw + kx)
                                    * wb
                                    * b
                                    + (ci % wb) * b
                                    + o % b;
                                let t = f64::from(x[xi]) * f64::from(w[wi]);
                                acc += t;
                                m += t.abs();
                            }
                        }
                    }
                    let at = (((n * p.out_channels / b + o / b) * oh + y) * ow + z) * b + o % b;
                    out[at] = acc;
                    mag[at] = m;
                }
            }
        }
    }
    (out, mag)
}

/// Runs `case` on `isa` with `threads` and checks it against the reference, through an
/// epilogue of a per-channel scale and shift, a residual and `clip(0, 6)` when `epilogue`.
fn check(case: &Case, isa: Isa, threads: usize, epilogue: bool) {
    let p = shape(case);
    p.check().unwrap();
    let [h, w] = p.input;
    let [oh, ow] = p.output;
    let [kh, kw] = p.kernel;
    let x = values(p.batch * p.channels * h * w, 1);
    let wt = values(p.out_channels * p.channels / p.groups * kh * kw, 2);
    let len = p.batch * p.out_channels * oh * ow;
    let scale = values(p.out_channels, 3);
    let shift = values(p.out_channels, 4);
    let residual = values(len, 5);
    let e = NchwcEpilogue {
        steps: [
            Some((Step::Mul, StepOperand::Channel(scale.as_ptr()))),
            Some((Step::Add, StepOperand::Channel(shift.as_ptr()))),
            Some((Step::Add, StepOperand::Full(residual.as_ptr()))),
            None,
        ],
        upper: Some(6.0),
        lower: Lower::Clip(0.0),
    };
    let mut y = vec![f32::NAN; len];
    let ctx = KernelContext::with_threads(threads).with_isa(isa).unwrap();
    let epi = epilogue.then_some(&e);
    // SAFETY: the vectors hold the shape's elements.
    unsafe { conv_nchwc(Some(&ctx), &p, x.as_ptr(), wt.as_ptr(), y.as_mut_ptr(), epi) }.unwrap();
    let (want, mag) = reference(&p, &x, &wt);
    let b = p.block;
    for (i, (&got, (&want, &m))) in y.iter().zip(want.iter().zip(&mag)).enumerate() {
        let (want, tol) = if epilogue {
            let o = (i / (oh * ow * b)) % (p.out_channels / b) * b + i % b;
            let v = want * f64::from(scale[o]) + f64::from(shift[o]) + f64::from(residual[i]);
            (
                v.clamp(0.0, 6.0),
                1e-5 * (m * f64::from(scale[o].abs()) + 8.0),
            )
        } else {
            (want, 1e-5 * (m + 1.0))
        };
        assert!(
            (f64::from(got) - want).abs() <= tol,
            "{isa:?} {case:?} element {i}: {got} != {want}"
        );
    }
}

/// The cases, for output blocks of `b` (input blocks of `b` unless 1 or given).
fn cases(b: usize) -> Vec<Case> {
    vec![
        // Depthwise (groups = channels): MobileNet's 3×3, rows whose interiors are tiles of 6
        // and 4 positions and single ones at strides 1 and 2 (12, 15 and 23 wide), strided with
        // asymmetric padding on an odd size, a dilated 5×5 over a row wider than a tile, several batches.
        (
            1,
            4 * b,
            b,
            4 * b,
            b,
            4 * b,
            [14, 14],
            [3, 3],
            [1, 1],
            [1, 1],
            [1, 1, 1, 1],
        ),
        (
            1,
            2 * b,
            b,
            2 * b,
            b,
            2 * b,
            [5, 12],
            [3, 3],
            [1, 1],
            [1, 1],
            [1, 1, 1, 1],
        ),
        (
            1,
            b,
            b,
            b,
            b,
            b,
            [4, 15],
            [3, 3],
            [1, 1],
            [1, 1],
            [1, 1, 1, 1],
        ),
        (
            1,
            b,
            b,
            b,
            b,
            b,
            [6, 23],
            [3, 3],
            [2, 2],
            [1, 1],
            [1, 1, 1, 1],
        ),
        (
            2,
            2 * b,
            b,
            2 * b,
            b,
            2 * b,
            [9, 11],
            [3, 3],
            [2, 2],
            [1, 1],
            [0, 1, 1, 0],
        ),
        (
            1,
            b,
            b,
            b,
            b,
            b,
            [7, 23],
            [5, 5],
            [1, 1],
            [2, 2],
            [4, 4, 4, 4],
        ),
        // ResNet-50: a 3×3 of the second stage, the 1×1s around it, a strided 1×1.
        (
            1,
            64,
            b,
            64,
            b,
            1,
            [14, 14],
            [3, 3],
            [1, 1],
            [1, 1],
            [1, 1, 1, 1],
        ),
        (
            1,
            64,
            b,
            256,
            b,
            1,
            [14, 14],
            [1, 1],
            [1, 1],
            [1, 1],
            [0; 4],
        ),
        (
            1,
            256,
            b,
            128,
            b,
            1,
            [14, 14],
            [1, 1],
            [2, 2],
            [1, 1],
            [0; 4],
        ),
        // The NCHW stem: 3 channels, 7×7, stride 2, padding 3.
        (
            1,
            3,
            1,
            2 * b,
            b,
            1,
            [23, 19],
            [7, 7],
            [2, 2],
            [1, 1],
            [3, 3, 3, 3],
        ),
        // Odd widths and heights, asymmetric padding, dilation, batch 2, 3 filter blocks.
        (
            2,
            2 * b,
            b,
            3 * b,
            b,
            1,
            [9, 13],
            [3, 5],
            [1, 2],
            [2, 1],
            [0, 2, 1, 3],
        ),
        // Groups of two input and one output block; padding wider than the kernel's reach.
        (
            1,
            4 * b,
            b,
            2 * b,
            b,
            2,
            [5, 6],
            [3, 3],
            [2, 1],
            [1, 1],
            [3, 4, 2, 1],
        ),
        // Five filter blocks (a set of 4, then 1), wide rows (segments), 1×1 over all.
        (
            1,
            b,
            b,
            5 * b,
            b,
            1,
            [3, 150],
            [1, 1],
            [1, 1],
            [1, 1],
            [0; 4],
        ),
        // Deep: several input batches of a 3×3.
        (
            1,
            40 * b,
            b,
            b,
            b,
            1,
            [4, 4],
            [3, 3],
            [1, 1],
            [1, 1],
            [1, 1, 1, 1],
        ),
        // Deep: several input batches of a 1×1 (the pointwise sequence over a batch's
        // blocks, then the next batch added to its partial sums), two filter blocks.
        (
            1,
            130 * b,
            b,
            2 * b,
            b,
            1,
            [3, 7],
            [1, 1],
            [1, 1],
            [1, 1],
            [0; 4],
        ),
        // A 1×1 over NCHW data (input blocks of one lane): the one-lane sequence over the
        // channels.
        (1, 3, 1, 2 * b, b, 1, [5, 7], [1, 1], [1, 1], [1, 1], [0; 4]),
        // A row with no interior column, and one with no valid kernel row at all.
        (
            1,
            b,
            b,
            b,
            b,
            1,
            [2, 2],
            [5, 5],
            [1, 1],
            [1, 1],
            [2, 2, 2, 2],
        ),
        (
            1,
            b,
            b,
            b,
            b,
            1,
            [1, 3],
            [1, 1],
            [1, 1],
            [1, 1],
            [2, 0, 0, 0],
        ),
    ]
}

#[test]
fn blocked_convolutions_on_every_isa() {
    for isa in Isa::available() {
        for b in [8, 16] {
            for (i, case) in cases(b).iter().enumerate() {
                check(case, isa, 1, i % 2 == 0);
                check(case, isa, 3, i % 2 == 1);
            }
        }
    }
}

#[test]
fn relu_turns_nan_into_its_bound() {
    let case: Case = (1, 8, 8, 8, 8, 1, [3, 3], [1, 1], [1, 1], [1, 1], [0; 4]);
    let p = shape(&case);
    for isa in Isa::available() {
        let mut x = values(72, 7);
        x[5] = f32::NAN;
        let w = values(64, 8);
        let e = NchwcEpilogue {
            steps: [None; MAX_STEPS],
            upper: None,
            lower: Lower::Relu(0.0),
        };
        let mut y = vec![1.0f32; 72];
        let ctx = KernelContext::with_threads(1).with_isa(isa).unwrap();
        // SAFETY: as above.
        unsafe {
            conv_nchwc(
                Some(&ctx),
                &p,
                x.as_ptr(),
                w.as_ptr(),
                y.as_mut_ptr(),
                Some(&e),
            )
        }
        .unwrap();
        // Position 0 read the NaN in every channel: relu makes it 0.
        assert!(y[..8].iter().all(|&v| v == 0.0), "{isa:?} {:?}", &y[..8]);
        assert!(y.iter().all(|v| !v.is_nan()));
    }
}

#[test]
fn shapes_it_does_not_take_are_errors() {
    let base = shape(&(1, 16, 8, 16, 8, 1, [4, 4], [3, 3], [1, 1], [1, 1], [1; 4]));
    for (bad, why) in [
        (NchwcConv { block: 4, ..base }, "not 8 or 16"),
        (
            NchwcConv {
                channels: 12,
                ..base
            },
            "input channels",
        ),
        (
            NchwcConv {
                out_channels: 24,
                groups: 2,
                ..base
            },
            "output channels",
        ),
        (
            NchwcConv {
                stride: [0, 1],
                ..base
            },
            "zero",
        ),
        (
            NchwcConv {
                input: [1 << 40, 1 << 40],
                ..base
            },
            "more elements",
        ),
    ] {
        let e = bad.check().unwrap_err().to_string();
        assert!(e.contains(why), "{e}");
    }
}

/// Blocked pooling against a direct evaluation of the definition (f64 sums), every ISA,
/// blocks 8 and 16, max and both averages, with padding, ceil-mode windows past the padding,
/// dilation, NaN inputs (max skips them), one and several threads.
#[test]
fn blocked_pooling_on_every_isa() {
    use super::{NchwcPool, PoolKind, pool_nchwc};
    // (N, C/B, [H, W], [KH, KW], strides, dilations, [top, left, bottom, right], [OH, OW])
    let shapes = [
        (
            1,
            3,
            [112, 112],
            [3, 3],
            [2, 2],
            [1, 1],
            [1, 1, 1, 1],
            [56, 56],
        ),
        (2, 2, [7, 9], [2, 3], [1, 2], [1, 1], [0, 1, 0, 1], [6, 5]),
        (1, 1, [6, 6], [3, 3], [2, 2], [2, 1], [1, 0, 1, 0], [3, 3]),
        (1, 2, [5, 5], [3, 3], [2, 2], [1, 1], [0, 0, 0, 0], [3, 3]),
        (1, 1, [4, 4], [4, 4], [1, 1], [1, 1], [0, 0, 0, 0], [1, 1]),
    ];
    let kinds = [
        PoolKind::Max,
        PoolKind::Avg {
            count_include_pad: false,
        },
        PoolKind::Avg {
            count_include_pad: true,
        },
    ];
    for isa in Isa::available() {
        for b in [8, 16] {
            for (n, blocks, input, kernel, stride, dilation, pad, output) in shapes {
                for kind in kinds {
                    let p = NchwcPool {
                        batch: n,
                        blocks,
                        block: b,
                        input,
                        output,
                        kernel,
                        stride,
                        dilation,
                        pad,
                        kind,
                    };
                    let mut x = values(n * blocks * b * input[0] * input[1], 7);
                    x[5] = f32::NAN;
                    let mut y = vec![0f32; n * blocks * b * output[0] * output[1]];
                    for threads in [1, 3] {
                        let ctx = KernelContext::with_threads(threads).with_isa(isa).unwrap();
                        // SAFETY: the vectors hold the shape's elements.
                        unsafe { pool_nchwc(Some(&ctx), &p, x.as_ptr(), y.as_mut_ptr()) }.unwrap();
                        check_pool(&p, &x, &y, &format!("{isa:?} {p:?} {threads}"));
                    }
                }
            }
        }
    }
}

/// `y` against the pooling's definition evaluated per element.
fn check_pool(p: &super::NchwcPool, x: &[f32], y: &[f32], what: &str) {
    use super::PoolKind;
    let (b, [h, w], [oh, ow]) = (p.block, p.input, p.output);
    for (i, &got) in y.iter().enumerate() {
        let (lane, c, r, plane) = (i % b, i / b % ow, i / b / ow % oh, i / b / ow / oh);
        let (mut max, mut sum, mut taps, mut counted) = (f64::NEG_INFINITY, 0.0, 0, 0);
        for kh in 0..p.kernel[0] {
            let ih = (r * p.stride[0] + kh * p.dilation[0]) as isize - p.pad[0] as isize;
            for kw in 0..p.kernel[1] {
                let iw = (c * p.stride[1] + kw * p.dilation[1]) as isize - p.pad[1] as isize;
                if ih < (h + p.pad[2]) as isize && iw < (w + p.pad[3]) as isize {
                    counted += 1;
                }
                if ih < 0 || iw < 0 || ih >= h as isize || iw >= w as isize {
                    continue;
                }
                let v = f64::from(x[((plane * h + ih as usize) * w + iw as usize) * b + lane]);
                if v > max {
                    max = v;
                }
                sum += v;
                taps += 1;
            }
        }
        let want = match p.kind {
            PoolKind::Max => max,
            PoolKind::Avg { count_include_pad } => {
                sum / f64::from(if count_include_pad { counted } else { taps })
            }
        };
        let ok = if want.is_nan() {
            got.is_nan()
        } else {
            (f64::from(got) - want).abs() <= 1e-5 * (want.abs() + 1.0)
        };
        assert!(ok, "{what} element {i}: {got} != {want}");
    }
}
