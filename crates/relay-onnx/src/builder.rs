//! The typed builder converters write `@main` with: operator calls by name with attributes,
//! whose result types come from the operators' own type relations (relay-ops), bound one by
//! one to the `let`-chain of the block being written; calls whose arguments are all
//! constants are evaluated at once by the operator's reference evaluation and become
//! constants; constants are parameters of `@main` (bound by name, as `--params` binds a
//! `.npz`) or, for scalars, literals.
//!
//! A value's shape is the relation's, with the importer's symbols ([`crate::symbolic`]) in
//! place of the relation's `?`: a broadcasting operator's dynamic dimension is its inputs',
//! and a converter that knows which symbol a dimension is says so ([`Builder::call_as`]).

use crate::error::ConvertError;
use std::collections::HashSet;
use std::sync::Arc;

use relay_ir::{
    AttrValue, Attrs, Binding, BindingKind, Dim, Expr, ExprKind, Function, OpPattern, Span, Symbol,
    Type, TypeKind, Var, print_type,
};
use relay_runtime::{DType, NDArray};

use crate::symbolic;

/// A value of the graph.
#[derive(Clone, Debug)]
pub(crate) struct Value {
    /// The Relay expression standing for it: a variable, or a scalar literal.
    pub expr: Expr,
    /// Its shape (a negative dimension is dynamic: [`crate::symbolic`]).
    pub shape: Vec<i64>,
    /// Its element type.
    pub dtype: DType,
    /// Its contents, when it is an initializer or a constant (shared, not copied).
    pub konst: Option<Arc<NDArray>>,
    /// Its elements, when it is a small integer vector computed from dynamic dimensions
    /// (some elements symbols: [`crate::symbolic`]).
    pub elems: Option<Vec<i64>>,
}

impl Value {
    /// A value of `shape` and `dtype` that `expr` computes (no contents known at import).
    pub(crate) fn of(expr: Expr, shape: Vec<i64>, dtype: DType) -> Value {
        Value {
            expr,
            shape,
            dtype,
            konst: None,
            elems: None,
        }
    }

    /// The value with `dims`' symbols in its dynamic dimensions (a relation gives `?`, the
    /// importer knows which symbol it is), for results [`Builder::call_as`] does not type:
    /// tuple fields.
    pub(crate) fn with_symbols(mut self, dims: &[i64]) -> Value {
        for (d, &s) in self.shape.iter_mut().zip(dims) {
            if *d < 0 {
                *d = s;
            }
        }
        self
    }

    /// Its Relay type (a dynamic dimension is `?`).
    pub(crate) fn ty(&self) -> Type {
        tensor_type(&self.shape, self.dtype)
    }
}

/// The tensor type of `shape` and `dtype` (a negative dimension is `?`).
pub(crate) fn tensor_type(shape: &[i64], dtype: DType) -> Type {
    let shape = shape
        .iter()
        .map(|&d| if d < 0 { Dim::Any } else { Dim::Known(d) })
        .collect();
    Type::from_kind(TypeKind::Tensor { shape, dtype })
}

/// The largest result a call on constants is evaluated into at import (a shape
/// computation: `Shape` → `Gather` → `Concat` → `Reshape`); larger ones are left to the
/// `fold_constant` pass, which folds them with compiled kernels.
const FOLDED_ELEMENTS: usize = 4096;

/// `@main` as it is written.
pub(crate) struct Builder {
    /// The blocks being written, innermost last: each a `let`-chain.
    blocks: Vec<Vec<Binding>>,
    /// Every identifier given out, so that each is unique in the module.
    names: HashSet<String>,
    next: usize,
    /// `@main`'s parameters, the graph's inputs first.
    main_params: Vec<Var>,
    /// The parameters that are constants, by name.
    params: Vec<(String, Arc<NDArray>)>,
}

/// What a finished `@main` is made of.
pub(crate) struct Finished {
    pub main: Function,
    pub params: Vec<(String, NDArray)>,
}

impl Builder {
    pub(crate) fn new() -> Builder {
        Builder {
            blocks: vec![Vec::new()],
            names: HashSet::new(),
            next: 0,
            main_params: Vec::new(),
            params: Vec::new(),
        }
    }

