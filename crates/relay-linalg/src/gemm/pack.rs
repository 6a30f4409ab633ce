//! Packing: a block of an operand copied into the panel layout the microkernels read, rows of
//! `a` in panels of `MR` (each column of a panel contiguous) and columns of `b` in panels of
//! `NR` (each row contiguous), the last panel padded with zeros; elements are converted to the
//! compute type on the way ([`Operand`]).

use super::{Element, Matrix, Operand};

/// Packs `rows × depth` of `a` starting at `(r0, p0)` into `MR`-row panels at `dst`:
/// element `(r0 + i, p0 + p)` goes to `dst[(i / MR)·MR·depth + p·MR + i % MR]`.
///
/// # Safety
///
/// The block lies inside `a`, and `dst` holds `ceil(rows / MR)·MR·depth` elements.
pub(crate) unsafe fn pack_a<T: Element, S: Operand<T>>(
    a: &Matrix<S>,
    r0: usize,
    rows: usize,
    p0: usize,
    depth: usize,
    mr: usize,
    dst: *mut T,
) {
    // SAFETY: forwarded: `a` transposed is the `b` operand of the transposed product.
    unsafe { pack_b(&a.transposed(), p0, depth, r0, rows, mr, dst) }
}

/// Packs `depth × cols` of `b` starting at `(p0, c0)` into `NR`-column panels at `dst`:
/// element `(p0 + p, c0 + j)` goes to `dst[(j / NR)·NR·depth + p·NR + j % NR]`.
///
/// # Safety
///
/// The block lies inside `b`, and `dst` holds `ceil(cols / NR)·NR·depth` elements.
pub(crate) unsafe fn pack_b<T: Element, S: Operand<T>>(
    b: &Matrix<S>,
    p0: usize,
    depth: usize,
    c0: usize,
    cols: usize,
    nr: usize,
    dst: *mut T,
) {
    if b.cs == 1 {
        // SAFETY: forwarded; `b`'s rows are contiguous.
        unsafe {
            match nr {
                32 => pack_row_major::<T, S, 32>(b, p0, depth, c0, cols, dst),
                16 => pack_row_major::<T, S, 16>(b, p0, depth, c0, cols, dst),
                8 => pack_row_major::<T, S, 8>(b, p0, depth, c0, cols, dst),
                _ => pack_panels(b, p0, depth, c0, cols, nr, dst),
            }
        }
        return;
    }
    // SAFETY: forwarded.
    unsafe { pack_panels(b, p0, depth, c0, cols, nr, dst) }
}

/// [`pack_b`] for a `b` whose rows are contiguous, row by row: each row of the block read in
/// order (one stream the hardware prefetches, one page at a time, however long the rows)
/// and cut into its panels, a whole panel row copied at constant length
/// ([`Operand::convert_row`]).
///
/// # Safety
///
/// As [`pack_b`], with `b.cs == 1`.
unsafe fn pack_row_major<T: Element, S: Operand<T>, const NR: usize>(
    b: &Matrix<S>,
    p0: usize,
    depth: usize,
    c0: usize,
    cols: usize,
    dst: *mut T,
) {
    let whole = cols / NR * NR;
    for p in 0..depth {
        // SAFETY: row `p0 + p` of the block is inside `b`, `(p, j)` of each panel inside
        // `dst` (panel `j / NR` at `j · depth`, its row `p` at `p · NR`).
        unsafe {
            let src = b.at(p0 + p, c0);
            for j in (0..whole).step_by(NR) {
                S::convert_row::<NR>(src.add(j), dst.add(j * depth + p * NR));
            }
            if whole < cols {
                let out = dst.add(whole * depth + p * NR);
                S::convert(src.add(whole), out, cols - whole);
                for j in cols - whole..NR {
                    *out.add(j) = T::ZERO;
                }
            }
        }
    }
}

