//! The image-window operand (implicit im2col) against a naive convolution: ResNet-50's 3 × 3
//! convolutions at every image size, strided, its 7 × 7 stem, odd sizes, every padding,
//! dilation, batches and groups (sub-images), on every ISA, one and several threads, in
//! `float32`, `float64` and `float16`.

use super::*;

/// A convolution: input channels, image size, output channels, kernel, stride, dilation,
/// padding (top, left, bottom, right).
#[derive(Clone, Copy, Debug)]
struct Conv {
    c: usize,
    size: [usize; 2],
    m: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pad: [usize; 4],
}

impl Conv {
    fn new(c: usize, hw: usize, m: usize, k: usize, s: usize, p: usize) -> Conv {
        Conv {
            c,
            size: [hw, hw],
            m,
            kernel: [k, k],
            stride: [s, s],
            dilation: [1, 1],
            pad: [p; 4],
        }
    }

    fn out(&self) -> [usize; 2] {
        [0, 1].map(|d| {
            let span = self.dilation[d] * (self.kernel[d] - 1) + 1;
            (self.size[d] + self.pad[d] + self.pad[d + 2] - span) / self.stride[d] + 1
        })
    }

    fn depth(&self) -> usize {
        self.c * self.kernel[0] * self.kernel[1]
    }

    fn window<S>(&self, ptr: *const S) -> Window<S> {
        Window {
            ptr,
            channels: self.c,
            size: self.size,
            kernel: self.kernel,
            stride: self.stride,
            dilation: self.dilation,
            pad: [self.pad[0], self.pad[1]],
            out: self.out(),
            transposed: false,
        }
    }

    /// The naive convolution of one image (`[C, H, W]`) with OIHW weights, in `f64`.
    fn naive(&self, w: &[f64], image: &[f64]) -> Vec<f64> {
        let [oh, ow] = self.out();
        let [kh, kw] = self.kernel;
        let [h, wd] = self.size;
        let mut out = vec![0.0; self.m * oh * ow];
        for o in 0..self.m {
            for y in 0..oh {
                for x in 0..ow {
                    let mut s = 0.0;
                    for c in 0..self.c {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (y * self.stride[0] + ky * self.dilation[0]) as isize
                                    - self.pad[0] as isize;
                                let ix = (x * self.stride[1] + kx * self.dilation[1]) as isize
                                    - self.pad[1] as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let (iy, ix) = (iy as usize, ix as usize);
                                s += w[((o * self.c + c) * kh + ky) * kw + kx]
                                    * image[(c * h + iy) * wd + ix];
                            }
                        }
                    }
                    out[(o * oh + y) * ow + x] = s;
                }
            }
        }
        out
    }
}

/// Small integers (exact in every summation order for the sizes tested).
fn values(len: usize, seed: usize) -> Vec<f64> {
    (0..len)
        .map(|i| ((i * 7 + seed * 13) % 9) as f64 - 4.0)
        .collect()
}

/// `conv` of `images` images of `groups` groups each (every group a sub-image of
/// `conv.c` channels and its own `conv.m` filters) through [`gemm_window`], operands and
/// result in `S` (computed in `T`), against the naive convolution.
fn check<T: Element, S: Operand<T>>(
    conv: Conv,
    (images, groups): (usize, usize),
    threads: usize,
    from: fn(f64) -> S,
    back: fn(T) -> f64,
) {
    let [h, wd] = conv.size;
    let [oh, ow] = conv.out();
    let (image_len, out_len) = (groups * conv.c * h * wd, groups * conv.m * oh * ow);
    let w64 = values(groups * conv.m * conv.depth(), 1);
    let x64 = values(images * image_len, 2);
    let (w, x): (Vec<S>, Vec<S>) = (
        w64.iter().map(|&v| from(v)).collect(),
        x64.iter().map(|&v| from(v)).collect(),
    );
    for isa in Isa::available() {
        let ctx = super::tests::on(isa, threads);
        let mut got = vec![T::ZERO; images * out_len];
        for (i, g) in (0..images).flat_map(|i| (0..groups).map(move |g| (i, g))) {
            let wg = g * conv.m * conv.depth();
            let xg = i * image_len + g * conv.c * h * wd;
            let og = i * out_len + g * conv.m * oh * ow;
            let a = Matrix {
                ptr: w[wg..].as_ptr(),
                rows: conv.m,
                cols: conv.depth(),
                rs: conv.depth() as isize,
                cs: 1,
            };
            let c = Matrix {
                ptr: got[og..].as_mut_ptr().cast_const(),
                rows: conv.m,
                cols: oh * ow,
                rs: (oh * ow) as isize,
                cs: 1,
            };
            // SAFETY: the views lie inside `w`, `x` and `got`.
            let rc = unsafe { gemm_window(Some(&ctx), a, conv.window(x[xg..].as_ptr()), c, None) };
            assert_eq!(rc, 0);
            let want = conv.naive(
                &w64[wg..wg + conv.m * conv.depth()],
                &x64[xg..xg + conv.c * h * wd],
            );
            let got: Vec<f64> = got[og..og + want.len()].iter().map(|&v| back(v)).collect();
            assert!(
                got == want,
                "{conv:?} image {i} group {g}, {isa:?}, {threads} threads"
            );
        }
    }
}

