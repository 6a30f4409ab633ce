//! The row kernel of the blocked convolution: output positions of one row × up to
//! [`FILTER_SET`] output blocks per tile, accumulators in registers.
//!
//! Per kernel tap and input lane, each position's input element is broadcast once and each
//! output block's filter row (`B` output channels) loaded once, then multiplied into every
//! accumulator of the tile: `F · R` fused multiply-adds for `R` broadcasts and `F` loads
//! (AVX2: 4 blocks × 3 positions, MLAS's, in 12 of the 16 registers; AVX-512: 4 × 6 in 24 of
//! 32). One generic body over [`Lanes`] — a vector of one output block — is compiled per
//! instruction set and block: 8 lanes in a `ymm` (AVX2, or AVX-512 running a program blocked
//! for AVX2), 16 in a `zmm`, 16 in two `ymm`s, and `[f32; B]` arrays the compiler vectorizes
//! for the baseline (portable). A type may bring a dedicated sequence for a whole tap
//! ([`Lanes::block`]): AVX2's is hand-scheduled `asm!`, because the compiler, given the lanes
//! as intrinsics, spills the accumulators or keeps them in memory across taps.
//!
//! Each position of a tile reads its own input pointer, so a tile at the row's edge is as wide
//! as an interior one: its padding taps read [`ZEROS`].

use super::NchwcEpilogue;
use super::StepOperand;
use crate::gemm::epilogue::{Lower, Step};
use crate::isa::Isa;

/// The output blocks a tile computes at most.
pub const FILTER_SET: usize = 4;

/// One row's work for a batch of input blocks (every pointer at its first element).
pub(super) struct Row<'a> {
    /// The data at the batch's first input block, row 0, column 0.
    pub x: *const f32,
    /// Elements between input blocks, and between input rows.
    pub x_block: usize,
    pub x_row: usize,
    /// Input columns.
    pub width: usize,
    /// The filter of the first output block at the batch's first input block.
    pub w: *const f32,
    /// Elements between output blocks' filters, and between input blocks' taps.
    pub w_out: usize,
    pub w_in: usize,
    /// Input blocks in the batch.
    pub blocks: usize,
    /// The kernel rows inside the data.
    pub rows: (usize, usize),
    /// The input row of kernel row 0.
    pub ih0: isize,
    pub kernel_w: usize,
    /// Vertical and horizontal dilation.
    pub dilation: [usize; 2],
    pub stride_w: usize,
    pub pad_left: usize,
    pub in_block: usize,
    /// The result at the first output block, this row, column 0.
    pub y: *mut f32,
    /// Elements between output blocks.
    pub y_out: usize,
    /// `y`'s offset from the result's first element (where a `Full` operand is read).
    pub y_offset: usize,
    /// The first output channel.
    pub channel0: usize,
    /// Output blocks of the tile (1 to [`FILTER_SET`]).
    pub filters: usize,
    /// Whether this batch starts the sums (else it adds to the result).
    pub first: bool,
    /// The epilogue, on the last batch.
    pub epilogue: Option<&'a NchwcEpilogue>,
}

