//! Max and average pooling over blocked data (`[N, C / B, H, W, B]`, `B` 8 or 16), MLAS's
//! NCHWc pooling: each output position's `B` channels are one vector, the window's taps
//! inside the data are combined lane by lane (max: x86's `v > acc ? v : acc`, which skips
//! NaN as the reference operator does; average: their sum divided by the in-bounds taps, or
//! with `count_include_pad` by the taps inside the padded input).

use super::NchwcError;
use crate::KernelContext;
use crate::isa::Isa;

/// Below this many window taps (over all lanes) a pooling runs on the calling thread.
const PARALLEL_TAPS: usize = 1 << 16;

/// Output rows per unit of work, at most.
const UNIT_ROWS: usize = 8;

/// What a pooling computes per window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    /// The largest tap.
    Max,
    /// The mean of the taps; with `count_include_pad` the padding taps count (TVM's rule:
    /// those inside the padded input, not the ones ceil mode adds past it).
    Avg {
        /// Whether padding taps count in the divisor.
        count_include_pad: bool,
    },
}

/// The shape of a blocked 2-d pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NchwcPool {
    /// Batch size `N`.
    pub batch: usize,
    /// Channel blocks `C / B`.
    pub blocks: usize,
    /// The block `B`, 8 or 16.
    pub block: usize,
    /// Input height and width.
    pub input: [usize; 2],
    /// Output height and width.
    pub output: [usize; 2],
    /// Window height and width.
    pub kernel: [usize; 2],
    /// Vertical and horizontal strides.
    pub stride: [usize; 2],
    /// Vertical and horizontal dilations.
    pub dilation: [usize; 2],
    /// Padding: top, left, bottom, right.
    pub pad: [usize; 4],
    /// Max or average.
    pub kind: PoolKind,
}

impl NchwcPool {
    /// Checks the shape: positive windows, strides and dilations, a block of 8 or 16, and
    /// element counts that fit in `isize`.
    pub fn check(&self) -> Result<(), NchwcError> {
        let bad = |why: String| Err(NchwcError(why));
        if [self.kernel, self.stride, self.dilation]
            .iter()
            .flatten()
            .any(|&v| v == 0)
        {
            return bad(format!("{self:?} has a zero window, stride or dilation"));
        }
        if !matches!(self.block, 8 | 16) {
            return bad(format!("the block is {}, not 8 or 16", self.block));
        }
        let fits = |[h, w]: [usize; 2]| {
            [self.batch, self.blocks, self.block, h, w]
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .is_some_and(|n| n <= isize::MAX as usize / 4)
        };
        if !fits(self.input) || !fits(self.output) {
            return bad(format!("{self:?} has more elements than memory holds"));
        }
        Ok(())
    }

    /// The taps of window `o` along axis `axis` inside the data (`lo..hi`), and how many lie
    /// inside the padded input.
    fn taps(&self, axis: usize, o: usize) -> (usize, usize, usize) {
        let d = self.dilation[axis];
        let start = (o * self.stride[axis]) as isize - self.pad[axis] as isize;
        let len = self.input[axis] as isize;
        let padded = len + self.pad[axis + 2] as isize;
        let k = self.kernel[axis];
        let tap = |i: usize| start + (i * d) as isize;
        let lo = (0..k).find(|&i| tap(i) >= 0).unwrap_or(k);
        let hi = (lo..k).find(|&i| tap(i) >= len).unwrap_or(k);
        let counted = (0..k).filter(|&i| tap(i) < padded).count();
        (lo, hi, counted)
    }
}

/// `y = pool(x)` for the blocked pooling `p`, on the threads and with the instruction set of
/// `ctx` (the process's default table and one thread without one).
///
/// # Safety
///
/// `x` holds `[N, C / B, H, W, B]` and `y` `[N, C / B, OH, OW, B]` elements of `p`, disjoint.
pub unsafe fn pool_nchwc(
    ctx: Option<&KernelContext>,
    p: &NchwcPool,
    x: *const f32,
    y: *mut f32,
) -> Result<(), NchwcError> {
    p.check()?;
    let isa = ctx.map_or_else(|| crate::Ops::process_default().isa, KernelContext::isa);
    let [oh, ow] = p.output;
    let chunks = oh.div_ceil(UNIT_ROWS);
    let units = p.batch * p.blocks * chunks;
    let taps = units * UNIT_ROWS * ow * p.kernel[0] * p.kernel[1] * p.block;
    let row = row_kernel(isa, p.block);
    let (xa, ya) = (x as usize, y as usize);
    let run = |u: i64| {
        let (plane, chunk) = (u as usize / chunks, u as usize % chunks);
        let [h, w] = p.input;
        let x = (xa as *const f32).wrapping_add(plane * h * w * p.block);
        let y = (ya as *mut f32).wrapping_add(plane * oh * ow * p.block);
        for r in chunk * UNIT_ROWS..((chunk + 1) * UNIT_ROWS).min(oh) {
            // SAFETY: the plane's rows are inside `x` and `y` (the caller's contract); units
            // write disjoint rows.
            unsafe { row(p, x, y, r) };
        }
        0
    };
    super::spread(
        ctx.filter(|c| c.threads() > 1 && taps >= PARALLEL_TAPS),
        units,
        &run,
    );
    Ok(())
}

