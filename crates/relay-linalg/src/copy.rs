//! Strided copies (ONNX Runtime's `Transpose`, `Slice` and `Concat` kernels, numpy's
//! `copyto`): the elements of one strided view of a buffer, in row-major order, written to
//! another view of the same shape — a transpose, a slice, a selected index or one input of a
//! concatenation, at shapes known only at run time.
//!
//! Both views are checked to stay inside their buffers before anything is copied. Dimensions
//! of one element are dropped and adjacent dimensions that both views step through as one are
//! merged, so a copy between compact views is one `memcpy` and a slice of rows a few; an inner
//! dimension contiguous on both sides is copied a row at a time; of 4-byte elements, an inner
//! dimension contiguous in the destination whose neighbour is contiguous in the source (a
//! transpose of the last two) is copied a tile of eight by eight at a time; any other element
//! by element.

/// The elements a copy moves: plain integers of 1, 2, 4 or 8 bytes, which any bytes are a
/// valid value of (a tensor's elements of that width, whatever its dtype).
pub trait Bits: Copy + 'static {}
impl Bits for u8 {}
impl Bits for u16 {}
impl Bits for u32 {}
impl Bits for u64 {}

/// A strided view of a buffer, in elements: element `(i0, i1, ...)` is at
/// `offset + i0 * strides[0] + i1 * strides[1] + ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Strided {
    /// The extents.
    pub shape: Vec<usize>,
    /// The step of each dimension (negative for a reversed one).
    pub strides: Vec<isize>,
    /// The first element.
    pub offset: usize,
}

/// Why a copy was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CopyError {
    /// The two views do not have one shape.
    #[error("a copy from a view of shape {from:?} into one of shape {into:?}")]
    Shapes {
        /// The source's shape.
        from: Vec<usize>,
        /// The destination's.
        into: Vec<usize>,
    },
    /// A view reaches outside its buffer.
    #[error(
        "a view of shape {shape:?}, strides {strides:?} and offset {offset} outside a buffer of {len} elements"
    )]
    OutOfBounds {
        /// The view's shape.
        shape: Vec<usize>,
        /// Its strides.
        strides: Vec<isize>,
        /// Its offset.
        offset: usize,
        /// The buffer's length.
        len: usize,
    },
}

