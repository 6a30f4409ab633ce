//! `Storage`: a zero-filled, aligned byte buffer that tensor views ([`NDArray::view`]) are
//! carved out of, as TVM's `memory.alloc_storage` allocates and `memory.alloc_tensor` places
//! tensors in.
//!
//! A storage is shared as `Arc<Storage>`; every view over it keeps it alive. Its bytes are only
//! ever reached through raw pointers, never through a reference to the buffer as a whole, so
//! that views over disjoint (or, under the aliasing contract of [`NDArray::view`], non-concurrently
//! used) byte ranges can read and write independently.
//!
//! [`NDArray::view`]: crate::NDArray::view

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::fmt;
use std::ptr::NonNull;
use std::sync::Weak;

use crate::NDArrayError;
use crate::ndarray::ALIGNMENT;

/// A zero-filled byte buffer aligned to at least [`ALIGNMENT`] (64) bytes.
pub struct Storage {
    /// The start of the allocation (a dangling, aligned pointer when `size` is 0).
    ptr: NonNull<u8>,
    /// The size of the allocation in bytes.
    capacity: usize,
    /// The size in use (at most `capacity`): what views must fit in. A pool hands out buffers
    /// of a size class larger than asked for; views are still checked against the request.
    size: usize,
    /// The alignment asked for.
    alignment: usize,
    /// Where `ptr` lies in a large allocation made for lazily zeroed pages
    /// ([`LAZY_ZERO_BYTES`]): its offset from the allocation's start. `None`: `ptr` is the
    /// start of an allocation of [`Storage::layout`].
    offset: Option<usize>,
    /// Where the buffer goes when the last reference to it is dropped, instead of being freed
    /// ([`Home`]).
    home: Option<Weak<dyn Home>>,
}

/// Where a storage goes when it is dropped, instead of being freed: the pool that handed it
/// out. A caller that drops a result the VM gave it (a model's logits, every call) gives the
/// buffer back to the VM's pool, as ONNX Runtime's arena takes back its outputs, instead of
/// freeing it, so the next call neither maps fresh pages nor faults them in.
pub trait Home: Send + Sync {
    /// Takes back `storage`, whose home is cleared, to cache or free it. Runs in the drop of
    /// the storage's last reference, on whichever thread drops it.
    fn take_back(&self, storage: Storage);
}

/// Storages at least this large come from `calloc` with room to align the start by hand: the
/// C library maps fresh pages for them, zero already, where an aligned zeroed allocation
/// writes every byte (a 100 MB result cost 10 ms more).
const LAZY_ZERO_BYTES: usize = 1 << 20;

// SAFETY: a `Storage` owns its allocation. It hands out only a raw pointer to it; reading and
// writing through that pointer from several threads is governed by the aliasing contract of
// `NDArray::view` (the only place the pointer is turned into slices), which the creator of
// every view promised to uphold.
unsafe impl Send for Storage {}
// SAFETY: as for `Send`: `&Storage` exposes no slice of the bytes, only their address.
unsafe impl Sync for Storage {}

impl Storage {
    /// A zero-filled storage of `size` bytes whose start is aligned to `alignment` bytes (a
    /// power of two; the allocation is always at least 64-byte aligned).
    pub fn new(size: usize, alignment: usize) -> Result<Storage, NDArrayError> {
        if alignment == 0 || !alignment.is_power_of_two() {
            return Err(NDArrayError::BadAlignment { alignment });
        }
        let layout = Self::layout(size, alignment)?;
        if size == 0 {
            // A dangling pointer aligned to the layout's alignment; never dereferenced, since
            // every view of a zero-size storage is empty.
            let ptr = NonNull::new(layout.align() as *mut u8)
                .ok_or(NDArrayError::BadAlignment { alignment })?;
            return Ok(Storage {
                ptr,
                capacity: size,
                size,
                alignment,
                offset: None,
                home: None,
            });
        }
        if let Some(lazy) = Self::lazy_layout(size, layout.align()) {
            // SAFETY: `lazy` has a non-zero size.
            let raw = unsafe { alloc_zeroed(lazy) };
            let Some(base) = NonNull::new(raw) else {
                return Err(NDArrayError::OutOfMemory { size });
            };
            let offset = base.as_ptr().align_offset(layout.align());
            // SAFETY: the allocation has `align` spare bytes past `size`, so the aligned start
            // and the `size` bytes after it are inside it.
            let ptr = unsafe { base.add(offset) };
            return Ok(Storage {
                ptr,
                capacity: size,
                size,
                alignment,
                offset: Some(offset),
                home: None,
            });
        }
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        // Out of memory is an error for the program, not an abort of the process.
        let Some(ptr) = NonNull::new(raw) else {
            return Err(NDArrayError::OutOfMemory { size });
        };
        Ok(Storage {
            ptr,
            capacity: size,
            size,
            alignment,
            offset: None,
            home: None,
        })
    }

    /// The layout of a large storage of `size` bytes aligned to `align` by hand (the C
    /// library's own alignment, `align` bytes more), when it is one ([`LAZY_ZERO_BYTES`]).
    fn lazy_layout(size: usize, align: usize) -> Option<Layout> {
        if size < LAZY_ZERO_BYTES || align > 4096 {
            return None;
        }
        Layout::from_size_align(size.checked_add(align)?, 16).ok()
    }

