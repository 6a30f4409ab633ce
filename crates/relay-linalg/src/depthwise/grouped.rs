//! Grouped and small ordinary convolutions (several input channels per group) with AVX-512
//! or AVX2: a block of up to [`BLOCK`] output channels of one group at a time, each output
//! vector (16 or 8 columns of a row) accumulated in one register per output channel.
//!
//! Per tap — input channel, kernel row and column — the input columns the vector's lanes read
//! are loaded once (masked, as in `x86.rs`: padding lanes read nothing and give 0) and
//! multiplied into every output channel of the block with its broadcast weight. The block's
//! accumulators are independent chains, so the multiply-adds are not bound by their latency,
//! and each input load serves the whole block. This is the schedule for the convolutions a
//! GEMM serves badly: few output channels (MNIST's 5×5 layers, 8 and 16 of them), where the
//! GEMM's row tiles would be mostly padding and its packing costs as much as the arithmetic.

use std::arch::x86_64::*;

use super::x86::{Epilogue512, kernel_rows, lanes8, mask16, masks16, store8, tap8, tap16};
use super::{ChannelEpilogue, DepthwiseParams};

/// The most output channels computed together.
pub(super) const BLOCK: usize = 8;

/// Output channels `[o, o + epi.len())` of one group (and batch element).
pub(super) struct Block<'a> {
    pub(super) p: &'a DepthwiseParams,
    /// The group's first input plane; its `group_channels` planes follow, `H·W` apart.
    pub(super) x: *const f32,
    /// The first output channel's weights; each output channel has `group_channels·kh·kw`.
    pub(super) w: *const f32,
    /// The first output plane; the others follow, `OH·OW` apart.
    pub(super) y: *mut f32,
    /// The output channels' epilogues (`1..=BLOCK` of them).
    pub(super) epi: &'a [ChannelEpilogue],
}

/// The block's geometry in elements: input plane, kernel plane, weights per output channel,
/// output plane.
struct Strides {
    plane_in: isize,
    kk: isize,
    per_out: isize,
    plane_out: isize,
}

impl Block<'_> {
    fn strides(&self) -> Strides {
        let p = self.p;
        let kk = (p.kernel_h * p.kernel_w) as isize;
        Strides {
            plane_in: (p.height * p.width) as isize,
            kk,
            per_out: p.group_channels as isize * kk,
            plane_out: (p.out_height * p.out_width) as isize,
        }
    }
}

/// Runs `rows` over the block in sub-blocks of 8, 4, 2 and 1 channels: `rows(sub, left)`
/// computes the first channels of `sub` (as many as its monomorphic loop for `left` takes)
/// and returns how many.
fn in_sub_blocks(b: &Block<'_>, mut rows: impl FnMut(&Block<'_>, usize) -> usize) {
    let s = b.strides();
    let mut done = 0;
    while done < b.epi.len() {
        let sub = Block {
            w: b.w.wrapping_offset(done as isize * s.per_out),
            y: b.y.wrapping_offset(done as isize * s.plane_out),
            epi: &b.epi[done..],
            ..*b
        };
        done += rows(&sub, b.epi.len() - done);
    }
}

/// The block with AVX-512, row stride 1 or 2.
///
/// # Safety
///
/// The block's planes, weights and output planes are inside their buffers; the CPU has
/// AVX-512F; the row stride is 1 or 2.
pub(super) unsafe fn block_avx512(b: &Block<'_>) {
    in_sub_blocks(b, |sub, left| {
        // SAFETY: a sub-block of the block (forwarded contract).
        unsafe {
            match (b.p.stride_w, left) {
                (1, 8..) => rows_avx512::<1, 8>(sub),
                (1, 4..) => rows_avx512::<1, 4>(sub),
                (1, 2..) => rows_avx512::<1, 2>(sub),
                (1, _) => rows_avx512::<1, 1>(sub),
                (_, 8..) => rows_avx512::<2, 8>(sub),
                (_, 4..) => rows_avx512::<2, 4>(sub),
                (_, 2..) => rows_avx512::<2, 2>(sub),
                (_, _) => rows_avx512::<2, 1>(sub),
            }
        }
    });
}

