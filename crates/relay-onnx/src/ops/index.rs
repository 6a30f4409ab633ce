//! Index-shaped operators written with Relay's comparisons, selects, gathers and
//! contractions: `OneHot`, `CumSum`, `Einsum` (its matrix-product-shaped equations),
//! `GatherND`, `TopK`, `ScatterElements` and `ScatterND`; and the masks `Trilu` and
//! `EyeLike`.

use crate::error::ConvertError;
use relay_runtime::{DType, DTypeCode, NDArray};

use crate::attrs::{Attrs, axis};
use crate::builder::{Value, attr, floats_of, ints_of};
use crate::graph::Graph;
use crate::proto::NodeProto;

use super::dynamic::int64;

/// Int64 indices `i` with the negative ones wrapped: `i + n` where `i < 0` (`n` the axis
/// length, a scalar or a vector broadcast along the indices' last axis).
fn wrapped(g: &mut Graph, i: &Value, n: &Value) -> Result<Value, ConvertError> {
    let zero = g.int(0, DType::I64)?;
    let negative = g.call("less", &[i, &zero], &[])?;
    let shifted = g.call("add", &[i, n], &[])?;
    g.call("where", &[&negative, &shifted, i], &[])
}

/// `x` reshaped to the static shape `to`.
fn reshaped(g: &mut Graph, x: &Value, to: &[i64]) -> Result<Value, ConvertError> {
    g.call("reshape", &[x], &[("newshape", attr::ints(to))])
}

/// `x` transposed by `perm`.
fn transposed(g: &mut Graph, x: &Value, perm: &[i64]) -> Result<Value, ConvertError> {
    g.call("transpose", &[x], &[("axes", attr::ints(perm))])
}

/// Reduction `op` (`sum`, `prod`, `max`, `min`) of `x` over `axes`.
fn reduced(g: &mut Graph, op: &str, x: &Value, axes: &[i64]) -> Result<Value, ConvertError> {
    g.call(op, &[x], &[("axis", attr::ints(axes))])
}

/// `OneHot(indices, depth, values)`: `values[1]` where the index (negative: from `depth`)
/// equals the position along the new axis, else `values[0]`.
pub(super) fn one_hot(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let (idx, depth, values) = (g.input(node, 0)?, g.input(node, 1)?, g.input(node, 2)?);
    let depth = match floats_of(&depth).as_deref() {
        // The positions are a constant of `depth` elements.
        Some(&[d]) if (1.0..=(1u64 << 20) as f64).contains(&d) => d as i64,
        _ => return Err("depth is not a positive constant scalar".into()),
    };
    if values.shape.iter().product::<i64>() != 2 {
        return Err(format!("values of shape {:?} (two are needed)", values.shape).into());
    }
    let rank = idx.shape.len();
    let ax = axis(a.int("axis", -1)?, rank + 1)?;
    // The positions along the new axis, broadcast over the axes after it.
    let positions = axis_positions(g, "one_hot_positions", depth, rank - ax)?;
    let i = int64(g, &idx)?;
    let n = g.int(depth, DType::I64)?;
    let i = wrapped(g, &i, &n)?;
    let i = g.call("expand_dims", &[&i], &[("axis", attr::int(ax as i64))])?;
    let hit = g.call("equal", &[&i, &positions], &[])?;
    let flat = reshaped(g, &values, &[2])?;
    let (on, off) = (g.int(1, DType::I64)?, g.int(0, DType::I64)?);
    let on = g.call("take", &[&flat, &on], &[])?;
    let off = g.call("take", &[&flat, &off], &[])?;
    g.call("where", &[&hit, &on, &off], &[])
}