    /// The layout of a storage of `size` bytes asking for `alignment`.
    pub(crate) fn layout(size: usize, alignment: usize) -> Result<Layout, NDArrayError> {
        let align = alignment.max(ALIGNMENT);
        Layout::from_size_align(size, align)
            .ok()
            .filter(|_| size <= isize::MAX as usize - align)
            .ok_or(NDArrayError::StorageTooLarge { size, alignment })
    }

    /// The size in use, in bytes: what views are checked against ([`Storage::set_size`]).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The size of the allocation in bytes (at least [`Storage::size`]).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Sets the size in use to `len` bytes (at most the capacity; a larger `len` is clamped
    /// to it), as a pool does when it hands out a buffer for a request of `len` bytes.
    pub fn set_size(&mut self, len: usize) {
        self.size = len.min(self.capacity);
    }

    /// Sends the buffer to `home` when the last reference to it is dropped ([`Home`]).
    pub fn set_home(&mut self, home: Weak<dyn Home>) {
        self.home = Some(home);
    }

    /// Frees the buffer when it is dropped (no [`Home`]).
    pub fn clear_home(&mut self) {
        self.home = None;
    }

    /// The alignment asked for when it was allocated (the start is aligned to at least this
    /// and at least 64 bytes).
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// The address of the first byte. Valid for `size` bytes while the storage lives; reading
    /// or writing through it is subject to the aliasing contract of [`NDArray::view`].
    ///
    /// [`NDArray::view`]: crate::NDArray::view
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Some(home) = self.home.take().and_then(|h| h.upgrade()) {
            // The allocation moves to a storage the home owns; nothing is left here to free.
            let moved = Storage {
                ptr: self.ptr,
                capacity: self.capacity,
                size: self.size,
                alignment: self.alignment,
                offset: self.offset,
                home: None,
            };
            self.capacity = 0;
            home.take_back(moved);
            return;
        }
        if self.capacity == 0 {
            return;
        }
        // The layout was valid at allocation, with these very arguments.
        let Ok(layout) = Self::layout(self.capacity, self.alignment) else {
            return;
        };
        match (
            self.offset,
            Self::lazy_layout(self.capacity, layout.align()),
        ) {
            (Some(offset), Some(lazy)) => {
                // SAFETY: allocated in `new` with layout `lazy`, starting `offset` bytes
                // before `ptr`, and dropped once.
                unsafe { dealloc(self.ptr.as_ptr().sub(offset), lazy) };
            }
            // SAFETY: allocated in `new` with this exact layout, and dropped once.
            (None, _) => unsafe { dealloc(self.ptr.as_ptr(), layout) },
            // Cannot happen (the same arguments give the same layouts); leaking is safe.
            (Some(_), None) => {}
        }
    }
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Storage({} bytes, aligned to {})",
            self.size, self.alignment
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A home that keeps what comes back.
    #[derive(Default)]
    struct Keep(std::sync::Mutex<Vec<Storage>>);

    impl Home for Keep {
        fn take_back(&self, storage: Storage) {
            self.0.lock().unwrap().push(storage);
        }
    }

    /// A storage with a home goes to it when dropped, the same bytes with the home cleared (so
    /// the home frees it by dropping it); with its home gone, or none, it is freed.
    #[test]
    fn storages_go_home_when_dropped() {
        let home = std::sync::Arc::new(Keep::default());
        for size in [100, 3 << 20] {
            let mut s = Storage::new(size, 64).unwrap();
            let weak: std::sync::Weak<Keep> = std::sync::Arc::downgrade(&home);
            s.set_home(weak);
            let p = s.as_ptr();
            drop(s);
            let back = home.0.lock().unwrap().pop().unwrap();
            assert_eq!((back.as_ptr(), back.capacity()), (p, size));
            assert!(back.home.is_none());
        }
        let mut orphan = Storage::new(100, 64).unwrap();
        let weak: std::sync::Weak<Keep> = std::sync::Arc::downgrade(&home);
        orphan.set_home(weak);
        drop(home);
        drop(orphan);
        let mut cleared = Storage::new(100, 64).unwrap();
        let other = std::sync::Arc::new(Keep::default());
        let weak: std::sync::Weak<Keep> = std::sync::Arc::downgrade(&other);
        cleared.set_home(weak);
        cleared.clear_home();
        drop(cleared);
        assert!(other.0.lock().unwrap().is_empty());
    }

    /// Large storages (aligned by hand inside a `calloc`) and small ones are aligned as asked,
    /// zero, writable over their whole size, and freed.
    #[test]
    fn storages_of_every_size_are_aligned_and_zero() {
        for size in [1, 4096, LAZY_ZERO_BYTES - 1, LAZY_ZERO_BYTES, 3 << 20] {
            for alignment in [64, 256, 4096, 8192] {
                let s = Storage::new(size, alignment).unwrap();
                assert_eq!(s.as_ptr() as usize % alignment, 0, "{size} {alignment}");
                // SAFETY: `size` bytes from `as_ptr` belong to the storage, used only here.
                let bytes = unsafe { std::slice::from_raw_parts_mut(s.as_ptr(), size) };
                assert!(bytes.iter().all(|&b| b == 0), "{size} {alignment}");
                bytes.fill(0xAB);
                drop(s);
            }
        }
    }
}
