//! The kernel cache: compiled kernels keyed by the structural hash of the primitive function
//! and its argument types, so that structurally equal primitives compile once (docs/design.md §7.8).
//!
//! Entries hold the kernels weakly: when every user of a kernel drops it, its code is freed,
//! and the next request compiles it again. Lookups compare keys structurally
//! (`relay_ir::structural_eq`, `type_eq`), so a hash collision never shares a kernel.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use relay_ir::{Expr, ExprKind, Type, structural_eq, structural_hash, type_eq};

use crate::error::KernelError;
use crate::loops::LoopFunc;
use crate::packed::{self, PackedFunc};

/// What a kernel is cached under: a primitive function and its argument types.
#[derive(Clone, Debug)]
pub struct KernelKey {
    /// The structural hash of both.
    hash: u64,
    /// The primitive function.
    func: Expr,
    /// The types of its arguments.
    arg_types: Vec<Type>,
}

impl KernelKey {
    /// The key of `func` called with arguments of `arg_types`.
    pub fn new(func: &Expr, arg_types: &[Type]) -> KernelKey {
        let mut h = DefaultHasher::new();
        structural_hash(func).hash(&mut h);
        for t in arg_types {
            t.to_string().hash(&mut h);
        }
        KernelKey {
            hash: h.finish(),
            func: func.clone(),
            arg_types: arg_types.to_vec(),
        }
    }

    /// The hash the cache files the key under.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Whether two keys name the same kernel.
    fn same(&self, other: &KernelKey) -> bool {
        self.hash == other.hash
            && self.arg_types.len() == other.arg_types.len()
            && self
                .arg_types
                .iter()
                .zip(&other.arg_types)
                .all(|(a, b)| type_eq(a, b))
            && structural_eq(&self.func, &other.func)
    }
}

/// The kernels filed under one hash.
type Bucket = Vec<(KernelKey, Weak<PackedFunc>)>;

/// Compiled kernels by [`KernelKey`], held weakly.
#[derive(Default)]
pub struct KernelCache {
    entries: Mutex<HashMap<u64, Bucket>>,
    /// How many kernels were compiled.
    compiled: Mutex<usize>,
}

impl std::fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelCache({} live kernels)", self.len())
    }
}

impl KernelCache {
    /// An empty cache.
    pub fn new() -> KernelCache {
        KernelCache::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Bucket>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The kernel for `key`: the cached one if it is still alive, or the result of compiling
    /// `lower()`'s loop nest (an error from `lower` is passed on as [`KernelError::Lower`],
    /// unless it already is a [`KernelError`]). Compilation happens under the cache's lock, so
    /// concurrent requests for one key compile once.
    pub fn get_or_compile<E>(
        &self,
        key: KernelKey,
        lower: impl FnOnce() -> Result<LoopFunc, E>,
    ) -> Result<Arc<PackedFunc>, KernelError>
    where
        E: Into<LowerError>,
    {
        self.get_or_build(key, || {
            let func = lower().map_err(|e| e.into().0)?;
            packed::compile(&func)
        })
    }

    /// The kernel for `key`: the cached one if it is still alive, or what `build` makes.
    fn get_or_build(
        &self,
        key: KernelKey,
        build: impl FnOnce() -> Result<PackedFunc, KernelError>,
    ) -> Result<Arc<PackedFunc>, KernelError> {
        let mut entries = self.lock();
        let bucket = entries.entry(key.hash).or_default();
        bucket.retain(|(_, w)| w.strong_count() > 0);
        if let Some(f) = bucket
            .iter()
            .find(|(k, _)| k.same(&key))
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(f);
        }
        let compiled = Arc::new(build()?);
        bucket.push((key, Arc::downgrade(&compiled)));
        *self.compiled.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Ok(compiled)
    }

