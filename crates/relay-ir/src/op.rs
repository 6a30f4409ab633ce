//! Operator schemas: the part of the operator registry the IR itself needs (names, inputs and
//! attribute declarations with TVM's defaults), so that the printer can omit default attributes
//! and the parser can check names and attributes.

use relay_runtime::{DType, Value};

use crate::{AttrValue, Attrs, OpError, Symbol, Type};

/// An operator as the IR refers to it: a schema in the static operator registry.
pub type OpRef = &'static OpSchema;

/// An operator's declaration: TVM's registered name, positional inputs and attribute fields.
#[derive(Debug)]
pub struct OpSchema {
    /// The registered name, e.g. `nn.conv2d`.
    pub name: &'static str,
    /// Names of the positional inputs, in order.
    pub inputs: &'static [&'static str],
    /// TVM's attributes struct, e.g. `relay.attrs.Conv2DAttrs`; empty when the op has none.
    pub attrs_type: &'static str,
    /// The attribute fields in declaration (printing) order.
    pub attrs: &'static [AttrField],
    /// How the operator fuses (TVM's `TOpPattern`).
    pub pattern: OpPattern,
    /// The type relation: the result type from the input types and attributes. `None` for
    /// operators relayc parses but cannot type (outside SPEC §4's Tier 1).
    pub relation: Option<RelationFn>,
    /// The reference evaluation the interpreter uses. `None` for operators relayc cannot run.
    pub eval: Option<EvalFn>,
    /// The compute definition the kernel compiler lowers (`crate::te`). `None` for operators
    /// relayc cannot compile into a kernel yet.
    pub compute: Option<crate::te::ComputeFn>,
    /// The operation it is on unboxed scalars, which the VM evaluates without a kernel (loop
    /// counters, comparisons); `None` for every other operator.
    pub scalar: Option<ScalarOp>,
    /// How it reads its arguments, for fusion, when that differs from [`OpSchema::pattern`]
    /// (TVM's edge patterns): `nn.softmax` is `OutEWiseFusable` for what follows it, but reads
    /// its input as a reduction does (`CommReduce`), so elementwise producers (an attention
    /// score's scaling) fuse into it. `None`: its own pattern.
    pub input_edge: Option<OpPattern>,
}

/// An operator's form on rank-0 integers, booleans and floats, which the VM evaluates on
/// unboxed values (`relay_vm::scalar`) with the kernels' exact results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarOp {
    /// One operand.
    Unary(ScalarUnary),
    /// Two operands of one dtype.
    Binary(ScalarBinary),
}

/// A unary [`ScalarOp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarUnary {
    /// `negative`.
    Neg,
    /// `logical_not`.
    Not,
}

/// A binary [`ScalarOp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarBinary {
    /// `add`.
    Add,
    /// `subtract`.
    Sub,
    /// `multiply`.
    Mul,
    /// `divide`.
    Div,
    /// `mod`.
    Mod,
    /// `floor_divide`.
    FloorDiv,
    /// `floor_mod`.
    FloorMod,
    /// `equal`.
    Eq,
    /// `not_equal`.
    Ne,
    /// `less`.
    Lt,
    /// `less_equal`.
    Le,
    /// `greater`.
    Gt,
    /// `greater_equal`.
    Ge,
    /// `logical_and`.
    And,
    /// `logical_or`.
    Or,
    /// `maximum`.
    Max,
    /// `minimum`.
    Min,
}

/// A type relation. It is called once every input type is known (tensor types may have `?`
/// dimensions; tuple inputs hold tensor types) and returns the output type, or an [`OpError`]
/// saying what is wrong with the inputs or attributes, e.g. a shape error "cannot broadcast
/// `Tensor[(2, 3), float32]` with `Tensor[(4, 3), float32]`" or an attribute error
/// "`pool_size` must have 2 values, got 3". The type checker adds the operator name and the
/// call's span.
pub type RelationFn = fn(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError>;

/// A reference evaluation: the result value from the argument values and attributes, or a
/// run-time error (an [`OpError::Value`] "integer division by zero"). Inputs have the types the
/// relation accepted. Written for clarity, not speed.
pub type EvalFn = fn(args: &[Value], attrs: &Attrs) -> Result<Value, OpError>;

/// How an operator may be fused with its neighbours: TVM's `TOpPattern`, in its order (a
/// smaller pattern fuses more freely).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpPattern {
    /// Elementwise: output element i depends on input element i only (`add` of equal shapes,
    /// `exp`).
    ElemWise = 0,
    /// Broadcasting elementwise (`add`).
    Broadcast = 1,
    /// Any injective map of indices (`reshape`, `transpose`, `take`).
    Injective = 2,
    /// A commutative reduction (`sum`, `max`).
    CommReduce = 3,
    /// Complex operators whose output can take an elementwise epilogue (`nn.conv2d`,
    /// `nn.dense`).
    OutEWiseFusable = 4,
    /// A tuple node.
    Tuple = 7,
    /// Not fusable.
    Opaque = 8,
}