/// `CumSum(x, axis)`: along a static axis of length `L`, the sum against an `L × L` mask of
/// the positions each output adds (`j <= i`; `j < i` when `exclusive`; mirrored when
/// `reverse`): a matrix product for floats, a masked sum otherwise.
pub(super) fn cumsum(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let (x, ax) = (g.input(node, 0)?, g.input(node, 1)?);
    let rank = x.shape.len();
    let ax = match ints_of(&ax).as_deref() {
        Some(&[k]) => axis(k, rank)?,
        _ => return Err("the axis is not a constant scalar".into()),
    };
    let len = x.shape[ax];
    if len > 4096 {
        return Err(format!("an axis of {len} elements (at most 4096)").into());
    }
    let (exclusive, reverse) = (a.int("exclusive", 0)? != 0, a.int("reverse", 0)? != 0);
    let mut mask = Vec::with_capacity((len * len) as usize);
    for i in 0..len {
        for j in 0..len {
            let (lo, hi) = if reverse { (i, j) } else { (j, i) };
            mask.push(f64::from(u8::from(if exclusive {
                lo < hi
            } else {
                lo <= hi
            })));
        }
    }
    let mask = NDArray::from_f64_slice(x.dtype, &[len, len], &mask).map_err(|e| e.to_string())?;
    let mask = g.constant("cumsum_mask", mask);
    // The axis moved last, summed against the mask, moved back.
    let mut perm: Vec<i64> = (0..rank as i64).filter(|&d| d != ax as i64).collect();
    perm.push(ax as i64);
    let mut inverse = vec![0i64; rank];
    for (k, &p) in perm.iter().enumerate() {
        inverse[p as usize] = k as i64;
    }
    let moved: Vec<i64> = perm.iter().map(|&p| x.shape[p as usize]).collect();
    let last = transposed(g, &x, &perm)?;
    let rows: i64 = moved[..rank - 1].iter().product();
    let summed = if x.dtype.is_float() {
        let flat = reshaped(g, &last, &[rows, len])?;
        let dense = g.call("nn.dense", &[&flat, &mask], &[("units", attr::int(len))])?;
        reshaped(g, &dense, &moved)?
    } else {
        let each = g.call(
            "expand_dims",
            &[&last],
            &[("axis", attr::int(rank as i64 - 1))],
        )?;
        let masked = g.call("multiply", &[&each, &mask], &[])?;
        reduced(g, "sum", &masked, &[-1])?
    };
    transposed(g, &summed, &inverse)
}

/// One operand of an einsum: its tensor and subscripts.
struct Term<'a> {
    v: &'a Value,
    labels: Vec<char>,
}

/// `0, 1, ..., n - 1` as an int64 constant of shape `[n, 1, ...]` (`trailing` ones), which
/// broadcasts along an axis followed by `trailing` others.
fn axis_positions(
    g: &mut Graph,
    hint: &str,
    n: i64,
    trailing: usize,
) -> Result<Value, ConvertError> {
    let shape: Vec<i64> = std::iter::once(n)
        .chain(std::iter::repeat_n(1, trailing))
        .collect();
    g.int64_constant(hint, &shape, 0..n)
}

/// `v` with every label repeated within its subscripts reduced to its diagonal (`ii` -> `i`):
/// the two axes moved last, merged, and every `n + 1`-th element taken. The label goes last.
fn diagonals(
    g: &mut Graph,
    mut v: Value,
    mut labels: Vec<char>,
) -> Result<(Value, Vec<char>), ConvertError> {
    while let Some((i, j)) = (0..labels.len()).find_map(|j| {
        labels[..j]
            .iter()
            .position(|&c| c == labels[j])
            .map(|i| (i, j))
    }) {
        let n = v.shape[i];
        // The index vector has `n` entries: bounded, as no real diagonal is this long.
        if n > 1 << 16 {
            return Err(format!("a diagonal of {n} elements").into());
        }
        if v.shape[j] != n {
            return Err(
                format!("label `{}` on axes of {} and {}", labels[i], n, v.shape[j]).into(),
            );
        }
        let rest: Vec<usize> = (0..labels.len()).filter(|&k| k != i && k != j).collect();
        let perm: Vec<i64> = rest.iter().chain([&i, &j]).map(|&k| k as i64).collect();
        let merged: Vec<i64> = rest.iter().map(|&k| v.shape[k]).chain([n * n]).collect();
        let index = g.int64_constant("diagonal", &[n], (0..n).map(|k| k * (n + 1)))?;
        let last = transposed(g, &v, &perm)?;
        let last = reshaped(g, &last, &merged)?;
        v = g.call("take", &[&last, &index], &[("axis", attr::int(-1))])?;
        let label = labels[i];
        labels = rest.iter().map(|&k| labels[k]).chain([label]).collect();
    }
    Ok((v, labels))
}

