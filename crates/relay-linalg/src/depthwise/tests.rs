//! The depthwise kernels against a naive reference, every instruction set this machine has,
//! at MobileNetV2's shapes and at odd widths, strides, paddings, dilations and kernel sizes.

use super::*;

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The output size of a window along one axis, with padding `lo` and `hi`.
fn out_size(n: i64, k: i64, s: i64, d: i64, lo: i64, hi: i64) -> i64 {
    (n + lo + hi - d * (k - 1) - 1) / s + 1
}

/// `(result, per element the sum of |w·x|)` of the naive convolution, in float64.
fn reference(p: &DepthwiseParams, x: &[f32], w: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let mut out = Vec::new();
    let mut mag = Vec::new();
    for b in 0..p.batch {
        for oc in 0..p.channels * p.multiplier {
            let g = oc / p.multiplier;
            for oy in 0..p.out_height {
                for ox in 0..p.out_width {
                    let (mut acc, mut m) = (0.0f64, 0.0f64);
                    for ci in 0..p.group_channels {
                        let ic = (b * p.channels + g) * p.group_channels + ci;
                        for ky in 0..p.kernel_h {
                            for kx in 0..p.kernel_w {
                                let iy = oy * p.stride_h + ky * p.dilation_h - p.pad_top;
                                let ix = ox * p.stride_w + kx * p.dilation_w - p.pad_left;
                                if (0..p.height).contains(&iy) && (0..p.width).contains(&ix) {
                                    let xi = (ic * p.height + iy) * p.width + ix;
                                    let wi = ((oc * p.group_channels + ci) * p.kernel_h + ky)
                                        * p.kernel_w
                                        + kx;
                                    let t = f64::from(x[xi as usize]) * f64::from(w[wi as usize]);
                                    acc += t;
                                    m += t.abs();
                                }
                            }
                        }
                    }
                    out.push(acc);
                    mag.push(m);
                }
            }
        }
    }
    (out, mag)
}

/// A shape: `[n, c, h, w]` (`c` groups of `group_channels` input channels), kernel `k × k`,
/// stride, dilation, padding (all sides), output channels per group.
#[derive(Clone, Copy, Debug)]
struct Case {
    n: i64,
    c: i64,
    h: i64,
    w: i64,
    k: i64,
    stride: i64,
    dilation: i64,
    pad: i64,
    multiplier: i64,
    group_channels: i64,
}

impl Case {
    fn params(&self) -> DepthwiseParams {
        let oh = out_size(
            self.h,
            self.k,
            self.stride,
            self.dilation,
            self.pad,
            self.pad,
        );
        let ow = out_size(
            self.w,
            self.k,
            self.stride,
            self.dilation,
            self.pad,
            self.pad,
        );
        DepthwiseParams {
            batch: self.n,
            channels: self.c,
            multiplier: self.multiplier,
            height: self.h,
            width: self.w,
            out_height: oh.max(0),
            out_width: ow.max(0),
            kernel_h: self.k,
            kernel_w: self.k,
            stride_h: self.stride,
            stride_w: self.stride,
            dilation_h: self.dilation,
            dilation_w: self.dilation,
            pad_top: self.pad,
            pad_left: self.pad,
            group_channels: self.group_channels,
        }
    }
}

fn case(c: i64, h: i64, w: i64, k: i64, stride: i64, pad: i64) -> Case {
    Case {
        n: 1,
        c,
        h,
        w,
        k,
        stride,
        dilation: 1,
        pad,
        multiplier: 1,
        group_channels: 1,
    }
}

/// An ordinary convolution (one group): `c` input and `o` output channels.
fn dense(c: i64, o: i64, hw: i64, k: i64, stride: i64, pad: i64) -> Case {
    Case {
        c: 1,
        multiplier: o,
        group_channels: c,
        ..case(1, hw, hw, k, stride, pad)
    }
}

