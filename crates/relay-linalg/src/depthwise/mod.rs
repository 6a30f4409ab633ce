//! Direct convolutions, float32 NCHW, as host code the JIT'd kernels call: depthwise
//! (`nn.conv2d` with `groups` = input channels; MLAS's `MlasConvDepthwise`, TVM's
//! `depthwise_conv2d_nchw`), and grouped or ordinary ones with few output channels per group
//! (`grouped.rs`).
//!
//! Output channel `o` reads the `group_channels` input channels of group `o / multiplier`
//! through its own `kh × kw` windows (weights `[C·multiplier, group_channels, kh, kw]`, OIHW),
//! any stride, dilation and padding, and no padded copy is made. Per output plane (one batch element, one channel) and output row, only
//! the kernel rows whose input row lies inside the data are visited.
//!
//! The SIMD paths (`x86.rs`; row stride 1 or 2) run each output row 16 columns a vector
//! (AVX-512) or 8 (AVX2): per kernel column, the input columns a vector's lanes read are
//! masked loads whose padding lanes read nothing and give 0, so the borders need no scalar
//! code; stride 2 loads contiguous vectors and deinterleaves their even lanes with permutes.
//! A 3×3 kernel (MobileNet's) has its own loop (AVX-512 in `x86.rs`, AVX2 in `avx2.rs`):
//! weights in registers, the masks of each vector of a row computed once per convolution.
//! The portable path (and other strides) splits each row into the interior columns, whose
//! every tap is inside the row ([`interior`], no checks), and the border columns, checked per
//! tap. Each result goes through the epilogue (`epilogue.rs`: per-channel scale and shift,
//! clamp), in registers in the 3×3 loops. Planes are spread over the kernel context's threads.
//!
//! The instruction set is the kernel context's ([`KernelContext::isa`]). The SIMD paths fuse
//! each multiply-add, the portable path rounds each product; the order of the sums differs
//! between paths, so results agree to rounding.

#[cfg(target_arch = "x86_64")]
mod avx2;
mod epilogue;
#[cfg(target_arch = "x86_64")]
mod grouped;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::ffi::c_void;

use crate::KernelContext;

pub(crate) use epilogue::ChannelEpilogue;
pub use epilogue::DepthwiseEpilogue;

/// The symbol of the float32 depthwise convolution ([`relay_kernel_depthwise_f32`]).
pub const DEPTHWISE_F32_SYMBOL: &str = "relay_kernel_depthwise_f32";

/// Below this many multiply-adds a depthwise convolution runs on the calling thread.
const PARALLEL_WORK: i64 = 1 << 16;

/// The shape of a direct convolution, as the JIT'd kernel passes it (16 `int64`s, in this
/// order).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DepthwiseParams {
    /// Batch size `N`.
    pub batch: i64,
    /// Groups `C`: the input channels of a depthwise convolution, 1 for an ordinary one.
    pub channels: i64,
    /// Output channels per group.
    pub multiplier: i64,
    /// Input height.
    pub height: i64,
    /// Input width.
    pub width: i64,
    /// Output height.
    pub out_height: i64,
    /// Output width.
    pub out_width: i64,
    /// Kernel height.
    pub kernel_h: i64,
    /// Kernel width.
    pub kernel_w: i64,
    /// Vertical stride.
    pub stride_h: i64,
    /// Horizontal stride.
    pub stride_w: i64,
    /// Vertical dilation.
    pub dilation_h: i64,
    /// Horizontal dilation.
    pub dilation_w: i64,
    /// Zero rows above the data.
    pub pad_top: i64,
    /// Zero columns left of the data.
    pub pad_left: i64,
    /// Input channels per group: 1 for a depthwise convolution, more for a grouped or an
    /// ordinary one (one group of all the input channels).
    pub group_channels: i64,
}

/// The number of `int64` fields of [`DepthwiseParams`].
pub const PARAM_COUNT: usize = 16;

