//! Property test for the two printer/parser laws of SPEC §1, on random IR:
//!
//! - `module_eq(parse(print(m)), m)`: the printed text re-parses to a structurally equal module;
//! - `print(parse(print(m))) == print(m)`: printing is a fixpoint.
//!
//! Modules are generated as IR with the `relay_ir` constructors (not as text), so the printer
//! meets every shape the IR allows and the parser must read back whatever it writes: random
//! nesting of `let`s, graph bindings and sequencing (with shadowing, recursive local functions,
//! names that need renaming), calls of every registered operator with random attribute values
//! (required ones always given), non-operator calls with attributes, tuples, projections, `if`,
//! `match`/`match?` over small ADTs with every pattern form, function literals with type
//! parameters, annotations and attributes, scalar constants of every literal dtype including
//! float16/float64/int8/int64 and special floats, metadata constants, references, globals
//! calling each other, and expression programs (`free_var` form).
//!
//! Generation is driven by a byte string that proptest produces and shrinks: every choice reads
//! the next byte, and a missing byte means the first (simplest) choice, so shrinking the bytes
//! shrinks the program.

use std::sync::Arc;

use proptest::prelude::*;
use relay_ir::structural::module_eq;
use relay_ir::{
    AttrDefault, AttrKind, AttrValue, Attrs, Binding, BindingKind, Clause, CtorDef, CtorRef, DType,
    Dim, Expr, ExprKind, FuncType, Function, GlobalFunc, Module, ModuleKind, NDArray, OpRef,
    Pattern, PatternKind, PrintOptions, Span, Symbol, Type, TypeDef, TypeKind, TypeVar, Var,
    print_module,
};

// ----- Choices -----

/// The byte string every random choice is read from.
struct Choices<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// A number in `0..n` (0 when the bytes run out).
    fn below(&mut self, n: usize) -> usize {
        match n {
            0 | 1 => 0,
            n if n <= 256 => self.byte() as usize % n,
            n => ((self.byte() as usize) << 8 | self.byte() as usize) % n,
        }
    }

    /// `true` with roughly `percent`% probability (false when the bytes run out).
    fn flag(&mut self, percent: u32) -> bool {
        u32::from(self.byte()) * 100 >= (100 - percent) * 256
    }

    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |acc, _| acc << 8 | u64::from(self.byte()))
    }

    fn pick<'t, T>(&mut self, items: &'t [T]) -> &'t T {
        &items[self.below(items.len())]
    }

    fn pick_str(&mut self, items: &[&'static str]) -> &'static str {
        items[self.below(items.len())]
    }
}

// ----- The module skeleton: ADTs and global names -----

/// Names given to local variables; several collide with the printer's renaming scheme
/// (`x`/`x1`, `v`/`v1`/`1`), are empty, start with a digit or an underscore, or hold `/`.
const VAR_NAMES: &[&str] = &[
    "x", "x1", "y", "v", "v1", "", "1", "_", "a/b", "True", "data", "p0", "acc", "x2",
];

/// Names given to type variables.
const TYPE_VAR_NAMES: &[&str] = &["T", "U", "A", "T1"];

/// Dtypes for tensor types.
const DTYPES: &[&str] = &[
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "int8x4",
    "float32x4",
    "uint1x4",
];

/// Strings for attributes, with every escape the text format has.
const STRINGS: &[&str] = &[
    "",
    "NCHW",
    "float32",
    "a\"b",
    "back\\slash",
    "line\nbreak",
    "tab\there",
    "\"\\\n\t",
    "unicode é ∑",
    "x // not a comment /* nor this */",
];

/// The ADTs every generated module has.
struct Adts {
    cons: CtorRef,
    nil: CtorRef,
    red: CtorRef,
    pair: CtorRef,
}

fn ctor(adt: &str, name: &str, tag: u32) -> CtorRef {
    CtorRef {
        adt: Symbol::intern(adt),
        name: Symbol::intern(name),
        tag,
    }
}

impl Adts {
    fn new() -> Adts {
        Adts {
            cons: ctor("List", "Cons", 0),
            nil: ctor("List", "Nil", 1),
            red: ctor("Color", "Red", 0),
            pair: ctor("Pair", "MkPair", 0),
        }
    }

    /// `type List[A] { Cons(A, List[A]), Nil }`, `type Color { Red, Green, Blue }`,
    /// `type Pair[A, B] { MkPair(A, B) }` and `extern type Storage`.
    fn type_defs(&self) -> Vec<TypeDef> {
        let def = |name: &str, params: Vec<TypeVar>, ctors: Vec<CtorDef>, external: bool| TypeDef {
            name: Symbol::intern(name),
            params,
            ctors,
            external,
            span: Span::DUMMY,
        };
        let ctor_def = |name: &str, fields: Vec<Type>| CtorDef {
            name: Symbol::intern(name),
            fields,
            span: Span::DUMMY,
        };
        let a = TypeVar::new(Symbol::intern("A"), Span::DUMMY);
        let var_a = || Type::from_kind(TypeKind::Var(a.clone()));
        let list_a = Type::from_kind(TypeKind::Adt {
            name: Symbol::intern("List"),
            args: vec![var_a()],
        });
        let pa = TypeVar::new(Symbol::intern("A"), Span::DUMMY);
        let pb = TypeVar::new(Symbol::intern("B"), Span::DUMMY);
        let (va, vb) = (
            Type::from_kind(TypeKind::Var(pa.clone())),
            Type::from_kind(TypeKind::Var(pb.clone())),
        );
        vec![
            def(
                "List",
                vec![a.clone()],
                vec![
                    ctor_def("Cons", vec![var_a(), list_a]),
                    ctor_def("Nil", vec![]),
                ],
                false,
            ),
            def(
                "Color",
                vec![],
                vec![
                    ctor_def("Red", vec![]),
                    ctor_def("Green", vec![]),
                    ctor_def("Blue", vec![]),
                ],
                false,
            ),
            def(
                "Pair",
                vec![pa, pb],
                vec![ctor_def("MkPair", vec![va, vb])],
                false,
            ),
            def("Storage", vec![], vec![], true),
        ]
    }
}

// ----- Generation -----

/// Generation state: the choices, what is in scope, and the budget that bounds the program.
struct Gen<'a> {
    c: Choices<'a>,
    adts: Adts,
    /// Global function names that exist (empty for an expression program).
    globals: Vec<Symbol>,
    /// Whether ADTs exist (not in an expression program).
    with_adts: bool,
    /// Local variables in scope, innermost last.
    locals: Vec<Var>,
    /// Type variables in scope, innermost last.
    type_vars: Vec<TypeVar>,
    /// Every registered operator.
    ops: Vec<OpRef>,
    /// Nodes left to generate; when it runs out only leaves are produced.
    budget: usize,
}

