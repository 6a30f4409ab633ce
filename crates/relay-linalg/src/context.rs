//! The kernel context a call runs with: TVM's `resource_handle` (tvm-rfcs #34).

use std::sync::Arc;

use crate::gemm::prepacked::PackedConstants;
use crate::isa::{Isa, IsaError};
use crate::ops::Ops;
use crate::pool::Pool;

/// The alignment of scratch regions (and of every tensor a kernel receives), in bytes.
pub const DATA_ALIGNMENT: u64 = 64;

/// The kernel context a kernel's `resource_handle` points to (tvm-rfcs #34): where it reports
/// errors, the threads its parallel loops and GEMM calls run on, and the workspace its scratch
/// buffers live in. One context serves one call at a time (the VM keeps one per thread); its
/// workspace is reused from call to call.
pub struct KernelContext {
    /// The message of the last failure, set by the kernel when it returns non-zero.
    pub error: Option<String>,
    /// Where parallel work runs.
    threads: Threads,
    /// Scratch memory, grown on demand and reused (`u64`s: 8-byte aligned; scratch buffers
    /// start at the first 64-byte boundary).
    workspace: Vec<u64>,
    /// The host kernels of the instruction set its calls use.
    ops: &'static Ops,
    /// The packed constant operands of the executable being run, if any.
    constants: Option<Arc<PackedConstants>>,
}

/// The threads of a [`KernelContext`].
enum Threads {
    /// The calling thread only.
    One,
    /// A pool ([`Pool::global`] for every core, or one of its own), the calling thread
    /// included.
    Pool(Arc<Pool>),
}

impl Default for KernelContext {
    /// A context running parallel work on every core (the shared [`Pool::global`]).
    fn default() -> KernelContext {
        KernelContext::with_threads(0)
    }
}

impl std::fmt::Debug for KernelContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelContext")
            .field("error", &self.error)
            .field("threads", &self.threads())
            .field("workspace_bytes", &(self.workspace.len() * 8))
            .field("isa", &self.ops.isa)
            .finish()
    }
}

impl KernelContext {
    /// A context whose kernels use `threads` threads: 0 means one per core (the shared
    /// [`Pool::global`]), 1 the calling thread only. If a pool of that size cannot be created (the system
    /// refuses threads), the context runs on the calling thread alone.
    pub fn with_threads(threads: usize) -> KernelContext {
        let threads = match threads {
            0 => Threads::Pool(Pool::global().clone()),
            1 => Threads::One,
            n => match Pool::new(n) {
                Some(pool) => Threads::Pool(Arc::new(pool)),
                None => Threads::One,
            },
        };
        KernelContext {
            error: None,
            threads,
            workspace: Vec::new(),
            ops: Ops::process_default(),
            constants: None,
        }
    }

    /// The context with its calls on instruction set `isa`'s kernels instead of the default
    /// ([`Isa::process_default`]), or an error if this CPU cannot run them.
    pub fn with_isa(mut self, isa: Isa) -> Result<KernelContext, IsaError> {
        self.ops = Ops::for_isa(isa)?;
        Ok(self)
    }

    /// The context with its calls on the kernels of `ops`.
    pub fn with_ops(mut self, ops: &'static Ops) -> KernelContext {
        self.ops = ops;
        self
    }

    /// The instruction set its calls use.
    pub fn isa(&self) -> Isa {
        self.ops.isa
    }

    /// The host kernels its calls use.
    pub fn ops(&self) -> &'static Ops {
        self.ops
    }

    /// Makes GEMMs of later calls find their constant operands' packed forms in `constants`
    /// (the executable's), or pack every operand per call for `None`.
    pub fn set_constants(&mut self, constants: Option<Arc<PackedConstants>>) {
        self.constants = constants;
    }

    /// The packed constant operands calls use, if any.
    pub fn constants(&self) -> Option<&PackedConstants> {
        self.constants.as_deref()
    }

    /// How many threads its kernels use.
    pub fn threads(&self) -> usize {
        match &self.threads {
            Threads::One => 1,
            Threads::Pool(pool) => pool.threads(),
        }
    }

    /// The thread pool, unless the context runs on its calling thread only.
    pub fn pool(&self) -> Option<&Pool> {
        match &self.threads {
            Threads::One => None,
            Threads::Pool(pool) => Some(pool),
        }
    }

    /// Runs `f(i)` for every `i` in `0..n`, spread over the context's threads, and returns the
    /// first non-zero result met (or 0).
    ///
    /// The calling thread takes chunks too, and chunks are handed out one at a time, so no
    /// thread sits waiting while chunks remain (see [`crate::pool`]). Runs on the calling
    /// thread alone when the context has one thread or its pool is busy with another job.
    pub fn parallel(&self, n: i64, f: &(dyn Fn(i64) -> i32 + Sync)) -> i32 {
        match &self.threads {
            Threads::Pool(pool) if n > 1 => pool.run(n, f),
            _ => (0..n).map(f).find(|&rc| rc != 0).unwrap_or(0),
        }
    }

    /// Writes the addresses of `sizes.len()` 64-byte aligned scratch regions of the given
    /// byte sizes in the workspace (growing it if needed) to `out`, or returns `None` if that
    /// much memory cannot be reserved.
    ///
    /// # Safety
    ///
    /// `out` is valid for `sizes.len()` writes.
    pub unsafe fn scratch(&mut self, sizes: &[u64], out: *mut *mut u8) -> Option<()> {
        let mut total: u64 = DATA_ALIGNMENT;
        for &s in sizes {
            total =
                total.checked_add(s.checked_add(DATA_ALIGNMENT - 1)? & !(DATA_ALIGNMENT - 1))?;
        }
        let words = usize::try_from(total.div_ceil(8)).ok()?;
        if self.workspace.len() < words {
            self.workspace.clear();
            self.workspace.try_reserve_exact(words).ok()?;
            self.workspace.resize(words, 0);
        }
        let base = self.workspace.as_mut_ptr().cast::<u8>();
        let mut offset = base.align_offset(DATA_ALIGNMENT as usize);
        for (i, &s) in sizes.iter().enumerate() {
            // SAFETY: `out` is valid for one write per size.
            unsafe { *out.add(i) = base.wrapping_add(offset) };
            let rounded = (s + DATA_ALIGNMENT - 1) & !(DATA_ALIGNMENT - 1);
            offset += usize::try_from(rounded).ok()?;
        }
        Some(())
    }
}

/// An output's base pointer, shared by the chunks of a parallel loop, each of which writes
/// its own elements of it.
pub(crate) struct SharedOut(pub(crate) *mut f32);

// SAFETY: the chunks write disjoint elements.
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// The address `offset` elements in.
    pub(crate) fn at(&self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
    }
}