impl DepthwiseParams {
    /// The fields in declaration order.
    pub fn to_array(&self) -> [i64; PARAM_COUNT] {
        [
            self.batch,
            self.channels,
            self.multiplier,
            self.height,
            self.width,
            self.out_height,
            self.out_width,
            self.kernel_h,
            self.kernel_w,
            self.stride_h,
            self.stride_w,
            self.dilation_h,
            self.dilation_w,
            self.pad_top,
            self.pad_left,
            self.group_channels,
        ]
    }

    /// Whether the sizes are non-negative, strides and dilations positive, and the element
    /// counts of data, weights and result fit in `isize`.
    pub fn valid(&self) -> bool {
        let sizes = [
            self.batch,
            self.channels,
            self.multiplier,
            self.height,
            self.width,
            self.out_height,
            self.out_width,
            self.kernel_h,
            self.kernel_w,
            self.pad_top,
            self.pad_left,
        ];
        let steps = [
            self.stride_h,
            self.stride_w,
            self.dilation_h,
            self.dilation_w,
            self.group_channels,
        ];
        sizes.iter().all(|&v| v >= 0)
            && steps.iter().all(|&v| v > 0)
            && [self.data_len(), self.weight_len(), self.out_len()]
                .iter()
                .all(|n| n.is_some_and(|n| n <= isize::MAX as i64))
    }

    /// Output channels.
    fn out_channels(&self) -> Option<i64> {
        self.channels.checked_mul(self.multiplier)
    }

    /// Elements of the data, `N·C·group_channels·H·W`.
    pub fn data_len(&self) -> Option<i64> {
        [self.channels, self.group_channels, self.height, self.width]
            .iter()
            .try_fold(self.batch, |p, &v| p.checked_mul(v))
    }

    /// Elements of the weights, `C·multiplier·group_channels·kh·kw`.
    pub fn weight_len(&self) -> Option<i64> {
        [self.group_channels, self.kernel_h, self.kernel_w]
            .iter()
            .try_fold(self.out_channels()?, |p, &v| p.checked_mul(v))
    }

    /// Elements of the result, `N·C·multiplier·OH·OW`.
    pub fn out_len(&self) -> Option<i64> {
        [self.out_channels()?, self.out_height, self.out_width]
            .iter()
            .try_fold(self.batch, |p, &v| p.checked_mul(v))
    }
}

pub use crate::isa::Isa;

/// The output columns `[x0, x1)` of a row whose every tap lies inside the input row: `ox·s +
/// kx·d - pad` in `0..width` for every `kx`. `x0 <= x1 <= out_width`.
pub fn interior(
    width: i64,
    out_width: i64,
    k: i64,
    stride: i64,
    dilation: i64,
    pad: i64,
) -> (i64, i64) {
    let x0 = ((pad + stride - 1) / stride).min(out_width);
    let last = width - 1 + pad - (k - 1) * dilation;
    let x1 = if last < 0 { 0 } else { last / stride + 1 };
    (x0, x1.min(out_width).max(x0))
}

/// One output row: the input rows its valid kernel rows read (each already offset by
/// `-pad_left`, so column `ox·s + kx·d` of it is the tap), with those kernel rows' weights.
pub(crate) struct Row<'a> {
    /// Per valid kernel row: the input row (offset by `-pad_left`; only in-row columns are
    /// read through it) and the kernel row's `kw` weights.
    pub(crate) taps: &'a [(*const f32, *const f32)],
    pub(crate) kw: usize,
    pub(crate) stride: usize,
    pub(crate) dilation: usize,
    /// The input row's width and the left padding (for the border columns' checks).
    pub(crate) width: i64,
    pub(crate) pad: i64,
    pub(crate) out: *mut f32,
    pub(crate) out_width: usize,
    /// The interior columns.
    pub(crate) x0: usize,
    pub(crate) x1: usize,
}

