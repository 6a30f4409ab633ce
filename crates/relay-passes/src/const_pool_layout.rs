//! `const_pool_layout`: deduplicates constants structurally and assigns constant pool indices.
//!
//! Every constant outside primitive functions goes into one pool, the VM executable's constant
//! table ([`ConstPool`], in `relay-ir`, which also defines the pool's order). Constants with
//! equal dtype, shape and bytes are one pool entry, and the pass makes them one shared [`Expr`]
//! node, so whoever walks the module afterwards (the printer, the VM compiler) sees a single node
//! per pool entry.
//!
//! Statistics: `constants` (pool entries), `constant bytes` (their total size) and
//! `duplicates removed` (distinct arrays merged into an equal earlier one). Its tests are in
//! `ir-tests/const_pool_layout/`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use relay_ir::const_pool::{content_hash, printing_order};
use relay_ir::visit::{is_primitive, map_children};
use relay_ir::{ConstPool, Expr, ExprKind, Module, ensure_sufficient_stack};

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

#[cfg(test)]
mod tests {
    use relay_ir::{NDArray, PrintOptions, print_module};

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