/// Checks `case` on every available instruction set, with and without a thread pool.
fn check(case: Case) {
    let p = case.params();
    assert!(p.valid(), "{case:?}");
    let x = values(p.data_len().unwrap() as usize, 1);
    let w = values(p.weight_len().unwrap() as usize, 2);
    let (want, mag) = reference(&p, &x, &w);
    let out_c = (p.channels * p.multiplier) as usize;
    let (scale, shift) = (values(out_c, 3), values(out_c, 4));
    let with = DepthwiseEpilogue {
        scale: scale.as_ptr(),
        shift: shift.as_ptr(),
        lo: -0.25,
        hi: 0.5,
    };
    let plane = (p.out_height * p.out_width) as usize;
    let ctx = KernelContext::with_threads(2);
    let pool: *mut std::ffi::c_void = std::ptr::from_ref(&ctx).cast_mut().cast();
    for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
        if !isa.runs_here() {
            continue;
        }
        for (c, epi) in [
            (std::ptr::null_mut(), DepthwiseEpilogue::NONE),
            (pool, DepthwiseEpilogue::NONE),
            (std::ptr::null_mut(), with),
        ] {
            // Sentinels show an element left unwritten.
            let mut y = vec![f32::NAN; want.len()];
            // SAFETY: the buffers have the lengths `p` gives; `c` is null or a live context.
            let rc =
                unsafe { depthwise_f32(c, &p, &epi, isa, x.as_ptr(), w.as_ptr(), y.as_mut_ptr()) };
            assert_eq!(rc, 0);
            for (i, (&got, (&e, &m))) in y.iter().zip(want.iter().zip(&mag)).enumerate() {
                let (mut e, mut tol) = (e, 1e-6 * m + 1e-30);
                if !epi.scale.is_null() {
                    let o = (i / plane) % out_c;
                    let (s, b) = (f64::from(scale[o]), f64::from(shift[o]));
                    e = (e * s + b).clamp(-0.25, 0.5);
                    tol = tol * s.abs() + 1e-7;
                }
                assert!(
                    (f64::from(got) - e).abs() <= tol,
                    "{case:?} {isa:?} element {i}: {got} vs {e}"
                );
            }
        }
    }
}

#[test]
fn mobilenet_v2_shapes() {
    // Every depthwise 3×3 of MobileNetV2 (224² input): channels, input size, stride.
    for (c, hw, s) in [
        (32, 112, 1),
        (96, 112, 2),
        (144, 56, 1),
        (144, 56, 2),
        (192, 28, 1),
        (192, 28, 2),
        (384, 14, 1),
        (576, 14, 1),
        (576, 14, 2),
        (960, 7, 1),
    ] {
        check(case(c, hw, hw, 3, s, 1));
    }
}

#[test]
fn odd_widths_strides_and_paddings() {
    for w in [1, 2, 7, 13, 15, 16, 17, 31, 33, 113] {
        for stride in [1, 2, 3] {
            for pad in [0, 1, 2] {
                check(case(3, 9, w, 3, stride, pad));
            }
        }
    }
}

#[test]
fn kernel_sizes_dilation_and_multiplier() {
    check(case(5, 20, 37, 5, 1, 2));
    check(case(5, 21, 40, 5, 2, 2));
    check(case(4, 6, 6, 7, 1, 3));
    check(case(2, 3, 4, 1, 1, 0));
    for stride in [1, 2] {
        check(Case {
            dilation: 2,
            ..case(6, 17, 35, 3, stride, 2)
        });
        check(Case {
            multiplier: 3,
            n: 2,
            ..case(4, 15, 19, 3, stride, 1)
        });
    }
    // A window larger than the data: every column a border.
    check(case(2, 3, 3, 5, 1, 2));
    // Padding wider than the window: rows and columns that read only zeros.
    check(case(2, 5, 5, 3, 1, 3));
    check(case(2, 5, 21, 3, 2, 3));
}

#[test]
fn small_ordinary_and_grouped_convolutions() {
    // MNIST's two 5×5 layers: 1 → 8 channels at 28², 8 → 16 at 14².
    check(dense(1, 8, 28, 5, 1, 2));
    check(dense(8, 16, 14, 5, 1, 2));
    // Every block size (8, 4, 2, 1 channels) with strides 1, 2 and 3, odd widths.
    for o in [1, 3, 7, 15] {
        for stride in [1, 2, 3] {
            check(Case {
                w: 19,
                ..dense(3, o, 11, 3, stride, 1)
            });
        }
    }
    // Grouped: 4 groups of 6 input channels, 5 outputs each; batch 2 and dilation.
    check(Case {
        n: 2,
        c: 4,
        multiplier: 5,
        group_channels: 6,
        dilation: 2,
        ..case(4, 13, 29, 3, 1, 2)
    });
    // At a real network's size: 64 → 16 channels over a 56² image (3.2 MB of data, ~29
    // MFLOP), and a stride-2 grouped layer of ResNeXt's shape (32 groups of 4 channels).
    check(dense(64, 16, 56, 3, 1, 1));
    check(Case {
        c: 32,
        multiplier: 4,
        group_channels: 4,
        ..case(32, 56, 56, 3, 2, 1)
    });
}

#[test]
fn invalid_shapes_are_refused() {
    let mut p = case(2, 5, 5, 3, 1, 1).params();
    p.stride_w = 0;
    let y = &mut [0.0f32; 64];
    // SAFETY: the shape is refused before any buffer is read.
    let rc = unsafe {
        depthwise_f32(
            std::ptr::null_mut(),
            &p,
            &DepthwiseEpilogue::NONE,
            Isa::Portable,
            y.as_ptr(),
            y.as_ptr(),
            y.as_mut_ptr(),
        )
    };
    assert_eq!(rc, -1);
}
