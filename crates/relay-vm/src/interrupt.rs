//! Stopping a run from outside: a [`Vm`](crate::Vm) made with an [`Interrupt`] asks it, at
//! function-call and kernel boundaries (calls, tail calls, backward jumps of a loop, kernel
//! calls), whether to stop, and returns a [`VmErrorKind::Interrupted`](crate::VmErrorKind)
//! error when it says so. A kernel that has started runs to its end.
//!
//! The question is asked once every [`POLL_EVERY`] boundaries, so that a check that costs
//! something (the Python binding reacquires the GIL to look for a pending `KeyboardInterrupt`)
//! does not slow a loop of a few nanoseconds per iteration.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Boundaries between two checks.
pub const POLL_EVERY: u32 = 256;

/// A check whether the run should stop, shared by every VM that was given it.
#[derive(Clone)]
pub struct Interrupt {
    check: Arc<dyn Fn() -> bool + Send + Sync>,
}

impl Interrupt {
    /// Stops the run when `check` returns true.
    pub fn new(check: impl Fn() -> bool + Send + Sync + 'static) -> Interrupt {
        Interrupt {
            check: Arc::new(check),
        }
    }

    /// Stops the run once `flag` is set (by another thread, a signal handler, a timer).
    pub fn flag(flag: Arc<AtomicBool>) -> Interrupt {
        Interrupt::new(move || flag.load(Ordering::Relaxed))
    }

    /// Whether the run should stop now.
    pub fn requested(&self) -> bool {
        (self.check)()
    }
}

impl fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Interrupt")
    }
}

/// A VM's countdown to its next check.
#[derive(Clone, Debug)]
pub(crate) struct Poll {
    left: u32,
}

impl Poll {
    pub(crate) fn new() -> Poll {
        Poll { left: POLL_EVERY }
    }

    /// Counts one boundary; true when `interrupt` was asked and said stop.
    #[inline(always)]
    pub(crate) fn stop(&mut self, interrupt: &Interrupt) -> bool {
        self.left -= 1;
        if self.left > 0 {
            return false;
        }
        self.left = POLL_EVERY;
        interrupt.requested()
    }
}
