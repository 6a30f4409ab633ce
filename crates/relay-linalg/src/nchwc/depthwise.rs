//! The row kernel of the blocked depthwise convolution (TVM's `depthwise_conv2d_NCHWc`,
//! MLAS's `MlasConvDepthwiseFloatKernel`): each output channel reads its own input channel,
//! so a position's `B` channels are one vector multiplied lane by lane by the tap's filter
//! row. A tile is up to [`POSITIONS`] positions of one row (the interior ones, every tap inside
//! the row, unchecked), or one edge position with its padding taps skipped; per tap the filter
//! row is loaded once and each position's input block once. A row whose window is 3 taps wide
//! with stride 1 or 2 (MobileNet's) is tiles that load each kernel row's inputs once, shared
//! by the taps whose windows overlap ([`tile_3x1`], [`WIDE`] positions at stride 1), the
//! edges' tiles reading zeros for the padding: the generic tile's loads outnumber its
//! multiply-adds.

use super::tile::{Lanes, Row, epilogue, interior};

/// Positions per interior tile.
const POSITIONS: usize = 4;

/// Positions per interior tile of a window 3 taps wide with unit stride ([`tile_3x1`]).
const WIDE: usize = 6;

/// The inputs of a kernel row a [`tile_3x1`] holds at most: 8 for [`WIDE`] positions at
/// stride 1, 9 for [`POSITIONS`] at stride 2.
const INPUTS: usize = 9;

/// Output columns `ow0..ow1` of `row` (one channel block: `row.blocks` and `row.filters` 1).
///
/// # Safety
///
/// As [`super::tile::RowKernel`].
#[inline(always)]
pub(super) unsafe fn run_row<V: Lanes>(row: &Row<'_>, ow0: usize, ow1: usize) {
    let (lo, hi) = interior(row, ow0, ow1);
    if row.kernel_w == 3 && row.dilation[1] == 1 && matches!(row.stride_w, 1 | 2) {
        // SAFETY: forwarded.
        unsafe { row_3x1::<V>(row, (ow0, ow1), (lo, hi)) };
        return;
    }
    // SAFETY: every tile is inside the row (forwarded contract); the interior's taps are
    // inside the data, the edges' are checked.
    unsafe {
        for ow in (ow0..lo).chain(hi..ow1) {
            tile::<V, 1, true>(row, ow);
        }
        let mut ow = lo;
        while ow + POSITIONS <= hi {
            tile::<V, POSITIONS, false>(row, ow);
            ow += POSITIONS;
        }
        for ow in ow..hi {
            tile::<V, 1, false>(row, ow);
        }
    }
}

/// Output columns `ow0..ow1` of a row whose window is 3 taps wide with stride 1 or 2 and unit
/// dilation, by [`tile_3x1`]: tiles of [`WIDE`] positions at stride 1 and [`POSITIONS`] at
/// stride 2 (the last one shorter), checked where they reach past the interior `lo..hi`.
///
/// # Safety
///
/// As [`run_row`].
#[inline(always)]
unsafe fn row_3x1<V: Lanes>(row: &Row<'_>, (ow0, ow1): (usize, usize), (lo, hi): (usize, usize)) {
    let width = if row.stride_w == 1 { WIDE } else { POSITIONS };
    let mut ow = ow0;
    while ow < ow1 {
        let r = (ow1 - ow).min(width);
        let checked = ow < lo || ow + r > hi;
        // SAFETY: forwarded; a tile past the interior is checked.
        unsafe {
            macro_rules! tiles {
                ($s:literal, $($r:literal),*) => {
                    match (r, checked) {
                        $(($r, false) => tile_3x1::<V, $r, $s, false>(row, ow),
                          ($r, true) => tile_3x1::<V, $r, $s, true>(row, ow),)*
                        _ => unreachable!("a tile of at most {width} positions"),
                    }
                };
            }
            if row.stride_w == 1 {
                tiles!(1, 1, 2, 3, 4, 5, 6);
            } else {
                tiles!(2, 1, 2, 3, 4);
            }
        }
        ow += r;
    }
}

