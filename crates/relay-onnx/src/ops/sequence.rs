//! Sequences that are only appended to: what PyTorch's TorchScript exporter writes for a list
//! grown in a loop (`SequenceEmpty`, `SequenceInsert` inside a `Loop`, `ConcatFromSequence`
//! after it). A sequence is its elements stacked along a new first axis (`[n, element...]`,
//! [`Sequence::Stacked`]; every element has one shape), and a sequence a `Loop` carries and
//! appends to is one more scan output of the loop (`control.rs`), so the list never exists as
//! a value of its own. An insert at a position, and the other sequence operators, are errors.

use crate::error::ConvertError;
use relay_runtime::DType;

use crate::attrs::Attrs;
use crate::builder::{Value, attr};
use crate::graph::{Graph, Sequence};
use crate::proto::NodeProto;
use crate::tensor;

/// The sequence input `i` of `node`.
fn sequence(g: &Graph, node: &NodeProto, i: usize) -> Result<Sequence, ConvertError> {
    let name = node.input.get(i).map(String::as_str).unwrap_or_default();
    g.sequence(name)
        .cloned()
        .ok_or_else(|| ConvertError::from(format!("input `{name}` is not a sequence")))
}

/// What stands for a sequence among the values: its stack, or for an empty one a `[0]`
/// tensor of its dtype (which nothing reads).
fn placeholder(g: &mut Graph, dtype: DType) -> Result<Value, ConvertError> {
    let attrs = [("shape", attr::ints(&[0])), ("dtype", attr::str(dtype))];
    g.call("zeros", &[], &attrs)
}

/// `SequenceEmpty`.
pub(super) fn empty(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let code = a.int("dtype", 1)?;
    let dtype = i32::try_from(code)
        .ok()
        .and_then(tensor::dtype)
        .ok_or_else(|| ConvertError::from(format!("dtype {code}")))?;
    g.define_sequence(&node.output[0], Sequence::Empty);
    placeholder(g, dtype)
}

/// `SequenceInsert(s, t)` at the end.
pub(super) fn insert(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    if node.input.get(2).is_some_and(|p| !p.is_empty()) {
        return Err("an insert at a position is not supported (only appending)".into());
    }
    let t = g.input(node, 1)?;
    let row = |g: &mut Graph| g.call("expand_dims", &[&t], &[("axis", attr::int(0))]);
    let (next, value) = match sequence(g, node, 0)? {
        Sequence::Empty => {
            let row = row(g)?;
            (Sequence::Stacked(row.clone()), row)
        }
        Sequence::Stacked(s) => {
            if s.shape[1..] != t.shape[..] || s.dtype != t.dtype {
                return Err("the sequence's elements differ in shape or type".into());
            }
            let row = row(g)?;
            let grown = g.call_tuple("concatenate", &[&s, &row], &[("axis", attr::int(0))])?;
            (Sequence::Stacked(grown.clone()), grown)
        }
        Sequence::Carried => (Sequence::Appended, t.clone()),
        Sequence::Appended => {
            return Err("a loop's sequence is appended to more than once per iteration".into());
        }
    };
    g.define_sequence(&node.output[0], next);
    Ok(value)
}

/// `ConcatFromSequence(s, axis, new_axis)`: the elements stacked along a new axis `axis`, or
/// concatenated along their axis `axis`.
pub(super) fn concat(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let Sequence::Stacked(s) = sequence(g, node, 0)? else {
        return Err("the sequence is empty or still carried by a loop".into());
    };
    let rank = s.shape.len() as i64 - 1;
    let new_axis = a.int("new_axis", 0)? != 0;
    let axis = a.int("axis", 0)?;
    let out_rank = if new_axis { rank + 1 } else { rank };
    let k = if axis < 0 { axis + out_rank } else { axis };
    if !(0..out_rank).contains(&k) {
        return Err(format!("axis {axis} for elements of rank {rank}").into());
    }
    let k = k as usize;
    // The stack's axis 0 moved to position `k` (stacking), or next to element axis `k`.
    let mut perm: Vec<i64> = (1..=rank).collect();
    perm.insert(k, 0);
    let moved = if k == 0 {
        s.clone()
    } else {
        g.call("transpose", &[&s], &[("axes", attr::ints(&perm))])?
    };
    if new_axis {
        return Ok(moved);
    }
    let mut shape = moved.shape.clone();
    let n = shape.remove(k);
    shape[k] = if n < 0 || shape[k] < 0 {
        crate::symbolic::ANY
    } else {
        n * shape[k]
    };
    g.reshape(&moved, shape)
}