impl Row<'_> {
    /// Output column `ox` with checks on each tap's column.
    ///
    /// # Safety
    ///
    /// Every `taps` pointer plus `pad` addresses a row of `width` readable elements and `kw`
    /// weights; `ox < out_width`.
    unsafe fn border(&self, ox: usize) -> f32 {
        let mut acc = 0.0f32;
        for &(row, w) in self.taps {
            for kx in 0..self.kw {
                let col = (ox * self.stride + kx * self.dilation) as i64;
                if (self.pad..self.pad + self.width).contains(&col) {
                    // SAFETY: `col - pad` is inside the row; `kx < kw`.
                    acc += unsafe { *w.add(kx) * *row.offset(col as isize) };
                }
            }
        }
        acc
    }

    /// The border columns `[0, x0)` and `[x1, out_width)`.
    ///
    /// # Safety
    ///
    /// As [`Row::border`]; `out` is valid for `out_width` elements.
    unsafe fn borders(&self) {
        for ox in (0..self.x0).chain(self.x1..self.out_width) {
            // SAFETY: forwarded; `ox < out_width`.
            unsafe { *self.out.add(ox) = self.border(ox) };
        }
    }

    /// The interior columns `[from, x1)`, portable.
    ///
    /// # Safety
    ///
    /// As [`Row::borders`]; every tap of the interior columns lies inside its row.
    unsafe fn interior_portable(&self, from: usize) {
        for ox in from..self.x1 {
            let mut acc = 0.0f32;
            for &(row, w) in self.taps {
                for kx in 0..self.kw {
                    // SAFETY: an interior column's taps are inside the row.
                    acc += unsafe { *w.add(kx) * *row.add(ox * self.stride + kx * self.dilation) };
                }
            }
            // SAFETY: `ox < x1 <= out_width`.
            unsafe { *self.out.add(ox) = acc };
        }
    }

    /// The whole row, portable.
    ///
    /// # Safety
    ///
    /// As [`Row::interior_portable`].
    unsafe fn run(&self) {
        // SAFETY: forwarded from this function's contract.
        unsafe {
            self.borders();
            self.interior_portable(self.x0);
        }
    }
}

/// One output plane (a batch element's output channel) for the SIMD paths.
pub(crate) struct Plane<'a> {
    pub(crate) p: &'a DepthwiseParams,
    /// The input channel's plane.
    pub(crate) x: *const f32,
    /// The output channel's `kh·kw` weights.
    pub(crate) w: *const f32,
    /// The output plane.
    pub(crate) y: *mut f32,
    /// The output channel's epilogue.
    pub(crate) epi: ChannelEpilogue,
}

/// A raw pointer shared by the threads computing disjoint output planes.
#[derive(Clone, Copy)]
struct Shared<T>(T);
// SAFETY: each thread writes its own output planes and only reads the data and weights.
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}