    /// The kernel of primitive function `func` (a function expression, `Primitive=1`) for
    /// arguments of the concrete types `arg_types` (its tensor arguments in call order, tuple
    /// parameters flattened), named `name`: the cached one, or `func` specialized to those
    /// types when it has `?` dimensions ([`crate::specialize::specialize`]) and compiled. This
    /// is how the VM compiles a dynamic primitive on first call, once per distinct argument
    /// types; a static primitive is compiled once (its argument types are always the same).
    /// Arguments that do not fit `func` are a [`KernelError::Call`], never cached.
    pub fn get_or_compile_for(
        &self,
        func: &Expr,
        arg_types: &[Type],
        name: &str,
    ) -> Result<Arc<PackedFunc>, KernelError> {
        let ExprKind::Function(f) = func.kind() else {
            return Err(KernelError::Lower {
                message: format!("kernel {name}: not a function literal"),
            });
        };
        self.get_or_build(KernelKey::new(func, arg_types), || {
            let specialized = crate::specialize::specialize_named(f, arg_types, name)?;
            crate::compile_primitive(&specialized, name)
        })
    }

    /// The number of cached kernels still alive.
    pub fn len(&self) -> usize {
        self.lock()
            .values()
            .flatten()
            .filter(|(_, w)| w.strong_count() > 0)
            .count()
    }

    /// Whether no cached kernel is alive.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many kernels the cache has compiled.
    pub fn compiled(&self) -> usize {
        *self.compiled.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets the entries of kernels no longer alive.
    pub fn purge(&self) {
        let mut entries = self.lock();
        entries.retain(|_, bucket| {
            bucket.retain(|(_, w)| w.strong_count() > 0);
            !bucket.is_empty()
        });
    }
}

/// The error of a compile closure, as the cache reports it.
#[derive(Debug)]
pub struct LowerError(pub KernelError);

impl From<KernelError> for LowerError {
    fn from(e: KernelError) -> LowerError {
        LowerError(e)
    }
}

impl From<String> for LowerError {
    fn from(message: String) -> LowerError {
        LowerError(KernelError::Lower { message })
    }
}

#[cfg(test)]
mod tests {
    use relay_ir::te::BinaryOp;
    use relay_ir::{DType, Span, Symbol};

    use super::*;
    use crate::loops::{Buffer, BufferId, BufferRole, ForKind, LExpr, Local, LocalId, Stmt};

    /// `@main` of a module, as a function expression.
    fn function(text: &str) -> Expr {
        let module = relay_syntax::parse(&format!("#[version = \"0.0.5\"]\n{text}"), "test")
            .unwrap_or_else(|e| panic!("{e:?}"));
        let main = module.function(Symbol::intern("main")).unwrap();
        Expr::new(ExprKind::Function(main.func.clone()), Span::DUMMY)
    }

    fn add_kernel(n: i64) -> LoopFunc {
        let buffer = |name: &str, role| Buffer {
            name: name.into(),
            dtype: DType::F32,
            shape: vec![n],
            role,
        };
        let at = || LExpr::Load {
            buffer: BufferId(0),
            index: Box::new(LExpr::Local(LocalId(0))),
        };
        LoopFunc {
            name: "fused_add".into(),
            buffers: vec![
                buffer("p0", BufferRole::Input),
                buffer("T_add", BufferRole::Output),
            ],
            locals: vec![Local {
                name: "i".into(),
                dtype: DType::I64,
            }],
            body: Stmt::For {
                var: LocalId(0),
                extent: n,
                kind: ForKind::Vectorized { lanes: 4 },
                body: Box::new(Stmt::Store {
                    buffer: BufferId(1),
                    index: LExpr::Local(LocalId(0)),
                    value: LExpr::Binary(BinaryOp::Add, Box::new(at()), Box::new(at())),
                }),
            },
        }
    }

