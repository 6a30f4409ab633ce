//! The pooled storage allocator behind `AllocStorage` (docs/design.md §9).
//!
//! TVM's `PooledAllocator` rounded every request up to a page multiple and kept one free list
//! per *exact* rounded size, never returning memory until `Clear()`. Two complaints followed:
//! nothing bounded the cached bytes, and with dynamic shapes every new size opened a new bucket
//! that only that size could reuse, so the cache grew with the number of distinct shapes seen.
//! [`PooledAllocator`] answers both:
//!
//! * **Size classes** ([`size_class`]) grow geometrically, so a workload whose sizes sweep a
//!   range touches O(log range) buckets, and a buffer cached for one shape serves every nearby
//!   shape:
//!   - 0 bytes is its own class (a zero-size storage owns no memory and is never cached);
//!   - 1 to 4 KiB: the next power of two, at least 64 bytes (64, 128, …, 4096);
//!   - above 4 KiB: the next multiple of `max(4 KiB, 2^(⌊log2 size⌋ − 2))` — page multiples up
//!     to 16 KiB, then four classes per doubling (16, 20, 24, 28, 32, 40, 48, 56, 64 KiB, …).
//!
//!   The waste is below 64 bytes or half the class for small sizes, below one page between 4
//!   and 16 KiB, and below a quarter of the request above 16 KiB.
//! * **A cap on cached bytes** ([`PooledAllocator::new`]): recycling a buffer that would push
//!   the cache over the cap first evicts (frees) the oldest cached buffers, whatever their
//!   class, until it fits; a buffer larger than the whole cap is freed instead of cached.
//!   Evicting the oldest favours the sizes the program is using now, which is what a
//!   changing dynamic shape needs.
//! * **The cache is no larger than the working set**: the room it has is the cap or the most
//!   bytes ever live at once (at least [`WORKING_SET_FLOOR`]), whichever is less. A program
//!   whose sizes only grow — a decoder's KV cache, one step longer each token — never asks
//!   for an outgrown class again, and an uncapped cache kept every one (GPT-2 small, 990
//!   tokens: 905 MB cached beside 151 MB ever live); bounded by the working set, resident
//!   memory stays within twice what the program needs at once.
//!
//! Fresh buffers come from [`Storage::new`] and are zero-filled. **Recycled buffers are not
//! re-zeroed**: they hold whatever the previous user wrote. The VM's kernels overwrite every
//! output element, so nothing in the language's semantics observes the old contents, and
//! skipping the fill keeps reuse free.
//!
//! **Storages come home.** Every storage the allocator hands out has it as its
//! [`Home`](relay_runtime::Home): when its last reference is dropped anywhere but in
//! [`PooledAllocator::recycle`] — a result the VM returned, dropped by its caller; a view that
//! outlived the VM's reference — the buffer is cached (or freed, by the same rules) instead of
//! freed, as ONNX Runtime's arena takes back the outputs it handed out. Once the allocator is
//! gone, its storages free themselves.
//!
//! One allocator may be shared (for example in an `Arc`) by several VMs on several threads:
//! every method takes `&self` and the state sits behind a mutex, held only for bookkeeping —
//! fresh allocations and frees happen outside it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use relay_runtime::{ALIGNMENT, Home, NDArrayError, Storage};

/// The cap on cached bytes of [`PooledAllocator::default`]: 1 GiB.
pub const DEFAULT_CAP_BYTES: usize = 1 << 30;

/// The room the cache has even when less has ever been live at once (below the cap): enough
/// that a small program's transient shapes are all cached.
pub const WORKING_SET_FLOOR: usize = 64 << 20;

/// The page size the size classes above 4 KiB are multiples of.
const PAGE: usize = 4096;

/// The smallest non-zero size class (one cache line, the runtime's minimum alignment).
const MIN_CLASS: usize = 64;

/// The size class a request of `size` bytes is rounded up to (see the [module
/// documentation](self) for the scheme): at least `size`, and `size_class(c) == Some(c)` for
/// every class `c`. `None` when rounding up overflows `usize`.
pub fn size_class(size: usize) -> Option<usize> {
    if size == 0 {
        return Some(0);
    }
    if size <= PAGE {
        return Some(size.next_power_of_two().max(MIN_CLASS));
    }
    let log2 = usize::BITS - 1 - size.leading_zeros();
    let step = (1usize << (log2 - 2)).max(PAGE);
    size.checked_next_multiple_of(step)
}

