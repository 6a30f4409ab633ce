//! The VM: runs an [`Executable`]'s bytecode.

use std::sync::Arc;

use relay_runtime::Value;

use crate::allocator::AllocStats;
use crate::error::VmError;
use crate::executable::Executable;
use crate::profile::Profile;

/// Settings of a [`Vm`].
#[derive(Clone, Debug)]
pub struct VmOptions {
    /// The most call frames live at once; deeper recursion is "recursion limit exceeded".
    pub max_frames: usize,
    /// Kernel threads: 0 = every core, 1 = the calling thread only, n = n threads.
    pub threads: usize,
    /// Records a [`Profile`] (per kernel and per instruction kind timings).
    pub profile: bool,
    /// The cap on bytes the storage pool keeps cached.
    pub allocator_cap: usize,
}

impl Default for VmOptions {
    fn default() -> Self {
        VmOptions {
            max_frames: 1_000_000,
            threads: 0,
            profile: false,
            allocator_cap: crate::allocator::DEFAULT_CAP_BYTES,
        }
    }
}

/// A closure the VM made: a function of the executable and its captured values (passed
/// before the explicit arguments).
#[derive(Clone, Debug)]
pub struct VmClosure {
    /// The function's index in the executable.
    pub func: u32,
    /// The captured values.
    pub captured: Vec<Value>,
}

/// A virtual machine running one executable; one per thread (an executable is shared).
pub struct Vm<'e> {
    exe: &'e Executable,
    options: VmOptions,
}

impl<'e> Vm<'e> {
    /// A VM with the default options.
    pub fn new(exe: &'e Executable) -> Vm<'e> {
        Vm::with_options(exe, VmOptions::default())
    }

    /// A VM with `options`.
    pub fn with_options(exe: &'e Executable, options: VmOptions) -> Vm<'e> {
        Vm { exe, options }
    }

    /// The options.
    pub fn options(&self) -> &VmOptions {
        &self.options
    }

    /// Runs global function `entry` (with or without `@`) on `args`, checked against its
    /// parameters (count, and each tensor's dtype and shape).
    pub fn invoke(&mut self, entry: &str, args: &[Value]) -> Result<Value, VmError> {
        let _ = (entry, args, self.exe);
        todo!("vm")
    }

    /// Calls a closure this VM (or another VM of the same executable) returned.
    pub fn call_closure(&mut self, closure: &Value, args: &[Value]) -> Result<Value, VmError> {
        let _ = (closure, args);
        todo!("vm")
    }

    /// The profile recorded so far, when profiling is on.
    pub fn profile(&self) -> Option<&Profile> {
        todo!("vm")
    }

    /// Takes the profile recorded so far, leaving an empty one.
    pub fn take_profile(&mut self) -> Option<Profile> {
        todo!("vm")
    }

    /// The storage allocator's counters.
    pub fn allocator_stats(&self) -> AllocStats {
        todo!("vm")
    }

    /// The most frames that were live at once.
    pub fn peak_frames(&self) -> usize {
        let _ = Arc::<()>::new(());
        todo!("vm")
    }
}