/// [`pack_b`] panel by panel, for any strides.
///
/// # Safety
///
/// As [`pack_b`].
unsafe fn pack_panels<T: Element, S: Operand<T>>(
    b: &Matrix<S>,
    p0: usize,
    depth: usize,
    c0: usize,
    cols: usize,
    nr: usize,
    dst: *mut T,
) {
    for j0 in (0..cols).step_by(nr) {
        let width = nr.min(cols - j0);
        // SAFETY: panel `j0 / nr` of `dst`.
        let panel = unsafe { dst.add(j0 * depth) };
        // SAFETY: the panel's elements are inside `b` and `dst` (forwarded).
        unsafe {
            if b.cs != 1 && b.rs == 1 {
                pack_columns(b, p0, depth, c0 + j0, width, nr, panel);
            } else {
                pack_rows(b, p0, depth, c0 + j0, width, nr, panel);
            }
        }
    }
}

/// One panel, row by row: each row's `width` elements (contiguous when `b.cs == 1`), then
/// zeros up to `nr`.
///
/// # Safety
///
/// As [`pack_b`], for the panel at `out`.
unsafe fn pack_rows<T: Element, S: Operand<T>>(
    b: &Matrix<S>,
    p0: usize,
    depth: usize,
    c0: usize,
    width: usize,
    nr: usize,
    mut out: *mut T,
) {
    for p in 0..depth {
        // SAFETY: `(p0 + p, c0)` is inside `b`.
        let src = unsafe { b.at(p0 + p, c0) };
        if b.cs == 1 {
            // SAFETY: the row's `width` elements are inside `b`; `out` has `nr` left in this
            // panel row.
            unsafe { convert_row(src, out, width, nr) };
        } else {
            for j in 0..width {
                // SAFETY: as above, element by element.
                unsafe { *out.add(j) = (*src.offset(j as isize * b.cs)).widen() };
            }
        }
        for j in width..nr {
            // SAFETY: padding inside the panel row.
            unsafe { *out.add(j) = T::ZERO };
        }
        // SAFETY: the next panel row is inside the panel.
        out = unsafe { out.add(nr) };
    }
}

/// `width` contiguous elements at `src` converted into `out`: a whole panel row of a
/// microkernel's width (32, 16, 12 or 8) as a conversion of constant length
/// ([`Operand::convert_row`]).
///
/// # Safety
///
/// As [`Operand::convert`] for `width` elements.
#[inline(always)]
unsafe fn convert_row<T: Element, S: Operand<T>>(
    src: *const S,
    out: *mut T,
    width: usize,
    nr: usize,
) {
    // SAFETY: forwarded; each constant length equals `width`.
    unsafe {
        match (width == nr, nr) {
            (true, 32) => S::convert_row::<32>(src, out),
            (true, 16) => S::convert_row::<16>(src, out),
            (true, 12) => S::convert_row::<12>(src, out),
            (true, 8) => S::convert_row::<8>(src, out),
            _ => S::convert(src, out, width),
        }
    }
}

/// One panel of a matrix whose columns are contiguous (`b.rs == 1`, a transposed operand):
/// its columns transposed into the panel's rows ([`Operand::transpose_into`]), then the
/// padding lanes of each row.
///
/// # Safety
///
/// As [`pack_b`], for the panel at `out`.
unsafe fn pack_columns<T: Element, S: Operand<T>>(
    b: &Matrix<S>,
    p0: usize,
    depth: usize,
    c0: usize,
    width: usize,
    nr: usize,
    out: *mut T,
) {
    // SAFETY: `(p0, c0)` is inside `b`; its `width` columns' `depth` elements are inside it
    // and contiguous; the panel holds `depth` rows of `nr`.
    unsafe { S::transpose_into(b.at(p0, c0), b.cs, depth, width, nr, out) };
    for p in 0..depth {
        for j in width..nr {
            // SAFETY: padding inside the panel.
            unsafe { *out.add(p * nr + j) = T::ZERO };
        }
    }
}