/// The operands' subscripts and the output's, with each `...` written out as letters the
/// equation does not use (the broadcast dimensions, aligned from the right as numpy aligns
/// them) and an implicit output made explicit (numpy's rule: the broadcast dimensions, then
/// the labels seen once, alphabetically).
fn expand_ellipsis(
    lhs: &str,
    rhs: Option<String>,
    ranks: &[usize],
) -> Result<(Vec<String>, String), ConvertError> {
    let subs: Vec<&str> = lhs.split(',').collect();
    // The number of dimensions each operand's ellipsis stands for.
    let mut spans = Vec::new();
    for (k, s) in subs.iter().enumerate() {
        let rank = ranks.get(k).copied().unwrap_or(0);
        let explicit = s.replace("...", "").chars().count();
        spans.push(if s.contains("...") {
            rank.checked_sub(explicit).ok_or_else(|| {
                ConvertError::from(format!("subscripts `{s}` for a rank-{rank} operand"))
            })?
        } else {
            0
        });
    }
    let widest = spans.iter().copied().max().unwrap_or(0);
    let fresh: Vec<char> = ('A'..='Z')
        .chain('a'..='z')
        .filter(|c| !lhs.contains(*c) && !rhs.as_deref().is_some_and(|r| r.contains(*c)))
        .take(widest)
        .collect();
    if fresh.len() < widest {
        return Err(format!("an ellipsis of {widest} dimensions").into());
    }
    let letters = |n: usize| -> String { fresh[widest - n..].iter().collect() };
    let out_subs = subs
        .iter()
        .zip(&spans)
        .map(|(s, &n)| s.replacen("...", &letters(n), 1))
        .collect();
    let rhs = rhs.map_or_else(
        || {
            // Implicit: the broadcast dimensions, then the labels seen once, alphabetically
            // (a label repeated within one operand is summed over its diagonal).
            let all: String = subs.concat().replace("...", "");
            let mut once: Vec<char> = all
                .chars()
                .filter(|c| all.chars().filter(|d| d == c).count() == 1)
                .collect();
            once.sort_unstable();
            letters(widest) + &once.into_iter().collect::<String>()
        },
        |r| r.replacen("...", &letters(widest), 1),
    );
    Ok((out_subs, rhs))
}

/// `Einsum` of one operand (a transpose and sums) or two (a batched matrix product): labels
/// in both inputs and the output are batch axes, in both inputs only contracted, in one input
/// and the output free; labels in one input only are summed first. An ellipsis is written out
/// as fresh labels ([`expand_ellipsis`]); a label repeated within one operand is its
/// diagonal ([`diagonals`]).
pub(super) fn einsum(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let eq: String = a
        .string("equation", "")?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let inputs: Vec<Value> = (0..node.input.len())
        .map(|i| g.input(node, i))
        .collect::<Result<_, _>>()?;
    let ranks: Vec<usize> = inputs.iter().map(|v| v.shape.len()).collect();
    let (subs, rhs) = expand_ellipsis(&lhs, rhs, &ranks)?;
    let subs: Vec<&str> = subs.iter().map(String::as_str).collect();
    if subs.len() != inputs.len() || !(1..=2).contains(&inputs.len()) {
        return Err(format!("equation `{eq}` for {} inputs", inputs.len()).into());
    }
    let mut operands = Vec::new();
    for (v, s) in inputs.iter().zip(&subs) {
        let labels: Vec<char> = s.chars().collect();
        if labels.len() != v.shape.len() || !labels.iter().all(char::is_ascii_alphabetic) {
            return Err(format!("subscripts `{s}` for shape {:?}", v.shape).into());
        }
        operands.push(diagonals(g, v.clone(), labels)?);
    }
    let terms: Vec<Term> = operands
        .iter()
        .map(|(v, labels)| Term {
            v,
            labels: labels.clone(),
        })
        .collect();
    let out: Vec<char> = rhs.chars().collect();
    let size = |c: char| {
        terms
            .iter()
            .find_map(|t| t.labels.iter().position(|&l| l == c).map(|p| t.v.shape[p]))
    };
    if let Some(c) = out.iter().find(|&&c| size(c).is_none()) {
        return Err(format!("output label `{c}` is in no input").into());
    }
    // Each operand with the labels only it has (and the output lacks) summed away.
    let mut ops = Vec::new();
    for (k, t) in terms.iter().enumerate() {
        let other: &[char] = terms.get(1 - k).map_or(&[], |o| o.labels.as_slice());
        let (keep, drop): (Vec<usize>, Vec<usize>) = (0..t.labels.len())
            .partition(|&i| out.contains(&t.labels[i]) || other.contains(&t.labels[i]));
        let labels: Vec<char> = keep.iter().map(|&i| t.labels[i]).collect();
        let v = if drop.is_empty() {
            t.v.clone()
        } else {
            let axes: Vec<i64> = drop.iter().map(|&i| i as i64).collect();
            reduced(g, "sum", t.v, &axes)?
        };
        ops.push((v, labels));
    }
    let (v, labels) = if ops.len() == 1 {
        ops.remove(0)
    } else {
        let (r, l) = (ops.remove(1), ops.remove(0));
        product(g, l, r, &out)?
    };
    // Move the product's labels into the output's order.
    let perm: Vec<i64> = out
        .iter()
        .map(|c| labels.iter().position(|l| l == c).map(|p| p as i64))
        .collect::<Option<_>>()
        .ok_or("an output label is summed away")?;
    if perm.len() != labels.len() {
        return Err(format!("equation `{eq}`").into());
    }
    debug_assert_eq!(v.shape.len(), perm.len());
    let identity = perm.iter().enumerate().all(|(i, &p)| p == i as i64);
    if identity {
        Ok(v)
    } else {
        transposed(g, &v, &perm)
    }
}

