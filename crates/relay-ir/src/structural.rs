//! Structural equality up to renaming of variables, and a structural hash consistent with it.
//!
//! The semantics are TVM's `assert_structural_equal(map_free_vars=True)`:
//!
//! - Bound variables (binding variables, function parameters, pattern variables) are equal when
//!   they are bound at corresponding positions; type variables bound by type parameters
//!   likewise. Free variables and free type variables are equal when they correspond
//!   consistently, the first occurrence fixing the correspondence.
//! - Variable annotations are compared; names, spans and [`BindingKind`]s are ignored.
//! - Binding chains compare as the flat sequence of their bindings: a chain whose body is
//!   another chain equals the single merged chain, and a chain without bindings equals its body
//!   (the printer writes all of these the same way).
//! - Constants compare by dtype, shape and bytes; operators by name; constructors by ADT, tag
//!   and name; attributes by value (floats by bits).
//!
//! Equal expressions hash equally: bound and free variables hash by the order in which the
//! walk meets them, never by name or identity. Binding vectors are iterated, so long chains
//! need no deep recursion.
//!
//! [`BindingKind`]: crate::BindingKind

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use crate::{
    Attrs, Binding, Dim, Expr, ExprKind, Function, Module, Pattern, PatternKind, Type, TypeDef,
    TypeKind, TypeVar, TypeVarId, Var, VarId,
};

/// Whether two expressions are equal up to consistent renaming of variables.
pub fn structural_eq(a: &Expr, b: &Expr) -> bool {
    Equal::default().expr(a, b)
}

/// A hash equal for structurally equal expressions.
pub fn structural_hash(e: &Expr) -> u64 {
    let mut h = Hashing::default();
    h.expr(e);
    h.state.finish()
}

/// Whether two types are equal up to consistent renaming of type variables.
pub fn type_eq(a: &Type, b: &Type) -> bool {
    Equal::default().ty(a, b)
}

/// Whether `a` is `b` with some of `b`'s `?` dimensions known: equal types, or tensors of one
/// dtype and rank whose dimensions are equal wherever `b`'s is not `?`, or tuples of such
/// fields. A kernel whose parameter has type `b` takes an argument of type `a` (the type
/// solver merges a known dimension with `?` into `?`, so two inferences of one program may
/// differ that way).
pub fn type_refines(a: &Type, b: &Type) -> bool {
    if type_eq(a, b) {
        return true;
    }
    match (a.kind(), b.kind()) {
        (
            TypeKind::Tensor {
                shape: sa,
                dtype: da,
            },
            TypeKind::Tensor {
                shape: sb,
                dtype: db,
            },
        ) => {
            da == db
                && sa.len() == sb.len()
                && sa.iter().zip(sb).all(|(x, y)| *y == Dim::Any || x == y)
        }
        (TypeKind::Tuple(xs), TypeKind::Tuple(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| type_refines(x, y))
        }
        _ => false,
    }
}

/// Whether two modules are structurally equal: the same kind, the same global functions by
/// name (in any order), each structurally equal, and the same type definitions by name (in
/// any order) with equal constructor lists up to renaming of their type parameters.
pub fn module_eq(a: &Module, b: &Module) -> bool {
    if a.kind != b.kind || a.functions.len() != b.functions.len() || a.types.len() != b.types.len()
    {
        return false;
    }
    let functions: HashMap<_, _> = b.functions.iter().map(|f| (f.name, &f.func)).collect();
    let types: HashMap<_, _> = b.types.iter().map(|t| (t.name, t)).collect();
    if functions.len() != b.functions.len() || types.len() != b.types.len() {
        // Duplicate names: compare in order instead.
        return a
            .functions
            .iter()
            .zip(&b.functions)
            .all(|(x, y)| x.name == y.name && Equal::default().function(&x.func, &y.func))
            && a.types
                .iter()
                .zip(&b.types)
                .all(|(x, y)| Equal::default().type_def(x, y));
    }
    a.functions.iter().all(|f| {
        functions
            .get(&f.name)
            .is_some_and(|g| Equal::default().function(&f.func, g))
    }) && a.types.iter().all(|t| {
        types
            .get(&t.name)
            .is_some_and(|u| Equal::default().type_def(t, u))
    })
}

