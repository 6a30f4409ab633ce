//! Convolutions in the blocked NCHWc layout (ONNX Runtime's NCHWc, TVM's `conv2d_NCHWc`),
//! float32, direct: no im2col, no packing; and max and average pooling in it (`pool.rs`).
//!
//! Data is `[N, C / bi, H, W, bi]` (`bi` the input block: the output block, or 1 for NCHW
//! data, the stem of a network whose few input channels fill no block), the filter
//! `[O / B, (C / groups) / bi, KH, KW, bi, B]` (TVM's `OIHW{bi}i{B}o`, MLAS's `OIHWBiBo`, or
//! `OIHWBo` when `bi` is 1), the result `[N, O / B, OH, OW, B]`; `B` is 8 or 16. The depthwise
//! form (one group per channel, [`NchwcConv::is_depthwise`]) takes the filter
//! `[C / B, 1, KH, KW, 1, B]` (`OIHW1i{B}o`) and has its own row kernel (`depthwise.rs`).
//!
//! The work is MLAS's: a call of the tile kernel computes a few output positions of one row
//! for up to [`FILTER_SET`] output blocks at once, their accumulators in registers, reading
//! each input element once per position as a broadcast and each filter row once as a vector
//! (`tile.rs`); the input blocks are visited in batches of about 128 multiply-adds per
//! accumulator, between which the row's partial sums stay in the output (in L1), so a
//! batch's filter slice and input rows stay in cache across the whole row. The positions
//! whose taps all lie inside the row run unchecked, several at a time; tiles at the edges
//! read zeros for their padding taps, and kernel rows outside the data are never visited. A 1 × 1 convolution with unit strides and no padding is `H · W` positions cut
//! into rows of 64. The epilogue (per-channel scale and shift, a residual in the output's
//! layout, the clamps of `relu` and `clip`) is applied to the accumulators of the last batch
//! before they are stored.
//!
//! A unit of work is a (batch element, group, filter set, run of output rows) whose results
//! fit in L2; per batch of input blocks it visits all its rows, so the batch's filter slice
//! is read from memory once per unit and from L1 after. Threads take the units one by one
//! (at least four per thread when the shape has them), so a late core costs its share only.

/// The body of a function returning the kernel of instruction set `$isa` for blocks of
/// `$block` lanes: `$avx512` (AVX-512, 16), `$avx2_8` (AVX2, or AVX-512 running a program
/// blocked for AVX2, 8), `$avx2_16` (AVX2, 16), else the portable `$portable::<8>` or
/// `$portable::<16>`.
macro_rules! by_isa {
    ($isa:expr, $block:expr, $avx512:path, $avx2_8:path, $avx2_16:path, $portable:ident) => {{
        let (isa, block): (crate::isa::Isa, usize) = ($isa, $block);
        #[cfg(target_arch = "x86_64")]
        match (isa, block) {
            (crate::isa::Isa::Avx512, 16) => return $avx512,
            (crate::isa::Isa::Avx512 | crate::isa::Isa::Avx2, 8) => return $avx2_8,
            (crate::isa::Isa::Avx2, 16) => return $avx2_16,
            _ => {}
        }
        let _ = isa;
        if block == 16 {
            $portable::<16>
        } else {
            $portable::<8>
        }
    }};
}

mod depthwise;
mod pool;
#[cfg(test)]
mod tests;
mod tile;

use crate::KernelContext;
use crate::gemm::epilogue::{Lower, Step};
use crate::isa::Isa;

pub use pool::{NchwcPool, PoolKind, pool_nchwc};
pub use tile::FILTER_SET;

/// The epilogue steps a convolution applies at most.
pub const MAX_STEPS: usize = 4;

/// Below this many multiply-adds a convolution runs on the calling thread.
const PARALLEL_WORK: usize = 1 << 18;

/// The bytes of a unit's results, at most: they stay in L2 between batches of input blocks,
/// with the batch's filter slice, across the unit's rows.
const UNIT_BYTES: usize = 128 << 10;

