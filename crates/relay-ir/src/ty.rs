//! Types: tensors (with `?` dimensions), tuples, function types with type parameters, type
//! variables, ADT applications, references and the incomplete type `_`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use relay_runtime::{DType, NDArray, Value};

use crate::{Span, Symbol};

/// A type: a shared, immutable node with a span (dummy for inferred types).
#[derive(Clone, Debug)]
pub struct Type(Arc<TypeNode>);

/// The node behind a [`Type`].
#[derive(Debug)]
pub struct TypeNode {
    /// What the type is.
    pub kind: TypeKind,
    /// Where it was written.
    pub span: Span,
}

/// The forms a type takes.
#[derive(Debug)]
pub enum TypeKind {
    /// `Tensor[(d0, d1, ...), dtype]`; a scalar dtype name is a rank-0 tensor.
    Tensor {
        /// The dimensions.
        shape: Vec<Dim>,
        /// The element type.
        dtype: DType,
    },
    /// `(T1, T2)`; `()` is the unit type.
    Tuple(Vec<Type>),
    /// `fn [A](T1, T2) -> R`.
    Func(FuncType),
    /// A type variable bound by a `def`, `fn` or `type` header.
    Var(TypeVar),
    /// An algebraic data type applied to arguments: `List[A]`, or `nat` with none.
    Adt {
        /// The ADT's name.
        name: Symbol,
        /// Its type arguments.
        args: Vec<Type>,
    },
    /// `ref(T)`.
    Ref(Type),
    /// `_`: to be inferred. Every occurrence is a distinct unknown.
    Incomplete,
}

/// A function type.
#[derive(Debug, Clone)]
pub struct FuncType {
    /// Type parameters (`fn [A, B](...)`).
    pub type_params: Vec<TypeVar>,
    /// Parameter types.
    pub params: Vec<Type>,
    /// Result type.
    pub ret: Type,
}

/// One dimension of a tensor shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A known extent.
    Known(i64),
    /// `?`: unknown until run time (TVM's `Any`).
    Any,
}

/// Whether tensor `array` fits type `ty` as an argument: a tensor type of the same dtype and
/// rank whose every known dimension is equal (`?` accepts any extent); a type variable or an
/// unknown type accepts any tensor; other types none.
pub fn tensor_fits(ty: &Type, array: &NDArray) -> bool {
    match ty.kind() {
        TypeKind::Tensor { shape, dtype } => {
            *dtype == array.dtype()
                && shape.len() == array.ndim()
                && shape.iter().zip(array.shape()).all(|(d, &n)| match d {
                    Dim::Known(k) => *k == n,
                    Dim::Any => true,
                })
        }
        TypeKind::Var(_) | TypeKind::Incomplete => true,
        TypeKind::Tuple(_) | TypeKind::Func(_) | TypeKind::Adt { .. } | TypeKind::Ref(_) => false,
    }
}

/// Why `value` does not fit the parameter type `ty` (e.g. "`Tensor[(3), float32]` in field
/// 1", "a tuple"), if it does not. Tensor and tuple types are checked; other types accept any
/// value (executors check an entry function's arguments with it).
pub fn value_mismatch(ty: &Type, value: &Value) -> Option<String> {
    crate::ensure_sufficient_stack(|| match (ty.kind(), value) {
        (TypeKind::Tensor { .. }, Value::Tensor(t)) => {
            (!tensor_fits(ty, t)).then(|| format!("`{}`", Type::tensor(t.shape(), t.dtype())))
        }
        (TypeKind::Tensor { .. }, other) => Some(other.kind_name().to_owned()),
        (TypeKind::Tuple(fields), Value::Tuple(values)) => {
            if fields.len() != values.len() {
                return Some(format!("a tuple of {} fields", values.len()));
            }
            fields
                .iter()
                .zip(values.iter())
                .enumerate()
                .find_map(|(i, (t, v))| value_mismatch(t, v).map(|m| format!("{m} in field {i}")))
        }
        (TypeKind::Tuple(_), other) => Some(other.kind_name().to_owned()),
        _ => None,
    })
}

impl Type {
    /// A new type node.
    pub fn new(kind: TypeKind, span: Span) -> Type {
        Type(Arc::new(TypeNode { kind, span }))
    }

    /// A synthesized type (no source span).
    pub fn from_kind(kind: TypeKind) -> Type {
        Type::new(kind, Span::DUMMY)
    }

    /// `Tensor[shape, dtype]` with known dimensions.
    pub fn tensor(shape: &[i64], dtype: DType) -> Type {
        Type::from_kind(TypeKind::Tensor {
            shape: shape.iter().map(|&d| Dim::Known(d)).collect(),
            dtype,
        })
    }

    /// The rank-0 tensor type of `dtype`.
    pub fn scalar(dtype: DType) -> Type {
        Type::tensor(&[], dtype)
    }

    /// The tuple type of `fields`.
    pub fn tuple(fields: Vec<Type>) -> Type {
        Type::from_kind(TypeKind::Tuple(fields))
    }

    /// What the type is.
    pub fn kind(&self) -> &TypeKind {
        &self.0.kind
    }

    /// Where it was written.
    pub fn span(&self) -> Span {
        self.0.span
    }

    /// Whether two handles point at the same node.
    pub fn ptr_eq(a: &Type, b: &Type) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

/// Identity of a type variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TypeVarId(pub u64);

/// A type variable, unique by id; the name is only a hint for printing.
#[derive(Clone, Debug)]
pub struct TypeVar(Arc<TypeVarData>);

/// The data behind a [`TypeVar`].
#[derive(Debug)]
pub struct TypeVarData {
    /// Unique identity.
    pub id: TypeVarId,
    /// The name it was written with.
    pub name: Symbol,
    /// Where it was bound.
    pub span: Span,
}

impl TypeVar {
    /// A fresh type variable.
    pub fn new(name: Symbol, span: Span) -> TypeVar {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        TypeVar(Arc::new(TypeVarData {
            id: TypeVarId(NEXT.fetch_add(1, Ordering::Relaxed)),
            name,
            span,
        }))
    }

    /// Its identity.
    pub fn id(&self) -> TypeVarId {
        self.0.id
    }

    /// Its name hint.
    pub fn name(&self) -> Symbol {
        self.0.name
    }

    /// Where it was bound.
    pub fn span(&self) -> Span {
        self.0.span
    }
}

impl PartialEq for TypeVar {
    fn eq(&self, other: &TypeVar) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for TypeVar {}

impl std::hash::Hash for TypeVar {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id.hash(state)
    }
}
