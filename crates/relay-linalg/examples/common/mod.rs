//! What the timing examples share: their operands' values, and the process's CPU time, which
//! they time one thread by (on a shared machine it leaves out the time other processes hold
//! the core, and repeats within a few percent where wall-clock time does not).

/// Values in [-1, 1).
pub fn values(len: usize, seed: u32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 8) as f32 / (1 << 23) as f32 - 1.0
        })
        .collect()
}

/// Seconds of CPU time this process has used (Linux), if it can be read.
#[cfg(target_os = "linux")]
pub fn cpu_seconds() -> Option<f64> {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: `ts` is a valid `struct timespec` (64-bit Linux layout).
    let rc = unsafe { clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then_some(ts.sec as f64 + ts.nsec as f64 * 1e-9)
}

#[cfg(not(target_os = "linux"))]
pub fn cpu_seconds() -> Option<f64> {
    None
}

/// A cache line of floats: a [`Buffer`]'s unit, aligned as the runtime aligns its tensors.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([f32; 16]);

/// Floats at a 64-byte-aligned address, as the VM's allocator places every tensor (a `Vec`
/// of floats is only 16-byte aligned, so some vector loads would cross cache lines).
pub struct Buffer(Vec<Line>, usize);

impl Buffer {
    /// `len` zeros.
    pub fn zeros(len: usize) -> Buffer {
        Buffer(vec![Line([0.0; 16]); len.div_ceil(16)], len)
    }

    /// A copy of `v`.
    pub fn from(v: &[f32]) -> Buffer {
        let mut b = Buffer::zeros(v.len());
        for (line, chunk) in b.0.iter_mut().zip(v.chunks(16)) {
            line.0[..chunk.len()].copy_from_slice(chunk);
        }
        b
    }

    /// The number of floats.
    pub fn len(&self) -> usize {
        self.1
    }

    /// The first element.
    pub fn as_ptr(&self) -> *const f32 {
        self.0.as_ptr().cast()
    }

    /// The first element, writable.
    pub fn as_mut_ptr(&mut self) -> *mut f32 {
        self.0.as_mut_ptr().cast()
    }
}