/// Computes output row `r` of one plane (`x`, `y` at the plane's first element).
type RowKernel = unsafe fn(&NchwcPool, *const f32, *mut f32, usize);

/// The row kernel of `isa` for blocks of `block` lanes.
fn row_kernel(isa: Isa, block: usize) -> RowKernel {
    by_isa!(
        isa,
        block,
        x86::row_avx512,
        x86::row_avx2_8,
        x86::row_avx2_16,
        row
    )
}

/// Output row `r` of one plane, `B` lanes per position, in the caller's instruction set.
///
/// # Safety
///
/// As [`RowKernel`]: `x` and `y` address one plane of `p`'s data and result.
#[inline(always)]
unsafe fn row<const B: usize>(p: &NchwcPool, x: *const f32, y: *mut f32, r: usize) {
    let w = p.input[1];
    let (kh0, kh1, rows) = p.taps(0, r);
    let ih0 = (r * p.stride[0]) as isize - p.pad[0] as isize;
    for c in 0..p.output[1] {
        let (kw0, kw1, cols) = p.taps(1, c);
        let iw0 = (c * p.stride[1]) as isize - p.pad[1] as isize;
        let mut acc = [match p.kind {
            PoolKind::Max => f32::NEG_INFINITY,
            PoolKind::Avg { .. } => 0.0,
        }; B];
        for kh in kh0..kh1 {
            let ih = (ih0 + (kh * p.dilation[0]) as isize) as usize;
            for kw in kw0..kw1 {
                let iw = (iw0 + (kw * p.dilation[1]) as isize) as usize;
                // SAFETY: the tap is inside the data (`taps`), the plane inside `x`.
                let v = unsafe { x.add((ih * w + iw) * B).cast::<[f32; B]>().read_unaligned() };
                for (a, v) in acc.iter_mut().zip(v) {
                    *a = match p.kind {
                        PoolKind::Max => {
                            if v > *a {
                                v
                            } else {
                                *a
                            }
                        }
                        PoolKind::Avg { .. } => *a + v,
                    };
                }
            }
        }
        if let PoolKind::Avg { count_include_pad } = p.kind {
            let n = if count_include_pad {
                rows * cols
            } else {
                (kh1 - kh0) * (kw1 - kw0)
            };
            acc = acc.map(|a| a / n as f32);
        }
        // SAFETY: the position is inside the plane's result.
        unsafe {
            y.add((r * p.output[1] + c) * B)
                .cast::<[f32; B]>()
                .write_unaligned(acc)
        };
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{NchwcPool, row};

    /// The row kernel with AVX2 and blocks of 8.
    ///
    /// # Safety
    ///
    /// As [`super::RowKernel`]; the CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn row_avx2_8(p: &NchwcPool, x: *const f32, y: *mut f32, r: usize) {
        // SAFETY: forwarded.
        unsafe { row::<8>(p, x, y, r) }
    }

    /// The row kernel with AVX2 and blocks of 16.
    ///
    /// # Safety
    ///
    /// As [`row_avx2_8`].
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn row_avx2_16(p: &NchwcPool, x: *const f32, y: *mut f32, r: usize) {
        // SAFETY: forwarded.
        unsafe { row::<16>(p, x, y, r) }
    }

    /// The row kernel with AVX-512 and blocks of 16.
    ///
    /// # Safety
    ///
    /// As [`super::RowKernel`]; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f,avx2")]
    pub(super) unsafe fn row_avx512(p: &NchwcPool, x: *const f32, y: *mut f32, r: usize) {
        // SAFETY: forwarded.
        unsafe { row::<16>(p, x, y, r) }
    }
}
