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
    let mut out = dst;
    for j0 in (0..cols).step_by(nr) {
        let width = nr.min(cols - j0);
        for p in 0..depth {
            // SAFETY: `(p0 + p, c0 + j0)` is inside `b`.
            let src = unsafe { b.at(p0 + p, c0 + j0) };
            if b.cs == 1 {
                // SAFETY: the row's `width` elements are inside `b`; `out` has `nr` left in
                // this panel row.
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
            // SAFETY: the next panel row is inside `dst`.
            out = unsafe { out.add(nr) };
        }
    }
}
