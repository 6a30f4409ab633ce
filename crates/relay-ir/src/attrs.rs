//! Attribute values and attribute lists (operator attributes, function attributes, and the
//! attributes of non-operator calls).

use std::sync::Arc;

use crate::Symbol;

/// An attribute value as the text format writes it.
#[derive(Clone, Debug)]
pub enum AttrValue {
    /// `None` (or `nullptr`).
    Null,
    /// `True` / `False`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float (kept at full `f64` precision).
    Float(f64),
    /// A string.
    Str(Arc<str>),
    /// `[a, b, ...]`, possibly nested.
    Array(Vec<AttrValue>),
}

impl PartialEq for AttrValue {
    /// Structural equality; floats compare by bits so NaN equals itself.
    fn eq(&self, other: &AttrValue) -> bool {
        match (self, other) {
            (AttrValue::Null, AttrValue::Null) => true,
            (AttrValue::Bool(a), AttrValue::Bool(b)) => a == b,
            (AttrValue::Int(a), AttrValue::Int(b)) => a == b,
            (AttrValue::Float(a), AttrValue::Float(b)) => a.to_bits() == b.to_bits(),
            (AttrValue::Str(a), AttrValue::Str(b)) => a == b,
            (AttrValue::Array(a), AttrValue::Array(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for AttrValue {}

impl std::hash::Hash for AttrValue {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            AttrValue::Null => {}
            AttrValue::Bool(b) => b.hash(state),
            AttrValue::Int(i) => i.hash(state),
            AttrValue::Float(f) => f.to_bits().hash(state),
            AttrValue::Str(s) => s.hash(state),
            AttrValue::Array(v) => v.hash(state),
        }
    }
}

impl AttrValue {
    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match *self {
            AttrValue::Int(i) => Some(i),
            _ => None,
        }
    }

    /// The number as a float, if this is a float or an integer.
    pub fn as_float(&self) -> Option<f64> {
        match *self {
            AttrValue::Float(f) => Some(f),
            AttrValue::Int(i) => Some(i as f64),
            _ => None,
        }
    }

    /// The boolean, if this is one (TVM also takes 0 and 1).
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            AttrValue::Bool(b) => Some(b),
            AttrValue::Int(0) => Some(false),
            AttrValue::Int(1) => Some(true),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            AttrValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[AttrValue]> {
        match self {
            AttrValue::Array(v) => Some(v),
            _ => None,
        }
    }

    /// The integers, if this is an array of integers.
    pub fn as_ints(&self) -> Option<Vec<i64>> {
        self.as_array()?.iter().map(AttrValue::as_int).collect()
    }

    /// Whether this is `None`.
    pub fn is_null(&self) -> bool {
        matches!(self, AttrValue::Null)
    }
}

/// An ordered list of `name = value` attributes, cheap to clone.
///
/// For an operator call it holds every field of the operator's schema, in declaration order,
/// with defaults filled in. For functions and non-operator calls it holds what was written, in
/// source order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Attrs(Arc<[(Symbol, AttrValue)]>);

impl Attrs {
    /// No attributes.
    pub fn empty() -> Attrs {
        Attrs::default()
    }

    /// Attributes from `(name, value)` pairs, in the given order.
    pub fn new(entries: Vec<(Symbol, AttrValue)>) -> Attrs {
        Attrs(entries.into())
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&AttrValue> {
        // One interner lookup, then integer comparisons (a shape function reads attributes
        // on every call).
        let name = Symbol::existing(name)?;
        self.0.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = &(Symbol, AttrValue)> {
        self.0.iter()
    }

    /// The entries as a slice.
    pub fn entries(&self) -> &[(Symbol, AttrValue)] {
        &self.0
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// A copy with `name` set to `value` (replacing or appending).
    pub fn with(&self, name: &str, value: AttrValue) -> Attrs {
        let key = Symbol::intern(name);
        let mut v: Vec<_> = self.0.to_vec();
        match v.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => v.push((key, value)),
        }
        Attrs::new(v)
    }
}
