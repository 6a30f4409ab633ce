//! `NDArray`: an immutable-by-convention, 64-byte aligned, compact row-major tensor buffer with
//! a DLPack-compatible description (dtype, shape, CPU device).

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::fmt;
use std::ptr::NonNull;

use crate::DType;

/// Alignment of every tensor buffer, in bytes (TVM's `kAllocAlignment`).
pub const ALIGNMENT: usize = 64;

/// Errors building an `NDArray`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NDArrayError {
    /// A dimension was negative.
    #[error("negative dimension {dim} in shape {shape:?}")]
    NegativeDim {
        /// The offending dimension.
        dim: i64,
        /// The whole shape.
        shape: Vec<i64>,
    },
    /// The element count or byte size does not fit in memory.
    #[error("shape {shape:?} of {dtype} is too large")]
    TooLarge {
        /// The shape.
        shape: Vec<i64>,
        /// The element type.
        dtype: DType,
    },
    /// The data does not have the size the shape and dtype require.
    #[error("{dtype} tensor of shape {shape:?} needs {expected} bytes, got {actual}")]
    SizeMismatch {
        /// The element type.
        dtype: DType,
        /// The shape.
        shape: Vec<i64>,
        /// Required byte count.
        expected: usize,
        /// Supplied byte count.
        actual: usize,
    },
}

/// A 64-byte aligned heap buffer.
struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: `AlignedBuf` uniquely owns its allocation, like `Box<[u8]>`.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    fn zeroed(len: usize) -> AlignedBuf {
        if len == 0 {
            // A dangling pointer aligned to 64 bytes; never dereferenced for a zero length.
            let ptr = NonNull::new(ALIGNMENT as *mut u8).expect("ALIGNMENT is non-zero");
            return AlignedBuf { ptr, len };
        }
        let layout = Layout::from_size_align(len, ALIGNMENT).expect("checked by NDArray::new");
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, len }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialized (zeroed or written) bytes, or `len == 0`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` guarantees unique access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len != 0 {
            let layout = Layout::from_size_align(self.len, ALIGNMENT).expect("valid at allocation");
            // SAFETY: allocated in `zeroed` with this exact layout.
            unsafe { dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

/// DLPack's `DLDevice`: where a tensor's memory lives. relayc runs on the CPU only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Device {
    /// DLPack's `DLDeviceType` (1 is `kDLCPU`).
    pub device_type: i32,
    /// The device's ordinal.
    pub device_id: i32,
}

impl Device {
    /// The host CPU (`kDLCPU`, device 0).
    pub const CPU: Device = Device {
        device_type: 1,
        device_id: 0,
    };
}

/// A dense tensor on the CPU: dtype, shape and 64-byte aligned, compact row-major storage.
pub struct NDArray {
    dtype: DType,
    shape: Vec<i64>,
    data: AlignedBuf,
}

impl NDArray {
    /// A zero-filled tensor.
    pub fn zeros(dtype: DType, shape: &[i64]) -> Result<NDArray, NDArrayError> {
        let len = Self::byte_len(dtype, shape)?;
        Ok(NDArray {
            dtype,
            shape: shape.to_vec(),
            data: AlignedBuf::zeroed(len),
        })
    }

    /// A tensor holding a copy of `bytes` (native-endian element data in row-major order).
    pub fn from_bytes(dtype: DType, shape: &[i64], bytes: &[u8]) -> Result<NDArray, NDArrayError> {
        let mut array = NDArray::zeros(dtype, shape)?;
        if bytes.len() != array.data.len {
            return Err(NDArrayError::SizeMismatch {
                dtype,
                shape: shape.to_vec(),
                expected: array.data.len,
                actual: bytes.len(),
            });
        }
        array.data.as_mut_slice().copy_from_slice(bytes);
        Ok(array)
    }

    /// The byte size of a compact tensor of this dtype and shape, checked for overflow.
    pub fn byte_len(dtype: DType, shape: &[i64]) -> Result<usize, NDArrayError> {
        let mut elems: usize = 1;
        for &d in shape {
            let d = usize::try_from(d).map_err(|_| NDArrayError::NegativeDim {
                dim: d,
                shape: shape.to_vec(),
            })?;
            elems = elems.checked_mul(d).ok_or_else(|| NDArrayError::TooLarge {
                shape: shape.to_vec(),
                dtype,
            })?;
        }
        let bytes = elems
            .checked_mul(dtype.size_bytes())
            .filter(|&b| b <= isize::MAX as usize - ALIGNMENT)
            .ok_or_else(|| NDArrayError::TooLarge {
                shape: shape.to_vec(),
                dtype,
            })?;
        Ok(bytes)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Where the data lives: always the CPU.
    pub fn device(&self) -> Device {
        Device::CPU
    }

    /// The shape (empty for a scalar).
    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    /// The rank.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements (1 for a scalar).
    pub fn num_elements(&self) -> usize {
        self.shape.iter().map(|&d| d as usize).product()
    }

    /// Row-major strides in elements, as DLPack describes them.
    pub fn strides(&self) -> Vec<i64> {
        let mut strides = vec![1i64; self.shape.len()];
        for i in (0..self.shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * self.shape[i + 1];
        }
        strides
    }

    /// The raw element bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.data.as_slice()
    }

    /// The raw element bytes, mutably.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.data.as_mut_slice()
    }

    /// Whether this is a rank-0 tensor.
    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }
}

impl Clone for NDArray {
    fn clone(&self) -> NDArray {
        NDArray::from_bytes(self.dtype, &self.shape, self.as_bytes()).expect("same shape and size")
    }
}

impl PartialEq for NDArray {
    /// Bitwise equality of dtype, shape and data (so NaNs with equal bits are equal).
    fn eq(&self, other: &NDArray) -> bool {
        self.dtype == other.dtype
            && self.shape == other.shape
            && self.as_bytes() == other.as_bytes()
    }
}

impl Eq for NDArray {}

impl fmt::Debug for NDArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "NDArray({}, {:?}, {} bytes)",
            self.dtype, self.shape, self.data.len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_sized() {
        let a = NDArray::zeros(DType::F32, &[3, 5]).unwrap();
        assert_eq!(a.as_bytes().len(), 60);
        assert_eq!(a.as_bytes().as_ptr() as usize % ALIGNMENT, 0);
        assert_eq!(a.strides(), vec![5, 1]);
        let s = NDArray::zeros(DType::I64, &[]).unwrap();
        assert_eq!(s.num_elements(), 1);
        assert_eq!(s.as_bytes().len(), 8);
        let e = NDArray::zeros(DType::F32, &[0, 4]).unwrap();
        assert_eq!(e.as_bytes().len(), 0);
    }

    #[test]
    fn rejects_bad_shapes() {
        assert!(matches!(
            NDArray::zeros(DType::F32, &[-1]),
            Err(NDArrayError::NegativeDim { .. })
        ));
        assert!(matches!(
            NDArray::zeros(DType::F32, &[i64::MAX, i64::MAX]),
            Err(NDArrayError::TooLarge { .. })
        ));
        assert!(NDArray::from_bytes(DType::F32, &[2], &[0; 4]).is_err());
    }
}