/// The row length a flattened 1 × 1 convolution is cut into.
const FLAT_ROW: usize = 48;

/// The multiply-adds per accumulator of one batch of input blocks, about: fewer batches
/// write and read the partial sums fewer times, and a batch's filter slice stays in L2.
const BATCH_MACS: usize = 1024;

/// The shape of a blocked convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NchwcConv {
    /// Batch size `N`.
    pub batch: usize,
    /// Groups: input and output channels split into this many independent convolutions.
    pub groups: usize,
    /// Input channels `C` (all groups), a multiple of `in_block · groups`.
    pub channels: usize,
    /// The input block `bi`: the data's innermost extent.
    pub in_block: usize,
    /// Output channels `O` (all groups), a multiple of `block · groups`.
    pub out_channels: usize,
    /// The output block `B`, 8 or 16.
    pub block: usize,
    /// Input height and width.
    pub input: [usize; 2],
    /// Output height and width.
    pub output: [usize; 2],
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Vertical and horizontal strides.
    pub stride: [usize; 2],
    /// Vertical and horizontal dilations.
    pub dilation: [usize; 2],
    /// Zero rows above and columns left of the data (those below and right follow from the
    /// output size).
    pub pad: [usize; 2],
}

/// An operand of an epilogue step.
#[derive(Clone, Copy, Debug)]
pub enum StepOperand {
    /// One value per output channel (`O` values in channel order: a bias, a batch norm's
    /// scale or shift).
    Channel(*const f32),
    /// A tensor in the output's layout (a residual).
    Full(*const f32),
}

/// The epilogue of a blocked convolution: `v = lower(upper(steps(v)))` per element, each step
/// the same IEEE operation as the operator it replaces (a multiply, then an add: never fused),
/// `upper` `clip`'s `hi < v ? hi : v`.
#[derive(Clone, Copy, Debug)]
pub struct NchwcEpilogue {
    /// The steps, in order.
    pub steps: [Option<(Step, StepOperand)>; MAX_STEPS],
    /// The upper clamp's bound, if any.
    pub upper: Option<f32>,
    /// The lower clamp.
    pub lower: Lower<f32>,
}

// SAFETY: the operands are only read, by the threads of one call; the caller keeps them alive.
unsafe impl Send for NchwcEpilogue {}
// SAFETY: as above.
unsafe impl Sync for NchwcEpilogue {}

/// A shape the blocked convolution does not take.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("blocked convolution: {0}")]
pub struct NchwcError(String);

impl NchwcConv {
    /// Checks the shape: positive sizes, blocks that divide the channels of each group, an
    /// output block of 8 or 16, and element counts that fit in `isize`.
    pub fn check(&self) -> Result<(), NchwcError> {
        let bad = |why: String| Err(NchwcError(why));
        let positive = [
            self.groups,
            self.in_block,
            self.block,
            self.kernel[0],
            self.kernel[1],
            self.stride[0],
            self.stride[1],
            self.dilation[0],
            self.dilation[1],
        ];
        if positive.contains(&0) {
            return bad(format!(
                "{self:?} has a zero group, block, kernel, stride or dilation"
            ));
        }
        if !matches!(self.block, 8 | 16) {
            return bad(format!("the output block is {}, not 8 or 16", self.block));
        }
        if self.is_depthwise() {
            if !self.channels.is_multiple_of(self.block) {
                return bad(format!(
                    "{} channels do not split into blocks of {}",
                    self.channels, self.block
                ));
            }
        } else if !self.channels.is_multiple_of(self.in_block * self.groups) {
            return bad(format!(
                "{} input channels do not split into {} groups of blocks of {}",
                self.channels, self.groups, self.in_block
            ));
        }
        if !self.is_depthwise() && !self.out_channels.is_multiple_of(self.block * self.groups) {
            return bad(format!(
                "{} output channels do not split into {} groups of blocks of {}",
                self.out_channels, self.groups, self.block
            ));
        }
        let fits = |dims: &[usize]| {
            dims.iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .is_some_and(|n| n <= isize::MAX as usize / 4)
        };
        let [h, w] = self.input;
        let [oh, ow] = self.output;
        let [kh, kw] = self.kernel;
        if !fits(&[self.batch, self.channels, h, w])
            || !fits(&[self.out_channels, self.channels, kh, kw])
            || !fits(&[self.batch, self.out_channels, oh, ow])
        {
            return bad(format!("{self:?} has more elements than memory holds"));
        }
        Ok(())
    }

