//! A dynamic kernel's specializations at its call site: the compiled kernels of one primitive
//! with `?` dimensions, filed under the argument shapes and dtypes they were specialized to
//! (TVM's VM keeps the same per-primitive table for its shape functions).
//!
//! The VM looks here before anything else when it calls a dynamic primitive: a call with
//! already seen argument shapes compares a hash and the shapes, takes a read lock and clones an
//! `Arc` — no `Type` is built, no function expression hashed, and the kernel stays alive (the
//! shared [`relay_kernel::KernelCache`] holds kernels weakly, so without a strong holder a
//! specialization was freed after each call and compiled again on the next). Only a miss goes
//! to the kernel cache, which compiles each distinct argument types once per process.
//!
//! The table is bounded ([`MAX_SPECIALIZATIONS`]): a call site that sees more distinct shapes
//! forgets its oldest specialization first, so a long-running VM fed ever-new shapes does not
//! keep every kernel it ever compiled.

use std::sync::{Arc, RwLock};

use relay_kernel::PackedFunc;
use relay_runtime::{DType, NDArray};

/// The most specializations one call site keeps.
pub const MAX_SPECIALIZATIONS: usize = 64;

/// One compiled specialization and the argument shapes it was compiled for.
#[derive(Clone, Debug)]
struct Specialization {
    /// [`shapes_hash`] of the arguments.
    hash: u64,
    /// Each argument's dtype and shape, in call order.
    args: Box<[(DType, Box<[i64]>)]>,
    /// The kernel.
    kernel: Arc<PackedFunc>,
}

impl Specialization {
    /// Whether it was compiled for exactly these arguments.
    fn fits(&self, hash: u64, inputs: &[Arc<NDArray>]) -> bool {
        self.hash == hash
            && self.args.len() == inputs.len()
            && self
                .args
                .iter()
                .zip(inputs)
                .all(|((d, s), t)| *d == t.dtype() && **s == *t.shape())
    }
}

/// The specializations of one dynamic primitive, oldest first.
#[derive(Debug, Default)]
pub struct Specializations {
    entries: RwLock<Vec<Specialization>>,
}

impl Clone for Specializations {
    fn clone(&self) -> Specializations {
        Specializations {
            entries: RwLock::new(self.read().clone()),
        }
    }
}

impl Specializations {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Specialization>> {
        self.entries.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The kernel specialized to the dtypes and shapes of `inputs`, if compiled already.
    pub fn find(&self, inputs: &[Arc<NDArray>]) -> Option<Arc<PackedFunc>> {
        let hash = shapes_hash(inputs);
        self.read()
            .iter()
            .rev()
            .find(|s| s.fits(hash, inputs))
            .map(|s| s.kernel.clone())
    }

    /// Files `kernel` as the specialization for `inputs` (unless another thread filed one
    /// meanwhile), forgetting the oldest one when the table is full.
    pub fn insert(&self, inputs: &[Arc<NDArray>], kernel: Arc<PackedFunc>) {
        let hash = shapes_hash(inputs);
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        if entries.iter().any(|s| s.fits(hash, inputs)) {
            return;
        }
        if entries.len() >= MAX_SPECIALIZATIONS {
            entries.remove(0);
        }
        entries.push(Specialization {
            hash,
            args: inputs
                .iter()
                .map(|t| (t.dtype(), t.shape().into()))
                .collect(),
            kernel,
        });
    }

    /// How many specializations are kept.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A hash of the arguments' dtypes and shapes (FxHash's multiply-rotate mix: a handful of
/// integers, no allocation).
fn shapes_hash(inputs: &[Arc<NDArray>]) -> u64 {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let mix = |h: u64, x: u64| (h.rotate_left(5) ^ x).wrapping_mul(K);
    inputs.iter().fold(inputs.len() as u64, |h, t| {
        let d = t.dtype();
        let h = mix(
            h,
            (d.code as u64) | (u64::from(d.bits) << 8) | (u64::from(d.lanes) << 16),
        );
        let h = mix(h, t.shape().len() as u64);
        t.shape().iter().fold(h, |h, &e| mix(h, e as u64))
    })
}
