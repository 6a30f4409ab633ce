//! Packed constant operands: weights packed once into the microkernel's panel layout and
//! reused by every later GEMM that reads them (MLAS's prepacked B, TVM's constant-folded
//! layout transform).
//!
//! A GEMM may only reuse a packing if the memory it was packed from cannot change. The owner
//! of immutable tensors (the VM's executable, for its constant pool) therefore makes a
//! [`PackedConstants`] of their byte ranges, which holds them alive and unmodified, and hands it
//! to calls through their [`KernelContext`](crate::KernelContext). A GEMM operand lying wholly
//! inside one of those constants is packed on first use, whole (every `KC` block), and found
//! again by the constant's index and its view of it (offset, sizes, strides, element type,
//! side, ISA). The packed forms belong to the `PackedConstants`: they are freed with it, and
//! two executables sharing a constant each pack their own. Operands anywhere else are packed
//! per call. Packed forms are never stored in files, so their layout needs no version.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::pack::{pack_a, pack_b};
use super::{Element, Isa, Kernel, Matrix, Operand};

/// Which operand of the product a matrix is (they are packed differently).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The left operand, packed in `MR`-row panels.
    A,
    /// The right operand, packed in `NR`-column panels.
    B,
}

/// The packed-operand key: the constant, the view of it and the layout it was packed into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    constant: usize,
    offset: usize,
    rows: usize,
    cols: usize,
    rs: isize,
    cs: isize,
    tag: u8,
    side: Side,
    isa: Isa,
}

/// An operand packed whole: for each `KC` block of the inner dimension (`kcb` deep), its
/// panels (`pad · kcb` elements, `pad` the row or column count rounded up to the tile), block
/// `p0` starting at element `p0 · pad`.
#[derive(Debug)]
pub struct PackedOperand {
    data: Vec<u64>,
    offset: usize,
}

impl PackedOperand {
    /// The first packed element.
    pub(crate) fn ptr<T>(&self) -> *const T {
        // SAFETY: `offset` is inside `data` (see `whole`).
        unsafe { self.data.as_ptr().cast::<u8>().add(self.offset).cast() }
    }

    /// The bytes it holds.
    pub fn bytes(&self) -> usize {
        self.data.len() * 8
    }
}

/// One constant's bytes.
#[derive(Clone, Copy, Debug)]
struct Range {
    start: usize,
    end: usize,
    index: usize,
}

/// The constant operands of one executable and the packed forms of their GEMM views, made on
/// first use and freed with it.
pub struct PackedConstants {
    /// The constants' byte ranges, by start (disjoint).
    ranges: Vec<Range>,
    /// The packed forms made so far.
    packed: Mutex<HashMap<Key, Arc<PackedOperand>>>,
    /// How many operands were packed (a race may pack one twice; one copy is kept).
    packs: AtomicU64,
    /// The owners of the constants' memory.
    _keep: Box<dyn Send + Sync>,
}

impl std::fmt::Debug for PackedConstants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedConstants")
            .field("constants", &self.ranges.len())
            .field("packed", &self.len())
            .finish()
    }
}