    /// Whether it is the depthwise form: one group per channel (`groups`, `channels` and
    /// `out_channels` equal, more than one) over blocked data (`in_block` the block), the
    /// filter `[C / B, 1, KH, KW, 1, B]` (TVM's `OIHW1i{B}o`).
    pub fn is_depthwise(&self) -> bool {
        self.groups > 1
            && self.groups == self.channels
            && self.channels == self.out_channels
            && self.in_block == self.block
    }

    /// The multiply-adds of the convolution.
    pub fn macs(&self) -> usize {
        let [oh, ow] = self.output;
        let [kh, kw] = self.kernel;
        self.batch * self.out_channels * oh * ow * kh * kw * self.channels / self.groups
    }

    /// The shape as computed, and the columns of its last output row: a 1 × 1 convolution
    /// with unit strides and no padding over the whole image is its `H · W` positions in rows
    /// of [`FLAT_ROW`] (or one row of fewer; the last one partial), the same memory.
    fn flattened(&self) -> (NchwcConv, usize) {
        let [h, w] = self.input;
        let whole = self.kernel == [1, 1]
            && self.stride == [1, 1]
            && self.pad == [0, 0]
            && self.output == self.input;
        if !whole || h * w == 0 {
            return (*self, self.output[1]);
        }
        let len = FLAT_ROW.min(h * w);
        let rows = (h * w).div_ceil(len);
        let flat = NchwcConv {
            input: [rows, len],
            output: [rows, len],
            ..*self
        };
        (flat, h * w - (rows - 1) * len)
    }
}

/// `y = epilogue(conv(x, w))` for the blocked convolution `p` (layouts in the module
/// documentation), on the threads and with the instruction set of `ctx` (the process's
/// default table and one thread without one).
///
/// # Safety
///
/// `x`, `w` and `y` hold the data, filter and result of `p` (`p.check()` passes); `y`
/// overlaps none of the others nor an epilogue operand, whose `Channel` operands hold `O`
/// values and `Full` ones the result's count.
pub unsafe fn conv_nchwc(
    ctx: Option<&KernelContext>,
    p: &NchwcConv,
    x: *const f32,
    w: *const f32,
    y: *mut f32,
    epilogue: Option<&NchwcEpilogue>,
) -> Result<(), NchwcError> {
    p.check()?;
    let isa = ctx.map_or_else(|| crate::Ops::process_default().isa, KernelContext::isa);
    let threads = ctx.map_or(1, KernelContext::threads);
    let threads = if p.macs() >= PARALLEL_WORK {
        threads
    } else {
        1
    };
    if p.is_depthwise() {
        // SAFETY: forwarded.
        unsafe { depthwise_call(ctx, p, isa, threads, (x, w, y), epilogue) };
        return Ok(());
    }
    let plan = Plan::new(p, isa, threads);
    let call = Call {
        x: x as usize,
        w: w as usize,
        y: y as usize,
        epilogue,
    };
    let run = |u: i64| {
        // SAFETY: the units write disjoint rows of `y` (forwarded contract).
        unsafe { plan.unit(&call, u as usize) };
        0
    };
    spread(ctx.filter(|_| threads > 1), plan.units(), &run);
    Ok(())
}

/// Runs units `0..units` of a call, handed out one by one to the threads of `ctx` (on the
/// calling thread without one).
fn spread(ctx: Option<&KernelContext>, units: usize, run: &(dyn Fn(i64) -> i32 + Sync)) {
    match ctx {
        Some(ctx) => {
            ctx.parallel(units as i64, run);
        }
        None => (0..units as i64).for_each(|u| {
            run(u);
        }),
    }
}