/// Computes output planes `[p0, p1)` (plane = batch element × output channel).
///
/// # Safety
///
/// As [`depthwise_f32`]; `p1 <= N·C·multiplier`.
#[allow(clippy::too_many_arguments)]
unsafe fn planes(
    p: &DepthwiseParams,
    epi: &DepthwiseEpilogue,
    isa: Isa,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    p0: i64,
    p1: i64,
) {
    let out_c = p.channels * p.multiplier;
    let (plane_in, plane_out) = (p.height * p.width, p.out_height * p.out_width);
    let per_out = p.group_channels * p.kernel_h * p.kernel_w;
    let simd = isa != Isa::Portable && (p.stride_w == 1 || p.stride_w == 2);
    #[cfg(target_arch = "x86_64")]
    let (mut chunks, mut chunks8) = (Vec::new(), Vec::new());
    let mut plane = p0;
    while plane < p1 {
        let (b, oc) = (plane / out_c, plane % out_c);
        let group = oc / p.multiplier;
        // The group's first input channel.
        let ic = (b * p.channels + group) * p.group_channels;
        // SAFETY: the planes and weights are inside their buffers (`ic < N·C·group_channels`,
        // `oc < C·multiplier`, `plane < N·C·multiplier`).
        let (xp, wp, yp) = unsafe {
            (
                x.offset((ic * plane_in) as isize),
                w.offset((oc * per_out) as isize),
                y.offset((plane * plane_out) as isize),
            )
        };
        #[cfg(target_arch = "x86_64")]
        if simd && (p.group_channels > 1 || p.multiplier > 1) {
            // The rest of the group's output channels, up to a block.
            let count = ((group + 1) * p.multiplier - oc)
                .min(p1 - plane)
                .min(grouped::BLOCK as i64);
            let mut epis = [ChannelEpilogue::NONE; grouped::BLOCK];
            for (j, e) in epis.iter_mut().take(count as usize).enumerate() {
                // SAFETY: one epilogue value per output channel (`oc + j < C·multiplier`).
                *e = unsafe { epi.channel(oc + j as i64) };
            }
            let block = grouped::Block {
                p,
                x: xp,
                w: wp,
                y: yp,
                epi: &epis[..count as usize],
            };
            // SAFETY: the block's channels are inside the group and the range; `isa` is
            // available.
            unsafe {
                match isa {
                    Isa::Avx512 => grouped::block_avx512(&block),
                    _ => grouped::block_avx2(&block),
                }
            }
            plane += count;
            continue;
        }
        // SAFETY: the epilogue has one value per output channel (`oc < C·multiplier`).
        let ch = unsafe { epi.channel(oc) };
        #[cfg(target_arch = "x86_64")]
        if simd {
            let one = Plane {
                p,
                x: xp,
                w: wp,
                y: yp,
                epi: ch,
            };
            // SAFETY: as above; `isa` is available.
            unsafe {
                match isa {
                    Isa::Avx512 => x86::plane_avx512(&one, &mut chunks),
                    _ => x86::plane_avx2(&one, &mut chunks8),
                }
            }
            plane += 1;
            continue;
        }
        // SAFETY: as above.
        unsafe { plane_portable(p, ch, xp, wp, yp) };
        plane += 1;
    }
}

/// One output plane, portable: per output row, the rows of every input channel of the group
/// under the kernel rows inside the data ([`Row`]).
///
/// # Safety
///
/// `x` is the group's first input plane (its `group_channels` planes follow), `w` the output
/// channel's weights, `y` its output plane.
unsafe fn plane_portable(
    p: &DepthwiseParams,
    ch: ChannelEpilogue,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
) {
    let (x0, x1) = interior(
        p.width,
        p.out_width,
        p.kernel_w,
        p.stride_w,
        p.dilation_w,
        p.pad_left,
    );
    let (plane_in, kk) = (p.height * p.width, p.kernel_h * p.kernel_w);
    let mut taps = Vec::with_capacity((p.group_channels * p.kernel_h) as usize);
    for oy in 0..p.out_height {
        taps.clear();
        for ci in 0..p.group_channels {
            for ky in 0..p.kernel_h {
                let iy = oy * p.stride_h + ky * p.dilation_h - p.pad_top;
                if (0..p.height).contains(&iy) {
                    // The row is inside the data; offsetting by `-pad_left` may leave the
                    // allocation, so `wrapping_offset`.
                    let row =
                        x.wrapping_offset((ci * plane_in + iy * p.width - p.pad_left) as isize);
                    // SAFETY: kernel row `ky` of channel `ci` is inside the weights.
                    let wr = unsafe { w.offset((ci * kk + ky * p.kernel_w) as isize) };
                    taps.push((row, wr));
                }
            }
        }
        let row = Row {
            taps: &taps,
            kw: p.kernel_w as usize,
            stride: p.stride_w as usize,
            dilation: p.dilation_w as usize,
            width: p.width,
            pad: p.pad_left,
            // SAFETY: row `oy` of the output plane.
            out: unsafe { y.offset((oy * p.out_width) as isize) },
            out_width: p.out_width as usize,
            x0: x0 as usize,
            x1: x1 as usize,
        };
        // SAFETY: the rows and weights are as `Row::run` requires.
        unsafe {
            row.run();
            ch.row(row.out, row.out_width);
        }
    }
}