impl Gen<'_> {
    fn name(&mut self) -> Symbol {
        Symbol::intern(self.c.pick_str(VAR_NAMES))
    }

    fn fresh_var(&mut self, depth: u32) -> Var {
        let name = self.name();
        let ty = if self.c.flag(40) {
            Some(self.ty(depth))
        } else {
            None
        };
        Var::new(name, ty, Span::DUMMY)
    }

    // ----- Types -----

    fn dtype(&mut self) -> DType {
        DType::parse(self.c.pick_str(DTYPES)).expect("a valid dtype")
    }

    fn ty(&mut self, depth: u32) -> Type {
        let leaf = depth == 0;
        let choice = self.c.below(if leaf { 3 } else { 10 });
        let kind = match choice {
            0 => TypeKind::Tensor {
                shape: Vec::new(),
                dtype: self.dtype(),
            },
            1 => {
                let rank = self.c.below(4);
                let shape = (0..rank)
                    .map(|_| {
                        if self.c.flag(20) {
                            Dim::Any
                        } else {
                            Dim::Known(self.c.below(300) as i64)
                        }
                    })
                    .collect();
                TypeKind::Tensor {
                    shape,
                    dtype: self.dtype(),
                }
            }
            2 => match self.type_vars.len() {
                0 => TypeKind::Incomplete,
                n => TypeKind::Var(self.type_vars[self.c.below(n)].clone()),
            },
            3 => TypeKind::Tuple((0..self.c.below(4)).map(|_| self.ty(depth - 1)).collect()),
            4 => {
                let saved = self.type_vars.len();
                let type_params = self.type_params();
                let params = (0..self.c.below(3)).map(|_| self.ty(depth - 1)).collect();
                let ret = self.ty(depth - 1);
                self.type_vars.truncate(saved);
                TypeKind::Func(FuncType {
                    type_params,
                    params,
                    ret,
                })
            }
            5 if self.with_adts => TypeKind::Adt {
                name: Symbol::intern("List"),
                args: vec![self.ty(depth - 1)],
            },
            6 if self.with_adts => TypeKind::Adt {
                name: Symbol::intern(if self.c.flag(50) { "Color" } else { "Storage" }),
                args: vec![],
            },
            7 if self.with_adts => TypeKind::Adt {
                name: Symbol::intern("Pair"),
                args: vec![self.ty(depth - 1), self.ty(depth - 1)],
            },
            8 => TypeKind::Ref(self.ty(depth - 1)),
            _ => TypeKind::Incomplete,
        };
        Type::from_kind(kind)
    }

    /// Type parameters `[T, U]` (0 to 2), pushed in scope.
    fn type_params(&mut self) -> Vec<TypeVar> {
        let n = if self.c.flag(25) {
            1 + self.c.below(2)
        } else {
            0
        };
        let params: Vec<TypeVar> = (0..n)
            .map(|_| TypeVar::new(Symbol::intern(self.c.pick_str(TYPE_VAR_NAMES)), Span::DUMMY))
            .collect();
        self.type_vars.extend(params.iter().cloned());
        params
    }

    // ----- Constants -----

    fn scalar(&mut self) -> NDArray {
        let (dtype, bytes): (DType, Vec<u8>) = match self.c.below(9) {
            0 => (
                DType::I32,
                (self.int_in(i32::MIN as i64, i32::MAX as i64) as i32)
                    .to_le_bytes()
                    .to_vec(),
            ),
            1 => (DType::BOOL, vec![u8::from(self.c.flag(50))]),
            2 => (
                DType::I8,
                (self.int_in(i8::MIN as i64, i8::MAX as i64) as i8)
                    .to_le_bytes()
                    .to_vec(),
            ),
            3 => (
                DType::I16,
                (self.int_in(i16::MIN as i64, i16::MAX as i64) as i16)
                    .to_le_bytes()
                    .to_vec(),
            ),
            4 => (
                DType::I64,
                self.int_in(i64::MIN, i64::MAX).to_le_bytes().to_vec(),
            ),
            5 => (DType::F32, self.f32_bits().to_le_bytes().to_vec()),
            6 => (DType::F16, self.f16_bits().to_le_bytes().to_vec()),
            7 => (DType::F64, self.f64_bits().to_le_bytes().to_vec()),
            _ => (DType::U8, vec![self.c.byte()]),
        };
        NDArray::from_bytes(dtype, &[], &bytes).expect("a scalar")
    }

    /// An integer in `lo..=hi`, often a small or extreme one.
    fn int_in(&mut self, lo: i64, hi: i64) -> i64 {
        match self.c.below(6) {
            0 => self.c.below(10) as i64,
            1 => -(self.c.below(10) as i64),
            2 => lo,
            3 => hi,
            _ => {
                let span = (hi as i128 - lo as i128 + 1) as u128;
                (lo as i128 + (u128::from(self.c.u64()) % span) as i128) as i64
            }
        }
    }

    fn f64_bits(&mut self) -> u64 {
        match self.c.below(10) {
            0 => 1.5f64.to_bits(),
            1 => 0.1f64.to_bits(),
            2 => f64::NAN.to_bits(),
            3 => f64::INFINITY.to_bits(),
            4 => f64::NEG_INFINITY.to_bits(),
            5 => (-0.0f64).to_bits(),
            6 => f64::MAX.to_bits(),
            7 => f64::from_bits(1).to_bits(),
            _ => {
                let v = f64::from_bits(self.c.u64());
                if v.is_nan() {
                    2.0f64.to_bits()
                } else {
                    v.to_bits()
                }
            }
        }
    }

    fn f32_bits(&mut self) -> u32 {
        match self.c.below(10) {
            0 => 1.5f32.to_bits(),
            1 => 0.1f32.to_bits(),
            2 => f32::NAN.to_bits(),
            3 => f32::INFINITY.to_bits(),
            4 => f32::NEG_INFINITY.to_bits(),
            5 => (-0.0f32).to_bits(),
            6 => f32::MAX.to_bits(),
            7 => 1e-45f32.to_bits(),
            _ => {
                let v = f32::from_bits(self.c.u64() as u32);
                if v.is_nan() {
                    2.0f32.to_bits()
                } else {
                    v.to_bits()
                }
            }
        }
    }

    fn f16_bits(&mut self) -> u16 {
        match self.c.below(8) {
            0 => 0x3c00, // 1
            1 => 0x7e00, // NaN
            2 => 0x7c00, // inf
            3 => 0xfc00, // -inf
            4 => 0x8000, // -0
            5 => 0x7bff, // 65504
            6 => 0x0001, // smallest subnormal
            _ => {
                let b = self.c.u64() as u16;
                if b & 0x7c00 == 0x7c00 && b & 0x03ff != 0 {
                    0x4000
                } else {
                    b
                }
            }
        }
    }

    /// A constant the printer must send to the metadata section: a non-scalar tensor, or a
    /// scalar of a dtype without a literal form.
    fn tensor(&mut self) -> NDArray {
        let dtype = DType::parse(self.c.pick_str(&[
            "float32", "int64", "uint8", "float16", "bool", "int8", "float64",
        ]))
        .expect("a dtype");
        let rank = self.c.below(3) + usize::from(dtype != DType::U8);
        let shape: Vec<i64> = (0..rank).map(|_| self.c.below(4) as i64).collect();
        let len = NDArray::byte_len(dtype, &shape).expect("a small tensor");
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                let b = self.c.byte();
                if dtype == DType::BOOL { b & 1 } else { b }
            })
            .collect();
        NDArray::from_bytes(dtype, &shape, &bytes).expect("a tensor")
    }

    // ----- Attributes -----

    fn attr_value(&mut self, kind: AttrKind) -> AttrValue {
        match kind {
            AttrKind::Int | AttrKind::Any => AttrValue::Int(self.int_in(i64::MIN, i64::MAX)),
            AttrKind::Float => AttrValue::Float(f64::from_bits(self.f64_bits())),
            AttrKind::Bool => AttrValue::Bool(self.c.flag(50)),
            AttrKind::Str => AttrValue::Str(Arc::from(*self.c.pick(STRINGS))),
            AttrKind::DType => {
                let d = if self.c.flag(20) {
                    String::new()
                } else {
                    self.dtype().to_string()
                };
                AttrValue::Str(d.into())
            }
            AttrKind::IntArray => self.array(|g| AttrValue::Int(g.int_in(-4, 300))),
            AttrKind::FloatArray => self.array(|g| AttrValue::Float(f64::from_bits(g.f64_bits()))),
            AttrKind::IntArrayArray => self.array(|g| {
                AttrValue::Array(vec![
                    AttrValue::Int(g.int_in(0, 3)),
                    AttrValue::Int(g.int_in(0, 3)),
                ])
            }),
            AttrKind::IntOrIntArray => {
                if self.c.flag(50) {
                    self.array(|g| AttrValue::Int(g.int_in(-4, 300)))
                } else {
                    AttrValue::Int(self.int_in(1, 8))
                }
            }
        }
    }

    fn array(&mut self, mut element: impl FnMut(&mut Self) -> AttrValue) -> AttrValue {
        AttrValue::Array((0..self.c.below(5)).map(|_| element(self)).collect())
    }

    /// Every field of `op`, in declaration order: required ones given, the others random or
    /// left at their default.
    fn op_attrs(&mut self, op: OpRef) -> Attrs {
        let entries = op
            .attrs
            .iter()
            .map(|field| {
                let required = matches!(field.default, AttrDefault::Required);
                let value = if field.nullable && self.c.flag(15) {
                    AttrValue::Null
                } else if required || self.c.flag(40) {
                    self.attr_value(field.kind)
                } else {
                    field.default.value().expect("a default")
                };
                (Symbol::intern(field.name), value)
            })
            .collect();
        Attrs::new(entries)
    }

    /// Function attributes or non-operator call attributes: distinct keys, any values.
    fn dict_attrs(&mut self, keys: &[&'static str]) -> Attrs {
        let mut entries: Vec<(Symbol, AttrValue)> = Vec::new();
        for _ in 0..self.c.below(4) {
            let key = Symbol::intern(self.c.pick_str(keys));
            if entries.iter().any(|(k, _)| *k == key) {
                continue;
            }
            let value = match self.c.below(7) {
                0 => AttrValue::Int(1),
                1 => AttrValue::Str(Arc::from(*self.c.pick(STRINGS))),
                2 => AttrValue::Null,
                3 => AttrValue::Bool(self.c.flag(50)),
                4 => AttrValue::Float(f64::from_bits(self.f64_bits())),
                5 => self.array(|g| AttrValue::Int(g.int_in(-3, 3))),
                _ => AttrValue::Int(self.int_in(i64::MIN, i64::MAX)),
            };
            entries.push((key, value));
        }
        Attrs::new(entries)
    }

    // ----- Expressions -----

    fn node(kind: ExprKind) -> Expr {
        Expr::new(kind, Span::DUMMY)
    }

    fn leaf(&mut self) -> Expr {
        match self.c.below(6) {
            0 | 1 if !self.locals.is_empty() => {
                let v = self.locals[self.c.below(self.locals.len())].clone();
                Expr::var(&v)
            }
            2 if !self.globals.is_empty() => {
                Self::node(ExprKind::Global(*self.c.pick(&self.globals.clone())))
            }
            3 => {
                let op = *self.c.pick(&self.ops.clone());
                Self::node(ExprKind::Op(op))
            }
            4 if self.with_adts => {
                let ctor = if self.c.flag(50) {
                    self.adts.cons
                } else {
                    self.adts.pair
                };
                Self::node(ExprKind::Ctor(ctor))
            }
            5 => Self::node(ExprKind::Tuple(Vec::new())),
            _ => Expr::constant(self.scalar()),
        }
    }

    fn expr(&mut self, depth: u32) -> Expr {
        if depth == 0 || self.budget == 0 {
            return self.leaf();
        }
        self.budget -= 1;
        let d = depth - 1;
        match self.c.below(18) {
            0 => self.leaf(),
            1 => Expr::constant(self.scalar()),
            2 => Expr::constant(self.tensor()),
            3 | 4 => {
                let op = *self.c.pick(&self.ops.clone());
                let args = (0..op.inputs.len()).map(|_| self.expr(d)).collect();
                let attrs = self.op_attrs(op);
                Self::node(ExprKind::Call {
                    callee: Self::node(ExprKind::Op(op)),
                    args,
                    attrs,
                })
            }
            5 => Self::node(ExprKind::Tuple(
                (0..self.c.below(4)).map(|_| self.expr(d)).collect(),
            )),
            6 => {
                let tuple = self.expr(d);
                Self::node(ExprKind::Proj {
                    tuple,
                    index: self.c.below(3) as u32,
                })
            }
            7 => {
                let cond = self.expr(d);
                let then_branch = self.scoped(|g| g.expr(d));
                let else_branch = self.scoped(|g| g.expr(d));
                Self::node(ExprKind::If {
                    cond,
                    then_branch,
                    else_branch,
                })
            }
            8 | 9 => self.scoped(|g| g.let_chain(d)),
            10 => {
                let f = self.function(d);
                Self::node(ExprKind::Function(f))
            }
            11 if self.with_adts => self.match_expr(d),
            12 if !self.globals.is_empty() => {
                let callee = Self::node(ExprKind::Global(*self.c.pick(&self.globals.clone())));
                let args = (0..self.c.below(3)).map(|_| self.expr(d)).collect();
                Self::node(ExprKind::Call {
                    callee,
                    args,
                    attrs: Attrs::empty(),
                })
            }
            13 if self.with_adts => self.ctor_call(d),
            14 => match self.c.below(3) {
                0 => Self::node(ExprKind::RefNew(self.expr(d))),
                1 => Self::node(ExprKind::RefRead(self.expr(d))),
                _ => {
                    let r = self.expr(d);
                    Self::node(ExprKind::RefWrite(r, self.expr(d)))
                }
            },
            15 => {
                // A call of a non-operator (a local, a function literal, a call result) with
                // TVM's call attributes.
                let callee = match self.expr(d) {
                    // Operator and constructor calls hold no call attributes of this kind.
                    e if matches!(e.kind(), ExprKind::Op(_) | ExprKind::Ctor(_)) => {
                        let f = self.function(d);
                        Self::node(ExprKind::Function(f))
                    }
                    e => e,
                };
                let args = (0..self.c.below(3)).map(|_| self.expr(d)).collect();
                let attrs = if self.c.flag(40) {
                    self.dict_attrs(&["name", "attrs_type_key", "x.y", "count"])
                } else {
                    Attrs::empty()
                };
                Self::node(ExprKind::Call {
                    callee,
                    args,
                    attrs,
                })
            }
            _ => self.leaf(),
        }
    }

    fn scoped<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let saved = self.locals.len();
        let r = f(self);
        self.locals.truncate(saved);
        r
    }

    /// `let`s, graph bindings and sequencing, then a body. The caller restores the scope.
    fn let_chain(&mut self, depth: u32) -> Expr {
        let n = 1 + self.c.below(4);
        let mut bindings = Vec::with_capacity(n);
        for _ in 0..n {
            let kind = *self
                .c
                .pick(&[BindingKind::Let, BindingKind::Graph, BindingKind::Seq]);
            match kind {
                BindingKind::Seq => {
                    let value = self.expr(depth);
                    let var = Var::new(Symbol::intern(""), None, Span::DUMMY);
                    bindings.push(Binding { var, value, kind });
                }
                BindingKind::Graph => {
                    let var = Var::new(
                        Symbol::intern(&bindings.len().to_string()),
                        None,
                        Span::DUMMY,
                    );
                    let value = if self.c.flag(15) {
                        // A recursive function bound in graph form (prints as a `let`).
                        self.locals.push(var.clone());
                        let f = self.function(depth);
                        Self::node(ExprKind::Function(f))
                    } else {
                        let v = self.expr(depth);
                        self.locals.push(var.clone());
                        v
                    };
                    bindings.push(Binding { var, value, kind });
                }
                BindingKind::Let => {
                    let var = self.fresh_var(depth.min(2));
                    let value = if self.c.flag(30) {
                        // The recursive-let rule: a function value sees its own variable.
                        self.locals.push(var.clone());
                        let f = self.function(depth);
                        Self::node(ExprKind::Function(f))
                    } else {
                        // Any other value sees the outer binding of the same name, if any.
                        let v = self.expr(depth);
                        self.locals.push(var.clone());
                        v
                    };
                    bindings.push(Binding { var, value, kind });
                }
            }
        }
        let body = self.expr(depth);
        Self::node(ExprKind::Let { bindings, body })
    }

    /// A function literal (or the function of a global), in a new scope that still sees the
    /// enclosing locals.
    fn function(&mut self, depth: u32) -> Function {
        let saved_locals = self.locals.len();
        let saved_tvs = self.type_vars.len();
        let type_params = self.type_params();
        let params: Vec<Var> = (0..self.c.below(4))
            .map(|_| self.fresh_var(depth.min(2)))
            .collect();
        let ret_type = if self.c.flag(30) {
            Some(self.ty(depth.min(2)))
        } else {
            None
        };
        let attrs = if self.c.flag(25) {
            self.dict_attrs(&[
                "Primitive",
                "Compiler",
                "relay.reshape_only",
                "global_symbol",
                "Closure",
                "hash",
                "TestAttribute",
            ])
        } else {
            Attrs::empty()
        };
        self.locals.extend(params.iter().cloned());
        let body = self.expr(depth);
        self.locals.truncate(saved_locals);
        self.type_vars.truncate(saved_tvs);
        Function {
            type_params,
            params,
            ret_type,
            body,
            attrs,
        }
    }

    fn ctor_call(&mut self, depth: u32) -> Expr {
        let (ctor, arity) = match self.c.below(4) {
            0 => (self.adts.nil, 0),
            1 => (self.adts.cons, 2),
            2 => (self.adts.red, 0),
            _ => (self.adts.pair, 2),
        };
        let args = (0..arity).map(|_| self.expr(depth)).collect();
        Self::node(ExprKind::Call {
            callee: Self::node(ExprKind::Ctor(ctor)),
            args,
            attrs: Attrs::empty(),
        })
    }

    fn match_expr(&mut self, depth: u32) -> Expr {
        let scrutinee = self.expr(depth);
        let clauses = (0..1 + self.c.below(3))
            .map(|_| {
                self.scoped(|g| {
                    let pattern = g.pattern(2);
                    let body = g.expr(depth);
                    Clause { pattern, body }
                })
            })
            .collect();
        Self::node(ExprKind::Match {
            scrutinee,
            clauses,
            complete: self.c.flag(70),
        })
    }

    /// A pattern; its variables are pushed in scope.
    fn pattern(&mut self, depth: u32) -> Pattern {
        let kind = match self.c.below(if depth == 0 { 2 } else { 6 }) {
            0 => PatternKind::Wildcard,
            1 => {
                let var = self.fresh_var(1);
                self.locals.push(var.clone());
                PatternKind::Var(var)
            }
            2 => PatternKind::Ctor(
                self.adts.cons,
                vec![self.pattern(depth - 1), self.pattern(depth - 1)],
            ),
            3 => PatternKind::Ctor(
                if self.c.flag(50) {
                    self.adts.nil
                } else {
                    self.adts.red
                },
                vec![],
            ),
            4 => PatternKind::Ctor(
                self.adts.pair,
                vec![self.pattern(depth - 1), self.pattern(depth - 1)],
            ),
            _ => PatternKind::Tuple(
                (0..self.c.below(3))
                    .map(|_| self.pattern(depth - 1))
                    .collect(),
            ),
        };
        Pattern {
            kind,
            span: Span::DUMMY,
        }
    }
}

