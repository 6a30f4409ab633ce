//! The unifier: inference types in a union-find arena, unification with the occurs check,
//! instantiation of type parameters, and conversion to and from `relay_ir` types.
//!
//! Every type the checker reasons about is a node in one [`Arena`], named by a [`TyId`]. A
//! node is either an unsolved type variable ([`Ty::Var`]) or a type constructor whose children
//! are again ids. Unifying two nodes links one root to the other, so the arena always holds the
//! most general solution found so far; [`Arena::find`] follows the links.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use relay_ir::{DType, Dim, FuncType, Symbol, Type, TypeKind, TypeVar, TypeVarId};

/// A hasher for the small integer ids the checker keys maps by (variable and type variable
/// ids): one multiplication instead of SipHash.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// A hash map keyed by ids.
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// The name of a node in the [`Arena`].
pub(crate) type TyId = u32;

/// Where an unsolved type variable came from, which decides whether leaving it unsolved is an
/// error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A fresh instance of a type parameter (of a polymorphic global or constructor). Nothing
    /// may constrain it (`@length(Nil)`), and that is fine.
    Instance,
    /// An unknown the program must determine: `_`, an unannotated parameter, let variable or
    /// return type.
    Unknown,
}

/// One inference type node.
#[derive(Clone, Debug)]
pub(crate) enum Ty {
    /// An unsolved type variable, with a name hint for printing.
    Var(Origin, Symbol),
    /// The type of something already reported as wrong; it unifies with everything, so one
    /// mistake gives one diagnostic.
    Error,
    /// A tensor type; `?` dimensions unify with any extent.
    Tensor { shape: Vec<Dim>, dtype: DType },
    /// A tuple type.
    Tuple(Vec<TyId>),
    /// A function type; `type_params` are bound inside `params` and `ret` as [`Ty::Param`].
    Func {
        type_params: Vec<TypeVar>,
        params: Vec<TyId>,
        ret: TyId,
    },
    /// A rigid type parameter (inside the function or type that binds it).
    Param(TypeVar),
    /// An ADT applied to arguments.
    Adt { name: Symbol, args: Vec<TyId> },
    /// `ref(T)`.
    Ref(TyId),
}

/// Why two types do not unify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clash {
    /// Different constructors, dtypes, shapes or arities.
    Mismatch,
    /// A variable would have to contain itself.
    Occurs,
}

/// What an inference type still lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Solved {
    /// No unsolved variable anywhere inside.
    Known,
    /// Contains an unsolved variable.
    Unknown,
    /// Contains an error type.
    Error,
}

/// The union-find arena of inference types.
#[derive(Debug, Default)]
pub(crate) struct Arena {
    nodes: Vec<Ty>,
    parent: Vec<TyId>,
    params: IdMap<TypeVarId, TyId>,
}

impl Arena {
    /// Adds a node.
    pub(crate) fn add(&mut self, ty: Ty) -> TyId {
        let id = self.nodes.len() as TyId;
        self.nodes.push(ty);
        self.parent.push(id);
        id
    }

    /// A fresh unsolved variable.
    pub(crate) fn fresh(&mut self, origin: Origin, hint: Symbol) -> TyId {
        self.add(Ty::Var(origin, hint))
    }

    /// The error type.
    pub(crate) fn error(&mut self) -> TyId {
        self.add(Ty::Error)
    }

    /// The rigid node of a type parameter (one per parameter).
    pub(crate) fn param(&mut self, tv: &TypeVar) -> TyId {
        if let Some(&id) = self.params.get(&tv.id()) {
            return id;
        }
        let id = self.add(Ty::Param(tv.clone()));
        self.params.insert(tv.id(), id);
        id
    }

    /// The rank-0 tensor type of `dtype`.
    pub(crate) fn scalar(&mut self, dtype: DType) -> TyId {
        self.add(Ty::Tensor {
            shape: Vec::new(),
            dtype,
        })
    }

