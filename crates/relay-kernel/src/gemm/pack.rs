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
            unsafe { S::convert(src, out, width) };
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

/// One panel of a matrix whose columns are contiguous (`b.rs == 1`, a transposed operand):
/// column by column, each read in order, then the padding columns.
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
    for j in 0..nr {
        if j >= width {
            for p in 0..depth {
                // SAFETY: padding inside the panel.
                unsafe { *out.add(p * nr + j) = T::ZERO };
            }
            continue;
        }
        // SAFETY: `(p0, c0 + j)` is inside `b`; its column's `depth` elements are contiguous.
        let src = unsafe { b.at(p0, c0 + j) };
        for p in 0..depth {
            // SAFETY: as above; `(p, j)` is inside the panel.
            unsafe { *out.add(p * nr + j) = (*src.add(p)).widen() };
        }
    }
}