/// A hash equal for structurally equal modules (independent of definition order).
pub fn module_hash(m: &Module) -> u64 {
    let mut state = StableHasher::default();
    (m.kind as u8).hash(&mut state);
    let mut functions: Vec<_> = m.functions.iter().collect();
    functions.sort_by(|x, y| x.name.as_str().cmp(y.name.as_str()));
    for f in functions {
        let mut h = Hashing::default();
        h.function(&f.func);
        f.name.as_str().hash(&mut state);
        state.write_u64(h.state.finish());
    }
    let mut types: Vec<_> = m.types.iter().collect();
    types.sort_by(|x, y| x.name.as_str().cmp(y.name.as_str()));
    for t in types {
        let mut h = Hashing::default();
        h.type_def(t);
        state.write_u64(h.state.finish());
    }
    state.finish()
}

/// The bindings of a (possibly nested) chain, in order, and the final non-chain body.
fn flatten(e: &Expr) -> (Vec<&Binding>, &Expr) {
    let mut bindings = Vec::new();
    let mut cur = e;
    while let ExprKind::Let { bindings: bs, body } = cur.kind() {
        bindings.extend(bs);
        cur = body;
    }
    (bindings, cur)
}

// ----- Equality -----

/// The correspondence between the variables of the two sides, in both directions.
#[derive(Default)]
struct Equal {
    vars: HashMap<VarId, VarId>,
    vars_back: HashMap<VarId, VarId>,
    type_vars: HashMap<TypeVarId, TypeVarId>,
    type_vars_back: HashMap<TypeVarId, TypeVarId>,
}

impl Equal {
    /// Binds `a` to `b` at a binding site, after comparing their annotations.
    fn bind(&mut self, a: &Var, b: &Var) -> bool {
        if !self.opt_ty(a.ty(), b.ty()) {
            return false;
        }
        self.vars.insert(a.id(), b.id());
        self.vars_back.insert(b.id(), a.id());
        true
    }

    /// Compares two uses: bound variables must correspond; two unseen variables are free and
    /// now correspond.
    fn var(&mut self, a: &Var, b: &Var) -> bool {
        match (self.vars.get(&a.id()), self.vars_back.get(&b.id())) {
            (Some(&x), Some(&y)) => x == b.id() && y == a.id(),
            (None, None) => self.bind(a, b),
            _ => false,
        }
    }

    fn bind_type_var(&mut self, a: &TypeVar, b: &TypeVar) {
        self.type_vars.insert(a.id(), b.id());
        self.type_vars_back.insert(b.id(), a.id());
    }

    fn type_var(&mut self, a: &TypeVar, b: &TypeVar) -> bool {
        match (
            self.type_vars.get(&a.id()),
            self.type_vars_back.get(&b.id()),
        ) {
            (Some(&x), Some(&y)) => x == b.id() && y == a.id(),
            (None, None) => {
                self.bind_type_var(a, b);
                true
            }
            _ => false,
        }
    }

