//! The Relay operator registry: every operator TVM registered, with its positional inputs and
//! the fields of its attributes struct exactly as TVM declares them (names, declaration order,
//! defaults, required-ness, nullability and value kind).
//!
//! The parser uses it to resolve operator names and to check, complete and order call
//! attributes; the printer uses it to omit attributes equal to their default. The tables live
//! with the operators they describe, one module per operator family (`elementwise`, `reduce`,
//! `transform`, `nn`, `other`, `memory`); the larger families are directories with one file per
//! group of operators (`nn/conv.rs`, `nn/pool.rs`, ...). Each entry's fusion pattern, type
//! relation, reference evaluation and compute definition sit in the same file as the entry, so
//! an operator lives in one place. The helpers they share are in `support` (types, attributes,
//! arguments, axes, row-major indices) and `compute` (tensor expressions).
//!
//! Invariants, checked by the unit tests below:
//! - operator names are unique across the whole registry;
//! - within one operator, every attribute field name is unique;
//! - a field whose default is `None` is nullable.
//!
//! Operators whose TVM registration declares no attributes struct (for example `cumsum`, whose
//! `ScanopAttrs` TVM can only print as a meta reference) have no fields here and an empty
//! `attrs_type`. The `vision.*` operators are the exception: TVM declares none for them either,
//! but they keep the fields of the struct their calls carry so that the keyword form parses.

use std::collections::HashMap;
use std::sync::OnceLock;

use relay_ir::{AttrDefault, AttrField, AttrKind, OpPattern, OpRef, OpSchema};

pub mod attention;
pub mod compute;
pub mod dynamic;
mod elementwise;
pub mod memory;
mod nn;
pub use nn::{padding4, positive_pair, recurrence_clip};
pub use reduce::reduced_mask;
mod other;
mod reduce;
pub mod support;
#[cfg(test)]
mod testing;
mod transform;
pub use transform::strided_set_region;
pub mod views;

/// The family tables in their stable order.
fn families() -> impl Iterator<Item = &'static [OpSchema]> {
    [elementwise::OPS, reduce::OPS]
        .into_iter()
        .chain(transform::tables())
        .chain(nn::tables())
        .chain([dynamic::OPS, other::OPS, memory::OPS])
}

/// Every operator, in a stable order (family by family, in table order).
pub fn all() -> impl Iterator<Item = OpRef> {
    families().flatten()
}

/// The operator registered under `name`.
pub fn lookup(name: &str) -> Option<OpRef> {
    static INDEX: OnceLock<HashMap<&'static str, OpRef>> = OnceLock::new();
    INDEX
        .get_or_init(|| all().map(|op| (op.name, op)).collect())
        .get(name)
        .copied()
}

/// The input whose bytes a call of `op` may overwrite with its result when nothing reads that
/// input afterwards: `strided_set`'s data, its result being the data with one region replaced
/// (TVM Relax's `call_tir_inplace`, decided by the VM at run time). `None` for every other
/// operator.
pub fn updates_input(op: OpRef) -> Option<usize> {
    (op.name == "strided_set").then_some(0)
}

/// The parameter of primitive function `f` whose buffer its kernel may overwrite with the
/// result: when `f` is one call of an operator that [updates an input](updates_input) and that
/// input is the parameter of the same position.
pub fn updated_param(f: &relay_ir::Function) -> Option<usize> {
    let (op, args, _) = f.body.op_call()?;
    let k = updates_input(op)?;
    match args.get(k)?.kind() {
        relay_ir::ExprKind::Var(v) if f.params.get(k) == Some(v) => Some(k),
        _ => None,
    }
}

