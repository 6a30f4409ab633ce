//! `Vm`: runs an [`Executable`] on Rust values, one VM per thread (TVM's `VirtualMachine`).

use relay_runtime::Value;
use relay_vm::allocator::AllocStats;
use relay_vm::{Executable, Profile, VmOptions};

use crate::Result;

/// A virtual machine running one executable. Many VMs (one per thread) share one executable;
/// a VM keeps its storage pool and profile between calls.
pub struct Vm<'e> {
    inner: relay_vm::Vm<'e>,
}

impl<'e> Vm<'e> {
    /// A VM with the default options (every core for kernels, 10^6 frames at most).
    pub fn new(exe: &'e Executable) -> Vm<'e> {
        Vm {
            inner: relay_vm::Vm::new(exe),
        }
    }

    /// A VM with `options`.
    pub fn with_options(exe: &'e Executable, options: VmOptions) -> Vm<'e> {
        Vm {
            inner: relay_vm::Vm::with_options(exe, options),
        }
    }

    /// Runs global function `entry` (with or without `@`) on `args`: [`crate::Tensor`]s or
    /// [`Value`]s. The arguments are checked against the function's parameters (their number,
    /// and each tensor's dtype and shape); a mismatch, an unknown function or a failure while
    /// running is an [`crate::Error::Run`] saying which.
    pub fn invoke<A: Clone + Into<Value>>(&mut self, entry: &str, args: &[A]) -> Result<Value> {
        let args: Vec<Value> = args.iter().cloned().map(Into::into).collect();
        Ok(self.inner.invoke(entry, &args)?)
    }

    /// Calls a closure a run of this executable returned, on `args`.
    pub fn call_closure<A: Clone + Into<Value>>(
        &mut self,
        closure: &Value,
        args: &[A],
    ) -> Result<Value> {
        let args: Vec<Value> = args.iter().cloned().map(Into::into).collect();
        Ok(self.inner.call_closure(closure, &args)?)
    }

    /// The options.
    pub fn options(&self) -> &VmOptions {
        self.inner.options()
    }

    /// The profile recorded so far, when the VM was made with `profile: true`.
    pub fn profile(&self) -> Option<&Profile> {
        self.inner.profile()
    }

    /// Takes the profile recorded so far, leaving an empty one.
    pub fn take_profile(&mut self) -> Option<Profile> {
        self.inner.take_profile()
    }

    /// The storage allocator's counters.
    pub fn allocator_stats(&self) -> AllocStats {
        self.inner.allocator_stats()
    }

    /// The VM of `relay-vm` this one wraps.
    pub fn inner(&self) -> &relay_vm::Vm<'e> {
        &self.inner
    }

    /// The VM of `relay-vm` this one wraps, mutably.
    pub fn inner_mut(&mut self) -> &mut relay_vm::Vm<'e> {
        &mut self.inner
    }

    /// The VM of `relay-vm` this one wraps, taken out.
    pub fn into_inner(self) -> relay_vm::Vm<'e> {
        self.inner
    }
}

impl<'e> From<relay_vm::Vm<'e>> for Vm<'e> {
    fn from(inner: relay_vm::Vm<'e>) -> Vm<'e> {
        Vm { inner }
    }
}
