//! A global allocator that records the largest single request of the current thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    // A `Cell` of a constant initializer has no destructor, so it can be read inside the
    // allocator at any point of a thread's life, its start and end included.
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn record(size: usize) {
    // `try_with` fails only while the thread's locals are being torn down; a request then
    // is not one any test measures.
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
}

/// The system allocator, recording the largest single request (allocation, zeroed
/// allocation, or the new size of a reallocation) of each thread. Install it with
/// `#[global_allocator] static ALLOCATOR: RecordingAllocator = RecordingAllocator;` and read
/// it with [`largest_allocation`].
pub struct RecordingAllocator;

// SAFETY: every method forwards to the system allocator unchanged; recording touches only a
// thread-local `Cell` and allocates nothing.
unsafe impl GlobalAlloc for RecordingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded; `ptr` came from this allocator, which is the system's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        // SAFETY: forwarded; `ptr` came from this allocator, which is the system's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns its result with the largest single allocation this thread made
/// during it (0 for none). Meaningful only in a binary whose global allocator is
/// [`RecordingAllocator`].
pub fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LARGEST.with(|largest| largest.replace(0));
    let value = f();
    let during = LARGEST.with(|largest| largest.replace(before.max(largest.get())));
    (value, during)
}