/// A random module: ADTs and 1 to 4 global functions calling each other, or (sometimes) an
/// expression program.
fn module(bytes: &[u8]) -> Module {
    let mut g = Gen {
        c: Choices { bytes, pos: 0 },
        adts: Adts::new(),
        globals: Vec::new(),
        with_adts: true,
        locals: Vec::new(),
        type_vars: Vec::new(),
        ops: relay_ops::all().collect(),
        budget: 80,
    };
    let depth = 2 + g.c.below(4) as u32;

    if g.c.flag(10) {
        // An expression program: `free_var` lines and an expression, held as `@main`.
        g.with_adts = false;
        let params: Vec<Var> = (0..g.c.below(3))
            .map(|_| {
                let name = Symbol::intern(g.c.pick_str(&["x", "y", "data", "w1"]));
                let ty = if g.c.flag(50) { Some(g.ty(1)) } else { None };
                Var::new(name, ty, Span::DUMMY)
            })
            .collect();
        g.locals.extend(params.iter().cloned());
        let body = g.expr(depth);
        let func = Function {
            type_params: vec![],
            params,
            ret_type: None,
            body,
            attrs: Attrs::empty(),
        };
        return Module {
            functions: vec![GlobalFunc {
                name: Symbol::intern("main"),
                func,
                span: Span::DUMMY,
            }],
            types: Vec::new(),
            kind: ModuleKind::Expr,
            source: None,
        };
    }

    let n = 1 + g.c.below(4);
    g.globals = (0..n)
        .map(|i| Symbol::intern(["main", "f", "g/h", "helper"][i]))
        .collect();
    let functions = g
        .globals
        .clone()
        .into_iter()
        .map(|name| {
            g.budget = g.budget.max(20);
            let func = g.function(depth);
            GlobalFunc {
                name,
                func,
                span: Span::DUMMY,
            }
        })
        .collect();
    Module {
        functions,
        types: g.adts.type_defs(),
        kind: ModuleKind::Definitions,
        source: None,
    }
}