    /// The root of `id`'s class, compressing the path to it.
    pub(crate) fn find(&mut self, id: TyId) -> TyId {
        let mut root = id;
        while self.parent[root as usize] != root {
            root = self.parent[root as usize];
        }
        let mut cur = id;
        while self.parent[cur as usize] != root {
            let next = self.parent[cur as usize];
            self.parent[cur as usize] = root;
            cur = next;
        }
        root
    }

    /// Makes `a` and `b` equal, or says why they cannot be.
    pub(crate) fn unify(&mut self, a: TyId, b: TyId) -> Result<(), Clash> {
        relay_ir::ensure_sufficient_stack(|| self.unify_inner(a, b))
    }

    fn link(&mut self, from: TyId, to: TyId) {
        self.parent[from as usize] = to;
    }

    /// Children are unified before the two nodes are linked, so that after a failure both
    /// sides still print as they were (but for what their children had in common).
    fn unify_inner(&mut self, a: TyId, b: TyId) -> Result<(), Clash> {
        let a = self.find(a);
        let b = self.find(b);
        if a == b {
            return Ok(());
        }
        match (&self.nodes[a as usize], &self.nodes[b as usize]) {
            (Ty::Var(oa, hint), Ty::Var(ob, _)) => {
                let origin = if *oa == Origin::Unknown || *ob == Origin::Unknown {
                    Origin::Unknown
                } else {
                    Origin::Instance
                };
                let hint = *hint;
                self.nodes[b as usize] = Ty::Var(origin, hint);
                self.link(a, b);
                Ok(())
            }
            (Ty::Var(..), _) => self.bind(a, b),
            (_, Ty::Var(..)) => self.bind(b, a),
            (Ty::Error, _) => {
                self.link(b, a);
                Ok(())
            }
            (_, Ty::Error) => {
                self.link(a, b);
                Ok(())
            }
            (
                Ty::Tensor {
                    shape: sa,
                    dtype: da,
                },
                Ty::Tensor {
                    shape: sb,
                    dtype: db,
                },
            ) => {
                if da != db || sa.len() != sb.len() {
                    return Err(Clash::Mismatch);
                }
                let mut merged = Vec::with_capacity(sa.len());
                for (x, y) in sa.iter().zip(sb) {
                    merged.push(match (x, y) {
                        (Dim::Known(m), Dim::Known(n)) if m == n => *x,
                        (Dim::Known(_), Dim::Known(_)) => return Err(Clash::Mismatch),
                        (Dim::Any, _) | (_, Dim::Any) => Dim::Any,
                    });
                }
                let dtype = *da;
                self.nodes[b as usize] = Ty::Tensor {
                    shape: merged,
                    dtype,
                };
                self.link(a, b);
                Ok(())
            }
            (Ty::Tuple(xs), Ty::Tuple(ys)) => {
                if xs.len() != ys.len() {
                    return Err(Clash::Mismatch);
                }
                let pairs: Vec<(TyId, TyId)> = xs.iter().copied().zip(ys.iter().copied()).collect();
                pairs.into_iter().try_for_each(|(x, y)| self.unify(x, y))?;
                self.link(a, b);
                Ok(())
            }
            (
                Ty::Func {
                    type_params: ta,
                    params: pa,
                    ret: ra,
                },
                Ty::Func {
                    type_params: tb,
                    params: pb,
                    ret: rb,
                },
            ) => {
                if ta.len() != tb.len() || pa.len() != pb.len() {
                    return Err(Clash::Mismatch);
                }
                let (ta, tb) = (ta.clone(), tb.clone());
                let (mut pa, pb, ra, mut rb) = (pa.clone(), pb.clone(), *ra, *rb);
                let mut pb = pb;
                if !ta.is_empty() && ta != tb {
                    // Rename `b`'s parameters to `a`'s, then compare the bodies.
                    let map: HashMap<TypeVarId, TyId> = tb
                        .iter()
                        .zip(&ta)
                        .map(|(from, to)| (from.id(), self.param(to)))
                        .collect();
                    pb = pb.iter().map(|&p| self.subst(p, &map)).collect();
                    rb = self.subst(rb, &map);
                }
                pa.push(ra);
                pb.push(rb);
                pa.into_iter()
                    .zip(pb)
                    .try_for_each(|(x, y)| self.unify(x, y))?;
                self.link(a, b);
                Ok(())
            }
            (Ty::Param(x), Ty::Param(y)) if x == y => {
                self.link(a, b);
                Ok(())
            }
            (Ty::Adt { name: na, args: xs }, Ty::Adt { name: nb, args: ys }) => {
                if na != nb || xs.len() != ys.len() {
                    return Err(Clash::Mismatch);
                }
                let pairs: Vec<(TyId, TyId)> = xs.iter().copied().zip(ys.iter().copied()).collect();
                pairs.into_iter().try_for_each(|(x, y)| self.unify(x, y))?;
                self.link(a, b);
                Ok(())
            }
            (Ty::Ref(x), Ty::Ref(y)) => {
                let (x, y) = (*x, *y);
                self.unify(x, y)?;
                self.link(a, b);
                Ok(())
            }
            _ => Err(Clash::Mismatch),
        }
    }

