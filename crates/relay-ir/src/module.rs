//! Modules: global functions, algebraic data types and `extern type`s, plus the source text
//! they came from (for diagnostics).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crate::{CtorRef, Function, Span, Symbol, Type, TypeKind, TypeVar, TypeVarId};

/// The text a module was parsed from.
#[derive(Debug)]
pub struct Source {
    /// The file name (or `"<string>"`).
    pub name: String,
    /// The whole text.
    pub text: String,
    /// The byte offset of every line's start, computed on first use by
    /// [`Source::location`].
    line_starts: OnceLock<Vec<usize>>,
}

impl Source {
    /// The source `text` of file `name`.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Source {
        Source {
            name: name.into(),
            text: text.into(),
            line_starts: OnceLock::new(),
        }
    }

    /// `name:line:column` (both 1-based, the column in characters) of the start of `span`;
    /// a binary search over the line starts, so locating many spans stays cheap.
    pub fn location(&self, span: Span) -> String {
        let starts = self.line_starts.get_or_init(|| {
            std::iter::once(0)
                .chain(self.text.match_indices('\n').map(|(i, _)| i + 1))
                .collect()
        });
        let lo = (span.lo as usize).min(self.text.len());
        let line = starts.partition_point(|&start| start <= lo).max(1);
        let line_start = starts[line - 1];
        let column = self
            .text
            .get(line_start..lo)
            .map_or(0, |prefix| prefix.chars().count())
            + 1;
        format!("{}:{line}:{column}", self.name)
    }
}

/// Whether the module was written as definitions or as a single expression.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ModuleKind {
    /// `def`s and `type`s.
    #[default]
    Definitions,
    /// A bare expression (TVM's `parse_expr` text, printed with `free_var` lines). It is held as
    /// `def @main` whose parameters are the expression's free variables, as TVM's
    /// `IRModule.from_expr` does, and printed back as an expression.
    Expr,
}

/// A global function definition `def @name ...`.
#[derive(Clone, Debug)]
pub struct GlobalFunc {
    /// Its name, without `@`.
    pub name: Symbol,
    /// The function.
    pub func: Function,
    /// Where the definition was written.
    pub span: Span,
}

/// `type Name[A, ...] { Ctor(T, ...), ... }` or `extern type Name[A, ...]`.
#[derive(Clone, Debug)]
pub struct TypeDef {
    /// The ADT's name.
    pub name: Symbol,
    /// Its type parameters.
    pub params: Vec<TypeVar>,
    /// Its constructors, in tag order.
    pub ctors: Vec<CtorDef>,
    /// Whether it is an `extern type` (opaque, no constructors).
    pub external: bool,
    /// Where it was written.
    pub span: Span,
}

/// One constructor of a [`TypeDef`].
#[derive(Clone, Debug)]
pub struct CtorDef {
    /// Its name.
    pub name: Symbol,
    /// Its field types, over the ADT's type parameters.
    pub fields: Vec<Type>,
    /// Where it was written.
    pub span: Span,
}

/// A Relay module.
#[derive(Clone, Debug, Default)]
pub struct Module {
    /// Global functions, in definition order.
    pub functions: Vec<GlobalFunc>,
    /// Type definitions, in definition order.
    pub types: Vec<TypeDef>,
    /// How the text wrote it.
    pub kind: ModuleKind,
    /// The source text, when parsed from one.
    pub source: Option<Arc<Source>>,
}

impl Module {
    /// The global function called `name`.
    pub fn function(&self, name: Symbol) -> Option<&GlobalFunc> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// The type definition called `name`.
    pub fn type_def(&self, name: Symbol) -> Option<&TypeDef> {
        self.types.iter().find(|t| t.name == name)
    }

    /// The name and field types of constructor `tag` of the ADT type `ty` (`List[float32]`),
    /// with the type's arguments substituted for the ADT's parameters: how a value is shown
    /// with its constructor's name. `None` when `ty` is not an ADT of this module or has no
    /// such constructor.
    pub fn constructor_of(&self, ty: &Type, tag: u32) -> Option<(String, Vec<Type>)> {
        let TypeKind::Adt { name, args } = ty.kind() else {
            return None;
        };
        let def = self.type_def(*name)?;
        let ctor = def.ctors.get(tag as usize)?;
        let map: HashMap<TypeVarId, Type> = def
            .params
            .iter()
            .zip(args)
            .map(|(p, a)| (p.id(), a.clone()))
            .collect();
        let fields = ctor.fields.iter().map(|f| substitute(f, &map)).collect();
        Some((ctor.name.as_str().to_owned(), fields))
    }

    /// Every constructor by name.
    pub fn constructors(&self) -> HashMap<Symbol, CtorRef> {
        let mut map = HashMap::new();
        for t in &self.types {
            for (tag, c) in t.ctors.iter().enumerate() {
                map.insert(
                    c.name,
                    CtorRef {
                        adt: t.name,
                        name: c.name,
                        tag: tag as u32,
                    },
                );
            }
        }
        map
    }

    /// The definition of a constructor.
    pub fn ctor_def(&self, ctor: CtorRef) -> Option<&CtorDef> {
        self.type_def(ctor.adt)?.ctors.get(ctor.tag as usize)
    }
}

/// `ty` with the type variables in `map` replaced.
fn substitute(ty: &Type, map: &HashMap<TypeVarId, Type>) -> Type {
    crate::ensure_sufficient_stack(|| match ty.kind() {
        TypeKind::Var(v) => map.get(&v.id()).cloned().unwrap_or_else(|| ty.clone()),
        TypeKind::Tuple(fields) => Type::from_kind(TypeKind::Tuple(
            fields.iter().map(|f| substitute(f, map)).collect(),
        )),
        TypeKind::Adt { name, args } => Type::from_kind(TypeKind::Adt {
            name: *name,
            args: args.iter().map(|a| substitute(a, map)).collect(),
        }),
        TypeKind::Ref(inner) => Type::from_kind(TypeKind::Ref(substitute(inner, map))),
        // Tensor types hold no variables, and function values are shown as closures whatever
        // their type, so neither needs rebuilding.
        TypeKind::Tensor { .. } | TypeKind::Func(_) | TypeKind::Incomplete => ty.clone(),
    })
}