/// Checks both laws on `m`; the error says which failed and shows the texts.
fn check_laws(m: &Module) -> Result<(), String> {
    let options = PrintOptions::default();
    let printed = print_module(m, &options);
    let reparsed = relay_syntax::parse(&printed, "printed.relay").map_err(|errors| {
        format!(
            "the printed text does not parse:\n{}\nprinted text:\n{printed}",
            relay_syntax::render_plain(&errors)
        )
    })?;
    let reprinted = print_module(&reparsed, &options);
    if reprinted != printed {
        return Err(format!(
            "printing is not a fixpoint\nprint(m):\n{printed}\nprint(parse(print(m))):\n{reprinted}"
        ));
    }
    if !module_eq(&reparsed, m) {
        return Err(format!(
            "parse(print(m)) is not structurally equal to m\nprint(m):\n{printed}"
        ));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        max_shrink_iters: 4096,
        ..relay_testing::proptest_config(1024)
    })]

    #[test]
    fn print_parse_round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let m = module(&bytes);
        if let Err(message) = check_laws(&m) {
            prop_assert!(false, "{}", message);
        }
    }
}

/// The simplest module (every choice the first one) also obeys the laws; a quick smoke test
/// that fails with a readable message before proptest's shrinking output.
#[test]
fn simplest_module_round_trips() {
    check_laws(&module(&[])).unwrap();
}

/// A few fixed seeds, so that a regression reproduces without proptest.
#[test]
fn fixed_seeds_round_trip() {
    for seed in 0u64..64 {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let bytes: Vec<u8> = (0..2048)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        if let Err(message) = check_laws(&module(&bytes)) {
            panic!("seed {seed}: {message}");
        }
    }
}