    /// Binds the variable `var` (a root) to the type `ty` (a root), after the occurs check.
    fn bind(&mut self, var: TyId, ty: TyId) -> Result<(), Clash> {
        let leaf = matches!(
            self.nodes[ty as usize],
            Ty::Tensor { .. } | Ty::Param(_) | Ty::Error
        );
        if !leaf && self.occurs(var, ty) {
            return Err(Clash::Occurs);
        }
        self.link(var, ty);
        Ok(())
    }

    /// Whether the variable `var` occurs inside `ty`.
    fn occurs(&mut self, var: TyId, ty: TyId) -> bool {
        let mut stack = vec![ty];
        while let Some(t) = stack.pop() {
            let t = self.find(t);
            if t == var {
                return true;
            }
            self.push_children(t, &mut stack);
        }
        false
    }

    /// Pushes the children of the root `t` onto `stack`.
    fn push_children(&self, t: TyId, stack: &mut Vec<TyId>) {
        match &self.nodes[t as usize] {
            Ty::Var(..) | Ty::Error | Ty::Tensor { .. } | Ty::Param(_) => {}
            Ty::Tuple(xs) | Ty::Adt { args: xs, .. } => stack.extend(xs),
            Ty::Func { params, ret, .. } => {
                stack.extend(params);
                stack.push(*ret);
            }
            Ty::Ref(x) => stack.push(*x),
        }
    }

    /// Whether `ty` still contains unsolved variables or errors.
    pub(crate) fn solved(&mut self, ty: TyId) -> Solved {
        let root = self.find(ty);
        match &self.nodes[root as usize] {
            Ty::Tensor { .. } | Ty::Param(_) => return Solved::Known,
            Ty::Var(..) => return Solved::Unknown,
            Ty::Error => return Solved::Error,
            _ => {}
        }
        let mut result = Solved::Known;
        let mut stack = vec![ty];
        while let Some(t) = stack.pop() {
            let t = self.find(t);
            match &self.nodes[t as usize] {
                Ty::Error => return Solved::Error,
                Ty::Var(..) => result = Solved::Unknown,
                _ => self.push_children(t, &mut stack),
            }
        }
        result
    }

    /// A copy of `ty` with the type parameters in `map` replaced; parts without them are
    /// shared, not copied.
    pub(crate) fn subst(&mut self, ty: TyId, map: &HashMap<TypeVarId, TyId>) -> TyId {
        relay_ir::ensure_sufficient_stack(|| self.subst_inner(ty, map))
    }