/// The depthwise form of [`conv_nchwc`]: units of (batch element, channel block, run of
/// [`DEPTHWISE_ROWS`] output rows) handed out to the threads one by one.
///
/// # Safety
///
/// As [`conv_nchwc`]; `p` is depthwise and checked.
unsafe fn depthwise_call(
    ctx: Option<&KernelContext>,
    p: &NchwcConv,
    isa: Isa,
    threads: usize,
    (x, w, y): (*const f32, *const f32, *mut f32),
    epilogue: Option<&NchwcEpilogue>,
) {
    let kernel = tile::depthwise_kernel(isa, p.block);
    let ([h, wd], [oh_n, ow_n], b) = (p.input, p.output, p.block);
    let chunks = oh_n.div_ceil(DEPTHWISE_ROWS);
    let planes = p.batch * p.channels / b;
    let (xa, wa, ya) = (x as usize, w as usize, y as usize);
    let run = |u: i64| {
        let (plane, chunk) = (u as usize / chunks, u as usize % chunks);
        let cb = plane % (p.channels / b);
        for oh in chunk * DEPTHWISE_ROWS..((chunk + 1) * DEPTHWISE_ROWS).min(oh_n) {
            let ih0 = (oh * p.stride[0]) as isize - p.pad[0] as isize;
            let y_row = (plane * oh_n + oh) * ow_n * b;
            let row = tile::Row {
                x: (xa as *const f32).wrapping_add(plane * h * wd * b),
                x_block: 0,
                x_row: wd * b,
                width: wd,
                w: (wa as *const f32).wrapping_add(cb * p.kernel[0] * p.kernel[1] * b),
                w_out: 0,
                w_in: 0,
                blocks: 1,
                rows: inside(ih0, p.dilation[0], p.kernel[0], h),
                ih0,
                kernel_w: p.kernel[1],
                dilation: p.dilation,
                stride_w: p.stride[1],
                pad_left: p.pad[1],
                in_block: b,
                y: (ya as *mut f32).wrapping_add(y_row),
                y_out: 0,
                y_offset: y_row,
                channel0: cb * b,
                filters: 1,
                first: true,
                epilogue,
            };
            // SAFETY: the row addresses its plane's data, its block's filter and its row of
            // the result (the caller's contract); units write disjoint rows.
            unsafe { kernel(&row, 0, ow_n) };
        }
        0
    };
    spread(ctx.filter(|_| threads > 1), planes * chunks, &run);
}

/// Output rows per unit of a depthwise convolution.
const DEPTHWISE_ROWS: usize = 4;

/// The pointers of one call (as addresses, shared by its threads).
struct Call<'a> {
    x: usize,
    w: usize,
    y: usize,
    epilogue: Option<&'a NchwcEpilogue>,
}

/// The split of a call into units and the kernel that computes them.
struct Plan {
    p: NchwcConv,
    /// The columns of the last output row (all of them unless flattened).
    last_cols: usize,
    /// Positions of an input and of an output channel block (`H · W`, `OH · OW`: a flattened
    /// shape's rows may hold more).
    planes: [usize; 2],
    /// Input blocks and output blocks per group.
    in_blocks: usize,
    out_blocks: usize,
    /// Filter sets per group.
    sets: usize,
    /// Output rows per unit, and units per image.
    rows: usize,
    row_units: usize,
    /// Input blocks per batch.
    batch: usize,
    kernel: tile::RowKernel,
}

impl Plan {
    fn new(given: &NchwcConv, isa: Isa, threads: usize) -> Plan {
        let (p, last_cols) = given.flattened();
        let planes = [given.input, given.output].map(|[h, w]| h * w);
        let in_blocks = p.channels / p.groups / p.in_block;
        let out_blocks = p.out_channels / p.groups / p.block;
        let sets = out_blocks.div_ceil(FILTER_SET);
        let [oh, ow] = p.output;
        let row_bytes = (ow * FILTER_SET * p.block * 4).max(1);
        let images = p.batch * p.groups * sets;
        let wanted = 4 * threads;
        let split = if images >= wanted {
            oh
        } else {
            (oh * images).div_ceil(wanted)
        };
        let rows = (UNIT_BYTES / row_bytes).min(split).clamp(1, oh.max(1));
        let taps = p.in_block * p.kernel[0] * p.kernel[1];
        Plan {
            p,
            last_cols,
            planes,
            in_blocks,
            out_blocks,
            sets,
            rows,
            row_units: oh.div_ceil(rows),
            batch: (BATCH_MACS / taps).clamp(1, in_blocks.max(1)),
            kernel: tile::row_kernel(isa, p.block),
        }
    }