impl Strided {
    /// The compact row-major view of `shape` from `offset`.
    pub fn compact(shape: &[usize], offset: usize) -> Strided {
        let mut strides = vec![0isize; shape.len()];
        let mut step = 1isize;
        for (s, &d) in strides.iter_mut().zip(shape).rev() {
            *s = step;
            step = step.saturating_mul(isize::try_from(d).unwrap_or(isize::MAX));
        }
        Strided {
            shape: shape.to_vec(),
            strides,
            offset,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the view has no element.
    pub fn is_empty(&self) -> bool {
        self.shape.contains(&0)
    }

    /// Checks that every element is inside a buffer of `len` elements.
    fn check(&self, len: usize) -> Result<(), CopyError> {
        let outside = || CopyError::OutOfBounds {
            shape: self.shape.clone(),
            strides: self.strides.clone(),
            offset: self.offset,
            len,
        };
        if self.shape.len() != self.strides.len() {
            return Err(outside());
        }
        if self.is_empty() {
            return Ok(());
        }
        let (mut lo, mut hi) = (self.offset as i128, self.offset as i128);
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            let reach = (d as i128 - 1) * s as i128;
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        if lo < 0 || hi >= len as i128 {
            return Err(outside());
        }
        Ok(())
    }
}

/// Copies the elements of `src`'s view `from` into `dst`'s view `into`, in row-major order.
pub fn strided_copy<T: Bits>(
    src: &[T],
    from: &Strided,
    dst: &mut [T],
    into: &Strided,
) -> Result<(), CopyError> {
    if from.shape != into.shape {
        return Err(CopyError::Shapes {
            from: from.shape.clone(),
            into: into.shape.clone(),
        });
    }
    from.check(src.len())?;
    into.check(dst.len())?;
    if from.is_empty() {
        return Ok(());
    }
    let dims = merged(from, into);
    let Some((&(n, s_in, d_in), outer)) = dims.split_last() else {
        dst[into.offset] = src[from.offset];
        return Ok(());
    };
    if let Some((&(m, 1, d_out), outer)) = outer.split_last()
        && d_in == 1
        && size_of::<T>() == 4
    {
        let (s, d) = (src.as_ptr().cast::<u32>(), dst.as_mut_ptr().cast::<u32>());
        let tile = |s_at: isize, d_at: isize| {
            // SAFETY: `T` is `u32` (a 4-byte `Bits`); the views were checked to be inside
            // their buffers, and the block at each position is part of them: its `n` rows of
            // `m` contiguous source elements and `m` rows of `n` contiguous destination ones.
            unsafe {
                crate::transpose::transpose_u32(s.offset(s_at), s_in, d.offset(d_at), d_out, n, m)
            }
        };
        odometer(outer, from.offset as isize, into.offset as isize, tile);
        return Ok(());
    }
    odometer(
        outer,
        from.offset as isize,
        into.offset as isize,
        |s_at, d_at| copy_row(src, s_at, s_in, dst, d_at, d_in, n),
    );
    Ok(())
}

/// Calls `f` with the source and destination positions of every index of the `outer`
/// dimensions (`(extent, source step, destination step)`), from `(s_at, d_at)`, the last
/// dimension fastest.
fn odometer(
    outer: &[(usize, isize, isize)],
    mut s_at: isize,
    mut d_at: isize,
    mut f: impl FnMut(isize, isize),
) {
    let mut index = vec![0usize; outer.len()];
    loop {
        f(s_at, d_at);
        // The next outer index (an odometer), moving both positions with it.
        let mut k = outer.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            let (extent, s_step, d_step) = outer[k];
            index[k] += 1;
            s_at += s_step;
            d_at += d_step;
            if index[k] < extent {
                break;
            }
            index[k] = 0;
            s_at -= s_step * extent as isize;
            d_at -= d_step * extent as isize;
        }
    }
}

/// One row of `n` elements from `src[s_at + i * s_step]` to `dst[d_at + i * d_step]`; the
/// positions were checked to be in bounds (so indexing cannot fail).
fn copy_row<T: Copy>(
    src: &[T],
    s_at: isize,
    s_step: isize,
    dst: &mut [T],
    d_at: isize,
    d_step: isize,
    n: usize,
) {
    let (s, d) = (s_at as usize, d_at as usize);
    if s_step == 1 && d_step == 1 {
        dst[d..d + n].copy_from_slice(&src[s..s + n]);
    } else if d_step == 1 {
        for (i, out) in dst[d..d + n].iter_mut().enumerate() {
            *out = src[(s_at + i as isize * s_step) as usize];
        }
    } else {
        for i in 0..n as isize {
            dst[(d_at + i * d_step) as usize] = src[(s_at + i * s_step) as usize];
        }
    }
}

/// The dimensions of a copy as `(extent, source step, destination step)`, outermost first:
/// one-element dimensions dropped, and a dimension merged into the one inside it when both
/// views step over the inner one exactly once per step of the outer one.
fn merged(from: &Strided, into: &Strided) -> Vec<(usize, isize, isize)> {
    let mut dims: Vec<(usize, isize, isize)> = Vec::with_capacity(from.shape.len());
    for ((&n, &s), &d) in from.shape.iter().zip(&from.strides).zip(&into.strides) {
        if n == 1 {
            continue;
        }
        if let Some(last) = dims.last_mut() {
            let (m, ls, ld) = *last;
            if ls == s * n as isize && ld == d * n as isize {
                *last = (m * n, s, d);
                continue;
            }
        }
        dims.push((n, s, d));
    }
    dims
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference: every element by its multi-index.
    fn naive(src: &[u32], from: &Strided, dst: &mut [u32], into: &Strided) {
        let n = from.len();
        for flat in 0..n {
            let (mut rest, mut s, mut d) = (flat, from.offset as isize, into.offset as isize);
            for k in (0..from.shape.len()).rev() {
                let i = (rest % from.shape[k]) as isize;
                rest /= from.shape[k];
                s += i * from.strides[k];
                d += i * into.strides[k];
            }
            dst[d as usize] = src[s as usize];
        }
    }

    fn transposed(shape: &[usize], perm: &[usize]) -> Strided {
        let c = Strided::compact(shape, 0);
        Strided {
            shape: perm.iter().map(|&p| shape[p]).collect(),
            strides: perm.iter().map(|&p| c.strides[p]).collect(),
            offset: 0,
        }
    }

    #[test]
    fn transposes_match_the_reference_at_every_permutation() {
        let shapes: &[&[usize]] = &[&[3, 5, 7], &[1, 4, 1], &[2, 0, 3], &[6, 1, 9], &[4, 4, 4]];
        let perms: &[&[usize]] = &[
            &[0, 1, 2],
            &[0, 2, 1],
            &[1, 0, 2],
            &[1, 2, 0],
            &[2, 0, 1],
            &[2, 1, 0],
        ];
        for shape in shapes {
            let n: usize = shape.iter().product();
            let src: Vec<u32> = (0..n as u32).collect();
            for perm in perms {
                let from = transposed(shape, perm);
                let into = Strided::compact(&from.shape, 0);
                let (mut got, mut want) = (vec![0; n], vec![0; n]);
                strided_copy(&src, &from, &mut got, &into).unwrap();
                naive(&src, &from, &mut want, &into);
                assert_eq!(got, want, "{shape:?} {perm:?}");
            }
        }
    }

    #[test]
    fn reversed_and_offset_views_copy_into_a_slice_of_the_destination() {
        // Rows 1.. of a [4, 6] source, every second column from the last, into columns
        // 2..5 of a [3, 8] destination.
        let src: Vec<u32> = (0..24).collect();
        let from = Strided {
            shape: vec![3, 3],
            strides: vec![6, -2],
            offset: 6 + 5,
        };
        let into = Strided {
            shape: vec![3, 3],
            strides: vec![8, 1],
            offset: 2,
        };
        let (mut got, mut want) = (vec![0; 24], vec![0; 24]);
        strided_copy(&src, &from, &mut got, &into).unwrap();
        naive(&src, &from, &mut want, &into);
        assert_eq!(got, want);
        assert_eq!(&got[2..5], &[11, 9, 7]);
    }

    #[test]
    fn views_outside_their_buffers_and_mismatched_shapes_are_errors() {
        let src = vec![0u32; 10];
        let mut dst = vec![0u32; 10];
        let inside = Strided::compact(&[2, 5], 0);
        let past_end = Strided::compact(&[2, 5], 1);
        let before_start = Strided {
            shape: vec![2, 5],
            strides: vec![5, -1],
            offset: 3,
        };
        assert!(matches!(
            strided_copy(&src, &past_end, &mut dst, &inside),
            Err(CopyError::OutOfBounds { .. })
        ));
        assert!(matches!(
            strided_copy(&src, &inside, &mut dst, &before_start),
            Err(CopyError::OutOfBounds { .. })
        ));
        let other = Strided::compact(&[5, 2], 0);
        assert!(matches!(
            strided_copy(&src, &inside, &mut dst, &other),
            Err(CopyError::Shapes { .. })
        ));
        let scalar = Strided::compact(&[], 7);
        strided_copy(&src, &scalar, &mut dst, &Strided::compact(&[], 9)).unwrap();
        let empty = Strided::compact(&[3, 0], 100);
        strided_copy(&src, &empty, &mut dst, &Strided::compact(&[3, 0], 100)).unwrap();
    }
}