impl PackedConstants {
    /// The constants `(index, start, len)` (byte ranges that do not overlap), packed on demand
    /// while the result lives; `keep` (the owners of the memory) is held that long. Empty
    /// ranges are skipped.
    ///
    /// # Safety
    ///
    /// While `keep` lives, the ranges stay allocated and nothing writes to them.
    pub unsafe fn new<K: Send + Sync + 'static>(
        constants: impl IntoIterator<Item = (usize, usize, usize)>,
        keep: K,
    ) -> PackedConstants {
        let mut ranges: Vec<Range> = constants
            .into_iter()
            .filter(|&(_, _, len)| len > 0)
            .map(|(index, start, len)| Range {
                start,
                end: start.saturating_add(len),
                index,
            })
            .collect();
        ranges.sort_by_key(|r| r.start);
        PackedConstants {
            ranges,
            packed: Mutex::new(HashMap::new()),
            packs: AtomicU64::new(0),
            _keep: Box::new(keep),
        }
    }

    /// How many operands were packed so far.
    pub fn packs(&self) -> u64 {
        self.packs.load(Ordering::Relaxed)
    }

    /// How many packed operands it holds.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether it holds no packed operand.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes its packed operands hold.
    pub fn bytes(&self) -> usize {
        self.map().values().map(|p| p.bytes()).sum()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<PackedOperand>>> {
        self.packed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The constant holding bytes `lo..hi`.
    fn constant_of(&self, lo: usize, hi: usize) -> Option<Range> {
        let at = self.ranges.partition_point(|r| r.start <= lo);
        let r = *self.ranges.get(at.checked_sub(1)?)?;
        (hi <= r.end).then_some(r)
    }

    /// Whether the `bytes` bytes at `ptr` lie in one of the constants (an operand the GEMM
    /// packs once and keeps).
    pub fn holds<T>(&self, ptr: *const T, bytes: usize) -> bool {
        let lo = ptr as usize;
        lo.checked_add(bytes)
            .is_some_and(|hi| self.constant_of(lo, hi).is_some())
    }

    /// The key of `m`'s packing as operand `side` of kernel `kern`, if `m` lies in one of
    /// the constants.
    fn key<T: Element, S: Operand<T>>(
        &self,
        m: &Matrix<S>,
        side: Side,
        kern: &Kernel<T>,
    ) -> Option<Key> {
        if m.rows == 0 || m.cols == 0 || m.rs < 0 || m.cs < 0 {
            return None;
        }
        let (lo, hi) = span(m);
        let constant = self.constant_of(lo, hi)?;
        Some(Key {
            constant: constant.index,
            offset: lo - constant.start,
            rows: m.rows,
            cols: m.cols,
            rs: m.rs,
            cs: m.cs,
            tag: T::TAG * 16 + S::TAG,
            side,
            isa: kern.isa,
        })
    }

    /// Whether `m` lies in one of the constants and is packed already as operand `side` of
    /// kernel `kern` (nothing is packed here).
    pub(crate) fn has_packed<T: Element, S: Operand<T>>(
        &self,
        m: &Matrix<S>,
        side: Side,
        kern: &Kernel<T>,
    ) -> bool {
        self.key(m, side, kern)
            .is_some_and(|key| self.map().contains_key(&key))
    }

    /// The packing of `m` as operand `side` of kernel `kern`, if `m` lies in one of the
    /// constants: found, or packed now and kept.
    ///
    /// # Safety
    ///
    /// `m` is a valid view with non-negative strides.
    pub(crate) unsafe fn packed<T: Element, S: Operand<T>>(
        &self,
        m: &Matrix<S>,
        side: Side,
        kern: &Kernel<T>,
    ) -> Option<Arc<PackedOperand>> {
        let key = self.key(m, side, kern)?;
        if let Some(p) = self.map().get(&key) {
            return Some(p.clone());
        }
        // SAFETY: forwarded.
        let p = Arc::new(unsafe { whole(m, side, kern) });
        self.packs.fetch_add(1, Ordering::Relaxed);
        Some(self.map().entry(key).or_insert(p).clone())
    }
}

/// The byte range `m` addresses (its strides are non-negative).
fn span<T>(m: &Matrix<T>) -> (usize, usize) {
    let lo = m.ptr as usize;
    let last = (m.rows - 1) as isize * m.rs + (m.cols - 1) as isize * m.cs;
    (lo, lo + (last as usize + 1) * size_of::<T>())
}

/// Packs all of `m` as operand `side`: its `KC` blocks one after another.
///
/// # Safety
///
/// As [`PackedConstants::packed`].
unsafe fn whole<T: Element, S: Operand<T>>(
    m: &Matrix<S>,
    side: Side,
    kern: &Kernel<T>,
) -> PackedOperand {
    let (len, depth, tile) = match side {
        Side::A => (m.rows, m.cols, kern.mr),
        Side::B => (m.cols, m.rows, kern.nr),
    };
    let pad = len.div_ceil(tile) * tile;
    let bytes = pad * depth * size_of::<T>();
    let mut data = vec![0u64; bytes.div_ceil(8) + 8];
    let offset = data.as_ptr().cast::<u8>().align_offset(64);
    // SAFETY: `offset < 64` and `data` has 64 bytes beyond `bytes`.
    let base: *mut T = unsafe { data.as_mut_ptr().cast::<u8>().add(offset).cast() };
    for p0 in (0..depth).step_by(kern.kc) {
        let kcb = kern.kc.min(depth - p0);
        // SAFETY: block `p0` holds `pad · kcb` elements from `p0 · pad`; the view is valid.
        unsafe {
            let dst = base.add(p0 * pad);
            match side {
                Side::A => pack_a(m, 0, len, p0, kcb, tile, dst),
                Side::B => pack_b(m, p0, kcb, 0, len, tile, dst),
            }
        }
    }
    PackedOperand { data, offset }
}
