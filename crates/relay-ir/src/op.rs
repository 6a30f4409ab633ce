//! Operator schemas: the part of the operator registry the IR itself needs (names, inputs and
//! attribute declarations with TVM's defaults), so that the printer can omit default attributes
//! and the parser can check names and attributes.

use crate::AttrValue;

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
    /// The field called `name`, with its position.
    pub fn field(&self, name: &str) -> Option<(usize, &'static AttrField)> {
        self.attrs.iter().enumerate().find(|(_, f)| f.name == name)
    }
}

impl PartialEq for OpSchema {
    fn eq(&self, other: &OpSchema) -> bool {
        self.name == other.name
    }
}

impl Eq for OpSchema {}