    #[test]
    fn structurally_equal_primitives_compile_once() {
        let cache = KernelCache::new();
        let f1 = function("def @main(%x: Tensor[(4), float32]) { add(%x, %x) }");
        let f2 = function("def @main(%y: Tensor[(4), float32]) { add(%y, %y) }");
        let f3 = function("def @main(%x: Tensor[(4), float32]) { multiply(%x, %x) }");
        let ty = [relay_ir::Type::tensor(&[4], DType::F32)];
        let k1 = KernelKey::new(&f1, &ty);
        let k2 = KernelKey::new(&f2, &ty);
        assert_eq!(k1.hash(), k2.hash());
        let a = cache
            .get_or_compile(k1, || Ok::<_, KernelError>(add_kernel(4)))
            .unwrap();
        let b = cache
            .get_or_compile(k2, || -> Result<LoopFunc, KernelError> {
                panic!("a structurally equal primitive must not compile again")
            })
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(cache.compiled(), 1);
        // A different primitive, or different argument types, compiles anew.
        let c = cache
            .get_or_compile(KernelKey::new(&f3, &ty), || {
                Ok::<_, KernelError>(add_kernel(4))
            })
            .unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        let ty8 = [relay_ir::Type::tensor(&[8], DType::F32)];
        cache
            .get_or_compile(KernelKey::new(&f1, &ty8), || {
                Ok::<_, KernelError>(add_kernel(8))
            })
            .unwrap();
        assert_eq!(cache.compiled(), 3);
        // Errors of the compile closure pass through.
        let err = cache
            .get_or_compile(KernelKey::new(&f3, &ty8), || {
                Err::<LoopFunc, _>("no compute definition for `foo`".to_string())
            })
            .unwrap_err();
        assert_eq!(err.to_string(), "no compute definition for `foo`");
    }

    #[test]
    fn entries_are_weak() {
        let cache = KernelCache::new();
        let f = function("def @main(%x: Tensor[(4), float32]) { add(%x, %x) }");
        let ty = [relay_ir::Type::tensor(&[4], DType::F32)];
        let a = cache
            .get_or_compile(KernelKey::new(&f, &ty), || {
                Ok::<_, KernelError>(add_kernel(4))
            })
            .unwrap();
        assert_eq!(cache.len(), 1);
        let weak = Arc::downgrade(&a);
        drop(a);
        // The code is freed with the last user; the next request compiles again.
        assert!(weak.upgrade().is_none());
        assert!(cache.is_empty());
        cache.purge();
        let again = cache
            .get_or_compile(KernelKey::new(&f, &ty), || {
                Ok::<_, KernelError>(add_kernel(4))
            })
            .unwrap();
        assert_eq!(cache.compiled(), 2);
        let x =
            relay_runtime::NDArray::from_f64_slice(DType::F32, &[4], &[1., 2., 3., 4.]).unwrap();
        let mut out = relay_runtime::NDArray::zeros(DType::F32, &[4]).unwrap();
        again.call(&[&x], &mut [&mut out]).unwrap();
        assert_eq!(out.to_f64_vec(), vec![2., 4., 6., 8.]);
    }

    #[test]
    fn dynamic_primitives_compile_once_per_argument_types() {
        let prim = crate::compose::tests::primitive(
            r#"#[version = "0.0.5"]
def @main(%x: Tensor[(?, 2), float32]) {
  %0 = fn (%p0: Tensor[(?, 2), float32], Primitive=1) {
    add(%p0, %p0)
  };
  %0(%x)
}"#,
        );
        let f = Expr::new(ExprKind::Function(prim), Span::DUMMY);
        let cache = KernelCache::new();
        let t3 = [relay_ir::Type::tensor(&[3, 2], DType::F32)];
        let t5 = [relay_ir::Type::tensor(&[5, 2], DType::F32)];
        let a = cache.get_or_compile_for(&f, &t3, "k").unwrap();
        let b = cache.get_or_compile_for(&f, &t3, "k").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let c = cache.get_or_compile_for(&f, &t5, "k").unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(cache.compiled(), 2);
        let x =
            relay_runtime::NDArray::from_f64_slice(DType::F32, &[3, 2], &[1., 2., 3., 4., 5., 6.])
                .unwrap();
        let mut out = relay_runtime::NDArray::zeros(DType::F32, &[3, 2]).unwrap();
        a.call(&[&x], &mut [&mut out]).unwrap();
        assert_eq!(out.to_f64_vec(), vec![2., 4., 6., 8., 10., 12.]);
        // Arguments that do not fit are an error, and nothing is compiled.
        let bad = [relay_ir::Type::tensor(&[3, 4], DType::F32)];
        let err = cache.get_or_compile_for(&f, &bad, "k").unwrap_err();
        assert!(matches!(err, KernelError::Call { .. }), "{err:?}");
        assert_eq!(cache.compiled(), 2);
        let not_a_function = Expr::new(ExprKind::Global(Symbol::intern("f")), Span::DUMMY);
        assert!(cache.get_or_compile_for(&not_a_function, &t3, "k").is_err());
    }
}