    fn subst_inner(&mut self, ty: TyId, map: &HashMap<TypeVarId, TyId>) -> TyId {
        let root = self.find(ty);
        let node = self.nodes[root as usize].clone();
        match node {
            Ty::Var(..) | Ty::Error | Ty::Tensor { .. } => root,
            Ty::Param(tv) => map.get(&tv.id()).copied().unwrap_or(root),
            Ty::Tuple(xs) => match self.subst_all(&xs, map) {
                Some(ys) => self.add(Ty::Tuple(ys)),
                None => root,
            },
            Ty::Adt { name, args } => match self.subst_all(&args, map) {
                Some(ys) => self.add(Ty::Adt { name, args: ys }),
                None => root,
            },
            Ty::Ref(x) => {
                let y = self.subst(x, map);
                if y == self.find(x) {
                    root
                } else {
                    self.add(Ty::Ref(y))
                }
            }
            Ty::Func {
                type_params,
                mut params,
                ret,
            } => {
                params.push(ret);
                match self.subst_all(&params, map) {
                    Some(mut ys) => {
                        let ret = ys.pop().unwrap_or(ret);
                        self.add(Ty::Func {
                            type_params,
                            params: ys,
                            ret,
                        })
                    }
                    None => root,
                }
            }
        }
    }

    /// The substituted children, or `None` when none of them changed.
    fn subst_all(&mut self, xs: &[TyId], map: &HashMap<TypeVarId, TyId>) -> Option<Vec<TyId>> {
        let mut changed = false;
        let ys: Vec<TyId> = xs
            .iter()
            .map(|&x| {
                let y = self.subst(x, map);
                changed |= y != self.find(x);
                y
            })
            .collect();
        changed.then_some(ys)
    }

    /// `ty` with the type parameters of a polymorphic function type replaced by fresh
    /// variables; other types are returned as they are.
    pub(crate) fn instantiate(&mut self, ty: TyId) -> TyId {
        let root = self.find(ty);
        let Ty::Func {
            type_params,
            params,
            ret,
        } = &self.nodes[root as usize]
        else {
            return root;
        };
        if type_params.is_empty() {
            return root;
        }
        let (type_params, params, ret) = (type_params.clone(), params.clone(), *ret);
        let map: HashMap<TypeVarId, TyId> = type_params
            .iter()
            .map(|tv| (tv.id(), self.fresh(Origin::Instance, tv.name())))
            .collect();
        let params = params.iter().map(|&p| self.subst(p, &map)).collect();
        let ret = self.subst(ret, &map);
        self.add(Ty::Func {
            type_params: Vec::new(),
            params,
            ret,
        })
    }

    /// Converts an IR type: type variables in `map` become the given nodes, other type
    /// variables rigid parameters, and each `_` a fresh unknown.
    pub(crate) fn import(&mut self, ty: &Type, map: &HashMap<TypeVarId, TyId>) -> TyId {
        relay_ir::ensure_sufficient_stack(|| self.import_inner(ty, map))
    }

    fn import_inner(&mut self, ty: &Type, map: &HashMap<TypeVarId, TyId>) -> TyId {
        match ty.kind() {
            TypeKind::Tensor { shape, dtype } => self.add(Ty::Tensor {
                shape: shape.clone(),
                dtype: *dtype,
            }),
            TypeKind::Tuple(fields) => {
                let fields = fields.iter().map(|f| self.import(f, map)).collect();
                self.add(Ty::Tuple(fields))
            }
            TypeKind::Func(f) => {
                let params = f.params.iter().map(|p| self.import(p, map)).collect();
                let ret = self.import(&f.ret, map);
                self.add(Ty::Func {
                    type_params: f.type_params.clone(),
                    params,
                    ret,
                })
            }
            TypeKind::Var(tv) => match map.get(&tv.id()) {
                Some(&id) => id,
                None => self.param(tv),
            },
            TypeKind::Adt { name, args } => {
                let args = args.iter().map(|a| self.import(a, map)).collect();
                self.add(Ty::Adt { name: *name, args })
            }
            TypeKind::Ref(inner) => {
                let inner = self.import(inner, map);
                self.add(Ty::Ref(inner))
            }
            TypeKind::Incomplete => self.fresh(Origin::Unknown, Symbol::intern("_")),
        }
    }