    /// A Relay identifier made from `hint` (an ONNX name), unique in the module.
    pub(crate) fn fresh_name(&mut self, hint: &str) -> String {
        let mut base: String = hint
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if !base.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            base.insert(0, 'v');
        }
        let mut candidate = base.clone();
        let mut k = 1;
        while !self.names.insert(candidate.clone()) {
            candidate = format!("{base}_{k}");
            k += 1;
        }
        candidate
    }

    /// A new parameter of `@main` of `shape` and `dtype`, named after `hint`.
    pub(crate) fn parameter(
        &mut self,
        hint: &str,
        shape: Vec<i64>,
        dtype: DType,
    ) -> (String, Value) {
        let name = self.fresh_name(hint);
        let var = Var::new(
            Symbol::intern(&name),
            Some(tensor_type(&shape, dtype)),
            Span::DUMMY,
        );
        self.main_params.push(var.clone());
        (name, Value::of(Expr::var(&var), shape, dtype))
    }

    /// A constant: a new parameter of `@main` named after `hint`, bound to `array`.
    pub(crate) fn constant(&mut self, hint: &str, array: NDArray) -> Value {
        let (shape, dtype) = (array.shape().to_vec(), array.dtype());
        let (name, v) = self.parameter(hint, shape, dtype);
        let array = Arc::new(array);
        self.params.push((name, Arc::clone(&array)));
        Value {
            konst: Some(array),
            ..v
        }
    }

    /// A scalar literal of `dtype` holding `v` (a float dtype: `v` rounded to it; an
    /// infinite bound is the dtype's largest finite value, as a Relay literal is finite).
    pub(crate) fn float(&mut self, v: f64, dtype: DType) -> Result<Value, ConvertError> {
        let v = if dtype.is_float() {
            finite(v, dtype)
        } else {
            v
        };
        let array = NDArray::scalar_f64(dtype, v).map_err(|e| e.to_string())?;
        Ok(self.literal(array))
    }

    /// A scalar literal of integer (or boolean) `dtype` holding `v`.
    pub(crate) fn int(&mut self, v: i64, dtype: DType) -> Result<Value, ConvertError> {
        let array = NDArray::scalar_i128(dtype, i128::from(v)).map_err(|e| e.to_string())?;
        Ok(self.literal(array))
    }

    /// `array` as a literal in the expression (a scalar; a tensor is a [`Builder::constant`]).
    fn literal(&mut self, array: NDArray) -> Value {
        let array = Arc::new(array);
        Value {
            expr: Expr::new(ExprKind::Constant(Arc::clone(&array)), Span::DUMMY),
            shape: Vec::new(),
            dtype: array.dtype(),
            konst: Some(array),
            elems: None,
        }
    }

    /// A result computed at import: a literal when it is a scalar, else a constant.
    fn folded(&mut self, hint: &str, array: NDArray) -> Value {
        if array.ndim() == 0 {
            self.literal(array)
        } else {
            self.constant(&format!("{hint}_folded"), array)
        }
    }

    /// A new int64 constant of `shape` holding `values` (indices, offsets), named after `hint`.
    pub(crate) fn int64_constant(
        &mut self,
        hint: &str,
        shape: &[i64],
        values: impl IntoIterator<Item = i64>,
    ) -> Result<Value, ConvertError> {
        elements(shape)?;
        let values: Vec<i128> = values.into_iter().map(i128::from).collect();
        let array =
            NDArray::from_i128_slice(DType::I64, shape, &values).map_err(|e| e.to_string())?;
        Ok(self.constant(hint, array))
    }

    /// `op(args..., attrs...)`: its type from the operator's relation, evaluated at once when
    /// every argument is a constant and the result small.
    pub(crate) fn call(
        &mut self,
        op: &str,
        args: &[&Value],
        attrs: &[(&str, AttrValue)],
    ) -> Result<Value, ConvertError> {
        let hint = broadcast_hint(op, args);
        self.call_typed(op, Arg::each(args), attrs, hint)
    }

    /// [`Builder::call`] whose result has `shape`, symbols included: the relation's type
    /// must agree with it in every static dimension, and its `?` dimensions are `shape`'s.
    pub(crate) fn call_as(
        &mut self,
        op: &str,
        args: &[&Value],
        attrs: &[(&str, AttrValue)],
        shape: &[i64],
    ) -> Result<Value, ConvertError> {
        self.call_typed(op, Arg::each(args), attrs, Some(shape.to_vec()))
    }

    /// `op((fields...), attrs...)`: an operator whose one input is a tuple (`concatenate`,
    /// `stack`, `einsum`).
    pub(crate) fn call_tuple(
        &mut self,
        op: &str,
        fields: &[&Value],
        attrs: &[(&str, AttrValue)],
    ) -> Result<Value, ConvertError> {
        let args = vec![Arg::Tuple(fields.iter().map(|v| (*v).clone()).collect())];
        self.call_typed(op, args, attrs, None)
    }

    /// `op(args..., attrs...)` whose result is a tuple of tensors (`split`, `topk`,
    /// `nn.batch_norm`): each field bound.
    pub(crate) fn call_fields(
        &mut self,
        op: &str,
        args: &[&Value],
        attrs: &[(&str, AttrValue)],
    ) -> Result<Vec<Value>, ConvertError> {
        let (expr, ty, konst) = self.checked_call(op, Arg::each(args), attrs)?;
        let TypeKind::Tuple(types) = ty.kind() else {
            return Err(format!("`{op}` returns {}, not a tuple", print_type(&ty)).into());
        };
        let types: Vec<(Vec<i64>, DType)> = types
            .iter()
            .map(|t| {
                shape_of(t).ok_or_else(|| {
                    ConvertError::from(format!("`{op}` returns a field of type {}", print_type(t)))
                })
            })
            .collect::<Result<_, _>>()?;
        if let Some(relay_runtime::Value::Tuple(fields)) = konst {
            return fields
                .iter()
                .map(|f| match f {
                    relay_runtime::Value::Tensor(t) => Ok(self.folded(op, (**t).clone())),
                    _ => Err(format!("`{op}` evaluated to a nested tuple").into()),
                })
                .collect();
        }
        let tuple = self.bind(expr);
        Ok(self.fields(&tuple, types))
    }

    /// The fields of tuple `tuple` (an expression), of these shapes and types, each bound.
    pub(crate) fn fields(&mut self, tuple: &Expr, types: Vec<(Vec<i64>, DType)>) -> Vec<Value> {
        types
            .into_iter()
            .enumerate()
            .map(|(i, (shape, dtype))| {
                let proj = Expr::new(
                    ExprKind::Proj {
                        tuple: tuple.clone(),
                        index: i as u32,
                    },
                    Span::DUMMY,
                );
                Value::of(self.bind(proj), shape, dtype)
            })
            .collect()
    }

    fn call_typed(
        &mut self,
        op: &str,
        args: Vec<Arg>,
        attrs: &[(&str, AttrValue)],
        hint: Option<Vec<i64>>,
    ) -> Result<Value, ConvertError> {
        let (expr, ty, konst) = self.checked_call(op, args, attrs)?;
        let (shape, dtype) = shape_of(&ty).ok_or_else(|| {
            ConvertError::from(format!("`{op}` returns {}, not a tensor", print_type(&ty)))
        })?;
        let shape = match hint {
            Some(hint) => with_symbols(op, &shape, &hint)?,
            None => shape,
        };
        if let Some(relay_runtime::Value::Tensor(t)) = konst {
            let c = self.folded(op, (*t).clone());
            return Ok(Value { shape, ..c });
        }
        Ok(Value::of(self.bind(expr), shape, dtype))
    }

    /// The call, its type, and its value when every argument is a constant and the result
    /// is small.
    fn checked_call(
        &mut self,
        op: &str,
        args: Vec<Arg>,
        attrs: &[(&str, AttrValue)],
    ) -> Result<(Expr, Type, Option<relay_runtime::Value>), ConvertError> {
        let schema = relay_ops::lookup(op)
            .ok_or_else(|| ConvertError::from(format!("`{op}` is not a Relay operator")))?;
        let attrs = schema.complete_attrs(attrs)?;
        let relation = schema
            .relation
            .ok_or_else(|| ConvertError::from(format!("`{op}` has no type relation")))?;
        let types: Vec<Type> = args.iter().map(Arg::ty).collect();
        let ty = relation(&types, &attrs).map_err(|error| ConvertError::Operator {
            op: op.to_owned(),
            error,
        })?;
        let konst = match schema.eval {
            Some(eval) if small(&ty) => match constants(&args) {
                Some(values) => eval(&values, &attrs).ok(),
                None => None,
            },
            _ => None,
        };
        let args = args.iter().map(Arg::expr).collect();
        let expr = call_expr(schema, args, attrs);
        Ok((expr, ty, konst))
    }

    /// Binds `expr` to the next variable of the block being written; the variable.
    pub(crate) fn bind(&mut self, expr: Expr) -> Expr {
        let var = Var::new(Symbol::intern(&self.next.to_string()), None, Span::DUMMY);
        self.next += 1;
        self.push(Binding {
            var: var.clone(),
            value: expr,
            kind: BindingKind::Graph,
        });
        Expr::var(&var)
    }

    /// Binds `expr`, a non-operator expression (an `if`, a call of a local function, a
    /// tuple field) of `shape` and `dtype` known to the converter.
    pub(crate) fn bind_value(&mut self, expr: Expr, shape: Vec<i64>, dtype: DType) -> Value {
        Value::of(self.bind(expr), shape, dtype)
    }

    /// Appends `binding` to the block being written.
    pub(crate) fn push(&mut self, binding: Binding) {
        match self.blocks.last_mut() {
            Some(block) => block.push(binding),
            None => self.blocks.push(vec![binding]),
        }
    }

    /// A fresh local variable named after `hint`, of `shape` and `dtype` (a function's
    /// parameter), as a value.
    pub(crate) fn local(&mut self, hint: &str, shape: &[i64], dtype: DType) -> (Var, Value) {
        let name = self.fresh_name(&format!("{hint}{}", self.next));
        self.next += 1;
        let var = Var::new(
            Symbol::intern(&name),
            Some(tensor_type(shape, dtype)),
            Span::DUMMY,
        );
        let v = Value::of(Expr::var(&var), shape.to_vec(), dtype);
        (var, v)
    }

    /// A fresh local variable named after `hint` with no annotation (a local function).
    pub(crate) fn local_untyped(&mut self, hint: &str) -> Var {
        let name = self.fresh_name(&format!("{hint}{}", self.next));
        self.next += 1;
        Var::new(Symbol::intern(&name), None, Span::DUMMY)
    }

    /// Opens a nested block (a branch, a loop body): what is bound next goes into it.
    pub(crate) fn open(&mut self) {
        self.blocks.push(Vec::new());
    }

    /// Closes the innermost block; its bindings.
    pub(crate) fn close(&mut self) -> Vec<Binding> {
        // The outermost block (`@main`'s) stays open.
        match self.blocks.len() {
            0 | 1 => Vec::new(),
            _ => self.blocks.pop().unwrap_or_default(),
        }
    }

    /// Finishes `@main` returning `result`: the bindings and constants nothing reads are
    /// dropped (an initializer replaced by its transposed copy, a shape read at import),
    /// the first `inputs` parameters, the graph's inputs, kept.
    pub(crate) fn finish(mut self, result: Expr, inputs: usize) -> Finished {
        let bindings = self
            .blocks
            .first_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        let mut used: HashSet<relay_ir::VarId> = relay_ir::visit::free_vars(&result)
            .iter()
            .map(Var::id)
            .collect();
        let mut kept = Vec::with_capacity(bindings.len());
        for b in bindings.into_iter().rev() {
            if !used.contains(&b.var.id()) {
                continue;
            }
            used.extend(relay_ir::visit::free_vars(&b.value).iter().map(Var::id));
            kept.push(b);
        }
        kept.reverse();
        let params: Vec<Var> = self
            .main_params
            .iter()
            .enumerate()
            .filter(|(i, v)| *i < inputs || used.contains(&v.id()))
            .map(|(_, v)| v.clone())
            .collect();
        let names: HashSet<String> = params.iter().map(|v| v.name().to_string()).collect();
        self.params.retain(|(name, _)| names.contains(name));
        let body = block(kept, result);
        let params_out = self
            .params
            .into_iter()
            .map(|(n, a)| (n, Arc::try_unwrap(a).unwrap_or_else(|a| (*a).clone())))
            .collect();
        Finished {
            main: Function {
                type_params: Vec::new(),
                params,
                ret_type: None,
                body,
                attrs: Attrs::empty(),
            },
            params: params_out,
        }
    }
}