    fn exprs(&mut self, a: &[Expr], b: &[Expr]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| self.expr(x, y))
    }

    fn expr(&mut self, a: &Expr, b: &Expr) -> bool {
        crate::ensure_sufficient_stack(|| self.expr_inner(a, b))
    }

    fn expr_inner(&mut self, a: &Expr, b: &Expr) -> bool {
        if matches!(a.kind(), ExprKind::Let { .. }) || matches!(b.kind(), ExprKind::Let { .. }) {
            return self.chain(a, b);
        }
        match (a.kind(), b.kind()) {
            (ExprKind::Constant(x), ExprKind::Constant(y)) => {
                std::sync::Arc::ptr_eq(x, y) || x == y
            }
            (ExprKind::Var(x), ExprKind::Var(y)) => self.var(x, y),
            (ExprKind::Global(x), ExprKind::Global(y)) => x == y,
            (ExprKind::Op(x), ExprKind::Op(y)) => x.name == y.name,
            (ExprKind::Ctor(x), ExprKind::Ctor(y)) => x == y,
            (
                ExprKind::Call {
                    callee: f,
                    args: xs,
                    attrs: p,
                },
                ExprKind::Call {
                    callee: g,
                    args: ys,
                    attrs: q,
                },
            ) => p == q && self.expr(f, g) && self.exprs(xs, ys),
            (ExprKind::Function(f), ExprKind::Function(g)) => self.function(f, g),
            (
                ExprKind::If {
                    cond: c,
                    then_branch: t,
                    else_branch: e,
                },
                ExprKind::If {
                    cond: d,
                    then_branch: u,
                    else_branch: f,
                },
            ) => self.expr(c, d) && self.expr(t, u) && self.expr(e, f),
            (
                ExprKind::Match {
                    scrutinee: s,
                    clauses: xs,
                    complete: p,
                },
                ExprKind::Match {
                    scrutinee: t,
                    clauses: ys,
                    complete: q,
                },
            ) => {
                p == q
                    && xs.len() == ys.len()
                    && self.expr(s, t)
                    && xs.iter().zip(ys).all(|(x, y)| {
                        self.pattern(&x.pattern, &y.pattern) && self.expr(&x.body, &y.body)
                    })
            }
            (ExprKind::Tuple(xs), ExprKind::Tuple(ys)) => self.exprs(xs, ys),
            (ExprKind::Proj { tuple: x, index: i }, ExprKind::Proj { tuple: y, index: j }) => {
                i == j && self.expr(x, y)
            }
            (ExprKind::RefNew(x), ExprKind::RefNew(y)) => self.expr(x, y),
            (ExprKind::RefRead(x), ExprKind::RefRead(y)) => self.expr(x, y),
            (ExprKind::RefWrite(r, v), ExprKind::RefWrite(s, w)) => {
                self.expr(r, s) && self.expr(v, w)
            }
            _ => false,
        }
    }

    /// Compares binding chains as flat binding sequences (either side may be a non-chain,
    /// which is a chain of no bindings).
    fn chain(&mut self, a: &Expr, b: &Expr) -> bool {
        let (xs, x_body) = flatten(a);
        let (ys, y_body) = flatten(b);
        if xs.len() != ys.len() {
            return false;
        }
        for (x, y) in xs.iter().zip(&ys) {
            // Bound before the value, which may refer to it (recursive functions).
            if !self.bind(&x.var, &y.var) || !self.expr(&x.value, &y.value) {
                return false;
            }
        }
        // Neither body is a chain, so this does not come back here.
        self.expr(x_body, y_body)
    }

    fn function(&mut self, f: &Function, g: &Function) -> bool {
        if f.type_params.len() != g.type_params.len()
            || f.params.len() != g.params.len()
            || f.attrs != g.attrs
        {
            return false;
        }
        for (x, y) in f.type_params.iter().zip(&g.type_params) {
            self.bind_type_var(x, y);
        }
        f.params.iter().zip(&g.params).all(|(x, y)| self.bind(x, y))
            && self.opt_ty(f.ret_type.as_ref(), g.ret_type.as_ref())
            && self.expr(&f.body, &g.body)
    }

    fn pattern(&mut self, p: &Pattern, q: &Pattern) -> bool {
        crate::ensure_sufficient_stack(|| self.pattern_inner(p, q))
    }

    fn pattern_inner(&mut self, p: &Pattern, q: &Pattern) -> bool {
        match (&p.kind, &q.kind) {
            (PatternKind::Wildcard, PatternKind::Wildcard) => true,
            (PatternKind::Var(x), PatternKind::Var(y)) => self.bind(x, y),
            (PatternKind::Ctor(c, xs), PatternKind::Ctor(d, ys)) => c == d && self.patterns(xs, ys),
            (PatternKind::Tuple(xs), PatternKind::Tuple(ys)) => self.patterns(xs, ys),
            _ => false,
        }
    }

    fn patterns(&mut self, xs: &[Pattern], ys: &[Pattern]) -> bool {
        xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| self.pattern(x, y))
    }

    fn opt_ty(&mut self, a: Option<&Type>, b: Option<&Type>) -> bool {
        match (a, b) {
            (None, None) => true,
            (Some(x), Some(y)) => self.ty(x, y),
            _ => false,
        }
    }

    fn types(&mut self, a: &[Type], b: &[Type]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| self.ty(x, y))
    }

    fn ty(&mut self, a: &Type, b: &Type) -> bool {
        crate::ensure_sufficient_stack(|| self.ty_inner(a, b))
    }

    fn ty_inner(&mut self, a: &Type, b: &Type) -> bool {
        match (a.kind(), b.kind()) {
            (TypeKind::Tensor { shape: s, dtype: d }, TypeKind::Tensor { shape: t, dtype: e }) => {
                s == t && d == e
            }
            (TypeKind::Tuple(xs), TypeKind::Tuple(ys)) => self.types(xs, ys),
            (TypeKind::Func(f), TypeKind::Func(g)) => {
                if f.type_params.len() != g.type_params.len() {
                    return false;
                }
                for (x, y) in f.type_params.iter().zip(&g.type_params) {
                    self.bind_type_var(x, y);
                }
                self.types(&f.params, &g.params) && self.ty(&f.ret, &g.ret)
            }
            (TypeKind::Var(x), TypeKind::Var(y)) => self.type_var(x, y),
            (TypeKind::Adt { name: m, args: xs }, TypeKind::Adt { name: n, args: ys }) => {
                m == n && self.types(xs, ys)
            }
            (TypeKind::Ref(x), TypeKind::Ref(y)) => self.ty(x, y),
            (TypeKind::Incomplete, TypeKind::Incomplete) => true,
            _ => false,
        }
    }

    fn type_def(&mut self, a: &TypeDef, b: &TypeDef) -> bool {
        if a.name != b.name
            || a.external != b.external
            || a.params.len() != b.params.len()
            || a.ctors.len() != b.ctors.len()
        {
            return false;
        }
        for (x, y) in a.params.iter().zip(&b.params) {
            self.bind_type_var(x, y);
        }
        a.ctors
            .iter()
            .zip(&b.ctors)
            .all(|(x, y)| x.name == y.name && self.types(&x.fields, &y.fields))
    }
}

