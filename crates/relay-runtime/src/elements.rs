//! Typed element access for `NDArray`s: every dtype read as `f64` or `i128` and written back,
//! with numpy's conversion rules. Reference evaluation and input handling use these, so each
//! operator is written once over two number types instead of once per dtype.

use crate::half::{f16_bits_to_f32, f64_to_f16_bits};
use crate::{DType, DTypeCode, NDArray, NDArrayError};

impl NDArray {
    /// This array as one of `bfloat16` or an 8-bit float type `d`, for inputs that numpy cannot
    /// type: unsigned integers of `d`'s width are its bits, float values are rounded to it.
    /// `None` for other arrays and types.
    pub fn to_minifloat(&self, d: DType) -> Option<NDArray> {
        d.minifloat()?;
        let from = self.dtype();
        if from.code == DTypeCode::UInt && from.bits == d.bits && from.lanes == 1 {
            return NDArray::from_bytes(d, self.shape(), self.as_bytes()).ok();
        }
        if from.code != DTypeCode::Float || from.lanes != 1 {
            return None;
        }
        NDArray::from_f64_slice(d, self.shape(), &self.to_f64_vec()).ok()
    }

    /// Every element as `f64` (booleans as 0 and 1; integers converted, exactly up to 2^53).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        let d = self.dtype();
        let b = self.as_bytes();
        let n = self.num_elements();
        let size = d.size_bytes();
        (0..n)
            .map(|i| read_f64(d, &b[i * size..(i + 1) * size]))
            .collect()
    }

    /// Every element as `i128` (floats truncated toward zero, NaN as 0; booleans as 0 and 1).
    /// `i128` holds every `int64` and `uint64` value exactly.
    pub fn to_i128_vec(&self) -> Vec<i128> {
        let d = self.dtype();
        let b = self.as_bytes();
        let n = self.num_elements();
        let size = d.size_bytes();
        (0..n)
            .map(|i| read_i128(d, &b[i * size..(i + 1) * size]))
            .collect()
    }

    /// Every element as a boolean (non-zero is true).
    pub fn to_bool_vec(&self) -> Vec<bool> {
        if self.dtype().is_float() {
            self.to_f64_vec().into_iter().map(|v| v != 0.0).collect()
        } else {
            self.to_i128_vec().into_iter().map(|v| v != 0).collect()
        }
    }

    /// A tensor of `dtype` from `f64` values, converted as numpy's `astype` does: floats round
    /// to nearest, integers truncate toward zero (saturating; NaN becomes 0), booleans are
    /// `value != 0`.
    pub fn from_f64_slice(
        dtype: DType,
        shape: &[i64],
        values: &[f64],
    ) -> Result<NDArray, NDArrayError> {
        let mut out = NDArray::zeros(dtype, shape)?;
        check_len(&out, values.len())?;
        let size = dtype.size_bytes();
        let bytes = out.as_bytes_mut();
        for (i, &v) in values.iter().enumerate() {
            write_f64(dtype, &mut bytes[i * size..(i + 1) * size], v);
        }
        Ok(out)
    }

    /// A tensor of `dtype` from integer values: integer dtypes wrap to their width (numpy's
    /// overflow behaviour), floats convert, booleans are `value != 0`.
    pub fn from_i128_slice(
        dtype: DType,
        shape: &[i64],
        values: &[i128],
    ) -> Result<NDArray, NDArrayError> {
        let mut out = NDArray::zeros(dtype, shape)?;
        check_len(&out, values.len())?;
        let size = dtype.size_bytes();
        let bytes = out.as_bytes_mut();
        for (i, &v) in values.iter().enumerate() {
            write_i128(dtype, &mut bytes[i * size..(i + 1) * size], v);
        }
        Ok(out)
    }

    /// A boolean tensor.
    pub fn from_bool_slice(shape: &[i64], values: &[bool]) -> Result<NDArray, NDArrayError> {
        let bytes: Vec<u8> = values.iter().map(|&b| u8::from(b)).collect();
        NDArray::from_bytes(DType::BOOL, shape, &bytes)
    }

    /// A rank-0 tensor of `dtype` holding `value` (converted as [`NDArray::from_f64_slice`]).
    pub fn scalar_f64(dtype: DType, value: f64) -> Result<NDArray, NDArrayError> {
        NDArray::from_f64_slice(dtype, &[], &[value])
    }

    /// A rank-0 tensor of `dtype` holding `value` (converted as [`NDArray::from_i128_slice`]).
    pub fn scalar_i128(dtype: DType, value: i128) -> Result<NDArray, NDArrayError> {
        NDArray::from_i128_slice(dtype, &[], &[value])
    }
}

fn check_len(out: &NDArray, given: usize) -> Result<(), NDArrayError> {
    if out.num_elements() != given {
        return Err(NDArrayError::SizeMismatch {
            dtype: out.dtype(),
            shape: out.shape().to_vec(),
            expected: out.num_elements() * out.dtype().size_bytes(),
            actual: given * out.dtype().size_bytes(),
        });
    }
    Ok(())
}

fn le<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