/// `bindings` then `result` as one expression (`result` alone when there are none).
pub(crate) fn block(bindings: Vec<Binding>, result: Expr) -> Expr {
    if bindings.is_empty() {
        return result;
    }
    Expr::new(
        ExprKind::Let {
            bindings,
            body: result,
        },
        Span::DUMMY,
    )
}

/// `(exprs...)`; one expression alone is itself.
pub(crate) fn tuple(exprs: Vec<Expr>) -> Expr {
    match <[Expr; 1]>::try_from(exprs) {
        Ok([one]) => one,
        Err(exprs) => Expr::new(ExprKind::Tuple(exprs), Span::DUMMY),
    }
}

/// The call of operator `schema` on `args` with `attrs` (complete).
fn call_expr(schema: relay_ir::OpRef, args: Vec<Expr>, attrs: Attrs) -> Expr {
    let callee = Expr::new(ExprKind::Op(schema), Span::DUMMY);
    Expr::new(
        ExprKind::Call {
            callee,
            args,
            attrs,
        },
        Span::DUMMY,
    )
}

/// An argument of a call: a value, or a tuple of them.
enum Arg {
    One(Value),
    Tuple(Vec<Value>),
}

impl Arg {
    fn each(args: &[&Value]) -> Vec<Arg> {
        args.iter().map(|v| Arg::One((*v).clone())).collect()
    }

