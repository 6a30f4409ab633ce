//! The kernels' thread pool: a few workers that run the chunks of one parallel loop or GEMM
//! at a time, woken fast.
//!
//! A kernel with a few microseconds of work cannot afford a wake-up through the OS per call
//! (a futex wake and the scheduler's latency are tens of microseconds on a busy machine), and
//! a network's kernels come back to back. So, as ONNX Runtime's and OpenMP's pools do, a
//! worker that finished a job **spins** on the job word for a short while ([`SPIN`], with
//! `spin_loop` hints, yielding the core to other threads in the second half) before it
//! **parks** on a condition variable; the caller wakes parked workers only if some are
//! parked. The calling thread takes part in its own job, and chunks are handed out one at a
//! time from a shared counter, so a worker that wakes late, or a core the OS took away, does
//! not hold the job up: whoever is running takes the next chunk.
//!
//! One job runs at a time: a `run` on a pool that is busy (a second VM sharing the global
//! pool, or a kernel body calling back into its own context from a worker) runs serially on
//! its calling thread instead of waiting.
//!
//! **The job protocol.** `state` packs the job's epoch, a `closed` bit and the number of
//! workers that joined. The caller writes the job (`body`, `n`), resets the counters, and
//! publishes a new epoch (Release). A worker joins by a compare-and-swap that increments the
//! joined count only if the epoch is the one it saw and the job is not closed (Acquire), takes
//! chunks from `next` until they run out, and counts itself out in `left`. The caller, after
//! running chunks itself until none remain and waiting for `done == n`, closes the job and
//! waits until every worker that joined has left: from then on no worker reads the job, so the
//! caller may return (and its closure go out of scope) and publish the next job.

use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a worker spins on the job word after its last job before it parks.
pub const SPIN: Duration = Duration::from_micros(100);

/// The body of a job: runs chunk `i` and returns 0 or an error code.
type Body<'a> = dyn Fn(i64) -> i32 + Sync + 'a;

/// `state` layout: the epoch above bit 32, the closed bit, the joined count below it.
const CLOSED: u64 = 1 << 31;
const JOINED: u64 = CLOSED - 1;
const EPOCH: u64 = 1 << 32;

/// What the caller and the workers share.
struct Shared {
    /// Epoch, closed bit, joined count (see the module documentation).
    state: AtomicU64,
    /// The job's body, lifetime erased: valid while the job is open or a worker is joined.
    body: UnsafeCell<Option<NonNull<Body<'static>>>>,
    /// The job's chunk count.
    n: AtomicI64,
    /// The next chunk to hand out.
    next: AtomicI64,
    /// Chunks finished.
    done: AtomicI64,
    /// Workers that joined the job and left it.
    left: AtomicU64,
    /// The first non-zero code a chunk returned.
    first_error: AtomicI32,
    /// Whether a job is being run (only one at a time).
    busy: AtomicBool,
    /// Workers parked (or about to park) on `wake`.
    sleepers: AtomicUsize,
    /// The lock `wake` is waited on with.
    lock: Mutex<()>,
    /// Parked workers wait here for a new epoch.
    wake: Condvar,
    /// Set when the pool is dropped: the workers exit.
    shutdown: AtomicBool,
    /// Whether workers record when they take part in a job ([`Pool::set_tracing`]).
    tracing: AtomicBool,
    /// What they recorded: (worker number from 1, joined, left).
    spans: Mutex<Vec<WorkerSpan>>,
}

/// A worker's part in one job: the worker (numbered from 1; the caller is thread 0) and when
/// it joined and left.
pub type WorkerSpan = (u32, Instant, Instant);

// SAFETY: `body` is written only by the caller holding `busy` while no worker is joined, and
// read only by joined workers, ordered by the Release/Acquire operations on `state`; every
// other field is atomic or a lock.
unsafe impl Sync for Shared {}
// SAFETY: as above; the raw pointer is only dereferenced under that protocol.
unsafe impl Send for Shared {}

/// A pool of worker threads running one job's chunks at a time; the calling thread is one
/// of its threads.
pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pool({} threads)", self.threads())
    }
}

impl Pool {
    /// A pool of `threads` threads: `threads - 1` workers plus the caller. `None` if the
    /// system refuses to start a thread.
    pub fn new(threads: usize) -> Option<Pool> {
        let mut pool = Pool::serial();
        for i in 1..threads.max(1) {
            let shared = pool.shared.clone();
            let handle = std::thread::Builder::new()
                .name(format!("relay-kernel-{i}"))
                .spawn(move || worker(&shared, i as u32))
                .ok()?;
            pool.workers.push(handle);
        }
        Some(pool)
    }