/// Reads one element (native byte order) as `f64`.
pub fn read_f64(d: DType, b: &[u8]) -> f64 {
    match (d.code, d.bits) {
        (DTypeCode::Float, 16) => f16_bits_to_f32(u16::from_ne_bytes(le(b))) as f64,
        (DTypeCode::Float, 32) => f32::from_ne_bytes(le(b)) as f64,
        (DTypeCode::Float, 64) => f64::from_ne_bytes(le(b)),
        _ => match d.minifloat() {
            Some(f) if d.bits == 16 => f.to_f64(u16::from_ne_bytes(le(b))),
            Some(f) => f.to_f64(u16::from(b[0])),
            None => read_i128(d, b) as f64,
        },
    }
}

/// Reads one element (native byte order) as `i128`.
pub fn read_i128(d: DType, b: &[u8]) -> i128 {
    match (d.code, d.bits) {
        (DTypeCode::Int, 8) => i8::from_ne_bytes(le(b)) as i128,
        (DTypeCode::Int, 16) => i16::from_ne_bytes(le(b)) as i128,
        (DTypeCode::Int, 32) => i32::from_ne_bytes(le(b)) as i128,
        (DTypeCode::Int, 64) => i64::from_ne_bytes(le(b)) as i128,
        (DTypeCode::UInt, 8) | (DTypeCode::Bool, _) => b[0] as i128,
        (DTypeCode::UInt, 16) => u16::from_ne_bytes(le(b)) as i128,
        (DTypeCode::UInt, 32) => u32::from_ne_bytes(le(b)) as i128,
        (DTypeCode::UInt, 64) => u64::from_ne_bytes(le(b)) as i128,
        _ if d.is_float() => {
            let v = read_f64(d, b);
            if v.is_nan() { 0 } else { v as i128 }
        }
        _ => 0,
    }
}

/// Writes one element (native byte order) from an `f64`, converting as numpy's `astype`.
pub fn write_f64(d: DType, b: &mut [u8], v: f64) {
    match (d.code, d.bits) {
        (DTypeCode::Float, 16) => b[..2].copy_from_slice(&f64_to_f16_bits(v).to_ne_bytes()),
        (DTypeCode::Float, 32) => b[..4].copy_from_slice(&(v as f32).to_ne_bytes()),
        (DTypeCode::Float, 64) => b[..8].copy_from_slice(&v.to_ne_bytes()),
        _ if let Some(f) = d.minifloat() => {
            let bits = f.from_f64(v);
            if d.bits == 16 {
                b[..2].copy_from_slice(&bits.to_ne_bytes())
            } else {
                b[0] = bits as u8
            }
        }
        (DTypeCode::Bool, _) => b[0] = u8::from(v != 0.0),
        (DTypeCode::Int, bits) => {
            let (lo, hi) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
            write_i128(
                d,
                b,
                if v.is_nan() {
                    0
                } else {
                    (v as i128).clamp(lo, hi)
                },
            )
        }
        (DTypeCode::UInt, bits) => {
            let hi = (1i128 << bits) - 1;
            write_i128(
                d,
                b,
                if v.is_nan() {
                    0
                } else {
                    (v as i128).clamp(0, hi)
                },
            )
        }
        _ => {}
    }
}

/// Writes one element (native byte order) from an `i128`: integers wrap to their width.
pub fn write_i128(d: DType, b: &mut [u8], v: i128) {
    match (d.code, d.bits) {
        (DTypeCode::Int | DTypeCode::UInt, 8) => b[0] = v as u8,
        (DTypeCode::Int | DTypeCode::UInt, 16) => b[..2].copy_from_slice(&(v as u16).to_ne_bytes()),
        (DTypeCode::Int | DTypeCode::UInt, 32) => b[..4].copy_from_slice(&(v as u32).to_ne_bytes()),
        (DTypeCode::Int | DTypeCode::UInt, 64) => b[..8].copy_from_slice(&(v as u64).to_ne_bytes()),
        (DTypeCode::Bool, _) => b[0] = u8::from(v != 0),
        _ if d.is_float() => write_f64(d, b, v as f64),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_follow_numpy() {
        let a = NDArray::from_f64_slice(DType::I32, &[4], &[1.7, -1.7, f64::NAN, 3e10]).unwrap();
        assert_eq!(a.to_i128_vec(), vec![1, -1, 0, i32::MAX as i128]);
        let w = NDArray::from_i128_slice(DType::I8, &[2], &[200, -129]).unwrap();
        assert_eq!(w.to_i128_vec(), vec![-56, 127]);
        let u = NDArray::from_i128_slice(DType::U64, &[1], &[u64::MAX as i128]).unwrap();
        assert_eq!(u.to_i128_vec(), vec![u64::MAX as i128]);
        let h = NDArray::from_f64_slice(DType::F16, &[2], &[0.1, 65504.0]).unwrap();
        assert_eq!(h.to_f64_vec(), vec![0.0999755859375, 65504.0]);
        let b = NDArray::from_f64_slice(DType::BOOL, &[3], &[0.0, 2.0, -0.5]).unwrap();
        assert_eq!(b.to_bool_vec(), vec![false, true, true]);
        assert!(NDArray::from_f64_slice(DType::F32, &[2], &[1.0]).is_err());
    }
}