    /// The number of units: (batch element, group, filter set, run of rows).
    fn units(&self) -> usize {
        self.p.batch * self.p.groups * self.sets * self.row_units
    }

    /// Computes unit `u`.
    ///
    /// # Safety
    ///
    /// As [`conv_nchwc`]; `u < self.units()`.
    unsafe fn unit(&self, call: &Call<'_>, u: usize) {
        let p = &self.p;
        let (chunk, u) = (u % self.row_units, u / self.row_units);
        let (set, u) = (u % self.sets, u / self.sets);
        let (g, n) = (u % p.groups, u / p.groups);
        let [h, w] = p.input;
        let [oh_n, ow_n] = p.output;
        let (bi, b) = (p.in_block, p.block);
        let ob0 = g * self.out_blocks + set * FILTER_SET;
        let taps_w = p.kernel[0] * p.kernel[1] * bi * b;
        let x_block = self.planes[0] * bi;
        let y_block = self.planes[1] * b;
        let rows = chunk * self.rows..((chunk + 1) * self.rows).min(oh_n);
        let y_image = (n * p.out_channels / b + ob0) * y_block;
        for first in (0..self.in_blocks).step_by(self.batch) {
            let blocks = self.batch.min(self.in_blocks - first);
            let ib = g * self.in_blocks + first;
            for oh in rows.clone() {
                let ih0 = (oh * p.stride[0]) as isize - p.pad[0] as isize;
                let y_row = y_image + oh * ow_n * b;
                let row = tile::Row {
                    x: (call.x as *const f32).wrapping_add((n * p.channels / bi + ib) * x_block),
                    x_block,
                    x_row: w * bi,
                    width: w,
                    w: (call.w as *const f32).wrapping_add((ob0 * self.in_blocks + first) * taps_w),
                    w_out: self.in_blocks * taps_w,
                    w_in: taps_w,
                    blocks,
                    rows: inside(ih0, p.dilation[0], p.kernel[0], h),
                    ih0,
                    kernel_w: p.kernel[1],
                    dilation: p.dilation,
                    stride_w: p.stride[1],
                    pad_left: p.pad[1],
                    in_block: bi,
                    y: (call.y as *mut f32).wrapping_add(y_row),
                    y_out: y_block,
                    y_offset: y_row,
                    channel0: ob0 * b,
                    filters: FILTER_SET.min(self.out_blocks - set * FILTER_SET),
                    first: first == 0,
                    epilogue: call.epilogue.filter(|_| first + blocks == self.in_blocks),
                };
                let cols = if oh + 1 == oh_n { self.last_cols } else { ow_n };
                // SAFETY: the row's pointers address the unit's data, filter and result (the
                // caller's contract and the plan's arithmetic).
                unsafe { (self.kernel)(&row, 0, cols) };
            }
        }
    }
}

/// The kernel rows `kh0..kh1` of a window starting at input row `i0` (taps `dilation`
/// apart) that lie inside `0..len`.
fn inside(i0: isize, dilation: usize, kernel: usize, len: usize) -> (usize, usize) {
    let d = dilation as isize;
    let lo = if i0 >= 0 { 0 } else { (-i0 + d - 1) / d };
    let hi = if (len as isize) <= i0 {
        0
    } else {
        ((len as isize - 1 - i0) / d + 1).min(kernel as isize)
    };
    let lo = lo.min(kernel as isize) as usize;
    (lo, (hi.max(0) as usize).max(lo))
}