/// A storage could not be allocated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot allocate a storage of {size} bytes aligned to {alignment}")]
pub struct AllocError {
    /// The size asked for, in bytes.
    pub size: usize,
    /// The alignment asked for, in bytes.
    pub alignment: usize,
    /// Why: a bad alignment or a size too large to allocate.
    #[source]
    pub source: NDArrayError,
}

/// Counters of a [`PooledAllocator`], from [`PooledAllocator::stats`].
///
/// "Live" bytes are bytes handed out by [`PooledAllocator::alloc`] (whole size classes) minus
/// the sizes of the storages back in the allocator's hands, cached or freed: given to
/// [`PooledAllocator::recycle`] as their last reference, or come back when their last
/// reference was dropped elsewhere (a result its caller dropped, a view that outlived the
/// VM's reference). A recycled storage still referenced elsewhere stays live until then.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocStats {
    /// Calls to `alloc`, successful or not.
    pub requests: u64,
    /// Requests served with a cached buffer.
    pub pool_hits: u64,
    /// Requests served with a freshly allocated (zero-filled) buffer.
    pub fresh: u64,
    /// Requests that failed (bad alignment, size too large).
    pub failures: u64,
    /// Calls to `recycle`.
    pub recycles: u64,
    /// Recycled storages that something else (a tensor view, another clone) still referenced,
    /// so they could not be cached then.
    pub still_referenced: u64,
    /// Storages that came back when their last reference was dropped outside the allocator
    /// (a result its caller dropped, a view that outlived a recycle), cached or freed then.
    pub returned: u64,
    /// Buffers freed because of the cap: older cached buffers evicted to make room, and
    /// recycled buffers larger than the whole cap.
    pub evicted: u64,
    /// Bytes of the buffers counted in `evicted`.
    pub evicted_bytes: usize,
    /// Buffers in the cache now.
    pub cached_buffers: usize,
    /// Bytes in the cache now (never more than the cap, nor than the peak of live bytes or
    /// [`WORKING_SET_FLOOR`], whichever is more).
    pub cached_bytes: usize,
    /// Bytes live now (see the type's documentation).
    pub live_bytes: usize,
    /// The largest `live_bytes` has been.
    pub peak_live_bytes: usize,
}

impl fmt::Display for AllocStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hit_rate = if self.requests == 0 {
            0.0
        } else {
            // Counts far below 2^52: the conversion is exact enough for a percentage.
            100.0 * self.pool_hits as f64 / self.requests as f64
        };
        writeln!(
            f,
            "{:<22}{:>14}{:>16}",
            "storage allocator", "count", "bytes"
        )?;
        writeln!(f, "  {:<20}{:>14}", "requests", self.requests)?;
        writeln!(
            f,
            "  {:<20}{:>14}{:>16}",
            "served from pool",
            self.pool_hits,
            format!("({hit_rate:.1}%)")
        )?;
        writeln!(f, "  {:<20}{:>14}", "fresh allocations", self.fresh)?;
        writeln!(f, "  {:<20}{:>14}", "failed", self.failures)?;
        writeln!(f, "  {:<20}{:>14}", "recycled", self.recycles)?;
        writeln!(
            f,
            "  {:<20}{:>14}",
            "still referenced", self.still_referenced
        )?;
        writeln!(f, "  {:<20}{:>14}", "returned", self.returned)?;
        writeln!(
            f,
            "  {:<20}{:>14}{:>16}",
            "evicted (cap)", self.evicted, self.evicted_bytes
        )?;
        writeln!(
            f,
            "  {:<20}{:>14}{:>16}",
            "cached now", self.cached_buffers, self.cached_bytes
        )?;
        writeln!(f, "  {:<20}{:>14}{:>16}", "live now", "", self.live_bytes)?;
        write!(
            f,
            "  {:<20}{:>14}{:>16}",
            "peak live", "", self.peak_live_bytes
        )
    }
}

/// The mutable state behind the allocator's mutex.
#[derive(Default)]
struct Pool {
    /// Cached buffers by age: the key is a sequence number, increasing with every insertion.
    by_age: BTreeMap<u64, Storage>,
    /// The sequence numbers of the cached buffers of each size class.
    by_class: HashMap<usize, BTreeSet<u64>>,
    /// The next sequence number.
    next_seq: u64,
    /// The counters.
    stats: AllocStats,
}

