//! Helpers shared by the operator families' unit tests.

use relay_ir::{AttrValue, Attrs, Symbol};

/// A call's attributes for operator `op`: every schema field in order, the given ones set and
/// the rest at their defaults (`None` for required fields), as the parser builds them.
pub fn attrs(op: &str, set: &[(&str, AttrValue)]) -> Attrs {
    let schema = crate::lookup(op).unwrap_or_else(|| panic!("no operator `{op}`"));
    for (field, _) in set {
        assert!(schema.field(field).is_some(), "`{op}` has no `{field}`");
    }
    Attrs::new(
        schema
            .attrs
            .iter()
            .map(|f| {
                let v = set
                    .iter()
                    .find(|(n, _)| *n == f.name)
                    .map(|(_, v)| v.clone())
                    .or_else(|| f.default.value())
                    .unwrap_or(AttrValue::Null);
                (Symbol::intern(f.name), v)
            })
            .collect(),
    )
}

/// An integer-list attribute value.
pub fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Array(v.iter().map(|&i| AttrValue::Int(i)).collect())
}
