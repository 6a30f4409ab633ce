//! The constant pool of a module: every distinct constant outside primitive functions, one
//! index each — what the VM executable's constant table holds and what the printer numbers
//! `meta[relay.Constant][i]`. The `const_pool_layout` pass makes equal constants one shared
//! node; the VM compiler reads the indices from here.
//!
//! Order. The pool lists constants in first-occurrence order over the module as the printer
//! writes it: global functions sorted by name, and within a function in pre-order (callee before
//! arguments, binding values before the body, condition before branches). Constants the printer
//! writes as `meta[relay.Constant][i]` (every tensor that is not a scalar literal) come first, in
//! that order, so their pool index is exactly the printed `i`; the scalar literals the printer
//! writes inline (`1f`, `3i64`, `True`) follow, again in first-occurrence order. Constants inside
//! primitive functions (scalar literals only, in the fused form) belong to their kernel and are
//! not in the pool.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::visit::is_primitive;
use crate::{DTypeCode, Expr, ExprKind, Module, NDArray, ensure_sufficient_stack};

/// The constant pool of a module: every distinct constant outside primitive functions, indexed
/// as the module docs describe.
#[derive(Clone, Debug, Default)]
pub struct ConstPool {
    /// The constants, by pool index.
    pub constants: Vec<Arc<NDArray>>,
    /// How many leading entries the printer writes as `meta[relay.Constant][i]` (with `i` the
    /// pool index); the rest are scalar literals.
    pub meta_count: usize,
    /// Pool indices by the address of the pool's own arrays (kept alive by `constants`).
    by_ptr: HashMap<usize, usize>,
    /// Pool indices by the content hash of the arrays.
    by_hash: HashMap<u64, Vec<usize>>,
}

impl ConstPool {
    /// The pool of `module`. Structurally equal constants share one index even when the module
    /// did not go through the `const_pool_layout` pass.
    pub fn of(module: &Module) -> ConstPool {
        let mut meta = Table::default();
        let mut inline = Table::default();
        for i in printing_order(module) {
            visit_constants(&module.functions[i].func.body, &mut |c| {
                if printed_inline(c) {
                    inline.insert(c);
                } else {
                    meta.insert(c);
                }
            });
        }
        let meta_count = meta.arrays.len();
        let mut pool = ConstPool {
            meta_count,
            ..ConstPool::default()
        };
        for c in meta.arrays.into_iter().chain(inline.arrays) {
            let index = pool.constants.len();
            pool.by_ptr.insert(Arc::as_ptr(&c) as usize, index);
            pool.by_hash
                .entry(content_hash(&c))
                .or_default()
                .push(index);
            pool.constants.push(c);
        }
        pool
    }

    /// The pool index of a constant expression (`None` for other expressions and for
    /// constants not in the pool).
    pub fn index_of(&self, e: &Expr) -> Option<usize> {
        match e.kind() {
            ExprKind::Constant(c) => self.index_of_array(c),
            _ => None,
        }
    }

    /// The pool index of an array: by identity for the pool's own arrays, otherwise by
    /// content (dtype, shape and bytes).
    pub fn index_of_array(&self, array: &Arc<NDArray>) -> Option<usize> {
        if let Some(&i) = self.by_ptr.get(&(Arc::as_ptr(array) as usize)) {
            return Some(i);
        }
        self.by_hash
            .get(&content_hash(array))?
            .iter()
            .copied()
            .find(|&i| *self.constants[i] == **array)
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.constants.len()
    }

    /// Whether the pool is empty.
    pub fn is_empty(&self) -> bool {
        self.constants.is_empty()
    }

    /// The total size of the entries' data in bytes.
    pub fn total_bytes(&self) -> usize {
        self.constants.iter().map(|c| c.as_bytes().len()).sum()
    }
}

/// Distinct arrays in first-occurrence order.
#[derive(Default)]
struct Table {
    arrays: Vec<Arc<NDArray>>,
    by_hash: HashMap<u64, Vec<usize>>,
    by_ptr: HashMap<usize, usize>,
}

impl Table {
    /// The entry equal to `c`, inserting `c` if there is none; returns the entry's index.
    fn insert(&mut self, c: &Arc<NDArray>) -> usize {
        let ptr = Arc::as_ptr(c) as usize;
        if let Some(&i) = self.by_ptr.get(&ptr) {
            return i;
        }
        let bucket = self.by_hash.entry(content_hash(c)).or_default();
        let index = match bucket.iter().copied().find(|&i| *self.arrays[i] == **c) {
            Some(i) => i,
            None => {
                let i = self.arrays.len();
                self.arrays.push(c.clone());
                bucket.push(i);
                i
            }
        };
        // Every array recorded here is kept alive by the caller's module for the table's
        // lifetime, so its address cannot be reused by another array meanwhile.
        self.by_ptr.insert(ptr, index);
        index
    }
}

/// Calls `f` on every constant of `e` outside primitive functions, in pre-order.
fn visit_constants(e: &Expr, f: &mut impl FnMut(&Arc<NDArray>)) {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Constant(c) => f(c),
        ExprKind::Function(func) if is_primitive(func) => {}
        _ => crate::visit::for_each_child(e, |c| visit_constants(c, f)),
    })
}

/// The indices of `module.functions` in the order the printer writes them (sorted by name).
pub fn printing_order(module: &Module) -> Vec<usize> {
    let mut order: Vec<usize> = (0..module.functions.len()).collect();
    order.sort_by(|&a, &b| {
        module.functions[a]
            .name
            .as_str()
            .cmp(module.functions[b].name.as_str())
    });
    order
}

/// Whether the printer writes `c` as an inline literal rather than a metadata reference: a
/// rank-0, single-lane `bool`, `int8`..`int64` or `float16`..`float64` (the printer's
/// `push_scalar` rule).
fn printed_inline(c: &NDArray) -> bool {
    let d = c.dtype();
    c.is_scalar()
        && d.lanes == 1
        && match d.code {
            DTypeCode::Bool => d.bits == 8,
            DTypeCode::Int => matches!(d.bits, 8 | 16 | 32 | 64),
            DTypeCode::Float => matches!(d.bits, 16 | 32 | 64),
            _ => false,
        }
}

/// A hash of dtype, shape and bytes.
pub fn content_hash(c: &NDArray) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    c.dtype().hash(&mut h);
    c.shape().hash(&mut h);
    c.as_bytes().hash(&mut h);
    h.finish()
}