    fn ty(&self) -> Type {
        match self {
            Arg::One(v) => v.ty(),
            Arg::Tuple(vs) => Type::tuple(vs.iter().map(Value::ty).collect()),
        }
    }

    fn expr(&self) -> Expr {
        match self {
            Arg::One(v) => v.expr.clone(),
            Arg::Tuple(vs) => Expr::new(
                ExprKind::Tuple(vs.iter().map(|v| v.expr.clone()).collect()),
                Span::DUMMY,
            ),
        }
    }

    /// Its value, when it is known at import.
    fn konst(&self) -> Option<relay_runtime::Value> {
        let one = |v: &Value| Some(relay_runtime::Value::Tensor(Arc::clone(v.konst.as_ref()?)));
        match self {
            Arg::One(v) => one(v),
            Arg::Tuple(vs) => vs
                .iter()
                .map(one)
                .collect::<Option<Vec<_>>>()
                .map(|fields| relay_runtime::Value::Tuple(fields.into())),
        }
    }
}

/// The values of `args`, when every one is known at import (and there is one).
fn constants(args: &[Arg]) -> Option<Vec<relay_runtime::Value>> {
    if args.is_empty() {
        return None;
    }
    args.iter().map(Arg::konst).collect()
}

/// Whether a result of type `ty` is small enough to compute at import.
fn small(ty: &Type) -> bool {
    match ty.kind() {
        TypeKind::Tensor { shape, .. } => {
            let mut n: usize = 1;
            for d in shape {
                let Dim::Known(d) = d else { return false };
                n = n.saturating_mul(usize::try_from(*d).unwrap_or(usize::MAX));
            }
            n <= FOLDED_ELEMENTS
        }
        TypeKind::Tuple(fields) => fields.iter().all(small),
        _ => false,
    }
}

