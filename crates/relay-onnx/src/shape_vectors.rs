//! Small integer vectors computed from shapes with dynamic dimensions (`Shape` → `Gather` →
//! `Concat`, the exporters' way of writing `x.view(x.size(0), -1)`): their elements, symbols
//! included ([`crate::symbolic`]), so that the `Reshape` they feed stays a static `reshape`.

use crate::attrs::Attrs;
use crate::builder::{Value, ints_of};
use crate::graph::Graph;
use crate::proto::NodeProto;
use crate::symbolic::{ANY, is_symbol};

/// The elements of the first output of `node` when it computes a small integer vector from
/// shapes with dynamic dimensions (`Shape`, and `Gather`, `Concat`, `Slice`, `Squeeze`,
/// `Unsqueeze`, `Reshape`, `Cast`, `Identity` and arithmetic of such vectors and constants);
/// `None` for the others.
pub(crate) fn elements(g: &Graph, node: &NodeProto, a: &Attrs<'_>) -> Option<Vec<i64>> {
    let input = |i: usize| g.input(node, i).ok();
    let elems = |i: usize| input(i).as_ref().and_then(elems_of);
    // Vectors and scalars only (a constant matrix is no shape).
    let vectors = (0..node.input.len()).all(|i| input(i).is_none_or(|v| v.shape.len() <= 1));
    if !(vectors || node.op_type == "Shape") {
        return None;
    }
    match node.op_type.as_str() {
        "Shape" => {
            let x = input(0)?;
            let rank = x.shape.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
            let (start, end) = (
                clamp(a.int("start", 0).ok()?),
                clamp(a.int("end", rank).ok()?),
            );
            Some(x.shape[start..end.max(start)].to_vec())
        }
        "Identity" | "Squeeze" | "Unsqueeze" | "Reshape" | "Flatten" => elems(0),
        "Cast" => input(0)
            .filter(|x| x.dtype.is_int())
            .and_then(|x| elems_of(&x)),
        "Gather" => {
            let (data, at) = (elems(0)?, ints_of(&input(1)?)?);
            let n = data.len() as i64;
            at.iter()
                .map(|&i| data.get(if i < 0 { i + n } else { i } as usize).copied())
                .collect()
        }
        "Concat" => (0..node.input.len())
            .map(elems)
            .collect::<Option<Vec<_>>>()
            .map(|parts| parts.concat()),
        "Slice" if g.opset >= 10 => {
            let data = elems(0)?;
            let (start, end) = (ints_of(&input(1)?)?, ints_of(&input(2)?)?);
            let step = match g.optional_input(node, 4).ok()? {
                Some(s) => *ints_of(&s)?.first()?,
                None => 1,
            };
            let n = data.len() as i64;
            let fix = |v: i64| (if v < 0 { v.saturating_add(n) } else { v }).clamp(0, n);
            let (b, e) = (fix(*start.first()?), fix(*end.first()?));
            (step == 1 && start.len() == 1).then(|| data[b as usize..e.max(b) as usize].to_vec())
        }
        "Equal" => {
            let (x, y) = (elems(0)?, elems(1)?);
            let n = x.len().max(y.len());
            let at = |v: &[i64], i: usize| v.get(if v.len() == 1 { 0 } else { i }).copied();
            (0..n).map(|i| equal(at(&x, i)?, at(&y, i)?)).collect()
        }
        "Where" => {
            // The condition is a boolean constant or a vector of 0s and 1s.
            let flags = |v: Value| match v.konst {
                Some(k) if k.dtype() == relay_runtime::DType::BOOL => Some(
                    k.to_bool_vec()
                        .into_iter()
                        .map(i64::from)
                        .collect::<Vec<_>>(),
                ),
                _ => elems_of(&v),
            };
            let (c, x, y) = (flags(input(0)?)?, elems(1)?, elems(2)?);
            let n = c.len().max(x.len()).max(y.len());
            let at = |v: &[i64], i: usize| v.get(if v.len() == 1 { 0 } else { i }).copied();
            (0..n)
                .map(|i| match at(&c, i)? {
                    0 => at(&y, i),
                    c if !is_symbol(c) => at(&x, i),
                    _ => None,
                })
                .collect()
        }
        "Mul" | "Div" | "Add" | "Sub" => {
            let (x, y) = (elems(0)?, elems(1)?);
            let n = x.len().max(y.len());
            let at = |v: &[i64], i: usize| v.get(if v.len() == 1 { 0 } else { i }).copied();
            (0..n)
                .map(|i| arithmetic(&node.op_type, at(&x, i)?, at(&y, i)?))
                .collect()
        }
        _ => None,
    }
}

/// `x op y` of two shape-vector elements: numbers computed, a symbol times or divided by 1
/// (or plus or minus 0) kept, anything else [`ANY`].
fn arithmetic(op: &str, x: i64, y: i64) -> Option<i64> {
    if !is_symbol(x) && !is_symbol(y) {
        return match op {
            "Mul" => x.checked_mul(y),
            "Div" => x.checked_div(y),
            "Add" => x.checked_add(y),
            _ => x.checked_sub(y),
        };
    }
    Some(match (op, y) {
        ("Mul" | "Div", 1) | ("Add" | "Sub", 0) => x,
        ("Mul", _) if x == 1 => y,
        ("Add", _) if x == 0 => y,
        _ => ANY,
    })
}

/// `x == y` of two shape-vector elements as 1 or 0: numbers compared, a symbol equal to
/// itself and to no negative number (a dimension is never negative); `None` when unknown.
fn equal(x: i64, y: i64) -> Option<i64> {
    match (is_symbol(x), is_symbol(y)) {
        (false, false) => Some(i64::from(x == y)),
        _ if x == y && x != ANY => Some(1),
        (true, false) if y < 0 => Some(0),
        (false, true) if x < 0 => Some(0),
        _ => None,
    }
}

/// The elements of small integer vector or scalar `v`: symbolic ones, or a constant's.
pub(crate) fn elems_of(v: &Value) -> Option<Vec<i64>> {
    v.elems.clone().or_else(|| ints_of(v))
}