impl Pool {
    /// Takes the most recently cached buffer of `class` aligned to at least `alignment`.
    fn take(&mut self, class: usize, alignment: usize) -> Option<Storage> {
        let seqs = self.by_class.get_mut(&class)?;
        let seq = seqs.iter().rev().copied().find(|seq| {
            self.by_age
                .get(seq)
                .is_some_and(|s| s.alignment().max(ALIGNMENT) >= alignment)
        })?;
        seqs.remove(&seq);
        if seqs.is_empty() {
            self.by_class.remove(&class);
        }
        let storage = self.by_age.remove(&seq)?;
        self.stats.cached_buffers -= 1;
        self.stats.cached_bytes -= storage.capacity();
        Some(storage)
    }

    /// Removes the oldest cached buffer.
    fn evict_oldest(&mut self) -> Option<Storage> {
        let (seq, storage) = self.by_age.pop_first()?;
        let class = storage.capacity();
        if let Some(seqs) = self.by_class.get_mut(&class) {
            seqs.remove(&seq);
            if seqs.is_empty() {
                self.by_class.remove(&class);
            }
        }
        self.stats.cached_buffers -= 1;
        self.stats.cached_bytes -= class;
        Some(storage)
    }

    /// Caches `storage`, whose size is a size class and fits in the remaining room.
    fn insert(&mut self, storage: Storage) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let class = storage.capacity();
        self.stats.cached_buffers += 1;
        self.stats.cached_bytes += class;
        self.by_class.entry(class).or_default().insert(seq);
        self.by_age.insert(seq, storage);
    }

    /// Counts `bytes` more as live.
    fn count_live(&mut self, bytes: usize) {
        self.stats.live_bytes = self.stats.live_bytes.saturating_add(bytes);
        self.stats.peak_live_bytes = self.stats.peak_live_bytes.max(self.stats.live_bytes);
    }
}

/// A thread-safe, size-class-bucketed cache of [`Storage`] buffers with a cap on the bytes it
/// holds (see the [module documentation](self) for the size classes, the eviction policy and
/// zero-filling).
pub struct PooledAllocator {
    shared: Arc<Shared>,
}

/// The cap and the cache: the [`Home`] of every storage the allocator hands out.
struct Shared {
    /// The most bytes the cache may hold.
    cap_bytes: usize,
    /// The cache and the counters.
    pool: Mutex<Pool>,
}

impl Home for Shared {
    fn take_back(&self, storage: Storage) {
        let freed = {
            let mut pool = self.lock();
            pool.stats.returned += 1;
            self.keep(&mut pool, storage)
        };
        drop(freed);
    }
}

impl Shared {
    /// Locks the state. A panic while it was held cannot leave it inconsistent (no method
    /// panics between its updates), so a poisoned lock is taken over.
    fn lock(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Caches `storage`, the last reference to a buffer handed out, evicting the oldest
    /// buffers if the room requires, or gives it back to be freed (outside the lock) when it
    /// is no class's or larger than the whole room; its bytes stop counting as live.
    fn keep(&self, pool: &mut Pool, mut storage: Storage) -> Vec<Storage> {
        storage.clear_home();
        let size = storage.capacity();
        pool.stats.live_bytes = pool.stats.live_bytes.saturating_sub(size);
        let room = (self.cap_bytes).min(pool.stats.peak_live_bytes.max(WORKING_SET_FLOOR));
        let mut freed = Vec::new();
        if size == 0 || size_class(size) != Some(size) {
            // Nothing to reuse, or not one of this allocator's classes (a cached buffer must
            // be exactly its class to serve every request of it).
            freed.push(storage);
        } else if size > room {
            pool.stats.evicted += 1;
            pool.stats.evicted_bytes += size;
            freed.push(storage);
        } else {
            while pool.stats.cached_bytes > room - size {
                let Some(old) = pool.evict_oldest() else {
                    break;
                };
                pool.stats.evicted += 1;
                pool.stats.evicted_bytes += old.capacity();
                freed.push(old);
            }
            pool.insert(storage);
        }
        freed
    }
}

impl PooledAllocator {
    /// An empty allocator that caches at most `cap_bytes` bytes of recycled buffers (0 turns
    /// the cache off: every recycled buffer is freed).
    pub fn new(cap_bytes: usize) -> Self {
        PooledAllocator {
            shared: Arc::new(Shared {
                cap_bytes,
                pool: Mutex::new(Pool::default()),
            }),
        }
    }

