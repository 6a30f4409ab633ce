//! The row kernel of the blocked depthwise convolution (TVM's `depthwise_conv2d_NCHWc`,
//! MLAS's `MlasConvDepthwiseFloatKernel`): each output channel reads its own input channel,
//! so a position's `B` channels are one vector multiplied lane by lane by the tap's filter
//! row. A tile is up to [`POSITIONS`] positions of one row (the interior ones, every tap inside
//! the row, unchecked), or one edge position with its padding taps skipped; per tap the filter
//! row is loaded once and each position's input block once.

use super::tile::{Lanes, Row, epilogue, interior};

/// Positions per interior tile.
const POSITIONS: usize = 4;

/// Output columns `ow0..ow1` of `row` (one channel block: `row.blocks` and `row.filters` 1).
///
/// # Safety
///
/// As [`super::tile::RowKernel`].
#[inline(always)]
pub(super) unsafe fn run_row<V: Lanes>(row: &Row<'_>, ow0: usize, ow1: usize) {
    let (lo, hi) = interior(row, ow0, ow1);
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
        let mut acc = [acc];
        if let Some(e) = row.epilogue {
            epilogue(e, &mut acc, row, ow, 0);
        }
        for (r, a) in acc[0].into_iter().enumerate() {
            a.store(row.y.add((ow + r) * b));
        }
    }
}