    /// A pool without workers: every job runs on its caller.
    fn serial() -> Pool {
        let shared = Arc::new(Shared {
            state: AtomicU64::new(0),
            body: UnsafeCell::new(None),
            n: AtomicI64::new(0),
            next: AtomicI64::new(0),
            done: AtomicI64::new(0),
            left: AtomicU64::new(0),
            first_error: AtomicI32::new(0),
            busy: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
            tracing: AtomicBool::new(false),
            spans: Mutex::new(Vec::new()),
        });
        Pool {
            shared,
            workers: Vec::new(),
        }
    }

    /// The pool of every core, shared by the contexts that ask for "every core".
    pub fn global() -> &'static Arc<Pool> {
        static GLOBAL: OnceLock<Arc<Pool>> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            Arc::new(Pool::new(cores).unwrap_or_else(Pool::serial))
        })
    }

    /// Turns the recording of the workers' parts in jobs on or off (a profiler's timeline;
    /// every job of the pool is recorded, whoever runs it).
    pub fn set_tracing(&self, on: bool) {
        self.shared.tracing.store(on, Ordering::Relaxed);
    }

    /// The workers' parts in the jobs since the last call, while tracing was on.
    pub fn take_spans(&self) -> Vec<WorkerSpan> {
        let mut spans = self.shared.spans.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *spans)
    }

    /// Its threads, the caller included.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `body(i)` for every `i` in `0..n` on the pool's threads and the caller, and
    /// returns the first non-zero code a chunk returned (or 0). Runs serially on the caller
    /// when the pool has no workers, `n` is 1 or less, or the pool is running another job.
    pub fn run(&self, n: i64, body: &Body<'_>) -> i32 {
        let s = &*self.shared;
        let serial = || (0..n).map(body).find(|&rc| rc != 0).unwrap_or(0);
        if n <= 1 || self.workers.is_empty() {
            return serial();
        }
        if s.busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return serial();
        }
        // SAFETY: `busy` is held and the previous job's workers have all left, so no worker
        // reads `body`; it is read only by workers joined to the job published below, all of
        // whom leave before this function returns.
        unsafe {
            *s.body.get() = Some(std::mem::transmute::<
                NonNull<Body<'_>>,
                NonNull<Body<'static>>,
            >(NonNull::from(body)));
        }
        s.n.store(n, Ordering::Relaxed);
        s.next.store(0, Ordering::Relaxed);
        s.done.store(0, Ordering::Relaxed);
        s.left.store(0, Ordering::Relaxed);
        s.first_error.store(0, Ordering::Relaxed);
        let epoch = (s.state.load(Ordering::Relaxed) & !(CLOSED | JOINED)).wrapping_add(EPOCH);
        s.state.store(epoch, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _guard = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        run_chunks(s, body);
        wait_until(|| s.done.load(Ordering::Acquire) >= n);
        let joined = s.state.fetch_or(CLOSED, Ordering::AcqRel) & JOINED;
        wait_until(|| s.left.load(Ordering::Acquire) >= joined);
        let rc = s.first_error.load(Ordering::Relaxed);
        s.busy.store(false, Ordering::Release);
        rc
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let s = &*self.shared;
        s.shutdown.store(true, Ordering::SeqCst);
        s.state.fetch_add(EPOCH, Ordering::SeqCst);
        {
            let _guard = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Takes chunks of the current job and runs them until none remain.
fn run_chunks(s: &Shared, body: &Body<'_>) {
    let n = s.n.load(Ordering::Relaxed);
    loop {
        let i = s.next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            return;
        }
        // A panicking chunk (a host routine's bug) counts as an error, never as a chunk that
        // never finishes.
        let rc = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(i))).unwrap_or(-1);
        if rc != 0 {
            let _ = s
                .first_error
                .compare_exchange(0, rc, Ordering::Relaxed, Ordering::Relaxed);
        }
        s.done.fetch_add(1, Ordering::Release);
    }
}