    /// The cap on cached bytes.
    pub fn cap_bytes(&self) -> usize {
        self.shared.cap_bytes
    }

    /// Locks the state.
    fn lock(&self) -> MutexGuard<'_, Pool> {
        self.shared.lock()
    }

    /// `storage` handed out for a request of `size` bytes, coming back here when its last
    /// reference is dropped.
    fn hand_out(&self, mut storage: Storage, size: usize) -> Arc<Storage> {
        storage.set_size(size);
        let home: Weak<Shared> = Arc::downgrade(&self.shared);
        storage.set_home(home);
        Arc::new(storage)
    }

    /// A storage of at least `size` bytes (exactly [`size_class`]`(size)`) whose start is
    /// aligned to `alignment` (a power of two) and to at least 64 bytes: a cached buffer of that
    /// class allocated with at least that alignment if there is one (contents left over from
    /// its previous use), otherwise a fresh zero-filled one.
    pub fn alloc(&self, size: usize, alignment: usize) -> Result<Arc<Storage>, AllocError> {
        let fail = |source| AllocError {
            size,
            alignment,
            source,
        };
        let class = if !alignment.is_power_of_two() {
            Err(fail(NDArrayError::BadAlignment { alignment }))
        } else {
            size_class(size).ok_or_else(|| fail(NDArrayError::StorageTooLarge { size, alignment }))
        };
        let class = match class {
            Ok(class) => class,
            Err(err) => {
                let mut pool = self.lock();
                pool.stats.requests += 1;
                pool.stats.failures += 1;
                return Err(err);
            }
        };
        {
            let mut pool = self.lock();
            pool.stats.requests += 1;
            if class != 0
                && let Some(storage) = pool.take(class, alignment)
            {
                pool.stats.pool_hits += 1;
                pool.count_live(class);
                drop(pool);
                return Ok(self.hand_out(storage, size));
            }
        }
        // Allocate outside the lock: zero-filling a large buffer takes a while.
        let fresh = Storage::new(class, alignment);
        let mut pool = self.lock();
        match fresh {
            Ok(storage) => {
                pool.stats.fresh += 1;
                pool.count_live(class);
                drop(pool);
                Ok(self.hand_out(storage, size))
            }
            Err(source) => {
                pool.stats.failures += 1;
                Err(fail(source))
            }
        }
    }

    /// Takes back a storage the caller no longer uses. If this was its last reference and its
    /// size is a non-zero size class, it is cached for reuse (evicting the oldest cached
    /// buffers if the cap requires; freed instead if it alone exceeds the cap), and its bytes
    /// stop counting as live; if something else (a tensor view, another clone) still
    /// references it, only this reference is dropped, and the storage comes back when the
    /// last one is ([`Home`]).
    pub fn recycle(&self, storage: Arc<Storage>) {
        let freed = match Arc::try_unwrap(storage) {
            Ok(storage) => {
                let mut pool = self.lock();
                pool.stats.recycles += 1;
                self.shared.keep(&mut pool, storage)
            }
            Err(shared) => {
                let mut pool = self.lock();
                pool.stats.recycles += 1;
                pool.stats.still_referenced += 1;
                drop(pool);
                // Dropped outside the lock: if the other references went meanwhile, this is
                // the last one, and the storage comes home.
                drop(shared);
                Vec::new()
            }
        };
        // Free outside the lock.
        drop(freed);
    }