/// The shape (`?` as [`symbolic::ANY`]) and dtype of tensor type `ty`.
pub(crate) fn shape_of(ty: &Type) -> Option<(Vec<i64>, DType)> {
    match ty.kind() {
        TypeKind::Tensor { shape, dtype } => Some((
            shape
                .iter()
                .map(|d| match d {
                    Dim::Known(n) => *n,
                    Dim::Any => symbolic::ANY,
                })
                .collect(),
            *dtype,
        )),
        _ => None,
    }
}

/// The importer's symbols for a broadcasting operator's result: its inputs' broadcast.
fn broadcast_hint(op: &str, args: &[&Value]) -> Option<Vec<i64>> {
    let schema = relay_ops::lookup(op)?;
    if schema.pattern > OpPattern::Broadcast || !args.iter().any(|v| symbolic::is_dynamic(&v.shape))
    {
        return None;
    }
    let rank = args.iter().map(|v| v.shape.len()).max()?;
    let mut out = vec![1i64; rank];
    for v in args {
        let offset = rank - v.shape.len();
        for (i, &d) in v.shape.iter().enumerate() {
            out[offset + i] = symbolic::broadcast_dim(out[offset + i], d)?;
        }
    }
    Some(out)
}

/// The relation's `shape` with `hint`'s symbols for its `?` dimensions; an error when the
/// two disagree on a static dimension (an importer bug, reported as such).
fn with_symbols(op: &str, shape: &[i64], hint: &[i64]) -> Result<Vec<i64>, ConvertError> {
    let agrees = shape.len() == hint.len()
        && shape
            .iter()
            .zip(hint)
            .all(|(&s, &h)| s == h || s < 0 || h < 0);
    if !agrees {
        return Err(format!(
            "`{op}`'s type relation gives the shape {shape:?}, the importer expected {hint:?}"
        )
        .into());
    }
    Ok(shape
        .iter()
        .zip(hint)
        .map(|(&s, &h)| if s < 0 { h } else { s })
        .collect())
}