/// The first `OB` output channels of `b` with AVX-512 and row stride `S`; returns `OB`.
///
/// # Safety
///
/// As [`block_avx512`]; `b` has at least `OB` channels.
#[target_feature(enable = "avx512f")]
unsafe fn rows_avx512<const S: isize, const OB: usize>(b: &Block<'_>) -> usize {
    let p = b.p;
    let st = b.strides();
    let (w, ow, kw) = (p.width as isize, p.out_width as isize, p.kernel_w as isize);
    let (dw, pl) = (p.dilation_w as isize, p.pad_left as isize);
    let epi: [Epilogue512; OB] = std::array::from_fn(|j| Epilogue512::of(&b.epi[j]));
    for oy in 0..p.out_height {
        let (ky0, ky1) = kernel_rows(p, oy);
        let top = oy * p.stride_h - p.pad_top;
        let mut ox = 0isize;
        while ox < ow {
            let n = (ow - ox).min(16);
            let mut acc = [_mm512_setzero_ps(); OB];
            for kx in 0..kw {
                let c = ox * S + kx * dw - pl;
                let (lo, hi) = masks16::<S>(c, n, w);
                for ci in 0..p.group_channels as isize {
                    for ky in ky0..ky1 {
                        let iy = (top + ky * p.dilation_h) as isize;
                        let at = b.x.wrapping_offset(ci * st.plane_in + iy * w + c);
                        let k = b.w.wrapping_offset(ci * st.kk + ky as isize * kw + kx);
                        // SAFETY: the unmasked lanes are columns `0..W` of input row `iy` of
                        // channel `ci` (inside the data); weight `(ci, ky, kx)` of each of the
                        // `OB` output channels is inside the weights.
                        unsafe {
                            let v = tap16::<S>(at, lo, hi);
                            for (j, a) in acc.iter_mut().enumerate() {
                                let wv = _mm512_set1_ps(*k.offset(j as isize * st.per_out));
                                *a = _mm512_fmadd_ps(wv, v, *a);
                            }
                        }
                    }
                }
            }
            for (j, a) in acc.into_iter().enumerate() {
                let at =
                    b.y.wrapping_offset(j as isize * st.plane_out + oy as isize * ow + ox);
                // SAFETY: output columns `ox..ox + n` of row `oy` of output plane `j`.
                unsafe { _mm512_mask_storeu_ps(at, mask16((0, n)), epi[j].apply(a)) };
            }
            ox += n;
        }
    }
    OB
}

/// The block with AVX2 and FMA, row stride 1 or 2.
///
/// # Safety
///
/// As [`block_avx512`], with AVX2 and FMA instead of AVX-512F.
pub(super) unsafe fn block_avx2(b: &Block<'_>) {
    in_sub_blocks(b, |sub, left| {
        // SAFETY: a sub-block of the block (forwarded contract).
        unsafe {
            match (b.p.stride_w, left) {
                (1, 8..) => rows_avx2::<1, 8>(sub),
                (1, 4..) => rows_avx2::<1, 4>(sub),
                (1, 2..) => rows_avx2::<1, 2>(sub),
                (1, _) => rows_avx2::<1, 1>(sub),
                (_, 8..) => rows_avx2::<2, 8>(sub),
                (_, 4..) => rows_avx2::<2, 4>(sub),
                (_, 2..) => rows_avx2::<2, 2>(sub),
                (_, _) => rows_avx2::<2, 1>(sub),
            }
        }
    });
}

/// The first `OB` output channels of `b` with AVX2 and row stride `S`; returns `OB`. The
/// epilogue runs over each output row once it is stored.
///
/// # Safety
///
/// As [`block_avx2`]; `b` has at least `OB` channels.
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2<const S: isize, const OB: usize>(b: &Block<'_>) -> usize {
    let p = b.p;
    let st = b.strides();
    let (w, ow, kw) = (p.width as isize, p.out_width as isize, p.kernel_w as isize);
    let (dw, pl) = (p.dilation_w as isize, p.pad_left as isize);
    for oy in 0..p.out_height {
        let (ky0, ky1) = kernel_rows(p, oy);
        let top = oy * p.stride_h - p.pad_top;
        let row = |j: usize| {
            b.y.wrapping_offset(j as isize * st.plane_out + oy as isize * ow)
        };
        let mut ox = 0isize;
        while ox < ow {
            let n = (ow - ox).min(8);
            let mut acc = [_mm256_setzero_ps(); OB];
            for kx in 0..kw {
                let c = ox * S + kx * dw - pl;
                let (lo, hi) = lanes8::<S>(c, n, w);
                for ci in 0..p.group_channels as isize {
                    for ky in ky0..ky1 {
                        let iy = (top + ky * p.dilation_h) as isize;
                        let at = b.x.wrapping_offset(ci * st.plane_in + iy * w + c);
                        let k = b.w.wrapping_offset(ci * st.kk + ky as isize * kw + kx);
                        // SAFETY: as in `rows_avx512`.
                        unsafe {
                            let v = tap8::<S>(at, lo, hi);
                            for (j, a) in acc.iter_mut().enumerate() {
                                let wv = _mm256_set1_ps(*k.offset(j as isize * st.per_out));
                                *a = _mm256_fmadd_ps(wv, v, *a);
                            }
                        }
                    }
                }
            }
            for (j, a) in acc.into_iter().enumerate() {
                // SAFETY: output columns `ox..ox + n` of row `oy` of output plane `j`.
                unsafe { store8(row(j).offset(ox), n, a) };
            }
            ox += n;
        }
        for (j, e) in b.epi[..OB].iter().enumerate() {
            // SAFETY: row `oy` of output plane `j`, `OW` results.
            unsafe { e.row(row(j), ow as usize) };
        }
    }
    OB
}