    /// Frees every cached buffer (the counters other than the cache's own are kept).
    pub fn clear(&self) {
        let cached = {
            let mut pool = self.lock();
            pool.by_class.clear();
            pool.stats.cached_buffers = 0;
            pool.stats.cached_bytes = 0;
            std::mem::take(&mut pool.by_age)
        };
        drop(cached);
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> AllocStats {
        self.lock().stats.clone()
    }
}

impl Default for PooledAllocator {
    /// An allocator caching at most [`DEFAULT_CAP_BYTES`] (1 GiB).
    fn default() -> Self {
        PooledAllocator::new(DEFAULT_CAP_BYTES)
    }
}

impl fmt::Debug for PooledAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledAllocator")
            .field("cap_bytes", &self.cap_bytes())
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &Arc<Storage>) -> usize {
        s.as_ptr() as usize
    }

    #[test]
    fn size_classes_round_up_and_are_fixed_points() {
        assert_eq!(size_class(0), Some(0));
        assert_eq!(size_class(1), Some(64));
        assert_eq!(size_class(64), Some(64));
        assert_eq!(size_class(65), Some(128));
        assert_eq!(size_class(4096), Some(4096));
        assert_eq!(size_class(4097), Some(8192));
        assert_eq!(size_class(12 * 1024 + 1), Some(16 * 1024));
        assert_eq!(size_class(16 * 1024 + 1), Some(20 * 1024));
        assert_eq!(size_class(33 * 1024), Some(40 * 1024));
        assert_eq!(size_class(usize::MAX), None);
        let mut classes = BTreeSet::new();
        for size in (0..=1 << 20).step_by(7) {
            let class = size_class(size).unwrap();
            assert!(class >= size);
            if size > 16 * 1024 {
                assert!(class - size < size / 4, "waste at {size}");
            }
            assert_eq!(size_class(class), Some(class));
            classes.insert(class);
        }
        // Every size up to 1 MiB lands in a few dozen buckets, not one per page.
        assert!(classes.len() < 40, "{} classes", classes.len());
    }

    #[test]
    fn reuses_a_recycled_buffer_of_the_same_class() {
        let a = PooledAllocator::new(1 << 20);
        let s = a.alloc(1000, 64).unwrap();
        assert_eq!((s.size(), s.capacity()), (1000, 1024));
        let p = addr(&s);
        a.recycle(s);
        let t = a.alloc(900, 64).unwrap();
        assert_eq!(addr(&t), p);
        assert!(t.size() >= 900);
        assert_eq!(a.stats().pool_hits, 1);
    }

    #[test]
    fn different_classes_are_not_mixed() {
        let a = PooledAllocator::new(1 << 20);
        let small = a.alloc(100, 64).unwrap();
        let big = a.alloc(5000, 64).unwrap();
        let (ps, pb) = (addr(&small), addr(&big));
        a.recycle(small);
        a.recycle(big);
        let s2 = a.alloc(5000, 64).unwrap();
        assert_eq!(addr(&s2), pb);
        let s3 = a.alloc(3000, 64).unwrap();
        assert_ne!(addr(&s3), ps);
        assert_eq!(s3.capacity(), 4096);
        let s4 = a.alloc(128, 64).unwrap();
        assert_eq!(addr(&s4), ps);
        let st = a.stats();
        assert_eq!((st.pool_hits, st.fresh), (2, 3));
    }

    #[test]
    fn alignment_is_respected() {
        let a = PooledAllocator::new(1 << 20);
        for align in [64, 256] {
            let s = a.alloc(100, align).unwrap();
            assert_eq!(addr(&s) % align, 0);
            a.recycle(s);
        }
        // Cached: one 64-aligned and one 256-aligned buffer of class 128. A 256 request must
        // get the 256-aligned one; then the only one left is 64-aligned, so a second 256
        // request allocates afresh.
        let x = a.alloc(100, 256).unwrap();
        assert_eq!(addr(&x) % 256, 0);
        let y = a.alloc(100, 256).unwrap();
        assert_eq!(addr(&y) % 256, 0);
        let z = a.alloc(100, 64).unwrap();
        assert_eq!(addr(&z) % 64, 0);
        let st = a.stats();
        assert_eq!((st.pool_hits, st.fresh), (2, 3));
        assert_eq!(st.cached_buffers, 0);
        // Bad alignments are errors.
        assert!(a.alloc(100, 3).is_err());
        assert!(a.alloc(100, 0).is_err());
    }

    #[test]
    fn a_storage_referenced_elsewhere_comes_back_with_its_last_reference() {
        let a = PooledAllocator::new(1 << 20);
        let s = a.alloc(100, 64).unwrap();
        let view = Arc::clone(&s);
        let p = addr(&s);
        a.recycle(s);
        let st = a.stats();
        assert_eq!(st.still_referenced, 1);
        assert_eq!(st.cached_buffers, 0);
        assert_eq!(st.cached_bytes, 0);
        assert_eq!(st.live_bytes, 128);
        let t = a.alloc(100, 64).unwrap();
        assert_ne!(addr(&t), p);
        assert_eq!(addr(&view), p);
        assert_eq!(a.stats().pool_hits, 0);
        // The last reference dropped: the buffer is back in the cache.
        drop(view);
        let st = a.stats();
        assert_eq!((st.returned, st.cached_buffers, st.live_bytes), (1, 1, 128));
        let u = a.alloc(100, 64).unwrap();
        assert_eq!(addr(&u), p);
        assert_eq!(a.stats().pool_hits, 1);
    }

    /// A storage its holder drops without recycling (a result the VM returned, dropped by its
    /// caller) comes back to the cache, on any thread; once the allocator is gone, it is freed.
    #[test]
    fn dropped_results_come_back_while_the_allocator_lives() {
        let a = PooledAllocator::new(3 << 20);
        let result = a.alloc(3 << 20, 64).unwrap();
        let p = addr(&result);
        std::thread::spawn(move || drop(result)).join().unwrap();
        let st = a.stats();
        assert_eq!(
            (st.returned, st.cached_bytes, st.live_bytes),
            (1, 3 << 20, 0)
        );
        let again = a.alloc(3 << 20, 64).unwrap();
        assert_eq!(addr(&again), p);
        // Larger than the cap: freed on its way back, the cache unchanged.
        let big = a.alloc(4 << 20, 64).unwrap();
        drop(big);
        let st = a.stats();
        assert_eq!((st.returned, st.evicted, st.cached_bytes), (2, 1, 0));
        // The allocator dropped first: the storage outlives it and is freed by itself.
        drop(a);
        assert_eq!(again.capacity(), 3 << 20);
        drop(again);
    }

    #[test]
    fn the_cap_is_honoured() {
        let a = PooledAllocator::new(8192);
        let bufs: Vec<_> = (0..3).map(|_| a.alloc(4096, 64).unwrap()).collect();
        let addrs: Vec<_> = bufs.iter().map(addr).collect();
        for b in bufs {
            a.recycle(b);
            assert!(a.stats().cached_bytes <= 8192);
        }
        let st = a.stats();
        assert_eq!(st.cached_bytes, 8192);
        assert_eq!(st.cached_buffers, 2);
        assert_eq!((st.evicted, st.evicted_bytes), (1, 4096));
        // The oldest was evicted; the newest is served first.
        let x = a.alloc(4096, 64).unwrap();
        let y = a.alloc(4096, 64).unwrap();
        assert_eq!(addr(&x), addrs[2]);
        assert_eq!(addr(&y), addrs[1]);
        // A buffer larger than the whole cap is freed, and the cache does not grow.
        let big = a.alloc(16384, 64).unwrap();
        a.recycle(x);
        a.recycle(big);
        let st = a.stats();
        assert_eq!(st.cached_bytes, 4096);
        assert_eq!((st.evicted, st.evicted_bytes), (2, 4096 + 16384));
        // A cap of 0 caches nothing.
        let none = PooledAllocator::new(0);
        let s = none.alloc(10, 64).unwrap();
        none.recycle(s);
        assert_eq!(none.stats().cached_bytes, 0);
        assert_eq!(none.stats().evicted, 1);
    }

    /// Sizes that only grow (a KV cache one step longer per token), one buffer live at a
    /// time: the cache keeps no more than the floor, though the cap would allow all of them.
    #[test]
    fn the_cache_is_no_larger_than_the_working_set() {
        let a = PooledAllocator::new(DEFAULT_CAP_BYTES);
        let step = 1 << 20;
        let mut held = a.alloc(step, 64).unwrap();
        for n in 2..=100 {
            let next = a.alloc(n * step, 64).unwrap();
            a.recycle(std::mem::replace(&mut held, next));
            let st = a.stats();
            assert!(st.cached_bytes <= st.peak_live_bytes.max(WORKING_SET_FLOOR));
        }
        let st = a.stats();
        // Two live at once: the one held and the next.
        assert!(st.peak_live_bytes <= 2 * size_class(100 * step).unwrap());
        assert!(st.cached_bytes <= st.peak_live_bytes, "{st:?}");
        assert!(st.evicted > 0);
        // A working set larger than the floor: the peak's worth is kept, the newest first.
        let big: Vec<_> = (0..4).map(|_| a.alloc(64 << 20, 64).unwrap()).collect();
        for b in big {
            a.recycle(b);
        }
        let st = a.stats();
        assert!(st.cached_bytes >= 4 * (64 << 20) && st.cached_bytes <= st.peak_live_bytes);
    }

    #[test]
    fn stats_count_a_scripted_sequence_exactly() {
        let a = PooledAllocator::new(1 << 20);
        let s1 = a.alloc(100, 64).unwrap(); // fresh, 128
        let s2 = a.alloc(5000, 64).unwrap(); // fresh, 8192
        a.recycle(s1); // cached 128
        let s3 = a.alloc(120, 64).unwrap(); // hit, 128
        let view = Arc::clone(&s2);
        a.recycle(s2); // still referenced
        drop(view); // returned: cached 8192
        let e = a.alloc(usize::MAX, 64); // failure
        assert!(e.is_err());
        let s4 = a.alloc(0, 64).unwrap(); // fresh, 0 bytes
        a.recycle(s3); // cached 128
        a.recycle(s4); // zero-size: freed
        assert_eq!(
            a.stats(),
            AllocStats {
                requests: 5,
                pool_hits: 1,
                fresh: 3,
                failures: 1,
                recycles: 4,
                still_referenced: 1,
                returned: 1,
                evicted: 0,
                evicted_bytes: 0,
                cached_buffers: 2,
                cached_bytes: 128 + 8192,
                live_bytes: 0,
                peak_live_bytes: 128 + 8192,
            }
        );
        let table = a.stats().to_string();
        assert!(table.contains("served from pool"), "{table}");
        assert!(table.contains("(20.0%)"), "{table}");
        assert!(table.contains("8320"), "{table}");
    }

    #[test]
    fn clear_empties_the_cache() {
        let a = PooledAllocator::default();
        assert_eq!(a.cap_bytes(), DEFAULT_CAP_BYTES);
        let s = a.alloc(100, 64).unwrap();
        let t = a.alloc(10000, 64).unwrap();
        a.recycle(s);
        a.recycle(t);
        assert_eq!(a.stats().cached_buffers, 2);
        a.clear();
        let st = a.stats();
        assert_eq!((st.cached_buffers, st.cached_bytes), (0, 0));
        assert_eq!(st.recycles, 2);
        let _u = a.alloc(100, 64).unwrap();
        assert_eq!(a.stats().pool_hits, 0);
        assert_eq!(a.stats().fresh, 3);
    }

    #[test]
    fn concurrent_use_keeps_the_accounting() {
        const THREADS: usize = 8;
        const ROUNDS: usize = 500;
        let a = Arc::new(PooledAllocator::new(64 * 1024));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let a = Arc::clone(&a);
                std::thread::spawn(move || {
                    for i in 0..ROUNDS {
                        let size = 1 + (t * 997 + i * 131) % 20_000;
                        let s = a.alloc(size, if i % 3 == 0 { 256 } else { 64 }).unwrap();
                        assert!(s.size() >= size);
                        // SAFETY: this thread holds the only reference to the storage and
                        // writes within its size.
                        unsafe { s.as_ptr().add(size - 1).write(t as u8) };
                        a.recycle(s);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let st = a.stats();
        let n = (THREADS * ROUNDS) as u64;
        assert_eq!(st.requests, n);
        assert_eq!(st.pool_hits + st.fresh, n);
        assert_eq!(st.failures, 0);
        assert_eq!(st.recycles, n);
        assert_eq!(st.still_referenced, 0);
        assert_eq!(st.live_bytes, 0);
        assert!(st.cached_bytes <= 64 * 1024);
        assert!(st.pool_hits > 0);
        assert!(st.peak_live_bytes <= THREADS * size_class(20_000).unwrap());
        a.clear();
        assert_eq!(a.stats().cached_bytes, 0);
    }

    #[test]
    fn zero_size_allocations_work() {
        let a = PooledAllocator::new(1024);
        let s = a.alloc(0, 64).unwrap();
        assert_eq!(s.size(), 0);
        assert_eq!(addr(&s) % 64, 0);
        let t = a.alloc(0, 256).unwrap();
        assert_eq!(addr(&t) % 256, 0);
        a.recycle(s);
        a.recycle(t);
        let st = a.stats();
        assert_eq!((st.fresh, st.cached_buffers, st.evicted), (2, 0, 0));
    }

    #[test]
    fn an_impossible_size_is_an_error() {
        let a = PooledAllocator::default();
        for size in [usize::MAX, usize::MAX - 4096, isize::MAX as usize] {
            let err = a.alloc(size, 64).unwrap_err();
            assert_eq!(err.size, size);
            assert_eq!(err.alignment, 64);
            assert!(err.to_string().contains(&size.to_string()));
        }
        let st = a.stats();
        assert_eq!((st.requests, st.failures, st.fresh), (3, 3, 0));
    }
}