    /// The IR type for a message: unsolved unknowns and errors print as `_`, unsolved
    /// instances of type parameters by the parameter's name.
    pub(crate) fn display(&mut self, ty: TyId) -> Type {
        self.display_with(ty, &mut HashMap::new())
    }

    fn display_with(&mut self, ty: TyId, names: &mut HashMap<TyId, TypeVar>) -> Type {
        relay_ir::ensure_sufficient_stack(|| {
            let root = self.find(ty);
            let node = self.nodes[root as usize].clone();
            let kind = match node {
                Ty::Var(Origin::Instance, hint) => TypeKind::Var(
                    names
                        .entry(root)
                        .or_insert_with(|| TypeVar::new(hint, relay_ir::Span::DUMMY))
                        .clone(),
                ),
                Ty::Var(Origin::Unknown, _) | Ty::Error => TypeKind::Incomplete,
                Ty::Param(tv) => TypeKind::Var(tv),
                other => {
                    self.convert_children(other, &mut |arena, id| arena.display_with(id, names))
                }
            };
            Type::from_kind(kind)
        })
    }

    /// The IR kind of a constructed node, its children converted by `child`.
    pub(crate) fn convert_children(
        &mut self,
        node: Ty,
        child: &mut dyn FnMut(&mut Arena, TyId) -> Type,
    ) -> TypeKind {
        match node {
            Ty::Tensor { shape, dtype } => TypeKind::Tensor { shape, dtype },
            Ty::Tuple(xs) => TypeKind::Tuple(xs.into_iter().map(|x| child(self, x)).collect()),
            Ty::Func {
                type_params,
                params,
                ret,
            } => TypeKind::Func(FuncType {
                type_params,
                params: params.into_iter().map(|p| child(self, p)).collect(),
                ret: child(self, ret),
            }),
            Ty::Adt { name, args } => TypeKind::Adt {
                name,
                args: args.into_iter().map(|a| child(self, a)).collect(),
            },
            Ty::Ref(x) => TypeKind::Ref(child(self, x)),
            Ty::Param(tv) => TypeKind::Var(tv),
            Ty::Var(..) | Ty::Error => TypeKind::Incomplete,
        }
    }

    /// The root node, cloned (for callers that then mutate the arena).
    pub(crate) fn root_node(&mut self, ty: TyId) -> (TyId, Ty) {
        let root = self.find(ty);
        (root, self.nodes[root as usize].clone())
    }
}

/// Converts solved types to IR types at the end of inference, sharing the converted type of
/// each class. Unsolved variables become type variables named after their hint; the unknowns
/// among them are counted so the checker can report them.
#[derive(Default)]
pub(crate) struct Finalizer {
    memo: Vec<Option<(Type, bool)>>,
}

impl Finalizer {
    /// The IR type of `ty`, and whether it contains an unsolved unknown.
    pub(crate) fn convert(&mut self, arena: &mut Arena, ty: TyId) -> (Type, bool) {
        relay_ir::ensure_sufficient_stack(|| self.convert_inner(arena, ty))
    }

    fn convert_inner(&mut self, arena: &mut Arena, ty: TyId) -> (Type, bool) {
        let root = arena.find(ty);
        if let Some(Some(done)) = self.memo.get(root as usize) {
            return done.clone();
        }
        let node = arena.nodes[root as usize].clone();
        let result = match node {
            Ty::Var(origin, hint) => {
                let tv = TypeVar::new(hint, relay_ir::Span::DUMMY);
                (
                    Type::from_kind(TypeKind::Var(tv)),
                    origin == Origin::Unknown,
                )
            }
            Ty::Error => (Type::from_kind(TypeKind::Incomplete), true),
            other => {
                let mut unknown = false;
                let kind = arena.convert_children(other, &mut |arena, id| {
                    let (t, u) = self.convert(arena, id);
                    unknown |= u;
                    t
                });
                (Type::from_kind(kind), unknown)
            }
        };
        if self.memo.len() <= root as usize {
            self.memo.resize(arena.nodes.len(), None);
        }
        self.memo[root as usize] = Some(result.clone());
        result
    }
}
