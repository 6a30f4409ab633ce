//! [`NDArray::transposed_2d`]: a matrix transposed in cache-sized blocks, for the weights that
//! compilers transpose once (an ONNX `MatMul` weight made `nn.dense`'s, a `Transpose` of a
//! constant folded, the recurrent weights of a fused LSTM) — hundreds of megabytes in a
//! transformer, where an element-at-a-time gather is most of the import.

use crate::ndarray::{NDArray, NDArrayError};

/// The side of the square blocks copied at a time (32×32 elements stay in L1 for every width).
const BLOCK: usize = 32;

impl NDArray {
    /// The transpose of a matrix: shape `[cols, rows]` for `[rows, cols]`, any dtype.
    pub fn transposed_2d(&self) -> Result<NDArray, NDArrayError> {
        let &[rows, cols] = self.shape() else {
            return Err(NDArrayError::NotAMatrix {
                shape: self.shape().to_vec(),
            });
        };
        let mut out = NDArray::zeros(self.dtype(), &[cols, rows])?;
        let (rows, cols) = (rows as usize, cols as usize);
        let (src, dst) = (self.as_bytes(), out.as_bytes_mut());
        match self.dtype().size_bytes() {
            1 => blocked::<1>(src, dst, rows, cols),
            2 => blocked::<2>(src, dst, rows, cols),
            4 => blocked::<4>(src, dst, rows, cols),
            8 => blocked::<8>(src, dst, rows, cols),
            16 => blocked::<16>(src, dst, rows, cols),
            w => by_slices(src, dst, rows, cols, w),
        }
        Ok(out)
    }
}

/// [`blocked`] for elements of any width `w` (vector dtypes), an element slice at a time.
fn by_slices(src: &[u8], dst: &mut [u8], rows: usize, cols: usize, w: usize) {
    for r in 0..rows {
        for c in 0..cols {
            let (from, to) = ((r * cols + c) * w, (c * rows + r) * w);
            dst[to..to + w].copy_from_slice(&src[from..from + w]);
        }
    }
}

/// `dst[c, r] = src[r, c]` for `W`-byte elements, block by block.
fn blocked<const W: usize>(src: &[u8], dst: &mut [u8], rows: usize, cols: usize) {
    let (src, _) = src.as_chunks::<W>();
    let (dst, _) = dst.as_chunks_mut::<W>();
    for r0 in (0..rows).step_by(BLOCK) {
        let r1 = (r0 + BLOCK).min(rows);
        for c0 in (0..cols).step_by(BLOCK) {
            let c1 = (c0 + BLOCK).min(cols);
            for r in r0..r1 {
                let row = &src[r * cols + c0..r * cols + c1];
                for (c, &v) in (c0..c1).zip(row) {
                    dst[c * rows + r] = v;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{DType, NDArray};

    #[test]
    fn matrices_of_every_width_and_odd_shape_transpose() {
        for dtype in [DType::BOOL, DType::I8, DType::F16, DType::F32, DType::I64] {
            for (rows, cols) in [(0, 3), (1, 1), (3, 5), (33, 65), (70, 31)] {
                let n = rows * cols;
                let values: Vec<i128> = (0..n)
                    .map(|i| (i % 2) as i128 + (i % 7) as i128 * i128::from(dtype != DType::BOOL))
                    .collect();
                let a =
                    NDArray::from_i128_slice(dtype, &[rows as i64, cols as i64], &values).unwrap();
                let t = a.transposed_2d().unwrap();
                assert_eq!(t.shape(), [cols as i64, rows as i64]);
                let (got, want) = (t.to_i128_vec(), a.to_i128_vec());
                for r in 0..rows {
                    for c in 0..cols {
                        assert_eq!(
                            got[c * rows + r],
                            want[r * cols + c],
                            "{dtype} {rows}x{cols}"
                        );
                    }
                }
            }
        }
        assert!(
            NDArray::zeros(DType::F32, &[2, 2, 2])
                .unwrap()
                .transposed_2d()
                .is_err()
        );
    }
}