/// Spins on `ready` (yielding the core after a while: the chunks a caller waits for run on
/// threads the OS may have descheduled).
fn wait_until(ready: impl Fn() -> bool) {
    let mut spins = 0u32;
    while !ready() {
        if spins < 1 << 10 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

/// A worker: waits for each new epoch, joins its job if still open, runs chunks, leaves.
fn worker(s: &Shared, number: u32) {
    // Epoch 0 is the pool's state before its first job, whenever this thread starts: a worker
    // that starts late must not take a later epoch (a job, or the shutdown) for the one it
    // already saw.
    let mut seen = 0;
    loop {
        let state = wait_for_epoch(s, seen);
        if s.shutdown.load(Ordering::Acquire) {
            return;
        }
        seen = state & !(CLOSED | JOINED);
        if join(s, state).is_some() {
            // SAFETY: joined to an open job: the caller keeps `body` alive until this worker
            // has counted itself out in `left` (below).
            if let Some(body) = unsafe { *s.body.get() } {
                let joined = Instant::now();
                // SAFETY: as above: the caller's closure outlives this worker's membership.
                run_chunks(s, unsafe { body.as_ref() });
                if s.tracing.load(Ordering::Relaxed) {
                    let span = (number, joined, Instant::now());
                    s.spans.lock().unwrap_or_else(|e| e.into_inner()).push(span);
                }
            }
            s.left.fetch_add(1, Ordering::Release);
        }
    }
}

/// Joins the job of `state`'s epoch unless it is closed (or a newer one was published).
fn join(s: &Shared, mut state: u64) -> Option<()> {
    let epoch = state & !(CLOSED | JOINED);
    loop {
        if state & !(CLOSED | JOINED) != epoch || state & CLOSED != 0 {
            return None;
        }
        match s
            .state
            .compare_exchange_weak(state, state + 1, Ordering::Acquire, Ordering::Relaxed)
        {
            Ok(_) => return Some(()),
            Err(now) => state = now,
        }
    }
}

/// The state once its epoch differs from `seen`: spins for [`SPIN`], then parks.
fn wait_for_epoch(s: &Shared, seen: u64) -> u64 {
    let fresh = |state: u64| state & !(CLOSED | JOINED) != seen;
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        let state = s.state.load(Ordering::Acquire);
        if fresh(state) {
            return state;
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(64) {
            let spent = start.elapsed();
            if spent >= SPIN {
                break;
            }
            if spent >= SPIN / 2 {
                std::thread::yield_now();
            }
        }
        std::hint::spin_loop();
    }
    let mut guard = s.lock.lock().unwrap_or_else(|e| e.into_inner());
    s.sleepers.fetch_add(1, Ordering::SeqCst);
    loop {
        let state = s.state.load(Ordering::SeqCst);
        if fresh(state) {
            s.sleepers.fetch_sub(1, Ordering::SeqCst);
            return state;
        }
        guard = s.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI64;

    #[test]
    fn every_chunk_runs_once_on_many_jobs() {
        for threads in [1, 2, 3, 8] {
            let pool = Pool::new(threads).expect("threads");
            for n in [0i64, 1, 2, 3, 7, 64, 1000] {
                let hits: Vec<AtomicI64> = (0..n).map(|_| AtomicI64::new(0)).collect();
                let rc = pool.run(n, &|i| {
                    hits[i as usize].fetch_add(1, Ordering::Relaxed);
                    0
                });
                assert_eq!(rc, 0);
                assert!(
                    hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                    "{threads} {n}"
                );
            }
        }
    }

    #[test]
    fn the_first_error_is_returned_and_a_panic_is_an_error() {
        let pool = Pool::new(2).expect("threads");
        assert_eq!(pool.run(16, &|i| if i == 5 { 3 } else { 0 }), 3);
        let rc = pool.run(16, &|i| if i == 9 { panic!("chunk {i}") } else { 0 });
        assert_eq!(rc, -1);
        // The pool still works.
        assert_eq!(pool.run(16, &|_| 0), 0);
    }

    #[test]
    fn parked_workers_wake_and_nested_jobs_run_serially() {
        let pool = Pool::new(3).expect("threads");
        std::thread::sleep(SPIN * 5);
        let sum = AtomicI64::new(0);
        let rc = pool.run(100, &|i| {
            // A job started from inside a chunk runs on that thread.
            let inner = pool.run(4, &|j| {
                sum.fetch_add(j, Ordering::Relaxed);
                0
            });
            sum.fetch_add(i, Ordering::Relaxed);
            inner
        });
        assert_eq!(rc, 0);
        assert_eq!(sum.load(Ordering::Relaxed), 100 * 6 + 4950);
    }

    #[test]
    fn many_callers_share_one_pool() {
        let pool = Arc::new(Pool::new(2).expect("threads"));
        std::thread::scope(|scope| {
            for _ in 0..4 {
                let pool = pool.clone();
                scope.spawn(move || {
                    for _ in 0..500 {
                        let sum = AtomicI64::new(0);
                        pool.run(10, &|i| {
                            sum.fetch_add(i, Ordering::Relaxed);
                            0
                        });
                        assert_eq!(sum.load(Ordering::Relaxed), 45);
                    }
                });
            }
        });
    }
}