/// A call's attributes for `op`: every schema field in order, the given ones set (names `op`
/// does not have are left out) and the rest at their defaults (`Null` for required fields),
/// as the parser builds them.
pub fn schema_attrs(op: relay_ir::OpRef, set: &[(&str, relay_ir::AttrValue)]) -> relay_ir::Attrs {
    use relay_ir::{AttrValue, Attrs, Symbol};
    Attrs::new(
        op.attrs
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

/// A call of the operator registered under `name` (`None` when there is none), at `span`.
pub fn call(
    name: &str,
    args: Vec<relay_ir::Expr>,
    attrs: relay_ir::Attrs,
    span: relay_ir::Span,
) -> Option<relay_ir::Expr> {
    use relay_ir::{Expr, ExprKind, Span};
    let callee = Expr::new(ExprKind::Op(lookup(name)?), Span::DUMMY);
    Some(Expr::new(
        ExprKind::Call {
            callee,
            args,
            attrs,
        },
        span,
    ))
}

/// The known operator name closest to `name` (Levenshtein distance), if it is close enough to
/// be worth suggesting: "unknown operator `nn.rleu`, did you mean `nn.relu`?".
pub fn closest(name: &str) -> Option<&'static str> {
    nearest(name, all().map(|op| op.name))
}

/// The attribute of `op` whose name is closest to `name`, if it is close enough to suggest.
pub fn closest_attr(op: OpRef, name: &str) -> Option<&'static str> {
    nearest(name, op.attrs.iter().map(|field| field.name))
}

/// The candidate nearest to `name`, within `max(2, len / 3)` edits; the first one wins a tie.
/// Used for every "did you mean ...?" suggestion about registry names (operators, attributes,
/// passes).
pub fn nearest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(2);
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in candidates {
        let distance = levenshtein(name, candidate);
        if distance <= limit && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// The number of single-character insertions, deletions and substitutions turning `a` into `b`.
fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    // `row[j]` is the distance between the prefix of `a` read so far and `b[..j]`.
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

// Helpers that keep the family tables short. They are `const fn`s so that the tables are plain
// statics built at compile time.

/// An operator with an attributes struct.
pub(crate) const fn op(
    name: &'static str,
    inputs: &'static [&'static str],
    attrs_type: &'static str,
    attrs: &'static [AttrField],
) -> OpSchema {
    OpSchema {
        name,
        inputs,
        attrs_type,
        attrs,
        pattern: OpPattern::Opaque,
        relation: None,
        eval: None,
        compute: None,
        scalar: None,
        input_edge: None,
    }
}