/// An einsum operand: its value and labels.
type Labeled = (Value, Vec<char>);

/// The batched product of two operands: batch labels (in both and the output), then the
/// left's free labels, then the right's; contracted labels (in both, not the output) summed.
/// `nn.batch_matmul` of `[B, M, K]` by `[B, N, K]`.
fn product(g: &mut Graph, l: Labeled, r: Labeled, out: &[char]) -> Result<Labeled, ConvertError> {
    let in_r = |c: &char| r.1.contains(c);
    let batch: Vec<char> =
        l.1.iter()
            .copied()
            .filter(|c| in_r(c) && out.contains(c))
            .collect();
    let contracted: Vec<char> =
        l.1.iter()
            .copied()
            .filter(|c| in_r(c) && !out.contains(c))
            .collect();
    let free_l: Vec<char> = l.1.iter().copied().filter(|c| !in_r(c)).collect();
    let free_r: Vec<char> = r.1.iter().copied().filter(|c| !l.1.contains(c)).collect();
    let dim =
        |(v, labels): &Labeled, c: char| labels.iter().position(|&x| x == c).map(|p| v.shape[p]);
    for &c in batch.iter().chain(&contracted) {
        if dim(&l, c) != dim(&r, c) {
            return Err(format!(
                "label `{c}` has sizes {:?} and {:?}",
                dim(&l, c),
                dim(&r, c)
            )
            .into());
        }
    }
    let extent =
        |t: &Labeled, cs: &[char]| -> i64 { cs.iter().filter_map(|&c| dim(t, c)).product() };
    let (b, m, k, n) = (
        extent(&l, &batch),
        extent(&l, &free_l),
        extent(&l, &contracted),
        extent(&r, &free_r),
    );
    let arrange = |g: &mut Graph, t: &Labeled, order: Vec<char>, shape: [i64; 3]| {
        let perm: Vec<i64> = order
            .iter()
            .filter_map(|c| t.1.iter().position(|x| x == c).map(|p| p as i64))
            .collect();
        let moved = transposed(g, &t.0, &perm)?;
        reshaped(g, &moved, &shape)
    };
    let lm = arrange(
        g,
        &l,
        [batch.clone(), free_l.clone(), contracted.clone()].concat(),
        [b, m, k],
    )?;
    let rm = arrange(
        g,
        &r,
        [batch.clone(), free_r.clone(), contracted].concat(),
        [b, n, k],
    )?;
    let labels: Vec<char> = [batch.clone(), free_l.clone(), free_r.clone()].concat();
    let shape: Vec<i64> = batch
        .iter()
        .chain(&free_l)
        .map(|&c| dim(&l, c).unwrap_or(1))
        .chain(free_r.iter().map(|&c| dim(&r, c).unwrap_or(1)))
        .collect();
    let flags = [
        ("transpose_a", attr::bool(false)),
        ("transpose_b", attr::bool(true)),
    ];
    let mm = g.call("nn.batch_matmul", &[&lm, &rm], &flags)?;
    Ok((reshaped(g, &mm, &shape)?, labels))
}