fn check_f32(conv: Conv, batch: (usize, usize), threads: usize) {
    check::<f32, f32>(conv, batch, threads, |v| v as f32, f64::from);
}

#[test]
fn resnet50_convolutions_match_naive() {
    // The 3 × 3 convolutions of each stage (output channels cut: packing does not see them),
    // the first of stages 2-4 strided, and the 7 × 7 stride-2 stem padded by 3.
    for (conv, threads) in [
        (Conv::new(64, 56, 64, 3, 1, 1), 1),
        (Conv::new(128, 28, 40, 3, 1, 1), 2),
        (Conv::new(128, 56, 24, 3, 2, 1), 1),
        (Conv::new(256, 14, 70, 3, 1, 1), 3),
        (Conv::new(256, 28, 30, 3, 2, 1), 1),
        (Conv::new(512, 7, 100, 3, 1, 1), 2),
        (Conv::new(512, 14, 13, 3, 2, 1), 1),
        (Conv::new(3, 224, 64, 7, 2, 3), 2),
        (Conv::new(1024, 6, 520, 3, 1, 1), 2),
    ] {
        check_f32(conv, (1, 1), threads);
    }
}

#[test]
fn odd_sizes_paddings_and_dilations_match_naive() {
    let mut cases = Vec::new();
    for pad in [0, 1, 2] {
        cases.push(Conv::new(5, 13, 7, 3, 1, pad));
        cases.push(Conv::new(3, 17, 33, 3, 2, pad));
        cases.push(Conv::new(7, 9, 5, 5, 1, pad));
    }
    let mut dilated = Conv::new(6, 19, 9, 3, 1, 2);
    dilated.dilation = [2, 2];
    cases.push(dilated);
    dilated.stride = [2, 1];
    dilated.pad = [0, 2, 1, 0];
    cases.push(dilated);
    let mut wide = Conv::new(4, 11, 6, 3, 1, 1);
    wide.size = [5, 40];
    wide.kernel = [1, 7];
    wide.pad = [0, 3, 0, 3];
    cases.push(wide);
    // A 1 × 1 image under a 3 × 3 kernel: the window is mostly padding.
    cases.push(Conv::new(8, 1, 4, 3, 1, 1));
    for conv in cases {
        check_f32(conv, (1, 1), 1);
    }
}

#[test]
fn batches_and_groups_match_naive() {
    check_f32(Conv::new(32, 14, 48, 3, 1, 1), (2, 1), 2);
    check_f32(Conv::new(16, 10, 8, 3, 2, 1), (2, 4), 1);
}

#[test]
fn float64_and_float16_windows_match_naive() {
    check::<f64, f64>(Conv::new(64, 14, 40, 3, 1, 1), (2, 1), 2, |v| v, |v| v);
    check::<f64, f64>(Conv::new(3, 30, 8, 7, 2, 3), (1, 1), 1, |v| v, |v| v);
    let half = |v: f64| F16(relay_runtime::half::f32_to_f16_bits(v as f32));
    check::<f32, F16>(Conv::new(64, 14, 40, 3, 1, 1), (1, 2), 2, half, f64::from);
    check::<f32, F16>(Conv::new(3, 30, 8, 7, 2, 3), (1, 1), 1, half, f64::from);
}
