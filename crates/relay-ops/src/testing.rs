//! Helpers shared by the operator families' unit tests.

use relay_ir::{AttrValue, Attrs};

/// A call's attributes for operator `op`: every schema field in order, the given ones set and
/// the rest at their defaults (`None` for required fields), as the parser builds them.
pub fn attrs(op: &str, set: &[(&str, AttrValue)]) -> Attrs {
    let schema = crate::lookup(op).unwrap_or_else(|| panic!("no operator `{op}`"));
    for (field, _) in set {
        assert!(schema.field(field).is_some(), "`{op}` has no `{field}`");
    }
    crate::schema_attrs(schema, set)
}

/// An integer-list attribute value.
pub fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Array(v.iter().map(|&i| AttrValue::Int(i)).collect())
}