/// `GatherND(data, indices)` with `batch_dims`: each index tuple (the indices' last axis, `M`
/// long; negatives count from the end) made one position of the data's batch and indexed
/// axes flattened together, then a `take` along that flattened axis.
pub(super) fn gather_nd(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let (x, idx) = (g.input(node, 0)?, g.input(node, 1)?);
    let (r, q) = (x.shape.len(), idx.shape.len());
    let b = usize::try_from(a.int("batch_dims", 0)?).map_err(|_| "negative batch_dims")?;
    let m = idx.shape.last().copied().unwrap_or(0);
    if q == 0 || b >= q || m < 1 || b as i64 + m > r as i64 || idx.shape[..b] != x.shape[..b] {
        return Err(format!(
            "indices {:?} for data {:?} with batch_dims {b}",
            idx.shape, x.shape
        )
        .into());
    }
    let m = m as usize;
    // A dynamic extent or stride is read at run time (`shape_of`); with batch dimensions,
    // the indexed axes and the batch must be static.
    let dynamic = |dims: &[i64]| crate::symbolic::is_dynamic(dims);
    if b > 0 && dynamic(&x.shape[..b + m]) {
        return Err(format!(
            "GatherND of data {} with batch_dims {b}: the batch and indexed axes must be static",
            crate::graph::type_text(&x.shape, x.dtype)
        )
        .into());
    }
    let inner = crate::symbolic::product(&x.shape[b..b + m]);
    let rest = &x.shape[b + m..];
    let batch: i64 = x.shape[..b].iter().product();
    let flat_shape: Vec<i64> = std::iter::once(if inner < 0 { inner } else { batch * inner })
        .chain(rest.iter().copied())
        .collect();
    let data = match dynamic(&x.shape) {
        true => g.reshape(&x, flat_shape)?,
        false => reshaped(g, &x, &flat_shape)?,
    };
    let dims = match dynamic(&x.shape) {
        true => Some(g.call("shape_of", &[&x], &[("dtype", attr::str(DType::I64))])?),
        false => None,
    };
    // Extent `j` of the data: a constant, or read from its shape at run time.
    let extent = |g: &mut Graph, j: usize| -> Result<Value, ConvertError> {
        match (&dims, x.shape[j] < 0) {
            (Some(dims), true) => {
                let axis = g.int(j as i64, DType::I64)?;
                g.call("take", &[dims, &axis], &[("axis", attr::int(0))])
            }
            _ => g.int(x.shape[j], DType::I64),
        }
    };
    // Σ_k index_k · stride_k over the indexed axes, each index wrapped if negative.
    let i = int64(g, &idx)?;
    let mut flat: Option<Value> = None;
    for k in 0..m {
        let n = extent(g, b + k)?;
        let mut stride = g.int(1, DType::I64)?;
        for j in b + k + 1..b + m {
            let d = extent(g, j)?;
            stride = g.call("multiply", &[&stride, &d], &[])?;
        }
        let k = g.int(k as i64, DType::I64)?;
        let c = g.call("take", &[&i, &k], &[("axis", attr::int(-1))])?;
        let c = wrapped(g, &c, &n)?;
        let term = g.call("multiply", &[&c, &stride], &[])?;
        flat = Some(match flat {
            None => term,
            Some(acc) => g.call("add", &[&acc, &term], &[])?,
        });
    }
    let mut flat = flat.ok_or("no indexed axis")?;
    if b > 0 {
        // Each position's batch, as an offset of `inner` per batch element: a constant of
        // one element per batch element.
        if batch > 1 << 24 {
            return Err(format!("{batch} batch elements (at most 2^24)").into());
        }
        let oshape: Vec<i64> = idx.shape[..b]
            .iter()
            .copied()
            .chain(std::iter::repeat_n(1, q - 1 - b))
            .collect();
        let offsets =
            g.int64_constant("gather_nd_offsets", &oshape, (0..batch).map(|p| p * inner))?;
        flat = g.call("add", &[&flat, &offsets], &[])?;
    }
    // The result: one row of `rest` per index tuple (the symbols of both kept).
    let shape: Vec<i64> = idx.shape[..q - 1].iter().chain(rest).copied().collect();
    g.call_as("take", &[&data, &flat], &[("axis", attr::int(0))], &shape)
}