/// `v` rounded to float `dtype`, an infinity as its largest finite value (a Relay literal
/// or attribute is finite: an infinite bound is the largest one).
pub(crate) fn finite(v: f64, dtype: DType) -> f64 {
    let v = if dtype.bits == 64 {
        v
    } else {
        f64::from(v as f32)
    };
    if v.is_finite() {
        return v;
    }
    let max = match dtype.bits {
        64 => f64::MAX,
        16 => 65504.0,
        _ => f64::from(f32::MAX),
    };
    max.copysign(v)
}

/// The most elements a constant computed at import (`Range`, `ConstantOfShape`, index
/// tables) may have.
pub(crate) const MAX_ELEMENTS: usize = 1 << 24;

/// The element count of `shape`, checked against [`MAX_ELEMENTS`].
pub(crate) fn elements(shape: &[i64]) -> Result<usize, ConvertError> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| {
            usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
        })
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| ConvertError::from(format!("a constant of shape {shape:?}")))
}

/// Attribute values, as converters write them.
pub(crate) mod attr {
    use relay_ir::AttrValue;

    /// An integer.
    pub(crate) fn int(v: i64) -> AttrValue {
        AttrValue::Int(v)
    }

    /// A list of integers.
    pub(crate) fn ints(v: &[i64]) -> AttrValue {
        AttrValue::Array(v.iter().map(|&i| AttrValue::Int(i)).collect())
    }

    /// A float.
    pub(crate) fn float(v: f64) -> AttrValue {
        AttrValue::Float(v)
    }

    /// A string (also a dtype, `"float32"`).
    pub(crate) fn str(v: impl ToString) -> AttrValue {
        AttrValue::Str(v.to_string().into())
    }

    /// A boolean.
    pub(crate) fn bool(v: bool) -> AttrValue {
        AttrValue::Bool(v)
    }

    /// `None`.
    pub(crate) fn null() -> AttrValue {
        AttrValue::Null
    }

    /// A list of integer lists (`pad_width`).
    pub(crate) fn int_lists(v: &[Vec<i64>]) -> AttrValue {
        AttrValue::Array(v.iter().map(|l| ints(l)).collect())
    }
}

/// The element values of constant `v` as integers.
pub(crate) fn ints_of(v: &Value) -> Option<Vec<i64>> {
    let k = v.konst.as_ref()?;
    k.dtype()
        .is_int()
        .then(|| k.to_i128_vec().into_iter().map(|x| x as i64).collect())
}

/// The element values of constant `v` as floats.
pub(crate) fn floats_of(v: &Value) -> Option<Vec<f64>> {
    v.konst.as_ref().map(|k| k.to_f64_vec())
}
