//! `NDArray`: an immutable-by-convention, compact row-major tensor with a DLPack-compatible
//! description (dtype, shape, CPU device). Its bytes are either its own 64-byte aligned buffer
//! or a view into a shared [`Storage`] at a byte offset (what `memory.alloc_tensor` makes).

use std::alloc::{Layout, alloc, alloc_zeroed, dealloc};
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::{DType, Storage};

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
    /// A matrix operation on an array of another rank.
    #[error("expected a matrix, got shape {shape:?}")]
    NotAMatrix {
        /// The array's shape.
        shape: Vec<i64>,
    },
    /// A storage alignment that is not a power of two.
    #[error("storage alignment {alignment} is not a power of two")]
    BadAlignment {
        /// The alignment asked for.
        alignment: usize,
    },
    /// Foreign data ([`NDArray::from_foreign`]) that is not [`ALIGNMENT`]-byte aligned.
    #[error("data at {address:#x} is not {ALIGNMENT}-byte aligned")]
    Unaligned {
        /// The data's address.
        address: usize,
    },
    /// A storage too large to allocate.
    #[error("storage of {size} bytes aligned to {alignment} is too large")]
    StorageTooLarge {
        /// The size asked for.
        size: usize,
        /// The alignment asked for.
        alignment: usize,
    },
    /// The system could not provide the memory.
    #[error("out of memory allocating a storage of {size} bytes")]
    OutOfMemory {
        /// The size asked for.
        size: usize,
    },
    /// A view that does not fit in its storage.
    #[error("a view of {len} bytes at offset {offset} does not fit in a storage of {size} bytes")]
    OutOfBounds {
        /// The view's byte offset.
        offset: usize,
        /// The view's byte size.
        len: usize,
        /// The storage's byte size.
        size: usize,
    },
    /// A view whose offset is not a multiple of its element alignment.
    #[error("offset {offset} of a {dtype} view is not a multiple of {align} bytes")]
    Misaligned {
        /// The view's byte offset.
        offset: usize,
        /// The element type.
        dtype: DType,
        /// The alignment its elements need.
        align: usize,
    },
    /// A write through a shared reference to a tensor that is not a view.
    #[error("only a view into a storage can be written through a shared reference")]
    NotAView,
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
    /// `len` bytes aligned to [`ALIGNMENT`], zero-filled when `zero` (else uninitialized, for
    /// the caller to write before anything reads them).
    fn allocate(len: usize, zero: bool) -> Result<AlignedBuf, NDArrayError> {
        if len == 0 {
            // A dangling pointer aligned to 64 bytes; never dereferenced for a zero length.
            let ptr = NonNull::new(ALIGNMENT as *mut u8).expect("ALIGNMENT is non-zero");
            return Ok(AlignedBuf { ptr, len });
        }
        let layout = crate::storage::Storage::layout(len, ALIGNMENT)?;
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe {
            match zero {
                true => alloc_zeroed(layout),
                false => alloc(layout),
            }
        };
        let ptr = NonNull::new(raw).ok_or(NDArrayError::OutOfMemory { size: len })?;
        Ok(AlignedBuf { ptr, len })
    }

    fn zeroed(len: usize) -> Result<AlignedBuf, NDArrayError> {
        AlignedBuf::allocate(len, true)
    }

    /// A buffer holding a copy of `bytes`. Allocated uninitialized and written once:
    /// zero-filling first (which the allocator does by `memset` at this alignment) would
    /// touch every byte twice, the larger part of importing a model's weights.
    fn copied(bytes: &[u8]) -> Result<AlignedBuf, NDArrayError> {
        let buf = AlignedBuf::allocate(bytes.len(), false)?;
        // SAFETY: `buf` is valid for `bytes.len()` bytes of writes, and `bytes` cannot overlap
        // a fresh allocation; every byte is initialized here before the buffer is read.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.ptr.as_ptr(), bytes.len()) };
        Ok(buf)
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

/// What holds an [`NDArray`]'s bytes.
enum Owner {
    /// Its own buffer, held to be freed when the array drops (its bytes are reached through
    /// `NDArray::ptr`).
    Buf(#[allow(dead_code)] AlignedBuf),
    /// Memory someone else allocated (a numpy array, a DLPack tensor), kept alive by this
    /// value and only read: [`NDArray::as_bytes_mut`] first copies it into a buffer of the
    /// array's own.
    Foreign(#[allow(dead_code)] Box<dyn Send + Sync>),
    /// A shared storage; the array is a view at `offset`.
    Storage {
        /// The storage.
        storage: Arc<Storage>,
        /// The byte offset of the first element.
        offset: usize,
    },
}

/// A dense tensor on the CPU: dtype, shape and compact row-major element bytes, either owned
/// (64-byte aligned) or a view into a shared [`Storage`].
///
/// Owned arrays are immutable once shared, like any `Arc`'d value. Views share their bytes with
/// every other view over the same storage: a write through one is seen through all that overlap
/// it, which is what a memory plan relies on (and what makes a wrong plan give wrong results).
/// Views are made by the `unsafe` [`NDArray::view`], whose caller takes on the aliasing contract.
pub struct NDArray {
    dtype: DType,
    shape: Vec<i64>,
    /// The first element byte: `owner`'s buffer, or the storage's start plus the offset.
    ptr: NonNull<u8>,
    /// The byte size, `num_elements * dtype.size_bytes()`.
    len: usize,
    owner: Owner,
}

// SAFETY: an owned array owns its buffer like a `Box<[u8]>` (shared access only reads). A view
// reaches its storage's bytes through `ptr`; concurrent access to overlapping views from several
// threads is excluded by the contract of `NDArray::view`, which its creator upholds.
unsafe impl Send for NDArray {}
// SAFETY: as for `Send`; `&NDArray` only reads, except `write_view`, which is `unsafe` with the
// same contract.
unsafe impl Sync for NDArray {}

impl NDArray {
    /// A tensor owning `buf` (`len` bytes).
    fn owning(dtype: DType, shape: &[i64], buf: AlignedBuf, len: usize) -> NDArray {
        NDArray {
            dtype,
            shape: shape.to_vec(),
            ptr: buf.ptr,
            len,
            owner: Owner::Buf(buf),
        }
    }

    /// A zero-filled tensor.
    pub fn zeros(dtype: DType, shape: &[i64]) -> Result<NDArray, NDArrayError> {
        let len = Self::byte_len(dtype, shape)?;
        Ok(NDArray::owning(dtype, shape, AlignedBuf::zeroed(len)?, len))
    }

    /// A tensor of `dtype` and `shape` whose elements are the bytes of `storage` from byte
    /// `offset` on: a view sharing them, not a copy. The view must fit in the storage and
    /// `offset` must be a multiple of the element's scalar size rounded up to a power of two
    /// (4 for `float32`, 1 for `bool`); otherwise it is an error. A zero-size view fits
    /// anywhere up to the end of the storage.
    ///
    /// # Safety
    ///
    /// Aliasing contract: views over the same storage whose byte ranges overlap must never be
    /// accessed at the same time when one of the accesses writes. Concretely, while a slice from
    /// [`as_bytes`](NDArray::as_bytes) or [`as_bytes_mut`](NDArray::as_bytes_mut) of one view
    /// is alive, no overlapping bytes may be written through another view (with
    /// `as_bytes_mut` or [`write_view`](NDArray::write_view)), on this thread or any other; and
    /// while a slice from `as_bytes_mut` is alive, overlapping bytes may not be read through
    /// another view either. The caller of `view` promises this for the view it makes, for as
    /// long as the view (or anything it is moved into) lives. Executors satisfy it by reading
    /// inputs and writing outputs of a kernel call at different times, on one thread.
    pub unsafe fn view(
        storage: Arc<Storage>,
        offset: usize,
        dtype: DType,
        shape: &[i64],
    ) -> Result<NDArray, NDArrayError> {
        let len = Self::byte_len(dtype, shape)?;
        let align = dtype.bits.div_ceil(8).max(1).next_power_of_two() as usize;
        if !offset.is_multiple_of(align) {
            return Err(NDArrayError::Misaligned {
                offset,
                dtype,
                align,
            });
        }
        let size = storage.size();
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(NDArrayError::OutOfBounds { offset, len, size });
        }
        let ptr = if len == 0 {
            // A dangling pointer with the elements' alignment; never dereferenced for an empty
            // view (whose offset may be the storage's end).
            NonNull::new(align as *mut u8).ok_or(NDArrayError::BadAlignment { alignment: align })?
        } else {
            // SAFETY: `offset + len <= size`, so `offset` is within the allocation.
            let p = unsafe { storage.as_ptr().add(offset) };
            NonNull::new(p).ok_or(NDArrayError::OutOfBounds { offset, len, size })?
        };
        Ok(NDArray {
            dtype,
            shape: shape.to_vec(),
            ptr,
            len,
            owner: Owner::Storage { storage, offset },
        })
    }

    /// An array over `len` bytes at `ptr` that someone else allocated (a numpy array's data, a
    /// DLPack tensor's), without a copy: `keep` is held for as long as the array lives (and
    /// dropped with it), and must keep those bytes alive and unchanged. The array only reads
    /// them: [`NDArray::as_bytes_mut`] first moves the array to a copy of its own. `ptr` must
    /// be [`ALIGNMENT`]-byte aligned, as every array's data is (kernels rely on it); an
    /// unaligned pointer is [`NDArrayError::Unaligned`], and the caller copies instead.
    ///
    /// # Safety
    ///
    /// `ptr` is valid for reads of [`NDArray::byte_len`]`(dtype, shape)` bytes, all
    /// initialized, for as long as `keep` lives, and nobody writes them meanwhile.
    pub unsafe fn from_foreign(
        dtype: DType,
        shape: &[i64],
        ptr: NonNull<u8>,
        keep: Box<dyn Send + Sync>,
    ) -> Result<NDArray, NDArrayError> {
        let len = Self::byte_len(dtype, shape)?;
        let address = ptr.as_ptr() as usize;
        if !address.is_multiple_of(ALIGNMENT) {
            return Err(NDArrayError::Unaligned { address });
        }
        Ok(NDArray {
            dtype,
            shape: shape.to_vec(),
            ptr,
            len,
            owner: Owner::Foreign(keep),
        })
    }

    /// Whether the array reads memory someone else allocated ([`NDArray::from_foreign`]).
    pub fn is_foreign(&self) -> bool {
        matches!(self.owner, Owner::Foreign(_))
    }

    /// Whether the array is a view into a [`Storage`].
    pub fn is_view(&self) -> bool {
        matches!(self.owner, Owner::Storage { .. })
    }

    /// The storage of a view, giving up the view (so an executor can return the storage to its
    /// pool once nothing else holds it); `None` for an array with its own buffer.
    pub fn into_storage(self) -> Option<Arc<Storage>> {
        match self.owner {
            Owner::Storage { storage, .. } => Some(storage),
            Owner::Buf(_) | Owner::Foreign(_) => None,
        }
    }

    /// The storage and byte offset of a view; `None` for an array with its own buffer.
    pub fn storage(&self) -> Option<(&Arc<Storage>, usize)> {
        match &self.owner {
            Owner::Storage { storage, offset } => Some((storage, *offset)),
            Owner::Buf(_) | Owner::Foreign(_) => None,
        }
    }

    /// Copies `bytes` into the elements of this view, through a shared reference (the view may
    /// be held in a shared `Value`); an error if this is not a view or the size differs.
    ///
    /// # Safety
    ///
    /// The aliasing contract of [`NDArray::view`]: no slice of bytes overlapping this view's
    /// (from `as_bytes` or `as_bytes_mut` of this or any other view, including `bytes` itself)
    /// is alive during the call, and no other thread accesses them meanwhile.
    pub unsafe fn write_view(&self, bytes: &[u8]) -> Result<(), NDArrayError> {
        if !self.is_view() {
            return Err(NDArrayError::NotAView);
        }
        if bytes.len() != self.len {
            return Err(NDArrayError::SizeMismatch {
                dtype: self.dtype,
                shape: self.shape.clone(),
                expected: self.len,
                actual: bytes.len(),
            });
        }
        if self.len != 0 {
            // SAFETY: `ptr` is valid for `len` bytes of the live storage; the caller guarantees
            // that nothing else accesses them meanwhile. `copy` tolerates overlap.
            unsafe { std::ptr::copy(bytes.as_ptr(), self.ptr.as_ptr(), self.len) };
        }
        Ok(())
    }

    /// A tensor holding a copy of `bytes` (native-endian element data in row-major order).
    pub fn from_bytes(dtype: DType, shape: &[i64], bytes: &[u8]) -> Result<NDArray, NDArrayError> {
        let len = Self::byte_len(dtype, shape)?;
        if bytes.len() != len {
            return Err(NDArrayError::SizeMismatch {
                dtype,
                shape: shape.to_vec(),
                expected: len,
                actual: bytes.len(),
            });
        }
        Ok(NDArray::owning(
            dtype,
            shape,
            AlignedBuf::copied(bytes)?,
            len,
        ))
    }

    /// A tensor holding the element data `bytes`, stored little-endian (each lane's bytes in
    /// little-endian order, as file formats write it): [`NDArray::from_bytes`] on a
    /// little-endian machine, each lane's bytes reversed on a big-endian one.
    pub fn from_le_bytes(
        dtype: DType,
        shape: &[i64],
        bytes: &[u8],
    ) -> Result<NDArray, NDArrayError> {
        let mut array = NDArray::from_bytes(dtype, shape, bytes)?;
        if cfg!(target_endian = "big") {
            for lane in array.as_bytes_mut().chunks_mut(lane_width(dtype)) {
                lane.reverse();
            }
        }
        Ok(array)
    }

    /// Appends the element data to `out` little-endian (the inverse of
    /// [`NDArray::from_le_bytes`]).
    pub fn write_le_bytes(&self, out: &mut Vec<u8>) {
        let data = self.as_bytes();
        if cfg!(target_endian = "little") {
            out.extend_from_slice(data);
        } else {
            for lane in data.chunks(lane_width(self.dtype)) {
                out.extend(lane.iter().rev());
            }
        }
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
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `ptr` is valid for `len` initialized (zeroed or written) bytes of the owned
        // buffer or the storage `owner` keeps alive. For a view, no overlapping write happens
        // while the slice lives, by the contract of `NDArray::view`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The raw element bytes, mutably. For a view these are the storage's bytes, shared with
    /// every overlapping view (see the contract of [`NDArray::view`]); a foreign array is first
    /// copied into a buffer of its own, so the memory it was made over is never written.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        if self.is_foreign() {
            *self = self.clone();
        }
        // SAFETY: as in `as_bytes`; `&mut self` makes the access unique for an owned buffer,
        // and the contract of `NDArray::view` does for a view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Whether this is a rank-0 tensor.
    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }
}

impl Clone for NDArray {
    /// A deep copy into a new owned buffer (also of a view).
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
            self.dtype, self.shape, self.len
        )
    }
}