/// `y = epi(depthwise_conv(x, w))` with instruction set `isa`, spread over `ctx`'s threads.
/// Returns 0, or -1 when `p` is not [`DepthwiseParams::valid`] or `isa` is not available.
///
/// # Safety
///
/// `x`, `w` and `y` are valid for [`DepthwiseParams::data_len`], `weight_len` and `out_len`
/// elements, `y` overlaps neither, `epi`'s non-null pointers are valid for `C·multiplier`
/// elements, and `ctx` is null or a live [`KernelContext`].
pub unsafe fn depthwise_f32(
    ctx: *mut c_void,
    p: &DepthwiseParams,
    epi: &DepthwiseEpilogue,
    isa: Isa,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
) -> i32 {
    if !p.valid() || !isa.runs_here() {
        return -1;
    }
    let total = p.batch * p.channels * p.multiplier;
    if total == 0 || p.out_height == 0 || p.out_width == 0 {
        return 0;
    }
    // SAFETY: by the contract, `ctx` is null or a live context.
    let ctx = unsafe { ctx.cast::<KernelContext>().as_ref() };
    let threads = ctx.map_or(1, |c| c.threads()) as i64;
    let work = p
        .out_len()
        .unwrap_or(0)
        .saturating_mul(p.kernel_h * p.kernel_w)
        .saturating_mul(p.group_channels);
    let (xs, ws, ys, es) = (Shared(x), Shared(w), Shared(y), Shared(*epi));
    let run = move |p0: i64, p1: i64| {
        let (xs, ws, ys, es) = (xs, ws, ys, es);
        // SAFETY: forwarded from this function's contract; chunks write disjoint planes.
        unsafe { planes(p, &es.0, isa, xs.0, ws.0, ys.0, p0, p1) };
        0
    };
    match ctx {
        Some(ctx) if threads > 1 && work >= PARALLEL_WORK && total > 1 => {
            let chunks = (threads * 4).min(total);
            // Grouped convolutions keep whole blocks of output channels on one thread.
            let align = if p.group_channels > 1 || p.multiplier > 1 {
                8
            } else {
                1
            };
            let step = (total + chunks - 1) / chunks;
            let step = (step + align - 1) / align * align;
            let chunks = (total + step - 1) / step;
            ctx.parallel(chunks, &|t| {
                run((t * step).min(total), ((t + 1) * step).min(total))
            })
        }
        _ => run(0, total),
    }
}

/// The float32 depthwise convolution kernels call: `params` points at the shape
/// ([`DepthwiseParams`]), `x` the NCHW data, `w` the `[C·multiplier, 1, kh, kw]` weights, `y`
/// the NCHW result, `epi` at the epilogue ([`DepthwiseEpilogue`]) or is null (none). Returns
/// 0, or -1 for an invalid shape.
///
/// # Safety
///
/// `params` points at a [`DepthwiseParams`], `epi` is null or points at a
/// [`DepthwiseEpilogue`]; otherwise as [`depthwise_f32`].
pub unsafe extern "C" fn relay_kernel_depthwise_f32(
    ctx: *mut c_void,
    params: *const DepthwiseParams,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    epi: *const DepthwiseEpilogue,
) -> i32 {
    // SAFETY: by the contract, `params` points at the parameters, `epi` is null or valid.
    let (Some(p), epi) = (unsafe { params.as_ref() }, unsafe { epi.as_ref() }) else {
        return -1;
    };
    let epi = epi.unwrap_or(&DepthwiseEpilogue::NONE);
    // SAFETY: by the contract, `ctx` is null or a live context.
    let isa = unsafe { ctx.cast::<KernelContext>().as_ref() }
        .map_or_else(Isa::process_default, KernelContext::isa);
    // SAFETY: forwarded from this function's contract.
    unsafe { depthwise_f32(ctx, p, epi, isa, x, w, y) }
}
