//! `const_pool_layout`: deduplicates constants structurally and assigns constant pool indices.
//!
//! Every constant outside primitive functions goes into one pool, the VM executable's constant
//! table. Constants with equal dtype, shape and bytes are one pool entry, and the pass makes
//! them one shared [`Expr`] node, so whoever walks the module afterwards (the printer, the VM
//! compiler) sees a single node per pool entry.
//!
//! Order. The pool lists constants in first-occurrence order over the module as the printer
//! writes it: global functions sorted by name, and within a function in pre-order (callee before
//! arguments, binding values before the body, condition before branches). Constants the printer
//! writes as `meta[relay.Constant][i]` (every tensor that is not a scalar literal) come first, in
//! that order, so their pool index is exactly the printed `i`; the scalar literals the printer
//! writes inline (`1f`, `3i64`, `True`) follow, again in first-occurrence order. Constants inside
//! primitive functions (scalar literals only, in the fused form) belong to their kernel and are
//! not in the pool.
//!
//! Statistics: `constants` (pool entries), `constant bytes` (their total size) and
//! `duplicates removed` (distinct arrays merged into an equal earlier one). Its tests are in
//! `ir-tests/const_pool_layout/`.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use relay_ir::visit::{is_primitive, map_children};
use relay_ir::{DTypeCode, Expr, ExprKind, Module, NDArray, ensure_sufficient_stack};

use crate::{Pass, PassContext, PassError};

/// The `const_pool_layout` pass.
pub struct ConstPoolLayout;

impl Pass for ConstPoolLayout {
    fn name(&self) -> &'static str {
        "const_pool_layout"
    }

    fn description(&self) -> &'static str {
        "deduplicates constants structurally and assigns constant pool indices"
    }

    fn required(&self) -> bool {
        true
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let mut dedup = Dedup::default();
        // The old bodies stay alive until the end, so the addresses `Dedup` records are not
        // reused by other arrays meanwhile.
        let mut old_bodies = Vec::with_capacity(module.functions.len());
        for i in printing_order(&module) {
            let body = dedup.expr(&module.functions[i].func.body);
            old_bodies.push(std::mem::replace(&mut module.functions[i].func.body, body));
        }
        let pool = ConstPool::of(&module);
        cx.stat("constants", pool.constants.len() as i64);
        cx.stat("constant bytes", pool.total_bytes() as i64);
        cx.stat(
            "duplicates removed",
            (dedup.arrays.len() - pool.constants.len()) as i64,
        );
        drop(old_bodies);
        Ok(module)
    }
}

/// The constant pool of a module: every distinct constant outside primitive functions, indexed
/// as the module docs above describe.
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
    /// did not go through [`ConstPoolLayout`].
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

/// The rewrite: every constant node becomes the first node seen with equal contents.
#[derive(Default)]
struct Dedup {
    /// Canonical nodes by content hash.
    nodes: HashMap<u64, Vec<Expr>>,
    /// The addresses of every distinct array seen.
    arrays: HashSet<usize>,
}

impl Dedup {
    fn expr(&mut self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Constant(c) => {
                self.arrays.insert(Arc::as_ptr(c) as usize);
                let bucket = self.nodes.entry(content_hash(c)).or_default();
                let found = bucket.iter().find(|n| match n.kind() {
                    ExprKind::Constant(d) => Arc::ptr_eq(c, d) || **c == **d,
                    _ => false,
                });
                match found {
                    Some(n) => n.clone(),
                    None => {
                        bucket.push(e.clone());
                        e.clone()
                    }
                }
            }
            ExprKind::Function(f) if is_primitive(f) => e.clone(),
            _ => map_children(e, |c| self.expr(c)),
        })
    }
}

/// Calls `f` on every constant of `e` outside primitive functions, in pre-order.
fn visit_constants(e: &Expr, f: &mut impl FnMut(&Arc<NDArray>)) {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Constant(c) => f(c),
        ExprKind::Function(func) if is_primitive(func) => {}
        _ => relay_ir::visit::for_each_child(e, |c| visit_constants(c, f)),
    })
}

/// The indices of `module.functions` in the order the printer writes them (sorted by name).
fn printing_order(module: &Module) -> Vec<usize> {
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
fn content_hash(c: &NDArray) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    c.dtype().hash(&mut h);
    c.shape().hash(&mut h);
    c.as_bytes().hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use relay_ir::{PrintOptions, print_module};

    use super::*;

    fn run(text: &str) -> (Module, Vec<(String, i64)>) {
        let m = crate::testing::parse_checked(text);
        crate::testing::run_passes(vec![&ConstPoolLayout], 0, m, true)
    }

    #[test]
    fn equal_scalars_share_one_node_and_entry() {
        let (m, stats) = run(r#"#[version = "0.0.5"]
def @main(%x: float32) -> float32 {
  let %a = add(%x, 2f);
  let %b = multiply(%a, 2f);
  add(%b, 1f)
}
"#);
        let pool = ConstPool::of(&m);
        assert_eq!(pool.len(), 2);
        assert_eq!(pool.meta_count, 0);
        assert_eq!(
            stats,
            vec![
                ("constants".to_owned(), 2),
                ("constant bytes".to_owned(), 8),
                // The parser already shares the array of equal literals.
                ("duplicates removed".to_owned(), 0),
            ]
        );
    }

    #[test]
    fn meta_constants_come_first_and_match_printed_indices() {
        let two = Expr::constant(NDArray::scalar_f64(relay_ir::DType::F32, 2.0).unwrap());
        let vec_a = NDArray::from_f64_slice(relay_ir::DType::F32, &[2], &[1.0, 2.0]).unwrap();
        let a1 = Expr::constant(vec_a.clone());
        let a2 = Expr::constant(vec_a);
        let body = Expr::new(
            ExprKind::Tuple(vec![two, a1, a2.clone()]),
            relay_ir::Span::DUMMY,
        );
        let module = Module {
            functions: vec![relay_ir::GlobalFunc {
                name: relay_ir::Symbol::intern("main"),
                func: relay_ir::Function {
                    type_params: vec![],
                    params: vec![],
                    ret_type: None,
                    body,
                    attrs: relay_ir::Attrs::empty(),
                },
                span: relay_ir::Span::DUMMY,
            }],
            ..Module::default()
        };
        let pool = ConstPool::of(&module);
        assert_eq!((pool.len(), pool.meta_count), (2, 1));
        assert_eq!(pool.index_of(&a2), Some(0));
        let mut cx = PassContext::new(&ConstPoolLayout, 0);
        let out = ConstPoolLayout.run(module, &mut cx).unwrap();
        assert_eq!(cx.stats()[2], ("duplicates removed".to_owned(), 1));
        let text = print_module(&out, &PrintOptions::default());
        assert!(
            text.contains("(2f, meta[relay.Constant][0], meta[relay.Constant][0])"),
            "{text}"
        );
        assert_eq!(ConstPool::of(&out).index_of(&a2), Some(0));
    }
}
