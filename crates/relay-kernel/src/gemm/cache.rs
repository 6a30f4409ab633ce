//! Packed constant operands: weights packed once into the microkernel's panel layout and
//! reused by every later GEMM that reads them (MLAS's prepacked B, TVM's constant-folded
//! layout transform).
//!
//! A GEMM may only reuse a packing if the memory it was packed from cannot change. The owner
//! of immutable tensors (the VM's constant pool) therefore *registers* their byte ranges
//! ([`register`]), keeping them alive and unmodified while the [`Registration`] lives. A GEMM
//! operand lying wholly inside a registered range is packed on first use, whole (every
//! `KC` block), and found again by its view (address, sizes, strides, element type, side,
//! ISA). Dropping the registration unregisters the ranges (when no other registration holds
//! them) and evicts their packed operands. Operands anywhere else are packed per call.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

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

/// A registered byte range.
#[derive(Debug)]
struct Region {
    /// One past the last byte.
    end: usize,
    /// Registrations holding it.
    users: usize,
    /// Operands packed from it so far (for tests and statistics).
    packs: u64,
}

/// The packed-operand key: the view and the layout it was packed into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    addr: usize,
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
}

static REGIONS: RwLock<BTreeMap<usize, Region>> = RwLock::new(BTreeMap::new());
static PACKED: Mutex<Option<HashMap<Key, Arc<PackedOperand>>>> = Mutex::new(None);

/// Immutable memory registered for packing once; dropping it unregisters the ranges and
/// evicts what was packed from them.
pub struct Registration {
    ranges: Vec<(usize, usize)>,
    _keep: Box<dyn Send + Sync>,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("ranges", &self.ranges.len())
            .finish()
    }
}

/// Registers the byte ranges `(start, len)` as constant while the returned registration
/// lives; `keep` (the owners of the memory) is held that long. Empty ranges are skipped.
///
/// # Safety
///
/// While `keep` lives, the ranges stay allocated and nothing writes to them.
pub unsafe fn register<K: Send + Sync + 'static>(
    ranges: impl IntoIterator<Item = (usize, usize)>,
    keep: K,
) -> Registration {
    let ranges: Vec<(usize, usize)> = ranges
        .into_iter()
        .filter(|&(_, len)| len > 0)
        .map(|(start, len)| (start, start.saturating_add(len)))
        .collect();
    let mut regions = REGIONS.write().unwrap_or_else(PoisonError::into_inner);
    for &(start, end) in &ranges {
        let r = regions.entry(start).or_insert(Region {
            end,
            users: 0,
            packs: 0,
        });
        r.end = r.end.max(end);
        r.users += 1;
    }
    Registration {
        ranges,
        _keep: Box::new(keep),
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut gone = Vec::new();
        {
            let mut regions = REGIONS.write().unwrap_or_else(PoisonError::into_inner);
            for &(start, _) in &self.ranges {
                if let Some(r) = regions.get_mut(&start) {
                    r.users -= 1;
                    if r.users == 0 {
                        gone.push((start, r.end));
                        regions.remove(&start);
                    }
                }
            }
        }
        if gone.is_empty() {
            return;
        }
        let mut packed = PACKED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(map) = packed.as_mut() {
            map.retain(|k, _| !gone.iter().any(|&(s, e)| (s..e).contains(&k.addr)));
        }
    }
}

/// The registered range holding bytes `lo..hi`, by its start.
fn region_of(lo: usize, hi: usize) -> Option<usize> {
    let regions = REGIONS.read().unwrap_or_else(PoisonError::into_inner);
    let (&start, r) = regions.range(..=lo).next_back()?;
    (hi <= r.end).then_some(start)
}

/// How many operands were packed from the registered range holding `addr`, if registered.
pub fn packs_at(addr: usize) -> Option<u64> {
    let regions = REGIONS.read().unwrap_or_else(PoisonError::into_inner);
    let (_, r) = regions.range(..=addr).next_back()?;
    (addr < r.end).then_some(r.packs)
}

/// How many packed operands are cached from `start..end`.
pub fn cached_in(start: usize, end: usize) -> usize {
    let packed = PACKED.lock().unwrap_or_else(PoisonError::into_inner);
    packed.as_ref().map_or(0, |map| {
        map.keys()
            .filter(|k| (start..end).contains(&k.addr))
            .count()
    })
}

/// The byte range `m` addresses (its strides are non-negative).
fn span<T>(m: &Matrix<T>) -> (usize, usize) {
    let lo = m.ptr as usize;
    let last = (m.rows - 1) as isize * m.rs + (m.cols - 1) as isize * m.cs;
    (lo, lo + (last as usize + 1) * size_of::<T>())
}

/// The packing of `m` as operand `side` of kernel `kern`, if `m` lies in a registered
/// constant: from the cache, or packed now and cached.
///
/// # Safety
///
/// `m` is a valid view with non-negative strides.
pub(crate) unsafe fn packed<T: Element, S: Operand<T>>(
    m: &Matrix<S>,
    side: Side,
    kern: &Kernel<T>,
) -> Option<Arc<PackedOperand>> {
    if m.rows == 0 || m.cols == 0 || m.rs < 0 || m.cs < 0 {
        return None;
    }
    let (lo, hi) = span(m);
    let start = region_of(lo, hi)?;
    let key = Key {
        addr: lo,
        rows: m.rows,
        cols: m.cols,
        rs: m.rs,
        cs: m.cs,
        tag: T::TAG * 16 + S::TAG,
        side,
        isa: kern.isa,
    };
    if let Some(p) = PACKED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .and_then(|map| map.get(&key))
    {
        return Some(p.clone());
    }
    // SAFETY: forwarded.
    let p = Arc::new(unsafe { whole(m, side, kern) });
    let mut packed = PACKED.lock().unwrap_or_else(PoisonError::into_inner);
    // Only cache it if the range is still registered (not dropped while packing).
    let mut regions = REGIONS.write().unwrap_or_else(PoisonError::into_inner);
    let Some(region) = regions.get_mut(&start) else {
        return Some(p);
    };
    region.packs += 1;
    Some(
        packed
            .get_or_insert_with(HashMap::new)
            .entry(key)
            .or_insert(p)
            .clone(),
    )
}

/// Packs all of `m` as operand `side`: its `KC` blocks one after another.
///
/// # Safety
///
/// As [`packed`].
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