/// An operator whose registration declares no attributes struct.
pub(crate) const fn plain(name: &'static str, inputs: &'static [&'static str]) -> OpSchema {
    op(name, inputs, "", &[])
}

/// A field with a default value, where `None` is not allowed.
pub(crate) const fn field(name: &'static str, kind: AttrKind, default: AttrDefault) -> AttrField {
    AttrField {
        name,
        kind,
        default,
        nullable: false,
    }
}

/// A field whose default is `None`.
pub(crate) const fn nullable(name: &'static str, kind: AttrKind) -> AttrField {
    AttrField {
        name,
        kind,
        default: AttrDefault::Null,
        nullable: true,
    }
}

/// A field without a default, which must always be written.
pub(crate) const fn required(name: &'static str, kind: AttrKind) -> AttrField {
    AttrField {
        name,
        kind,
        default: AttrDefault::Required,
        nullable: false,
    }
}

/// A field without a default that may be written `None` (TVM prints `units=None`).
pub(crate) const fn required_nullable(name: &'static str, kind: AttrKind) -> AttrField {
    AttrField {
        name,
        kind,
        default: AttrDefault::Required,
        nullable: true,
    }
}

/// A `DataType` field whose default is the unset dtype (TVM's `NullValue<DataType>()`).
pub(crate) const fn dtype(name: &'static str) -> AttrField {
    field(name, AttrKind::DType, AttrDefault::Str(""))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use relay_ir::AttrValue;

    use super::*;

    #[test]
    fn scalar_forms_are_the_vm_s_unboxed_operators_with_their_arity() {
        let forms: Vec<(&str, relay_ir::ScalarOp)> = all()
            .filter_map(|op| op.scalar.map(|s| (op.name, s)))
            .collect();
        for (name, form) in &forms {
            let arity = match form {
                relay_ir::ScalarOp::Unary(_) => 1,
                relay_ir::ScalarOp::Binary(_) => 2,
            };
            assert_eq!(lookup(name).unwrap().inputs.len(), arity, "{name}");
        }
        let mut names: Vec<&str> = forms.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "add",
                "divide",
                "equal",
                "floor_divide",
                "floor_mod",
                "greater",
                "greater_equal",
                "less",
                "less_equal",
                "logical_and",
                "logical_not",
                "logical_or",
                "maximum",
                "minimum",
                "mod",
                "multiply",
                "negative",
                "not_equal",
                "subtract",
            ]
        );
    }

    /// The Tier 1 operators of `SPEC.md` §4.
    const TIER1: &[&str] = &[
        // Binary, broadcasting.
        "add",
        "subtract",
        "multiply",
        "divide",
        "power",
        "maximum",
        "minimum",
        "mod",
        "floor_divide",
        "floor_mod",
        "logical_and",
        "logical_or",
        "logical_xor",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "left_shift",
        "right_shift",
        "equal",
        "not_equal",
        "less",
        "less_equal",
        "greater",
        "greater_equal",
        // Unary.
        "negative",
        "abs",
        "sign",
        "exp",
        "log",
        "log2",
        "log10",
        "sqrt",
        "rsqrt",
        "erf",
        "sigmoid",
        "tanh",
        "sin",
        "cos",
        "tan",
        "ceil",
        "floor",
        "round",
        "trunc",
        "logical_not",
        "bitwise_not",
        "isnan",
        "isinf",
        "isfinite",
        "copy",
        "zeros_like",
        "ones_like",
        // Selection, casting, creation.
        "where",
        "clip",
        "cast",
        "cast_like",
        "full",
        "full_like",
        "zeros",
        "ones",
        "broadcast_to",
        "broadcast_to_like",
        // Reductions.
        "sum",
        "mean",
        "max",
        "min",
        "prod",
        "all",
        "any",
        "argmax",
        "argmin",
        "variance",
        // Shape.
        "reshape",
        "reshape_like",
        "transpose",
        "expand_dims",
        "squeeze",
        "concatenate",
        "stack",
        "split",
        "strided_slice",
        "take",
        "tile",
        "repeat",
        "reverse",
        "nn.batch_flatten",
        "shape_of",
        // Neural network.
        "nn.dense",
        "nn.matmul",
        "nn.batch_matmul",
        "nn.bias_add",
        "nn.relu",
        "nn.leaky_relu",
        "nn.prelu",
        "nn.softmax",
        "nn.log_softmax",
        "nn.conv2d",
        "nn.max_pool2d",
        "nn.avg_pool2d",
        "nn.global_avg_pool2d",
        "nn.global_max_pool2d",
        "nn.adaptive_avg_pool2d",
        "nn.batch_norm",
        "nn.layer_norm",
        "nn.dropout",
        "nn.pad",
    ];

    fn get(name: &str) -> OpRef {
        match lookup(name) {
            Some(op) => op,
            None => panic!("operator `{name}` is not registered"),
        }
    }

    fn names(op: OpRef) -> Vec<&'static str> {
        op.attrs.iter().map(|f| f.name).collect()
    }

    fn attr(op: OpRef, name: &str) -> &'static AttrField {
        match op.field(name) {
            Some((_, field)) => field,
            None => panic!("`{}` has no attribute `{name}`", op.name),
        }
    }

    fn default(op: OpRef, name: &str) -> Option<AttrValue> {
        attr(op, name).default.value()
    }

    fn ints(values: &[i64]) -> Option<AttrValue> {
        Some(AttrValue::Array(
            values.iter().map(|&i| AttrValue::Int(i)).collect(),
        ))
    }

    fn string(s: &str) -> Option<AttrValue> {
        Some(AttrValue::Str(s.into()))
    }

    #[test]
    fn op_names_are_unique() {
        let mut seen = HashSet::new();
        for op in all() {
            assert!(seen.insert(op.name), "duplicate operator `{}`", op.name);
        }
        assert!(seen.len() > 250, "only {} operators", seen.len());
    }

    #[test]
    fn field_names_are_unique_within_each_op() {
        for op in all() {
            let mut seen = HashSet::new();
            for field in op.attrs {
                assert!(
                    seen.insert(field.name),
                    "`{}` declares `{}` twice",
                    op.name,
                    field.name
                );
            }
        }
    }

    #[test]
    fn schemas_are_consistent() {
        for op in all() {
            assert!(!op.name.is_empty());
            // `SparseTransposeAttrs` is the one declared attrs struct without fields.
            if op.attrs.is_empty() && !op.attrs_type.is_empty() {
                assert_eq!(
                    op.attrs_type, "relay.attrs.SparseTransposeAttrs",
                    "{}",
                    op.name
                );
            }
            if !op.attrs.is_empty() {
                assert!(
                    op.attrs_type.starts_with("relay.attrs."),
                    "`{}` has fields but attrs type `{}`",
                    op.name,
                    op.attrs_type
                );
            }
            for field in op.attrs {
                if matches!(field.default, AttrDefault::Null) {
                    assert!(
                        field.nullable,
                        "`{}.{}` defaults to None",
                        op.name, field.name
                    );
                }
            }
            let mut inputs = HashSet::new();
            for input in op.inputs {
                assert!(
                    inputs.insert(input),
                    "`{}` repeats input `{input}`",
                    op.name
                );
            }
        }
    }

    #[test]
    fn every_tier1_op_is_typed_and_runnable() {
        let missing: Vec<&str> = TIER1
            .iter()
            .filter(|name| lookup(name).is_none_or(|op| op.relation.is_none() || op.eval.is_none()))
            .copied()
            .collect();
        assert!(
            missing.is_empty(),
            "Tier 1 operators without a relation or evaluation: {missing:?}"
        );
        let typed = all().filter(|op| op.relation.is_some()).count();
        let runnable = all().filter(|op| op.eval.is_some()).count();
        eprintln!(
            "{} operators, {typed} with a type relation, {runnable} with an evaluation",
            all().count()
        );
    }

    #[test]
    fn every_tier1_op_is_present() {
        for name in TIER1 {
            assert!(
                lookup(name).is_some(),
                "Tier 1 operator `{name}` is missing"
            );
        }
        assert!(lookup("nn.rleu").is_none());
    }

    #[test]
    fn all_is_stable_and_matches_lookup() {
        let first: Vec<_> = all().map(|op| op.name).collect();
        let second: Vec<_> = all().map(|op| op.name).collect();
        assert_eq!(first, second);
        for op in all() {
            assert!(std::ptr::eq(get(op.name), op));
        }
        assert_eq!(first.first(), Some(&"add"));
    }

    #[test]
    fn conv2d() {
        let conv = get("nn.conv2d");
        assert_eq!(conv.inputs, ["data", "weight"]);
        assert_eq!(conv.attrs_type, "relay.attrs.Conv2DAttrs");
        assert_eq!(
            names(conv),
            [
                "strides",
                "padding",
                "dilation",
                "groups",
                "channels",
                "kernel_size",
                "data_layout",
                "kernel_layout",
                "out_layout",
                "out_dtype"
            ]
        );
        assert_eq!(default(conv, "strides"), ints(&[1, 1]));
        assert_eq!(default(conv, "padding"), ints(&[0, 0]));
        assert_eq!(default(conv, "dilation"), ints(&[1, 1]));
        assert_eq!(default(conv, "groups"), Some(AttrValue::Int(1)));
        assert_eq!(default(conv, "channels"), Some(AttrValue::Null));
        assert!(attr(conv, "channels").nullable);
        assert_eq!(default(conv, "kernel_size"), Some(AttrValue::Null));
        assert_eq!(default(conv, "data_layout"), string("NCHW"));
        assert_eq!(default(conv, "kernel_layout"), string("OIHW"));
        assert_eq!(default(conv, "out_layout"), string(""));
        assert_eq!(default(conv, "out_dtype"), string(""));
        assert_eq!(attr(conv, "out_dtype").kind, AttrKind::DType);
        assert_eq!(attr(conv, "padding").kind, AttrKind::IntArray);

        let conv1d = get("nn.conv1d");
        assert_eq!(default(conv1d, "data_layout"), string("NCW"));
        assert_eq!(default(conv1d, "kernel_layout"), string("OIW"));
        let transpose = get("nn.conv2d_transpose");
        assert_eq!(
            &names(transpose)[..4],
            ["channels", "kernel_size", "strides", "output_padding"]
        );
        assert_eq!(default(transpose, "kernel_layout"), string("IOHW"));
    }

    #[test]
    fn batch_norm() {
        let bn = get("nn.batch_norm");
        assert_eq!(
            bn.inputs,
            ["data", "gamma", "beta", "moving_mean", "moving_var"]
        );
        assert_eq!(names(bn), ["axis", "epsilon", "center", "scale"]);
        assert_eq!(default(bn, "axis"), Some(AttrValue::Int(1)));
        assert_eq!(default(bn, "epsilon"), Some(AttrValue::Float(1e-5)));
        assert_eq!(default(bn, "center"), Some(AttrValue::Bool(true)));
        assert_eq!(default(bn, "scale"), Some(AttrValue::Bool(true)));
        assert_eq!(
            default(get("nn.layer_norm"), "axis"),
            Some(AttrValue::Int(-1))
        );
    }

    #[test]
    fn shape_ops() {
        let reshape = get("reshape");
        assert_eq!(names(reshape), ["newshape", "allowzero"]);
        assert!(matches!(
            attr(reshape, "newshape").default,
            AttrDefault::Required
        ));
        assert_eq!(default(reshape, "allowzero"), Some(AttrValue::Bool(false)));

        let slice = get("strided_slice");
        assert_eq!(
            names(slice),
            ["begin", "end", "strides", "slice_mode", "axes"]
        );
        for name in ["begin", "end", "strides", "axes"] {
            let f = attr(slice, name);
            assert!(matches!(f.default, AttrDefault::Required), "{name}");
            assert!(f.nullable, "{name}");
        }
        assert_eq!(default(slice, "slice_mode"), string("end"));

        let split = get("split");
        assert_eq!(names(split), ["indices_or_sections", "axis"]);
        let sections = attr(split, "indices_or_sections");
        assert_eq!(sections.kind, AttrKind::IntOrIntArray);
        assert!(matches!(sections.default, AttrDefault::Required));
        assert_eq!(default(split, "axis"), Some(AttrValue::Int(0)));

        let transpose = get("transpose");
        let axes = attr(transpose, "axes");
        assert!(matches!(axes.default, AttrDefault::Required) && axes.nullable);

        assert_eq!(get("concatenate").inputs, ["data"]);
        assert_eq!(get("zeros").inputs, [] as [&str; 0]);
        assert_eq!(get("full").inputs, ["fill_value"]);
        assert_eq!(get("where").inputs, ["condition", "x", "y"]);
        assert_eq!(get("nn.pad").inputs, ["data", "pad_value"]);
        assert_eq!(names(get("take")), ["batch_dims", "axis", "mode"]);
        assert_eq!(default(get("take"), "mode"), string("clip"));
        assert_eq!(default(get("searchsorted"), "dtype"), string("int32"));
    }

    #[test]
    fn dense_and_matmul() {
        let dense = get("nn.dense");
        assert_eq!(names(dense), ["units", "out_dtype"]);
        let units = attr(dense, "units");
        assert!(matches!(units.default, AttrDefault::Required) && units.nullable);
        let matmul = get("nn.matmul");
        assert_eq!(matmul.inputs, ["tensor_a", "tensor_b"]);
        assert_eq!(
            names(matmul),
            ["units", "out_dtype", "transpose_a", "transpose_b"]
        );
        assert_eq!(
            names(get("nn.batch_matmul")),
            ["out_dtype", "transpose_a", "transpose_b"]
        );
        assert_eq!(
            default(get("nn.leaky_relu"), "alpha"),
            Some(AttrValue::Float(0.25))
        );
    }

    #[test]
    fn reductions() {
        for name in ["sum", "mean", "max", "min", "prod", "all", "any"] {
            let op = get(name);
            assert_eq!(op.attrs_type, "relay.attrs.ReduceAttrs");
            assert_eq!(names(op), ["axis", "keepdims", "exclude"]);
            let axis = attr(op, "axis");
            assert!(matches!(axis.default, AttrDefault::Null) && axis.nullable);
            assert_eq!(axis.kind, AttrKind::IntArray);
            assert_eq!(default(op, "keepdims"), Some(AttrValue::Bool(false)));
            assert_eq!(default(op, "exclude"), Some(AttrValue::Bool(false)));
        }
        for name in ["argmax", "argmin"] {
            assert_eq!(
                names(get(name)),
                ["axis", "keepdims", "select_last_index", "exclude"]
            );
        }
        let variance = get("variance");
        assert_eq!(variance.inputs, ["data", "mean"]);
        assert_eq!(names(variance), ["axis", "keepdims", "exclude", "unbiased"]);
    }

    #[test]
    fn undeclared_attrs_have_no_fields() {
        for name in [
            "cumsum",
            "cumprod",
            "scatter_elements",
            "scatter_nd",
            "unique",
            "trilu",
        ] {
            let op = get(name);
            assert!(op.attrs.is_empty() && op.attrs_type.is_empty(), "{name}");
        }
    }

    #[test]
    fn suggestions() {
        assert_eq!(closest("nn.rleu"), Some("nn.relu"));
        assert_eq!(closest("ad"), Some("add"));
        assert_eq!(closest("nn.conv2"), Some("nn.conv2d"));
        assert_eq!(closest("add"), Some("add"));
        assert_eq!(closest("completely_unrelated_name"), None);

        let conv = get("nn.conv2d");
        assert_eq!(closest_attr(conv, "kernel_sise"), Some("kernel_size"));
        assert_eq!(closest_attr(conv, "padding"), Some("padding"));
        assert_eq!(closest_attr(conv, "zzz"), None);
        assert_eq!(closest_attr(get("nn.relu"), "axis"), None);
    }

    #[test]
    fn levenshtein_distances() {
        assert_eq!(levenshtein("", ""), 0);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("abc", ""), 3);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("nn.rleu", "nn.relu"), 2);
        assert_eq!(levenshtein("ad", "add"), 1);
        assert_eq!(levenshtein("ünï", "uni"), 2);
    }
}