/// The bytes byte order applies to within an element of `dtype`: one lane (at least a byte;
/// sub-byte types are stored a byte per element).
fn lane_width(dtype: DType) -> usize {
    (dtype.bits as usize).div_ceil(8).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn little_endian_bytes_round_trip() {
        // 0x0102 and 0x0304 as int16: little-endian in the file whatever the machine.
        let file = [0x02, 0x01, 0x04, 0x03];
        let a = NDArray::from_le_bytes(DType::I16, &[2], &file).unwrap();
        let values: Vec<i16> = a
            .as_bytes()
            .chunks(2)
            .map(|c| i16::from_ne_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(values, [0x0102, 0x0304]);
        let mut out = vec![0xff];
        a.write_le_bytes(&mut out);
        assert_eq!(out, [0xff, 0x02, 0x01, 0x04, 0x03]);
        assert!(NDArray::from_le_bytes(DType::I16, &[3], &file).is_err());
    }

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
    fn foreign_memory_is_read_in_place_kept_alive_and_never_written() {
        // The "foreign" buffer: another array's, kept alive by an `Arc` clone.
        let owner = Arc::new(NDArray::from_bytes(DType::U8, &[128], &[7u8; 128]).unwrap());
        let ptr = NonNull::new(owner.as_bytes().as_ptr().cast_mut()).unwrap();
        // SAFETY: `owner`'s 128 bytes live as long as the clone the array keeps, unwritten.
        let mut a =
            unsafe { NDArray::from_foreign(DType::F32, &[4, 8], ptr, Box::new(owner.clone())) }
                .unwrap();
        assert!(a.is_foreign());
        assert_eq!(a.as_bytes().as_ptr(), owner.as_bytes().as_ptr());
        assert_eq!(Arc::strong_count(&owner), 2);
        // Writing copies first.
        a.as_bytes_mut()[0] = 1;
        assert!(!a.is_foreign());
        assert_eq!(owner.as_bytes()[0], 7);
        assert_eq!(a.as_bytes()[..2], [1, 7]);
        assert_eq!(Arc::strong_count(&owner), 1);

        // Too few bytes cannot be asked for here (the caller's promise), but an unaligned
        // address is refused.
        let off = NonNull::new(ptr.as_ptr().wrapping_add(4)).unwrap();
        // SAFETY: refused before any read.
        let err = unsafe { NDArray::from_foreign(DType::F32, &[4], off, Box::new(owner.clone())) }
            .unwrap_err();
        assert!(matches!(err, NDArrayError::Unaligned { .. }), "{err}");
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

    #[test]
    fn views_share_their_storage() {
        let storage = Arc::new(Storage::new(128, 64).unwrap());
        assert_eq!(storage.as_ptr() as usize % ALIGNMENT, 0);
        // SAFETY: the views are used one at a time on this thread.
        let (a, b, c) = unsafe {
            (
                NDArray::view(storage.clone(), 0, DType::F32, &[2, 2]).unwrap(),
                NDArray::view(storage.clone(), 0, DType::I32, &[4]).unwrap(),
                NDArray::view(storage.clone(), 64, DType::F32, &[16]).unwrap(),
            )
        };
        assert!(a.is_view() && a.storage().is_some_and(|(_, off)| off == 0));
        assert_eq!(a.as_bytes(), &[0; 16]);
        let bytes: Vec<u8> = (1..=16).collect();
        // SAFETY: no slice of the storage is alive.
        unsafe { a.write_view(&bytes).unwrap() };
        assert_eq!(b.as_bytes(), &bytes[..]);
        assert_eq!(c.as_bytes(), &[0; 64]);
        // A clone is an owned deep copy.
        let copy = b.clone();
        assert!(!copy.is_view());
        // SAFETY: as above.
        unsafe { b.write_view(&[0; 16]).unwrap() };
        assert_eq!(a.as_bytes(), &[0; 16]);
        assert_eq!(copy.as_bytes(), &bytes[..]);
        // Writing through `as_bytes_mut` of a view is seen by the other views.
        let mut c = c;
        c.as_bytes_mut()[0] = 7;
        // SAFETY: as above.
        let d = unsafe { NDArray::view(storage, 64, DType::U8, &[1]).unwrap() };
        assert_eq!(d.as_bytes(), &[7]);
        // An owned array cannot be written through a shared reference.
        // SAFETY: nothing else accesses it.
        assert_eq!(
            unsafe { copy.write_view(&bytes) },
            Err(NDArrayError::NotAView)
        );
    }

    #[test]
    fn views_are_checked() {
        let storage = Arc::new(Storage::new(24, 64).unwrap());
        // SAFETY: the views are never accessed concurrently.
        unsafe {
            assert!(NDArray::view(storage.clone(), 0, DType::F32, &[2, 3]).is_ok());
            assert!(matches!(
                NDArray::view(storage.clone(), 4, DType::F32, &[2, 3]),
                Err(NDArrayError::OutOfBounds { .. })
            ));
            assert!(matches!(
                NDArray::view(storage.clone(), 2, DType::F32, &[1]),
                Err(NDArrayError::Misaligned { .. })
            ));
            assert!(matches!(
                NDArray::view(storage.clone(), usize::MAX - 3, DType::F32, &[1]),
                Err(NDArrayError::OutOfBounds { .. })
            ));
            let empty = NDArray::view(storage.clone(), 24, DType::F32, &[0, 3]).unwrap();
            assert_eq!(empty.as_bytes(), &[] as &[u8]);
            let view = NDArray::view(storage, 20, DType::F32, &[]).unwrap();
            assert!(view.write_view(&[0; 3]).is_err());
        }
        assert!(matches!(
            Storage::new(8, 3),
            Err(NDArrayError::BadAlignment { alignment: 3 })
        ));
        assert!(matches!(
            Storage::new(usize::MAX, 64),
            Err(NDArrayError::StorageTooLarge { .. })
        ));
        let empty = Storage::new(0, 128).unwrap();
        assert_eq!((empty.size(), empty.alignment()), (0, 128));
    }
}