/// Computes output columns `ow0..ow1` of a [`Row`].
pub(super) type RowKernel = unsafe fn(&Row<'_>, usize, usize);

/// The row kernel of `isa` for output blocks of `block` lanes (8 or 16).
pub(super) fn row_kernel(isa: Isa, block: usize) -> RowKernel {
    by_isa!(
        isa,
        block,
        x86::row_avx512,
        x86::row_avx2_8,
        x86::row_avx2_16,
        portable_row
    )
}

/// The depthwise row kernel of `isa` for blocks of `block` lanes (8 or 16).
pub(super) fn depthwise_kernel(isa: Isa, block: usize) -> RowKernel {
    by_isa!(
        isa,
        block,
        x86::depthwise_avx512,
        x86::depthwise_avx2_8,
        x86::depthwise_avx2_16,
        portable_depthwise
    )
}

/// The portable depthwise row kernel.
///
/// # Safety
///
/// As [`RowKernel`].
unsafe fn portable_depthwise<const B: usize>(row: &Row<'_>, ow0: usize, ow1: usize) {
    // SAFETY: forwarded.
    unsafe { super::depthwise::run_row::<[f32; B]>(row, ow0, ow1) }
}

/// The portable row kernel.
///
/// # Safety
///
/// As [`RowKernel`]: the row addresses its data, filter and result.
unsafe fn portable_row<const B: usize>(row: &Row<'_>, ow0: usize, ow1: usize) {
    // SAFETY: forwarded.
    unsafe { run_row::<[f32; B]>(row, ow0, ow1) }
}

/// A vector of one output block's lanes.
pub(super) trait Lanes: Copy {
    /// Lanes (the output block).
    const B: usize;
    /// Output blocks a tile computes at most.
    const F: usize;
    /// Positions a tile computes at most.
    const R: usize;
    /// Positions a tile of any row computes at most: [`Lanes::width`]'s largest.
    const R_MAX: usize = Self::R;
    /// Positions a tile computes at most in a row of `filters` output blocks (a row of fewer
    /// than [`Lanes::F`] holds fewer accumulators per position, and may take more positions).
    #[inline(always)]
    fn width(filters: usize) -> usize {
        let _ = filters;
        Self::R
    }
    /// All zero.
    unsafe fn zero() -> Self;
    /// `*p` in every lane.
    unsafe fn splat(p: *const f32) -> Self;
    /// `v` in every lane.
    unsafe fn set(v: f32) -> Self;
    /// `B` values from `p`.
    unsafe fn load(p: *const f32) -> Self;
    /// The lanes to `p`.
    unsafe fn store(self, p: *mut f32);
    /// `a · b + c` (fused where the instruction set has FMA).
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self;
    /// `a + b`.
    unsafe fn add(a: Self, b: Self) -> Self;
    /// `a · b`.
    unsafe fn mul(a: Self, b: Self) -> Self;
    /// x86's `min`: `a < b ? a : b`.
    unsafe fn min(a: Self, b: Self) -> Self;
    /// x86's `max`: `a > b ? a : b`.
    unsafe fn max(a: Self, b: Self) -> Self;
    /// Whether [`Lanes::block`] computes tiles of `F` blocks × `R` positions.
    #[inline(always)]
    fn has_block<const F: usize, const R: usize>() -> bool {
        false
    }
    /// All `B` lanes of one tap into a tile of `F` blocks × `R` positions, as [`lanes`] with
    /// `bi == B`, or the one lane of a tap with `bi == 1` (`ONE`: data in NCHW), for the tiles
    /// of [`Lanes::has_block`] (a dedicated sequence).
    ///
    /// `steps` taps in all: after each, the inputs move `steps.x` elements and the filter
    /// rows `steps.w`.
    #[inline(always)]
    unsafe fn block<const F: usize, const R: usize, const ONE: bool>(
        acc: &mut [[Self; R]; F],
        xs: [*const f32; R],
        (w, w_out): (*const f32, usize),
        steps: Steps,
    ) {
        // SAFETY: forwarded: every step's inputs and filter rows are readable.
        unsafe {
            for i in 0..steps.n {
                let xs = xs.map(|x| x.wrapping_add(i * steps.x));
                let w = w.add(i * steps.w);
                lanes(acc, xs, (w, w_out), if ONE { 1 } else { Self::B });
            }
        }
    }
}

/// Taps of [`Lanes::block`] in one call: `n` of them, the inputs `x` and the filter rows `w`
/// elements further at each.
#[derive(Clone, Copy)]
pub(super) struct Steps {
    pub n: usize,
    pub x: usize,
    pub w: usize,
}

impl Steps {
    /// One tap.
    const ONE: Steps = Steps { n: 1, x: 0, w: 0 };
}

impl<const B: usize> Lanes for [f32; B] {
    const B: usize = B;
    const F: usize = 2;
    const R: usize = 2;
    #[inline(always)]
    unsafe fn zero() -> Self {
        [0.0; B]
    }
    #[inline(always)]
    unsafe fn splat(p: *const f32) -> Self {
        // SAFETY: the caller's.
        [unsafe { *p }; B]
    }
    #[inline(always)]
    unsafe fn set(v: f32) -> Self {
        [v; B]
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller's.
        unsafe { p.cast::<[f32; B]>().read_unaligned() }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller's.
        unsafe { p.cast::<[f32; B]>().write_unaligned(self) }
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        // Rounded products: without FMA in the baseline, `mul_add` is a library call.
        std::array::from_fn(|i| a[i] * b[i] + c[i])
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        std::array::from_fn(|i| a[i] + b[i])
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        std::array::from_fn(|i| a[i] * b[i])
    }
    #[inline(always)]
    unsafe fn min(a: Self, b: Self) -> Self {
        std::array::from_fn(|i| if a[i] < b[i] { a[i] } else { b[i] })
    }
    #[inline(always)]
    unsafe fn max(a: Self, b: Self) -> Self {
        std::array::from_fn(|i| if a[i] > b[i] { a[i] } else { b[i] })
    }
}

/// Zeros a checked tile reads for the taps of its positions in the padding (as many as an
/// input block has lanes, at most).
static ZEROS: [f32; 64] = [0.0; 64];

/// Output columns `ow0..ow1` of `row`, `V::R` at a time: tiles whose every tap lies inside the
/// data unchecked, those touching the padding checked (each position's padding taps read
/// [`ZEROS`]; one position at a time, skipping them, for input blocks wider than that).
///
/// # Safety
///
/// As [`RowKernel`].
#[inline(always)]
pub(super) unsafe fn run_row<V: Lanes>(row: &Row<'_>, ow0: usize, ow1: usize) {
    let (lo, hi) = interior(row, ow0, ow1);
    let zeros = row.in_block <= ZEROS.len();
    let width = V::width(row.filters);
    let mut ow = ow0;
    // SAFETY: every tile below is inside the row (forwarded contract); the interior's taps
    // are inside the data, the edges' are checked.
    unsafe {
        while ow < ow1 {
            let r = width.min(ow1 - ow);
            if ow >= lo && ow + r <= hi {
                positions::<V, false>(row, ow, r);
            } else if zeros {
                positions::<V, true>(row, ow, r);
            } else {
                (ow..ow + r).for_each(|o| filters::<V, 1, true>(row, o));
            }
            ow += r;
        }
    }
}

/// The columns of `ow0..ow1` whose every tap lies inside the input row.
pub(super) fn interior(row: &Row<'_>, ow0: usize, ow1: usize) -> (usize, usize) {
    let (s, pl) = (row.stride_w, row.pad_left);
    let reach = (row.kernel_w - 1) * row.dilation[1];
    let lo = pl.div_ceil(s);
    let hi = match (row.width + pl).checked_sub(reach + 1) {
        Some(last) => last / s + 1,
        None => 0,
    };
    let lo = lo.clamp(ow0, ow1);
    (lo, hi.clamp(lo, ow1))
}

/// `r` positions from column `ow` (`r <= V::width(row.filters)`), checked or interior.
///
/// # Safety
///
/// As [`run_row`]; unless `CHECKED`, the positions are interior.
#[inline(always)]
unsafe fn positions<V: Lanes, const CHECKED: bool>(row: &Row<'_>, ow: usize, r: usize) {
    // SAFETY: forwarded.
    unsafe {
        match r {
            1 => filters::<V, 1, CHECKED>(row, ow),
            2 => filters::<V, 2, CHECKED>(row, ow),
            3 => filters::<V, 3, CHECKED>(row, ow),
            4 if V::R_MAX >= 4 => filters::<V, 4, CHECKED>(row, ow),
            5 if V::R_MAX >= 5 => filters::<V, 5, CHECKED>(row, ow),
            6 if V::R_MAX >= 6 => filters::<V, 6, CHECKED>(row, ow),
            // More than the vector type's tile (not asked for): one position at a time.
            _ => (ow..ow + r).for_each(|o| filters::<V, 1, CHECKED>(row, o)),
        }
    }
}

/// `R` positions from column `ow`, for the row's output blocks, `V::F` at a time.
///
/// # Safety
///
/// As [`positions`]; checked (`CHECKED`) or interior.
#[inline(always)]
unsafe fn filters<V: Lanes, const R: usize, const CHECKED: bool>(row: &Row<'_>, ow: usize) {
    let mut f0 = 0;
    while f0 < row.filters {
        let n = (row.filters - f0).min(V::F);
        // SAFETY: forwarded; blocks `f0..f0 + n` are the row's.
        unsafe {
            match n {
                1 => tile::<V, 1, R, CHECKED>(row, ow, f0),
                2 => tile::<V, 2, R, CHECKED>(row, ow, f0),
                3 => tile::<V, 3, R, CHECKED>(row, ow, f0),
                _ => tile::<V, 4, R, CHECKED>(row, ow, f0),
            }
        }
        f0 += n;
    }
}

/// The tile of `F` output blocks from the row's block `f0` × `R` positions from column `ow`:
/// the sums of the row's batch (added to the result's unless the batch is the first), the
/// epilogue on the last batch, stored.
///
/// # Safety
///
/// As [`filters`].
#[inline(always)]
unsafe fn tile<V: Lanes, const F: usize, const R: usize, const CHECKED: bool>(
    row: &Row<'_>,
    ow: usize,
    f0: usize,
) {
    let (b, bi) = (V::B, row.in_block);
    let out = |f: usize, r: usize| row.y.wrapping_add((f0 + f) * row.y_out + (ow + r) * b);
    // SAFETY: the tile's results, inputs and filters are inside the row (the contract); a
    // checked tile reads only the taps inside the data.
    unsafe {
        let mut acc = [[V::zero(); R]; F];
        if !row.first {
            for (f, acc) in acc.iter_mut().enumerate() {
                for (r, a) in acc.iter_mut().enumerate() {
                    *a = V::load(out(f, r));
                }
            }
        }
        match (bi, V::has_block::<F, R>()) {
            (b, true) if b == V::B => taps::<V, F, R, CHECKED, WHOLE_BLOCK>(&mut acc, row, ow, f0),
            (1, true) => taps::<V, F, R, CHECKED, ONE_LANE>(&mut acc, row, ow, f0),
            _ => taps::<V, F, R, CHECKED, ANY_BLOCK>(&mut acc, row, ow, f0),
        }
        if let Some(e) = row.epilogue {
            epilogue(e, &mut acc, row, ow, f0);
        }
        for (f, acc) in acc.iter().enumerate() {
            for (r, a) in acc.iter().enumerate() {
                a.store(out(f, r));
            }
        }
    }
}

/// [`taps`] by [`Lanes::block`], the input block `V::B` wide.
const WHOLE_BLOCK: u8 = 0;
/// [`taps`] by [`Lanes::block`], the input block one lane wide.
const ONE_LANE: u8 = 1;
/// [`taps`] by [`lanes`].
const ANY_BLOCK: u8 = 2;

/// The row's batch of input blocks into the accumulators of the tile at column `ow` (output
/// blocks from `f0`): per input block and tap, all the block's lanes, by [`Lanes::block`]
/// (`PATH`: [`WHOLE_BLOCK`] or [`ONE_LANE`], when the input block is `V::B` or 1 and the type
/// has a sequence for the tile) or by [`lanes`] ([`ANY_BLOCK`]).
/// [`lanes`]. A checked tile skips the taps outside the data.
///
/// # Safety
///
/// As [`tile`].
#[inline(always)]
unsafe fn taps<V: Lanes, const F: usize, const R: usize, const CHECKED: bool, const PATH: u8>(
    acc: &mut [[V; R]; F],
    row: &Row<'_>,
    ow: usize,
    f0: usize,
) {
    let (b, bi) = (V::B, row.in_block);
    let kw = row.kernel_w;
    let (s, pl) = (row.stride_w as isize, row.pad_left as isize);
    // An interior tile of a 1 × 1 kernel by a sequence takes every input block of the batch
    // in one call (the blocks' inputs `x_block` and filters `w_in` apart), MLAS's pointwise
    // kernel; the others one tap at a time (for larger kernels, the taps of one block in a
    // row read one plane, where a call across the blocks would hop between them).
    let pointwise = kw == 1 && row.rows.1 - row.rows.0 == 1;
    let (blocks, steps) = if pointwise && !CHECKED && PATH != ANY_BLOCK {
        let steps = Steps {
            n: row.blocks,
            x: row.x_block,
            w: row.w_in,
        };
        (1, steps)
    } else {
        (row.blocks, Steps::ONE)
    };
    // SAFETY: forwarded; a checked tile's positions outside the data read `ZEROS` (it has
    // `bi` lanes: `run_row`) or, alone, skip the tap.
    unsafe {
        for block in 0..blocks {
            let x = row.x.add(block * row.x_block);
            let w = row.w.add(f0 * row.w_out + block * row.w_in);
            for kh in row.rows.0..row.rows.1 {
                let ih = (row.ih0 + (kh * row.dilation[0]) as isize) as usize;
                let x = x.add(ih * row.x_row);
                let w = w.add(kh * kw * bi * b);
                for kx in 0..kw {
                    let iw0 = ow as isize * s + (kx * row.dilation[1]) as isize - pl;
                    let inside = |r: usize| {
                        let iw = iw0 + r as isize * s;
                        !CHECKED || (iw >= 0 && (iw as usize) < row.width)
                    };
                    if CHECKED && !(0..R).any(inside) {
                        continue;
                    }
                    let xs: [*const f32; R] = std::array::from_fn(|r| {
                        if inside(r) {
                            x.wrapping_offset((iw0 + r as isize * s) * bi as isize)
                        } else {
                            ZEROS.as_ptr()
                        }
                    });
                    let w = (w.add(kx * bi * b), row.w_out);
                    match PATH {
                        WHOLE_BLOCK => V::block::<F, R, false>(acc, xs, w, steps),
                        ONE_LANE => V::block::<F, R, true>(acc, xs, w, steps),
                        _ => lanes(acc, xs, w, bi),
                    }
                }
            }
        }
    }
}

/// One tap's `bi` input lanes into the accumulators: per lane, each position's input (`xs`)
/// broadcast and each block's filter row (`w`, blocks `w_out` apart) loaded once.
///
/// # Safety
///
/// The inputs and filter rows are readable.
#[inline(always)]
unsafe fn lanes<V: Lanes, const F: usize, const R: usize>(
    acc: &mut [[V; R]; F],
    xs: [*const f32; R],
    (w, w_out): (*const f32, usize),
    bi: usize,
) {
    // SAFETY: forwarded.
    unsafe {
        for lane in 0..bi {
            let inputs: [V; R] = std::array::from_fn(|r| V::splat(xs[r].add(lane)));
            for (f, acc) in acc.iter_mut().enumerate() {
                let wv = V::load(w.add(f * w_out + lane * V::B));
                for (a, &v) in acc.iter_mut().zip(&inputs) {
                    *a = V::fma(v, wv, *a);
                }
            }
        }
    }
}

/// The accumulators of the tile at column `ow` (output blocks from `f0` of the row) through
/// the epilogue, step by step: a per-channel operand is loaded once per block and applied to
/// the block's positions, a full one once per accumulator; then the clamps.
///
/// # Safety
///
/// The operands hold the row's channels and result elements.
#[inline(always)]
pub(super) unsafe fn epilogue<V: Lanes, const F: usize, const R: usize>(
    e: &NchwcEpilogue,
    acc: &mut [[V; R]; F],
    row: &Row<'_>,
    ow: usize,
    f0: usize,
) {
    let b = V::B;
    // No closures here: a closure does not take the caller's `target_feature`, and the
    // vector operations in it could stay calls.
    // SAFETY: forwarded.
    unsafe {
        for &(step, operand) in e.steps.iter().flatten() {
            for (f, acc) in acc.iter_mut().enumerate() {
                match operand {
                    StepOperand::Channel(p) => {
                        let o = V::load(p.add(row.channel0 + (f0 + f) * b));
                        for a in acc.iter_mut() {
                            *a = combine(step, *a, o);
                        }
                    }
                    StepOperand::Full(p) => {
                        for (r, a) in acc.iter_mut().enumerate() {
                            let at = row.y_offset + (f0 + f) * row.y_out + (ow + r) * b;
                            *a = combine(step, *a, V::load(p.add(at)));
                        }
                    }
                }
            }
        }
        let all = acc.as_flattened_mut();
        if let Some(hi) = e.upper {
            let hi = V::set(hi);
            for a in all.iter_mut() {
                *a = V::min(hi, *a);
            }
        }
        match e.lower {
            Lower::None => {}
            Lower::Relu(lo) => {
                let lo = V::set(lo);
                for a in all.iter_mut() {
                    *a = V::max(*a, lo);
                }
            }
            Lower::Clip(lo) => {
                let lo = V::set(lo);
                for a in all.iter_mut() {
                    *a = V::max(lo, *a);
                }
            }
        }
    }
}

/// `a · o` or `a + o`: an epilogue step.
///
/// # Safety
///
/// The caller has the vector type's instruction set.
#[inline(always)]
unsafe fn combine<V: Lanes>(step: Step, a: V, o: V) -> V {
    // SAFETY: forwarded.
    unsafe {
        match step {
            Step::Mul => V::mul(a, o),
            Step::Add => V::add(a, o),
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Lanes, Row, Steps, run_row};

    /// 8 lanes in a `ymm` register.
    #[derive(Clone, Copy)]
    pub(super) struct Y8(__m256);

    /// 16 lanes in two `ymm` registers.
    #[derive(Clone, Copy)]
    pub(super) struct Y16(__m256, __m256);

    /// 16 lanes in a `zmm` register.
    #[derive(Clone, Copy)]
    pub(super) struct Z16(__m512);

    /// The [`Lanes`] methods of a vector type from one expression each, every one run
    /// with the instruction set the row kernels are compiled for.
    macro_rules! lanes {
        ($t:ident, $b:expr, $f:expr, $r:expr, |$p:ident, $v:ident, $a:ident, $bb:ident, $c:ident| {
            zero: $zero:expr, splat: $splat:expr, set: $set:expr, load: $load:expr,
            store: $store:expr, fma: $fma:expr, add: $add:expr, mul: $mul:expr,
            min: $min:expr, max: $max:expr $(, widths: $rmax:expr, |$fl:ident| $width:expr)?
            $(, block: $block:ident => $fr:expr)? $(,)?
        }) => {
            // SAFETY: every method's caller has the instruction set (the row kernels below are
            // compiled for it) and valid lanes at its pointer.
            impl Lanes for $t {
                const B: usize = $b;
                const F: usize = $f;
                const R: usize = $r;
                $(
                const R_MAX: usize = $rmax;
                #[inline(always)]
                fn width($fl: usize) -> usize {
                    $width
                }
                )?
                #[inline(always)]
                unsafe fn zero() -> Self {
                    unsafe { $zero }
                }
                #[inline(always)]
                unsafe fn splat($p: *const f32) -> Self {
                    unsafe { $splat }
                }
                #[inline(always)]
                unsafe fn set($v: f32) -> Self {
                    unsafe { $set }
                }
                #[inline(always)]
                unsafe fn load($p: *const f32) -> Self {
                    unsafe { $load }
                }
                #[inline(always)]
                unsafe fn store(self, $p: *mut f32) {
                    let $a = self;
                    unsafe { $store }
                }
                #[inline(always)]
                unsafe fn fma($a: Self, $bb: Self, $c: Self) -> Self {
                    unsafe { $fma }
                }
                #[inline(always)]
                unsafe fn add($a: Self, $bb: Self) -> Self {
                    unsafe { $add }
                }
                #[inline(always)]
                unsafe fn mul($a: Self, $bb: Self) -> Self {
                    unsafe { $mul }
                }
                #[inline(always)]
                unsafe fn min($a: Self, $bb: Self) -> Self {
                    unsafe { $min }
                }
                #[inline(always)]
                unsafe fn max($a: Self, $bb: Self) -> Self {
                    unsafe { $max }
                }
                $(
                #[inline(always)]
                fn has_block<const F: usize, const R: usize>() -> bool {
                    $fr
                }
                #[inline(always)]
                unsafe fn block<const F: usize, const R: usize, const ONE: bool>(
                    acc: &mut [[Self; R]; F],
                    xs: [*const f32; R],
                    w: (*const f32, usize),
                    steps: Steps,
                ) {
                    unsafe { $block::<F, R, ONE>(acc, xs, w, steps) }
                }
                )?
            }
        };
    }

    lanes!(Y8, 8, 4, 3, |p, v, a, b, c| {
        zero: Y8(_mm256_setzero_ps()),
        splat: Y8(_mm256_broadcast_ss(&*p)),
        set: Y8(_mm256_set1_ps(v)),
        load: Y8(_mm256_loadu_ps(p)),
        store: _mm256_storeu_ps(p, a.0),
        fma: Y8(_mm256_fmadd_ps(a.0, b.0, c.0)),
        add: Y8(_mm256_add_ps(a.0, b.0)),
        mul: Y8(_mm256_mul_ps(a.0, b.0)),
        min: Y8(_mm256_min_ps(a.0, b.0)),
        max: Y8(_mm256_max_ps(a.0, b.0)),
        widths: 6, |filters| match filters {
            1 | 2 => 6,
            3 => 4,
            _ => 3,
        },
        block: block_y8 => (R <= 3 && F <= 4) || (F <= 2 && R <= 6) || (F == 3 && R <= 4),
    });

    lanes!(Y16, 16, 1, 4, |p, v, a, b, c| {
        zero: Y16(_mm256_setzero_ps(), _mm256_setzero_ps()),
        splat: {
            let v = _mm256_broadcast_ss(&*p);
            Y16(v, v)
        },
        set: Y16(_mm256_set1_ps(v), _mm256_set1_ps(v)),
        load: Y16(_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))),
        store: {
            _mm256_storeu_ps(p, a.0);
            _mm256_storeu_ps(p.add(8), a.1)
        },
        fma: Y16(_mm256_fmadd_ps(a.0, b.0, c.0), _mm256_fmadd_ps(a.1, b.1, c.1)),
        add: Y16(_mm256_add_ps(a.0, b.0), _mm256_add_ps(a.1, b.1)),
        mul: Y16(_mm256_mul_ps(a.0, b.0), _mm256_mul_ps(a.1, b.1)),
        min: Y16(_mm256_min_ps(a.0, b.0), _mm256_min_ps(a.1, b.1)),
        max: Y16(_mm256_max_ps(a.0, b.0), _mm256_max_ps(a.1, b.1)),
    });

    lanes!(Z16, 16, 4, 6, |p, v, a, b, c| {
        zero: Z16(_mm512_setzero_ps()),
        splat: Z16(_mm512_set1_ps(*p)),
        set: Z16(_mm512_set1_ps(v)),
        load: Z16(_mm512_loadu_ps(p)),
        store: _mm512_storeu_ps(p, a.0),
        fma: Z16(_mm512_fmadd_ps(a.0, b.0, c.0)),
        add: Z16(_mm512_add_ps(a.0, b.0)),
        mul: Z16(_mm512_mul_ps(a.0, b.0)),
        min: Z16(_mm512_min_ps(a.0, b.0)),
        max: Z16(_mm512_max_ps(a.0, b.0)),
    });

    /// The broadcasts of lane `$l`: each position's input (positions `$r`).
    macro_rules! broadcasts {
        ($l:literal, [$($r:literal),*]) => {
            concat!($("vbroadcastss {x", $r, "}, dword ptr [{p", $r, "} + 4*", $l, "]\n",)*)
        };
    }

    /// Lane `$l` of output block `$f` (its filter row at `$w`) into its accumulators, one per
    /// position `$r`.
    macro_rules! filter_row {
        ($l:literal, $w:literal, $f:literal, [$($r:literal),*]) => {
            concat!(
                "vmovups {t}, ymmword ptr [",
                $w,
                " + 32*",
                $l,
                "]\n",
                $("vfmadd231ps {a", $f, $r, "}, {x", $r, "}, {t}\n",)*
            )
        };
    }

    /// Lane `$l` of a tile of 1 to 4 output blocks × the positions `$rs`.
    macro_rules! lane {
        ($l:literal, 1, $rs:tt) => {
            concat!(broadcasts!($l, $rs), filter_row!($l, "{w0}", 0, $rs))
        };
        ($l:literal, 2, $rs:tt) => {
            concat!(lane!($l, 1, $rs), filter_row!($l, "{w0} + {o}", 1, $rs))
        };
        ($l:literal, 3, $rs:tt) => {
            concat!(lane!($l, 2, $rs), filter_row!($l, "{w0} + 2*{o}", 2, $rs))
        };
        ($l:literal, 4, $rs:tt) => {
            concat!(lane!($l, 3, $rs), filter_row!($l, "{w3}", 3, $rs))
        };
    }

    /// The lanes of one tap (`$n`: 8, or 1) of a tile of `$f` output blocks × the positions
    /// `$rs`.
    macro_rules! lanes_of {
        (8, $f:tt, $rs:tt) => {
            concat!(
                lane!(0, $f, $rs),
                lane!(1, $f, $rs),
                lane!(2, $f, $rs),
                lane!(3, $f, $rs),
                lane!(4, $f, $rs),
                lane!(5, $f, $rs),
                lane!(6, $f, $rs),
                lane!(7, $f, $rs),
            )
        };
        (1, $f:tt, $rs:tt) => {
            lane!(0, $f, $rs)
        };
    }

    /// Lane `$l` of a narrow tile (1 or 2 output blocks × the positions `$rs`, up to 6; 3 × up
    /// to 4): the blocks' filter rows loaded once (`{t}`, `{x1}`, `{x2}`), each position's
    /// input broadcast into `{x0}` and multiplied by them all.
    macro_rules! narrow_lane {
        ($l:literal, 1, [$($r:literal),*]) => {
            concat!(
                "vmovups {t}, ymmword ptr [{w0} + 32*", $l, "]\n",
                $(
                    "vbroadcastss {x0}, dword ptr [{p", $r, "} + 4*", $l, "]\n",
                    "vfmadd231ps {a0", $r, "}, {x0}, {t}\n",
                )*
            )
        };
        ($l:literal, 2, [$($r:literal),*]) => {
            concat!(
                "vmovups {t}, ymmword ptr [{w0} + 32*", $l, "]\n",
                "vmovups {x1}, ymmword ptr [{w0} + {o} + 32*", $l, "]\n",
                $(
                    "vbroadcastss {x0}, dword ptr [{p", $r, "} + 4*", $l, "]\n",
                    "vfmadd231ps {a0", $r, "}, {x0}, {t}\n",
                    "vfmadd231ps {a1", $r, "}, {x0}, {x1}\n",
                )*
            )
        };
        ($l:literal, 3, $rs:tt) => {
            narrow_lane3!($l, $rs)
        };
    }

    macro_rules! narrow_lane3 {
        ($l:literal, [$($r:literal),*]) => {
            concat!(
                "vmovups {t}, ymmword ptr [{w0} + 32*", $l, "]\n",
                "vmovups {x1}, ymmword ptr [{w0} + {o} + 32*", $l, "]\n",
                "vmovups {x2}, ymmword ptr [{w0} + 2*{o} + 32*", $l, "]\n",
                $(
                    "vbroadcastss {x0}, dword ptr [{p", $r, "} + 4*", $l, "]\n",
                    "vfmadd231ps {a0", $r, "}, {x0}, {t}\n",
                    "vfmadd231ps {a1", $r, "}, {x0}, {x1}\n",
                    "vfmadd231ps {a2", $r, "}, {x0}, {x2}\n",
                )*
            )
        };
    }

    /// The lanes of one tap (`$n`: 8, or 1) of a narrow tile.
    macro_rules! narrow_lanes_of {
        (8, $f:tt, $rs:tt) => {
            concat!(
                narrow_lane!(0, $f, $rs),
                narrow_lane!(1, $f, $rs),
                narrow_lane!(2, $f, $rs),
                narrow_lane!(3, $f, $rs),
                narrow_lane!(4, $f, $rs),
                narrow_lane!(5, $f, $rs),
                narrow_lane!(6, $f, $rs),
                narrow_lane!(7, $f, $rs),
            )
        };
        (1, $f:tt, $rs:tt) => {
            narrow_lane!(0, $f, $rs)
        };
    }

    /// The 8 lanes (or the one lane: `ONE`) of one tap into the AVX2 tile of `F` (1 to 4)
    /// output blocks × `R` (1 to 3) positions, scheduled by hand: the registers hold the
    /// accumulators, a broadcast per position and a filter row (all 16 `ymm` for 4 blocks × 3
    /// positions), which the compiler, given the same loop as intrinsics, spills when it
    /// unrolls the lanes, and keeps in memory across taps when it does not. A tile of 1 or 2
    /// blocks × 4 to 6 positions, or 3 × 4 (a row of few output channels), holds its filter
    /// rows instead and one broadcast at a time (`narrow_lane!`): up to 12 accumulators, as
    /// many as 4 × 3.
    ///
    /// # Safety
    ///
    /// As [`super::lanes`] with `bi == 8`; the CPU has AVX2 and FMA.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn block_y8<const F: usize, const R: usize, const ONE: bool>(
        acc: &mut [[Y8; R]; F],
        xs: [*const f32; R],
        (w, w_out): (*const f32, usize),
        steps: Steps,
    ) {
        assert!(
            (R <= 3 && F <= 4) || (F <= 2 && R <= 6) || (F == 3 && R <= 4),
            "the AVX2 sequences are for tiles of up to 4 × 3, 3 × 4 and 2 × 6"
        );
        if steps.n == 0 {
            return;
        }
        let a = acc.as_flattened_mut();
        let o = w_out * 4;
        let (x_step, w_step) = (steps.x * 4, steps.w * 4);
        // SAFETY: the tile reads the caller's inputs (`R` positions, 8 lanes each) and filter
        // rows (`F` blocks `w_out` apart, 8 × 8 each); the registers are operands.
        unsafe {
            macro_rules! run {
                ($seq:ident, once, $n:tt, $f:tt, $rs:tt, [$($p:ident = $pi:literal),*],
                    [$($x:ident),*], [$($name:ident = $i:literal),*], [$($o:ident)?],
                    [$($w3:ident)?]) => {
                    std::arch::asm!(
                        $seq!($n, $f, $rs),
                        $($p = in(reg) xs[$pi],)*
                        w0 = in(reg) w,
                        $($w3 = in(reg) w.add(3 * w_out),)?
                        $(o = in(reg) $o,)?
                        $($x = out(ymm_reg) _,)*
                        t = out(ymm_reg) _,
                        $($name = inout(ymm_reg) a[$i].0,)*
                        options(nostack, pure, readonly),
                    )
                };
                ($seq:ident, looped, $n:tt, $f:tt, $rs:tt, [$($p:ident = $pi:literal),*],
                    [$($x:ident),*], [$($name:ident = $i:literal),*], [$($o:ident)?],
                    [$($w3:ident)?]) => {
                    std::arch::asm!(
                        "2:",
                        $seq!($n, $f, $rs),
                        $(concat!("add {", stringify!($p), "}, {xs}"),)*
                        "add {w0}, {ws}",
                        $(concat!("add {", stringify!($w3), "}, {ws}"),)?
                        "dec {n}",
                        "jnz 2b",
                        $($p = inout(reg) xs[$pi] => _,)*
                        w0 = inout(reg) w => _,
                        $($w3 = inout(reg) w.add(3 * w_out) => _,)?
                        n = inout(reg) steps.n => _,
                        xs = in(reg) x_step,
                        ws = in(reg) w_step,
                        $(o = in(reg) $o,)?
                        $($x = out(ymm_reg) _,)*
                        t = out(ymm_reg) _,
                        $($name = inout(ymm_reg) a[$i].0,)*
                        options(nostack, pure, readonly),
                    )
                };
            }
            // The accumulators of blocks 0 to 3 (`[$a0]` ... `[$a3]`: names and indices).
            macro_rules! by_filters {
                ($l:tt, $n:tt, $rs:tt, $ps:tt, $xs:tt, [$($a0:tt)*], [$($a1:tt)*],
                    [$($a2:tt)*], [$($a3:tt)*]) => {
                    match F {
                        1 => run!(lanes_of, $l, $n, 1, $rs, $ps, $xs, [$($a0)*], [], []),
                        2 => run!(lanes_of, $l, $n, 2, $rs, $ps, $xs, [$($a0)*, $($a1)*], [o], []),
                        3 => run!(lanes_of, $l, $n, 3, $rs, $ps, $xs,
                            [$($a0)*, $($a1)*, $($a2)*], [o], []),
                        _ => run!(lanes_of, $l, $n, 4, $rs, $ps, $xs,
                            [$($a0)*, $($a1)*, $($a2)*, $($a3)*], [o], [w3]),
                    }
                };
            }
            // A narrow tile: 1 or 2 blocks (`[$a0]`, `[$a1]`), or 3 (`[$a2]`).
            macro_rules! narrow {
                ($l:tt, $n:tt, $rs:tt, $ps:tt, [$($a0:tt)*], [$($a1:tt)*]) => {
                    match F {
                        1 => run!(narrow_lanes_of, $l, $n, 1, $rs, $ps, [x0], [$($a0)*], [], []),
                        _ => run!(narrow_lanes_of, $l, $n, 2, $rs, $ps, [x0, x1],
                            [$($a0)*, $($a1)*], [o], []),
                    }
                };
                ($l:tt, $n:tt, $rs:tt, $ps:tt, [$($a0:tt)*], [$($a1:tt)*], [$($a2:tt)*]) => {
                    match F {
                        1 | 2 => narrow!($l, $n, $rs, $ps, [$($a0)*], [$($a1)*]),
                        _ => run!(narrow_lanes_of, $l, $n, 3, $rs, $ps, [x0, x1, x2],
                            [$($a0)*, $($a1)*, $($a2)*], [o], []),
                    }
                };
            }
            macro_rules! by_positions {
                ($l:tt, $n:tt) => {
                    match R {
                        1 => by_filters!(
                            $l,
                            $n,
                            [0],
                            [p0 = 0],
                            [x0],
                            [a00 = 0],
                            [a10 = 1],
                            [a20 = 2],
                            [a30 = 3]
                        ),
                        2 => by_filters!(
                            $l,
                            $n,
                            [0, 1],
                            [p0 = 0, p1 = 1],
                            [x0, x1],
                            [a00 = 0, a01 = 1],
                            [a10 = 2, a11 = 3],
                            [a20 = 4, a21 = 5],
                            [a30 = 6, a31 = 7]
                        ),
                        4 => narrow!(
                            $l,
                            $n,
                            [0, 1, 2, 3],
                            [p0 = 0, p1 = 1, p2 = 2, p3 = 3],
                            [a00 = 0, a01 = 1, a02 = 2, a03 = 3],
                            [a10 = 4, a11 = 5, a12 = 6, a13 = 7],
                            [a20 = 8, a21 = 9, a22 = 10, a23 = 11]
                        ),
                        5 => narrow!(
                            $l,
                            $n,
                            [0, 1, 2, 3, 4],
                            [p0 = 0, p1 = 1, p2 = 2, p3 = 3, p4 = 4],
                            [a00 = 0, a01 = 1, a02 = 2, a03 = 3, a04 = 4],
                            [a10 = 5, a11 = 6, a12 = 7, a13 = 8, a14 = 9]
                        ),
                        6 => narrow!(
                            $l,
                            $n,
                            [0, 1, 2, 3, 4, 5],
                            [p0 = 0, p1 = 1, p2 = 2, p3 = 3, p4 = 4, p5 = 5],
                            [a00 = 0, a01 = 1, a02 = 2, a03 = 3, a04 = 4, a05 = 5],
                            [a10 = 6, a11 = 7, a12 = 8, a13 = 9, a14 = 10, a15 = 11]
                        ),
                        _ => by_filters!(
                            $l,
                            $n,
                            [0, 1, 2],
                            [p0 = 0, p1 = 1, p2 = 2],
                            [x0, x1, x2],
                            [a00 = 0, a01 = 1, a02 = 2],
                            [a10 = 3, a11 = 4, a12 = 5],
                            [a20 = 6, a21 = 7, a22 = 8],
                            [a30 = 9, a31 = 10, a32 = 11]
                        ),
                    }
                };
            }
            match (ONE, steps.n) {
                (true, 1) => by_positions!(once, 1),
                (true, _) => by_positions!(looped, 1),
                (false, 1) => by_positions!(once, 8),
                (false, _) => by_positions!(looped, 8),
            }
        }
    }

    /// The row kernel with AVX2 and blocks of 8.
    ///
    /// # Safety
    ///
    /// As [`super::RowKernel`]; the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn row_avx2_8(row: &Row<'_>, ow0: usize, ow1: usize) {
        // SAFETY: forwarded.
        unsafe { run_row::<Y8>(row, ow0, ow1) }
    }

    /// The row kernel with AVX2 and blocks of 16.
    ///
    /// # Safety
    ///
    /// As [`row_avx2_8`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn row_avx2_16(row: &Row<'_>, ow0: usize, ow1: usize) {
        // SAFETY: forwarded.
        unsafe { run_row::<Y16>(row, ow0, ow1) }
    }

    /// The depthwise row kernels with AVX2 (blocks of 8 and 16) and AVX-512 (16), as the
    /// row kernels above.
    ///
    /// # Safety
    ///
    /// As [`row_avx2_8`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn depthwise_avx2_8(row: &Row<'_>, ow0: usize, ow1: usize) {
        // SAFETY: forwarded.
        unsafe { crate::nchwc::depthwise::run_row::<Y8>(row, ow0, ow1) }
    }

    /// See [`depthwise_avx2_8`].
    ///
    /// # Safety
    ///
    /// As [`row_avx2_8`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn depthwise_avx2_16(row: &Row<'_>, ow0: usize, ow1: usize) {
        // SAFETY: forwarded.
        unsafe { crate::nchwc::depthwise::run_row::<Y16>(row, ow0, ow1) }
    }

    /// See [`depthwise_avx2_8`].
    ///
    /// # Safety
    ///
    /// As [`row_avx512`].
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn depthwise_avx512(row: &Row<'_>, ow0: usize, ow1: usize) {
        // SAFETY: forwarded.
        unsafe { crate::nchwc::depthwise::run_row::<Z16>(row, ow0, ow1) }
    }

    /// The row kernel with AVX-512 and blocks of 16.
    ///
    /// # Safety
    ///
    /// As [`super::RowKernel`]; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn row_avx512(row: &Row<'_>, ow0: usize, ow1: usize) {
        // SAFETY: forwarded.
        unsafe { run_row::<Z16>(row, ow0, ow1) }
    }
}