/// One attribute field of an operator.
#[derive(Debug)]
pub struct AttrField {
    /// The field name, e.g. `strides`.
    pub name: &'static str,
    /// What values it takes.
    pub kind: AttrKind,
    /// Its default, or [`AttrDefault::Required`].
    pub default: AttrDefault,
    /// Whether `None` is an allowed value.
    pub nullable: bool,
}

/// The value type of an attribute field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    /// An integer (`int`, `IndexExpr`, `Integer`).
    Int,
    /// A floating-point number (`double`, `FloatImm`); integers are accepted too.
    Float,
    /// `True` or `False`; TVM also accepts 0 and 1.
    Bool,
    /// A string.
    Str,
    /// A dtype string such as `"float32"`; `""` means unset.
    DType,
    /// An array of integers.
    IntArray,
    /// An array of floats.
    FloatArray,
    /// An array of arrays of integers (`pad_width`).
    IntArrayArray,
    /// An integer or an array of integers (`split`'s `indices_or_sections`).
    IntOrIntArray,
    /// Anything (for fields whose values vary).
    Any,
}

/// The default of an attribute field, as a constant the schema tables can hold.
#[derive(Clone, Copy, Debug)]
pub enum AttrDefault {
    /// No default: the attribute must be written.
    Required,
    /// `None`.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string (also dtypes; `""` is the unset dtype).
    Str(&'static str),
    /// An array of integers.
    Ints(&'static [i64]),
}

impl AttrDefault {
    /// The default as a value, or `None` when the field is required.
    pub fn value(self) -> Option<AttrValue> {
        Some(match self {
            AttrDefault::Required => return None,
            AttrDefault::Null => AttrValue::Null,
            AttrDefault::Bool(b) => AttrValue::Bool(b),
            AttrDefault::Int(i) => AttrValue::Int(i),
            AttrDefault::Float(f) => AttrValue::Float(f),
            AttrDefault::Str(s) => AttrValue::Str(s.into()),
            AttrDefault::Ints(v) => {
                AttrValue::Array(v.iter().map(|&i| AttrValue::Int(i)).collect())
            }
        })
    }
}

impl OpSchema {
    /// The operator with its fusion pattern, type relation and reference evaluation, e.g.
    /// `plain("exp", DATA).with(OpPattern::ElemWise, unary_rel, exp_eval)` in a registry table.
    pub const fn with(self, pattern: OpPattern, relation: RelationFn, eval: EvalFn) -> OpSchema {
        OpSchema {
            pattern,
            relation: Some(relation),
            eval: Some(eval),
            ..self
        }
    }

    /// The operator with its compute definition.
    pub const fn with_compute(self, compute: crate::te::ComputeFn) -> OpSchema {
        OpSchema {
            compute: Some(compute),
            ..self
        }
    }

    /// The schema with its form on unboxed scalars.
    pub const fn with_scalar(self, scalar: ScalarOp) -> OpSchema {
        OpSchema {
            scalar: Some(scalar),
            ..self
        }
    }

    /// The schema with its arguments read as `edge` for fusion ([`OpSchema::input_edge`]).
    pub const fn with_input_edge(self, edge: OpPattern) -> OpSchema {
        OpSchema {
            input_edge: Some(edge),
            ..self
        }
    }

    /// The field called `name`, with its position.
    pub fn field(&self, name: &str) -> Option<(usize, &'static AttrField)> {
        self.attrs.iter().enumerate().find(|(_, f)| f.name == name)
    }
}

impl OpSchema {
    /// The call attributes of this operator from `given` (field name, value) pairs: every
    /// field in declaration order, each given value checked against its field's kind
    /// ([`AttrField::check`]) and the others at their defaults. The message names what is wrong:
    /// an unknown field, a value of the wrong kind, a required field not given.
    pub fn complete_attrs(&self, given: &[(&str, AttrValue)]) -> Result<Attrs, String> {
        if let Some((name, _)) = given.iter().find(|(n, _)| self.field(n).is_none()) {
            return Err(format!("`{}` has no attribute `{name}`", self.name));
        }
        let entries = self.attrs.iter().map(|field| {
            let value = match given.iter().find(|(n, _)| *n == field.name) {
                Some((_, v)) => field.check(v.clone()).map_err(|(expected, found)| {
                    format!(
                        "`{}`'s attribute `{}` is {expected}, not {found}",
                        self.name, field.name
                    )
                })?,
                None => field.default.value().ok_or_else(|| {
                    format!("`{}` needs the attribute `{}`", self.name, field.name)
                })?,
            };
            Ok((Symbol::intern(field.name), value))
        });
        entries.collect::<Result<Vec<_>, String>>().map(Attrs::new)
    }
}

impl AttrField {
    /// Checks value `v` against the field's kind, normalizing where TVM converts (an integer
    /// for a float field, 0/1 for a boolean, a single integer for an integer list); the error
    /// is what was expected and a description of what was found.
    pub fn check(&self, v: AttrValue) -> Result<AttrValue, (&'static str, String)> {
        use AttrValue as V;
        let nullable = self.nullable || matches!(self.default, AttrDefault::Null);
        let is_ints = |v: &[V]| v.iter().all(|x| matches!(x, V::Int(_)));
        let ok = match (self.kind, &v) {
            (_, V::Null) if nullable => return Ok(v),
            (AttrKind::Any, _) => return Ok(v),
            (AttrKind::Int, V::Int(_)) => true,
            (AttrKind::Float, V::Float(_)) => true,
            (AttrKind::Float, V::Int(i)) => return Ok(V::Float(*i as f64)),
            (AttrKind::Bool, V::Bool(_)) => true,
            (AttrKind::Bool, V::Int(i @ (0 | 1))) => return Ok(V::Bool(*i == 1)),
            (AttrKind::Str, V::Str(_)) => true,
            (AttrKind::DType, V::Str(s)) => s.is_empty() || DType::parse(s).is_some(),
            (AttrKind::IntArray, V::Array(xs)) => is_ints(xs),
            (AttrKind::IntArray, V::Int(i)) => return Ok(V::Array(vec![V::Int(*i)])),
            (AttrKind::FloatArray, V::Array(xs)) => {
                if xs.iter().all(|x| matches!(x, V::Float(_) | V::Int(_))) {
                    return Ok(V::Array(
                        xs.iter()
                            .map(|x| V::Float(x.as_float().unwrap_or(0.0)))
                            .collect(),
                    ));
                }
                false
            }
            (AttrKind::IntArrayArray, V::Array(xs)) => xs
                .iter()
                .all(|x| matches!(x, V::Array(inner) if is_ints(inner))),
            (AttrKind::IntOrIntArray, V::Int(_)) => true,
            (AttrKind::IntOrIntArray, V::Array(xs)) => is_ints(xs),
            _ => false,
        };
        if ok {
            return Ok(v);
        }
        let expected = match self.kind {
            AttrKind::Int => "an integer",
            AttrKind::Float => "a number",
            AttrKind::Bool => "True or False",
            AttrKind::Str => "a string",
            AttrKind::DType => "a dtype string",
            AttrKind::IntArray => "a list of integers",
            AttrKind::FloatArray => "a list of numbers",
            AttrKind::IntArrayArray => "a list of integer lists",
            AttrKind::IntOrIntArray => "an integer or a list of integers",
            AttrKind::Any => "a value",
        };
        Err((expected, describe(&v)))
    }
}

/// How a diagnostic names an attribute value: "the integer 3", "a list".
fn describe(v: &AttrValue) -> String {
    match v {
        AttrValue::Null => "None".into(),
        AttrValue::Bool(b) => format!("the boolean {}", if *b { "True" } else { "False" }),
        AttrValue::Int(i) => format!("the integer {i}"),
        AttrValue::Float(f) => format!("the float {f}"),
        AttrValue::Str(s) => format!("the string {s:?}"),
        AttrValue::Array(_) => "a list".into(),
    }
}

impl PartialEq for OpSchema {
    fn eq(&self, other: &OpSchema) -> bool {
        self.name == other.name
    }
}

impl Eq for OpSchema {}