/// `TopK` with a constant `k` (at most 256): `k` rounds of `argmax` (`argmin` when not
/// `largest`) along the axis, each taking the value there and masking it out, so the values
/// come sorted and ties go to the lower index, as ONNX specifies.
pub(super) fn top_k(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Vec<Value>, ConvertError> {
    let x = g.input(node, 0)?;
    let k = match ints_of(&g.input(node, 1)?).as_deref() {
        Some(&[k]) => k,
        _ => return Err("k is not a constant scalar".into()),
    };
    let rank = x.shape.len();
    let ax = axis(a.int("axis", -1)?, rank)?;
    let n = x.shape[ax];
    if !(1..=256.min(n)).contains(&k) || n > 1 << 24 {
        return Err(
            format!("k = {k} for an axis of {n} (k from 1 to 256, axes up to 2^24)").into(),
        );
    }
    let largest = a.int("largest", 1)? != 0;
    let (pick, worst) = if largest {
        ("argmax", extreme(g, x.dtype, false)?)
    } else {
        ("argmin", extreme(g, x.dtype, true)?)
    };
    // The positions along the axis, broadcast over the axes after it.
    let positions = axis_positions(g, "top_k_positions", n, rank - ax - 1)?;
    let (mut values, mut indices) = (Vec::new(), Vec::new());
    let mut cur = x.clone();
    for t in 0..k {
        let at = [
            ("axis", attr::ints(&[ax as i64])),
            ("keepdims", attr::bool(true)),
        ];
        let i = g.call(pick, &[&cur], &at)?;
        let i = int64(g, &i)?;
        values.push(g.call("gather", &[&x, &i], &[("axis", attr::int(ax as i64))])?);
        if t + 1 < k {
            let hit = g.call("equal", &[&positions, &i], &[])?;
            cur = g.call("where", &[&hit, &worst, &cur], &[])?;
        }
        indices.push(i);
    }
    let join = |g: &mut Graph, items: &[Value]| {
        let items: Vec<&Value> = items.iter().collect();
        g.call_tuple("concatenate", &items, &[("axis", attr::int(ax as i64))])
    };
    let v = join(g, &values)?;
    let i = join(g, &indices)?;
    Ok(vec![v, i])
}

/// `v` as a scalar literal of `dtype` (an integer dtype: `v` truncated).
fn literal(g: &mut Graph, dtype: DType, v: f64) -> Result<Value, ConvertError> {
    if dtype.is_float() {
        g.float(v, dtype)
    } else {
        g.int(v as i64, dtype)
    }
}

/// The largest one-hot intermediate a scatter may build, in elements.
const SCATTER_LIMIT: i64 = 1 << 26;

/// `ScatterND(data, indices, updates)`: each index tuple of `indices`' last axis (`q` long,
/// negative: from the end) names a slice `data[i_0, ..., i_q-1]`, which the matching update
/// replaces (`reduction` none), or is added to, multiplied by, or combined by max or min
/// with. Written as a one-hot scatter: the tuples become linear positions among the `M`
/// slices, compared with `0..M`, and the updates summed (or multiplied, maxed, minned) into
/// the slices they hit. PyTorch's exporters emit it for index assignment (`x[:, i] = v`).
pub(super) fn scatter_nd(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let (x, idx, upd) = (g.input(node, 0)?, g.input(node, 1)?, g.input(node, 2)?);
    let r = x.shape.len();
    let q = idx.shape.last().copied().unwrap_or(0);
    let lead = &idx.shape[..idx.shape.len().saturating_sub(1)];
    let bad = || {
        format!(
            "indices {:?} and updates {:?} for data {:?}",
            idx.shape, upd.shape, x.shape
        )
    };
    if !(1..=r as i64).contains(&q) || !idx.dtype.is_int() {
        return Err(bad().into());
    }
    let q = q as usize;
    let rest = &x.shape[q..];
    if upd.shape != [lead, rest].concat() || upd.dtype != x.dtype || x.dtype == DType::BOOL {
        return Err(bad().into());
    }
    let (u, m): (i64, i64) = (lead.iter().product(), x.shape[..q].iter().product());
    let tail: i64 = rest.iter().product();
    if u.saturating_mul(m).saturating_mul(tail) > SCATTER_LIMIT {
        return Err(format!("{}: too large to scatter", bad()).into());
    }
    // Linear slice positions of the tuples, negative indices wrapped.
    let dims = g.int64_constant("scatter_dims", &[q as i64], x.shape[..q].iter().copied())?;
    let strides: Vec<i64> = (0..q).map(|d| x.shape[d + 1..q].iter().product()).collect();
    let strides = g.int64_constant("scatter_strides", &[q as i64], strides)?;
    let i = int64(g, &idx)?;
    let i = wrapped(g, &i, &dims)?;
    let linear = g.call("multiply", &[&i, &strides], &[])?;
    let linear = reduced(g, "sum", &linear, &[-1])?;
    let linear = reshaped(g, &linear, &[u, 1])?;
    let positions = g.int64_constant("scatter_positions", &[m], 0..m)?;
    let eq = g.call("equal", &[&linear, &positions], &[])?;
    let ones = vec![1; rest.len()];
    let at = |first: &[i64]| [first, &ones].concat();
    let slices = |first: &[i64]| [first, rest].concat();
    let mask = reshaped(g, &eq, &at(&[u, m]))?;
    let updates = reshaped(g, &upd, &slices(&[u, 1]))?;
    let dt = x.dtype;
    let reduction = a.string("reduction", "none")?;
    let (f, neutral) = match reduction.as_str() {
        "none" | "add" => ("sum", literal(g, dt, 0.0)?),
        "mul" => ("prod", literal(g, dt, 1.0)?),
        "max" => ("max", extreme(g, dt, false)?),
        "min" => ("min", extreme(g, dt, true)?),
        other => return Err(format!("reduction `{other}`").into()),
    };
    let landed = g.call("where", &[&mask, &updates, &neutral], &[])?;
    let combined = reduced(g, f, &landed, &[0])?;
    let hit = hits(g, &eq, 0)?;
    let hit = reshaped(g, &hit, &at(&[m]))?;
    let d = reshaped(g, &x, &slices(&[m]))?;
    let out = combine(g, &reduction, &hit, &d, &combined, true)?;
    reshaped(g, &out, &x.shape)
}

/// Where some update lands: `eq` (update × position matches) has a match along `axis`.
fn hits(g: &mut Graph, eq: &Value, axis: i64) -> Result<Value, ConvertError> {
    let count = g.call("cast", &[eq], &[("dtype", attr::str(DType::I32))])?;
    let count = reduced(g, "sum", &count, &[axis])?;
    let zero = g.int(0, DType::I32)?;
    g.call("greater", &[&count, &zero], &[])
}

/// The data `d` with the reduced updates `combined` applied by `reduction` where `hit` (the
/// data everywhere else); `everywhere`: an `add` or `mul` applies everywhere (`combined` is
/// its neutral where nothing lands).
fn combine(
    g: &mut Graph,
    reduction: &str,
    hit: &Value,
    d: &Value,
    combined: &Value,
    everywhere: bool,
) -> Result<Value, ConvertError> {
    let applied = match reduction {
        "none" => combined.clone(),
        "add" => g.call("add", &[d, combined], &[])?,
        "mul" => g.call("multiply", &[d, combined], &[])?,
        "max" => g.call("maximum", &[d, combined], &[])?,
        _ => g.call("minimum", &[d, combined], &[])?,
    };
    if everywhere && matches!(reduction, "add" | "mul") {
        return Ok(applied);
    }
    g.call("where", &[hit, &applied, d], &[])
}

/// `Trilu(x, k)`: the upper (`upper` = 1) or lower triangle of the last two axes, from
/// diagonal `k` (a constant; above the main diagonal when positive), the rest zero. A mask
/// constant of the two axes selects (`torch.triu`/`tril`, causal masks).
pub(super) fn trilu(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let k = match g.optional_input(node, 1)? {
        None => 0,
        Some(k) => match ints_of(&k).as_deref() {
            Some(&[k]) => k,
            _ => return Err("k is not a constant integer".into()),
        },
    };
    let &[.., n, m] = x.shape.as_slice() else {
        return Err(format!("input of shape {:?}: rank 2 or more is needed", x.shape).into());
    };
    if n.saturating_mul(m) > 1 << 26 {
        return Err(format!("a {n}×{m} triangle is too large").into());
    }
    let upper = a.int("upper", 1)? != 0;
    let keep: Vec<bool> = (0..n)
        .flat_map(|i| {
            (0..m)
                .map(move |j| j - i)
                .map(move |d| if upper { d >= k } else { d <= k })
        })
        .collect();
    let mask = NDArray::from_bool_slice(&[n, m], &keep).map_err(|e| e.to_string())?;
    let mask = g.constant("trilu_mask", mask);
    let zeros = g.call("zeros_like", &[&x], &[])?;
    g.call("where", &[&mask, &x, &zeros], &[])
}

/// `EyeLike(x)`: a constant of `x`'s 2-D shape, ones on diagonal `k`, zeros elsewhere, of
/// `dtype` (an ONNX element type) or `x`'s.
pub(super) fn eye_like(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let &[n, m] = x.shape.as_slice() else {
        return Err(format!("input of shape {:?}: rank 2 is needed", x.shape).into());
    };
    if n.saturating_mul(m) > 1 << 26 {
        return Err(format!("a {n}×{m} identity is too large").into());
    }
    let dtype = match a.int("dtype", -1)? {
        -1 => x.dtype,
        code => crate::tensor::dtype(code as i32)
            .ok_or_else(|| ConvertError::from(format!("element type {code} is not supported")))?,
    };
    let k = a.int("k", 0)?;
    let values: Vec<f64> = (0..n)
        .flat_map(|i| (0..m).map(move |j| f64::from(u8::from(j - i == k))))
        .collect();
    let eye = NDArray::from_f64_slice(dtype, &[n, m], &values).map_err(|e| e.to_string())?;
    Ok(g.constant("eye", eye))
}

/// The lowest value of `dtype` (the one that never wins an `argmax`, the neutral of `max`), or
/// the highest (`high`); a float's infinity is its largest finite value, as a literal is.
fn extreme(g: &mut Graph, dtype: DType, high: bool) -> Result<Value, ConvertError> {
    if dtype.is_float() {
        let v = if high {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        };
        return g.float(v, dtype);
    }
    let bits = u32::from(dtype.bits);
    let signed = dtype.code == DTypeCode::Int;
    let v: i128 = match (signed, high) {
        (true, true) => (1i128 << (bits - 1)) - 1,
        (true, false) => -(1i128 << (bits - 1)),
        (false, true) => (1i128 << bits) - 1,
        (false, false) => 0,
    };
    // An unsigned 64-bit maximum is written as its bits (the literal is truncated to them).
    g.int(v as i64, dtype)
}

/// `ScatterElements(data, indices, updates)` along `axis`, with `reduction` none, add, mul,
/// max or min: each update compared with every position of the axis (`[.., m, n, ..]` for `m`
/// updates and `n` positions), the matches reduced over the updates, and the result combined
/// with the data where some update lands (memory `m·n` per line of the axis: for the few
/// updates of a cache write or a label scatter). Duplicate indices with `none`, which ONNX
/// leaves undefined, sum.
pub(super) fn scatter_elements(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let (x, idx, upd) = (g.input(node, 0)?, g.input(node, 1)?, g.input(node, 2)?);
    let r = x.shape.len();
    let k = axis(a.int("axis", 0)?, r)?;
    let fits = idx.shape.len() == r
        && upd.shape == idx.shape
        && (0..r).all(|d| d == k || idx.shape[d] <= x.shape[d]);
    let n = x.shape[k];
    if !fits || upd.dtype != x.dtype || n.saturating_mul(idx.shape.iter().product()) > 1 << 26 {
        return Err(format!(
            "indices {:?} and updates {:?} for data {:?} along axis {k}",
            idx.shape, upd.shape, x.shape
        )
        .into());
    }
    let reduction = a.string("reduction", "none")?;
    // The positions of the axis, lining up with the axis after the updates'.
    let positions = axis_positions(g, "scatter_positions", n, r - k - 1)?;
    let i = int64(g, &idx)?;
    let len = g.int(n, DType::I64)?;
    let i = wrapped(g, &i, &len)?;
    let after = [("axis", attr::int(k as i64 + 1))];
    let i = g.call("expand_dims", &[&i], &after)?;
    let eq = g.call("equal", &[&i, &positions], &[])?;
    let u = g.call("expand_dims", &[&upd], &after)?;
    let dt = x.dtype;
    // Reduced over the updates (axis k): the result has the axis as long as the data's.
    let (f, neutral) = match reduction.as_str() {
        "none" | "add" => ("sum", literal(g, dt, 0.0)?),
        "mul" => ("prod", literal(g, dt, 1.0)?),
        "max" => ("max", extreme(g, dt, false)?),
        "min" => ("min", extreme(g, dt, true)?),
        other => return Err(format!("reduction `{other}`").into()),
    };
    let landed = g.call("where", &[&eq, &u, &neutral], &[])?;
    let combined = reduced(g, f, &landed, &[k as i64])?;
    let hit = hits(g, &eq, k as i64)?;
    // Both padded with nothing-landed to the data's shape where the indices are shorter.
    let mut short = idx.shape.clone();
    short[k] = n;
    let width: Vec<Vec<i64>> = (0..r).map(|d| vec![0, x.shape[d] - short[d]]).collect();
    let pad = |g: &mut Graph, v: Value, value: Value| {
        if short == x.shape {
            return Ok(v);
        }
        g.call(
            "nn.pad",
            &[&v, &value],
            &[("pad_width", attr::int_lists(&width))],
        )
    };
    let zero = literal(g, dt, 0.0)?;
    let combined = pad(g, combined, zero)?;
    let nothing = g.int(0, DType::BOOL)?;
    let hit = pad(g, hit, nothing)?;
    combine(g, &reduction, &hit, &x, &combined, false)
}