// ----- Hashing -----

/// A fixed, process-independent 64-bit hasher (FxHash mixing with a final avalanche).
#[derive(Default)]
struct StableHasher {
    state: u64,
}

impl Hasher for StableHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.state = (self.state.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }

    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }

    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }

    fn finish(&self) -> u64 {
        // The SplitMix64 finalizer, so nearby states give unrelated hashes.
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Tags that keep different node kinds from hashing alike.
mod tag {
    pub const CONSTANT: u64 = 1;
    pub const VAR: u64 = 2;
    pub const GLOBAL: u64 = 3;
    pub const OP: u64 = 4;
    pub const CTOR: u64 = 5;
    pub const CALL: u64 = 6;
    pub const FUNCTION: u64 = 7;
    pub const LET: u64 = 8;
    pub const IF: u64 = 9;
    pub const MATCH: u64 = 10;
    pub const TUPLE: u64 = 11;
    pub const PROJ: u64 = 12;
    pub const REF_NEW: u64 = 13;
    pub const REF_READ: u64 = 14;
    pub const REF_WRITE: u64 = 15;
    pub const BIND: u64 = 16;
    pub const NO_TYPE: u64 = 17;
    pub const P_WILDCARD: u64 = 20;
    pub const P_VAR: u64 = 21;
    pub const P_CTOR: u64 = 22;
    pub const P_TUPLE: u64 = 23;
    pub const T_TENSOR: u64 = 30;
    pub const T_TUPLE: u64 = 31;
    pub const T_FUNC: u64 = 32;
    pub const T_VAR: u64 = 33;
    pub const T_ADT: u64 = 34;
    pub const T_REF: u64 = 35;
    pub const T_INCOMPLETE: u64 = 36;
    pub const T_BIND: u64 = 37;
}

/// The hashing walk: variables hash by the order in which they are first met (at their binding
/// site, or at their first use when free), which corresponding variables share.
#[derive(Default)]
struct Hashing {
    state: StableHasher,
    vars: HashMap<VarId, u64>,
    type_vars: HashMap<TypeVarId, u64>,
    next: u64,
}

impl Hashing {
    fn put(&mut self, word: u64) {
        self.state.write_u64(word);
    }

    /// A binding site: the variable gets the next number (re-binding overwrites, as equality
    /// does) and its annotation is hashed.
    fn bind(&mut self, v: &Var) {
        self.put(tag::BIND);
        self.opt_ty(v.ty());
        self.vars.insert(v.id(), self.next);
        self.next += 1;
    }

    fn var(&mut self, v: &Var) {
        self.put(tag::VAR);
        match self.vars.get(&v.id()) {
            Some(&n) => self.put(n),
            None => {
                // A free variable: numbered at its first occurrence, like a binding.
                self.put(self.next);
                self.bind(v);
            }
        }
    }

    fn bind_type_var(&mut self, tv: &TypeVar) {
        self.put(tag::T_BIND);
        self.type_vars.insert(tv.id(), self.next);
        self.next += 1;
    }

    fn attrs(&mut self, attrs: &Attrs) {
        self.put(attrs.len() as u64);
        for (key, value) in attrs.iter() {
            key.as_str().hash(&mut self.state);
            value.hash(&mut self.state);
        }
    }

    fn expr(&mut self, e: &Expr) {
        crate::ensure_sufficient_stack(|| self.expr_inner(e))
    }

    fn expr_inner(&mut self, e: &Expr) {
        match e.kind() {
            ExprKind::Let { .. } => {
                let (bindings, body) = flatten(e);
                if !bindings.is_empty() {
                    self.put(tag::LET);
                    self.put(bindings.len() as u64);
                    for b in bindings {
                        self.bind(&b.var);
                        self.expr(&b.value);
                    }
                }
                self.expr(body);
            }
            ExprKind::Constant(c) => {
                self.put(tag::CONSTANT);
                let d = c.dtype();
                self.put(((d.code as u64) << 32) | (u64::from(d.bits) << 16) | u64::from(d.lanes));
                self.put(c.ndim() as u64);
                c.shape().iter().for_each(|&s| self.put(s as u64));
                self.state.write(c.as_bytes());
            }
            ExprKind::Var(v) => self.var(v),
            ExprKind::Global(name) => {
                self.put(tag::GLOBAL);
                name.as_str().hash(&mut self.state);
            }
            ExprKind::Op(op) => {
                self.put(tag::OP);
                op.name.hash(&mut self.state);
            }
            ExprKind::Ctor(c) => {
                self.put(tag::CTOR);
                c.adt.as_str().hash(&mut self.state);
                c.name.as_str().hash(&mut self.state);
                self.put(u64::from(c.tag));
            }
            ExprKind::Call {
                callee,
                args,
                attrs,
            } => {
                self.put(tag::CALL);
                self.put(args.len() as u64);
                self.attrs(attrs);
                self.expr(callee);
                args.iter().for_each(|a| self.expr(a));
            }
            ExprKind::Function(f) => self.function(f),
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                self.put(tag::IF);
                self.expr(cond);
                self.expr(then_branch);
                self.expr(else_branch);
            }
            ExprKind::Match {
                scrutinee,
                clauses,
                complete,
            } => {
                self.put(tag::MATCH);
                self.put(u64::from(*complete));
                self.put(clauses.len() as u64);
                self.expr(scrutinee);
                for c in clauses {
                    self.pattern(&c.pattern);
                    self.expr(&c.body);
                }
            }
            ExprKind::Tuple(fields) => {
                self.put(tag::TUPLE);
                self.put(fields.len() as u64);
                fields.iter().for_each(|f| self.expr(f));
            }
            ExprKind::Proj { tuple, index } => {
                self.put(tag::PROJ);
                self.put(u64::from(*index));
                self.expr(tuple);
            }
            ExprKind::RefNew(x) => {
                self.put(tag::REF_NEW);
                self.expr(x);
            }
            ExprKind::RefRead(x) => {
                self.put(tag::REF_READ);
                self.expr(x);
            }
            ExprKind::RefWrite(r, v) => {
                self.put(tag::REF_WRITE);
                self.expr(r);
                self.expr(v);
            }
        }
    }

    fn function(&mut self, f: &Function) {
        self.put(tag::FUNCTION);
        self.put(f.type_params.len() as u64);
        self.put(f.params.len() as u64);
        self.attrs(&f.attrs);
        f.type_params.iter().for_each(|tv| self.bind_type_var(tv));
        f.params.iter().for_each(|p| self.bind(p));
        self.opt_ty(f.ret_type.as_ref());
        self.expr(&f.body);
    }

    fn pattern(&mut self, p: &Pattern) {
        crate::ensure_sufficient_stack(|| self.pattern_inner(p))
    }

    fn pattern_inner(&mut self, p: &Pattern) {
        match &p.kind {
            PatternKind::Wildcard => self.put(tag::P_WILDCARD),
            PatternKind::Var(v) => {
                self.put(tag::P_VAR);
                self.bind(v);
            }
            PatternKind::Ctor(c, fields) => {
                self.put(tag::P_CTOR);
                c.adt.as_str().hash(&mut self.state);
                c.name.as_str().hash(&mut self.state);
                self.put(u64::from(c.tag));
                self.put(fields.len() as u64);
                fields.iter().for_each(|f| self.pattern(f));
            }
            PatternKind::Tuple(fields) => {
                self.put(tag::P_TUPLE);
                self.put(fields.len() as u64);
                fields.iter().for_each(|f| self.pattern(f));
            }
        }
    }

    fn opt_ty(&mut self, t: Option<&Type>) {
        match t {
            Some(t) => self.ty(t),
            None => self.put(tag::NO_TYPE),
        }
    }

    fn ty(&mut self, t: &Type) {
        crate::ensure_sufficient_stack(|| self.ty_inner(t))
    }

    fn ty_inner(&mut self, t: &Type) {
        match t.kind() {
            TypeKind::Tensor { shape, dtype } => {
                self.put(tag::T_TENSOR);
                self.put(
                    ((dtype.code as u64) << 32)
                        | (u64::from(dtype.bits) << 16)
                        | u64::from(dtype.lanes),
                );
                self.put(shape.len() as u64);
                for d in shape {
                    match d {
                        crate::Dim::Known(n) => self.put(*n as u64),
                        crate::Dim::Any => self.put(u64::MAX - 1),
                    }
                }
            }
            TypeKind::Tuple(fields) => {
                self.put(tag::T_TUPLE);
                self.put(fields.len() as u64);
                fields.iter().for_each(|f| self.ty(f));
            }
            TypeKind::Func(f) => {
                self.put(tag::T_FUNC);
                self.put(f.type_params.len() as u64);
                self.put(f.params.len() as u64);
                f.type_params.iter().for_each(|tv| self.bind_type_var(tv));
                f.params.iter().for_each(|p| self.ty(p));
                self.ty(&f.ret);
            }
            TypeKind::Var(tv) => {
                self.put(tag::T_VAR);
                match self.type_vars.get(&tv.id()) {
                    Some(&n) => self.put(n),
                    None => {
                        self.put(self.next);
                        self.bind_type_var(tv);
                    }
                }
            }
            TypeKind::Adt { name, args } => {
                self.put(tag::T_ADT);
                name.as_str().hash(&mut self.state);
                self.put(args.len() as u64);
                args.iter().for_each(|a| self.ty(a));
            }
            TypeKind::Ref(inner) => {
                self.put(tag::T_REF);
                self.ty(inner);
            }
            TypeKind::Incomplete => self.put(tag::T_INCOMPLETE),
        }
    }

    fn type_def(&mut self, t: &TypeDef) {
        t.name.as_str().hash(&mut self.state);
        self.put(u64::from(t.external));
        self.put(t.params.len() as u64);
        t.params.iter().for_each(|tv| self.bind_type_var(tv));
        self.put(t.ctors.len() as u64);
        for c in &t.ctors {
            c.name.as_str().hash(&mut self.state);
            self.put(c.fields.len() as u64);
            c.fields.iter().for_each(|f| self.ty(f));
        }
    }
}