#[cfg(test)]
mod op_error_tests {
    use relay_ir::{AttrValue, DType, NDArray, OpError, OpErrorKind, Type, Value};

    use crate::testing::attrs;

    fn relation(op: &str, inputs: &[Type], set: &[(&str, AttrValue)]) -> Result<Type, OpError> {
        let f = crate::lookup(op).and_then(|s| s.relation).unwrap();
        f(inputs, &attrs(op, set))
    }

    #[test]
    fn a_relation_given_the_wrong_number_of_inputs_is_an_arity_error() {
        let t = Type::tensor(&[2], DType::F32);
        let e = relation("add", &[t], &[]).unwrap_err();
        assert_eq!(
            e,
            OpError::Arity {
                expected: "2".into(),
                got: 1
            }
        );
        assert_eq!(e.to_string(), "expects 2 inputs, got 1");
    }

    #[test]
    fn a_bad_attribute_names_the_attribute() {
        let t = Type::tensor(&[2], DType::F32);
        let set = [
            ("axis", AttrValue::Int(0)),
            ("num_newaxis", AttrValue::Int(-1)),
        ];
        let e = relation("expand_dims", &[t], &set);
        let e = e.unwrap_err();
        assert!(
            matches!(&e, OpError::Attribute { name, .. } if name == "num_newaxis"),
            "{e:?}"
        );
    }

    #[test]
    fn kinds_of_relation_errors() {
        let (a, b) = (
            Type::tensor(&[2, 3], DType::F32),
            Type::tensor(&[4, 3], DType::F32),
        );
        let e = relation("add", &[a.clone(), b], &[]).unwrap_err();
        assert_eq!(e.kind(), OpErrorKind::Shape);
        let i = Type::tensor(&[2, 3], DType::I32);
        let e = relation("add", &[a.clone(), i], &[]).unwrap_err();
        assert_eq!(e.kind(), OpErrorKind::DType);
        let e = relation("nn.relu", &[Type::tuple(vec![])], &[]).unwrap_err();
        assert_eq!(e.kind(), OpErrorKind::Type);
    }

    #[test]
    fn an_integer_division_by_zero_is_a_value_error() {
        let eval = crate::lookup("divide").and_then(|s| s.eval).unwrap();
        let int = |v| Value::tensor(NDArray::scalar_i128(DType::I32, v).unwrap());
        let e = eval(&[int(7), int(0)], &attrs("divide", &[])).unwrap_err();
        assert_eq!(e, OpError::value("integer division by zero"));
    }
}