/// `R` positions from column `ow` of a window 3 taps wide with stride `S` (1 or 2) and unit
/// dilation: as [`tile`], but each kernel row's `S · (R - 1) + 3` inputs are loaded once and
/// shared by the taps that read them (neighbouring positions' windows overlap): with `R = 6`
/// and `S = 1`, 3 filter rows and 8 inputs for 18 multiply-adds instead of 21 loads. Checked
/// (`CHECKED`), the inputs outside the row are zeros (as the dense kernel's padding taps).
///
/// # Safety
///
/// As [`run_row`]; unless `CHECKED`, the positions are interior.
#[inline(always)]
unsafe fn tile_3x1<V: Lanes, const R: usize, const S: usize, const CHECKED: bool>(
    row: &Row<'_>,
    ow: usize,
) {
    let b = V::B;
    let iw0 = (ow * S) as isize - row.pad_left as isize;
    // SAFETY: the taps read are inside the data (interior), the filter rows inside the
    // block's filter, the results inside the row (the contract).
    unsafe {
        let mut acc = [V::zero(); R];
        for kh in row.rows.0..row.rows.1 {
            let ih = (row.ih0 + (kh * row.dilation[0]) as isize) as usize;
            let x = row.x.add(ih * row.x_row);
            let w = row.w.add(kh * 3 * b);
            const { assert!(S * (R - 1) + 3 <= INPUTS, "a kernel row's inputs fit `xs`") };
            let mut xs = [V::zero(); INPUTS];
            for (j, v) in xs.iter_mut().enumerate().take(S * (R - 1) + 3) {
                let iw = iw0 + j as isize;
                if !CHECKED || (iw >= 0 && (iw as usize) < row.width) {
                    *v = V::load(x.wrapping_offset(iw * b as isize));
                }
            }
            for kx in 0..3 {
                let wv = V::load(w.add(kx * b));
                for (r, a) in acc.iter_mut().enumerate() {
                    *a = V::fma(xs[S * r + kx], wv, *a);
                }
            }
        }
        store(row, ow, acc);
    }
}

/// The tile's sums through the epilogue, stored.
///
/// # Safety
///
/// As [`run_row`].
#[inline(always)]
unsafe fn store<V: Lanes, const R: usize>(row: &Row<'_>, ow: usize, acc: [V; R]) {
    let mut acc = [acc];
    // SAFETY: the results are inside the row (the contract).
    unsafe {
        if let Some(e) = row.epilogue {
            epilogue(e, &mut acc, row, ow, 0);
        }
        for (r, a) in acc[0].into_iter().enumerate() {
            a.store(row.y.add((ow + r) * V::B));
        }
    }
}

/// `R` positions from column `ow`, checked (`CHECKED`) or interior: their sums over the
/// window, through the epilogue, stored.
///
/// # Safety
///
/// As [`run_row`].
#[inline(always)]
unsafe fn tile<V: Lanes, const R: usize, const CHECKED: bool>(row: &Row<'_>, ow: usize) {
    let b = V::B;
    let (s, pl) = (row.stride_w as isize, row.pad_left as isize);
    let kw = row.kernel_w;
    // SAFETY: the taps read are inside the data (interior, or checked), the filter rows inside
    // the block's filter, the results inside the row (the contract).
    unsafe {
        let mut acc = [V::zero(); R];
        for kh in row.rows.0..row.rows.1 {
            let ih = (row.ih0 + (kh * row.dilation[0]) as isize) as usize;
            let x = row.x.add(ih * row.x_row);
            for kx in 0..kw {
                let iw = ow as isize * s + (kx * row.dilation[1]) as isize - pl;
                if CHECKED && (iw < 0 || iw as usize >= row.width) {
                    continue;
                }
                let wv = V::load(row.w.add((kh * kw + kx) * b));
                for (r, a) in acc.iter_mut().enumerate() {
                    let at = (iw + r as isize * s) as usize;
                    *a = V::fma(V::load(x.add(at * b)), wv, *a);
                }
            }
        }
        store(row, ow, acc);
    }
}
