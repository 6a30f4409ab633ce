//! Index-shaped operators written with Relay's comparisons, selects, gathers and
//! contractions: `OneHot`, `CumSum`, `Einsum` (its matrix-product-shaped equations),
//! `GatherND`, `TopK`, `ScatterElements` and `ScatterND`; and the masks `Trilu` and
//! `EyeLike`.

use relay_runtime::{DType, NDArray};

use super::{Attrs, axis, ints_of, list};
use crate::graph::{Graph, Value};
use crate::proto::NodeProto;

/// `OneHot(indices, depth, values)`: `values[1]` where the index (negative: from `depth`)
/// equals the position along the new axis, else `values[0]`.
pub(super) fn one_hot(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, String> {
    let (idx, depth, values) = (g.input(node, 0)?, g.input(node, 1)?, g.input(node, 2)?);
    let depth = match super::floats_of(&depth).as_deref() {
        // The positions are a constant of `depth` elements.
        Some(&[d]) if (1.0..=(1u64 << 20) as f64).contains(&d) => d as i64,
        _ => return Err("depth is not a positive constant scalar".into()),
    };
    if values.shape.iter().product::<i64>() != 2 {
        return Err(format!(
            "values of shape {:?} (two are needed)",
            values.shape
        ));
    }
    let rank = idx.shape.len();
    let ax = axis(a.int("axis", -1)?, rank + 1)?;
    let mut shape = idx.shape.clone();
    shape.insert(ax, depth);
    // The positions along the new axis, broadcast over the axes after it.
    let positions = axis_positions(g, "one_hot_positions", depth, rank - ax)?;
    let i = format!("cast({}, dtype=\"int64\")", idx.expr);
    let wrapped = format!("where(less({i}, 0i64), add({i}, {depth}i64), {i})");
    let flat = format!("reshape({}, newshape=[2])", values.expr);
    let text = format!(
        "where(equal(expand_dims({wrapped}, axis={ax}), {}), take({flat}, 1), take({flat}, 0))",
        positions.expr
    );
    Ok(g.bind(text, shape, values.dtype))
}

/// `CumSum(x, axis)`: along a static axis of length `L`, the sum against an `L × L` mask of
/// the positions each output adds (`j <= i`; `j < i` when `exclusive`; mirrored when
/// `reverse`): a matrix product for floats, a masked sum otherwise.
pub(super) fn cumsum(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, String> {
    let (x, ax) = (g.input(node, 0)?, g.input(node, 1)?);
    let rank = x.shape.len();
    let ax = match ints_of(&ax).as_deref() {
        Some(&[k]) => axis(k, rank)?,
        _ => return Err("the axis is not a constant scalar".into()),
    };
    let len = x.shape[ax];
    if len > 4096 {
        return Err(format!("an axis of {len} elements (at most 4096)"));
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
    let mask = g.new_constant("cumsum_mask", mask);
    // The axis moved last, summed against the mask, moved back.
    let mut perm: Vec<i64> = (0..rank as i64).filter(|&d| d != ax as i64).collect();
    perm.push(ax as i64);
    let mut inverse = vec![0i64; rank];
    for (k, &p) in perm.iter().enumerate() {
        inverse[p as usize] = k as i64;
    }
    let moved: Vec<i64> = perm.iter().map(|&p| x.shape[p as usize]).collect();
    let last = format!("transpose({}, axes={})", x.expr, list(&perm));
    let rows: i64 = moved[..rank - 1].iter().product();
    let summed = if x.dtype.is_float() {
        format!(
            "reshape(nn.dense(reshape({last}, newshape={}), {}, units={len}), newshape={})",
            list(&[rows, len]),
            mask.expr,
            list(&moved)
        )
    } else {
        format!(
            "sum(multiply(expand_dims({last}, axis={}), {}), axis=[-1])",
            rank - 1,
            mask.expr
        )
    };
    Ok(g.bind(
        format!("transpose({summed}, axes={})", list(&inverse)),
        x.shape.clone(),
        x.dtype,
    ))
}

/// One operand of an einsum: its tensor and subscripts.
struct Term<'a> {
    v: &'a Value,
    labels: Vec<char>,
}

/// `0, 1, ..., n - 1` as an int64 constant of shape `[n, 1, ...]` (`trailing` ones), which
/// broadcasts along an axis followed by `trailing` others.
fn axis_positions(g: &mut Graph, hint: &str, n: i64, trailing: usize) -> Result<Value, String> {
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
) -> Result<(Value, Vec<char>), String> {
    while let Some((i, j)) = (0..labels.len()).find_map(|j| {
        labels[..j]
            .iter()
            .position(|&c| c == labels[j])
            .map(|i| (i, j))
    }) {
        let n = v.shape[i];
        // The index vector has `n` entries: bounded, as no real diagonal is this long.
        if n > 1 << 16 {
            return Err(format!("a diagonal of {n} elements"));
        }
        if v.shape[j] != n {
            return Err(format!(
                "label `{}` on axes of {} and {}",
                labels[i], n, v.shape[j]
            ));
        }
        let rest: Vec<usize> = (0..labels.len()).filter(|&k| k != i && k != j).collect();
        let perm: Vec<i64> = rest.iter().chain([&i, &j]).map(|&k| k as i64).collect();
        let mut shape: Vec<i64> = rest.iter().map(|&k| v.shape[k]).collect();
        let merged = [shape.clone(), vec![n * n]].concat();
        let index = g.int64_constant("diagonal", &[n], (0..n).map(|k| k * (n + 1)))?;
        shape.push(n);
        v = g.bind(
            format!(
                "take(reshape(transpose({}, axes={}), newshape={}), {}, axis=-1)",
                v.expr,
                list(&perm),
                list(&merged),
                index.expr
            ),
            shape,
            v.dtype,
        );
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
) -> Result<(Vec<String>, String), String> {
    let subs: Vec<&str> = lhs.split(',').collect();
    // The number of dimensions each operand's ellipsis stands for.
    let mut spans = Vec::new();
    for (k, s) in subs.iter().enumerate() {
        let rank = ranks.get(k).copied().unwrap_or(0);
        let explicit = s.replace("...", "").chars().count();
        spans.push(if s.contains("...") {
            rank.checked_sub(explicit)
                .ok_or_else(|| format!("subscripts `{s}` for a rank-{rank} operand"))?
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
        return Err(format!("an ellipsis of {widest} dimensions"));
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
pub(super) fn einsum(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, String> {
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
        return Err(format!("equation `{eq}` for {} inputs", inputs.len()));
    }
    let mut operands = Vec::new();
    for (v, s) in inputs.iter().zip(&subs) {
        let labels: Vec<char> = s.chars().collect();
        if labels.len() != v.shape.len() || !labels.iter().all(char::is_ascii_alphabetic) {
            return Err(format!("subscripts `{s}` for shape {:?}", v.shape));
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
    let mut out_shape = Vec::new();
    for &c in &out {
        out_shape.push(size(c).ok_or_else(|| format!("output label `{c}` is in no input"))?);
    }
    // Each operand with the labels only it has (and the output lacks) summed away.
    let mut ops = Vec::new();
    for (k, t) in terms.iter().enumerate() {
        let other: &[char] = terms.get(1 - k).map_or(&[], |o| o.labels.as_slice());
        let (keep, drop): (Vec<usize>, Vec<usize>) = (0..t.labels.len())
            .partition(|&i| out.contains(&t.labels[i]) || other.contains(&t.labels[i]));
        let labels: Vec<char> = keep.iter().map(|&i| t.labels[i]).collect();
        let shape: Vec<i64> = keep.iter().map(|&i| t.v.shape[i]).collect();
        let expr = if drop.is_empty() {
            t.v.expr.clone()
        } else {
            let axes: Vec<i64> = drop.iter().map(|&i| i as i64).collect();
            format!("sum({}, axis={})", t.v.expr, list(&axes))
        };
        ops.push((expr, labels, shape));
    }
    let dt = inputs[0].dtype;
    let (expr, labels, shape) = if ops.len() == 1 {
        ops.remove(0)
    } else {
        let (r, l) = (ops.remove(1), ops.remove(0));
        product(l, r, &out)?
    };
    // Move the product's labels into the output's order.
    let perm: Vec<i64> = out
        .iter()
        .map(|c| labels.iter().position(|l| l == c).map(|p| p as i64))
        .collect::<Option<_>>()
        .ok_or("an output label is summed away")?;
    if perm.len() != labels.len() {
        return Err(format!("equation `{eq}`"));
    }
    debug_assert_eq!(shape.len(), perm.len());
    let identity = perm.iter().enumerate().all(|(i, &p)| p == i as i64);
    let text = if identity {
        expr
    } else {
        format!("transpose({expr}, axes={})", list(&perm))
    };
    Ok(g.bind(text, out_shape, dt))
}

/// The batched product of two operands (expression, labels, shape): batch labels (in both
/// and the output), then the left's free labels, then the right's; contracted labels (in both,
/// not the output) summed. `nn.batch_matmul` of `[B, M, K]` by `[B, N, K]`.
fn product(
    l: (String, Vec<char>, Vec<i64>),
    r: (String, Vec<char>, Vec<i64>),
    out: &[char],
) -> Result<(String, Vec<char>, Vec<i64>), String> {
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
    let dim = |(_, labels, shape): &(String, Vec<char>, Vec<i64>), c: char| {
        labels.iter().position(|&x| x == c).map(|p| shape[p])
    };
    for &c in batch.iter().chain(&contracted) {
        if dim(&l, c) != dim(&r, c) {
            return Err(format!(
                "label `{c}` has sizes {:?} and {:?}",
                dim(&l, c),
                dim(&r, c)
            ));
        }
    }
    let extent = |t: &(String, Vec<char>, Vec<i64>), cs: &[char]| -> i64 {
        cs.iter().filter_map(|&c| dim(t, c)).product()
    };
    let (b, m, k, n) = (
        extent(&l, &batch),
        extent(&l, &free_l),
        extent(&l, &contracted),
        extent(&r, &free_r),
    );
    let arrange = |t: &(String, Vec<char>, Vec<i64>), order: Vec<char>, shape: [i64; 3]| {
        let perm: Vec<i64> = order
            .iter()
            .filter_map(|c| t.1.iter().position(|x| x == c).map(|p| p as i64))
            .collect();
        format!(
            "reshape(transpose({}, axes={}), newshape={})",
            t.0,
            list(&perm),
            list(&shape)
        )
    };
    let lm = arrange(
        &l,
        [batch.clone(), free_l.clone(), contracted.clone()].concat(),
        [b, m, k],
    );
    let rm = arrange(
        &r,
        [batch.clone(), free_r.clone(), contracted].concat(),
        [b, n, k],
    );
    let labels: Vec<char> = [batch.clone(), free_l.clone(), free_r.clone()].concat();
    let shape: Vec<i64> = batch
        .iter()
        .chain(&free_l)
        .map(|&c| dim(&l, c).unwrap_or(1))
        .chain(free_r.iter().map(|&c| dim(&r, c).unwrap_or(1)))
        .collect();
    let expr = format!(
        "reshape(nn.batch_matmul({lm}, {rm}, transpose_a=False, transpose_b=True), newshape={})",
        list(&shape)
    );
    Ok((expr, labels, shape))
}

/// `GatherND(data, indices)` with `batch_dims`: each index tuple (the indices' last axis, `M`
/// long; negatives count from the end) made one position of the data's batch and indexed
/// axes flattened together, then a `take` along that flattened axis.
pub(super) fn gather_nd(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, String> {
    let (x, idx) = (g.input(node, 0)?, g.input(node, 1)?);
    let (r, q) = (x.shape.len(), idx.shape.len());
    let b = usize::try_from(a.int("batch_dims", 0)?).map_err(|_| "negative batch_dims")?;
    let m = idx.shape.last().copied().unwrap_or(0);
    if q == 0 || b >= q || m < 1 || b as i64 + m > r as i64 || idx.shape[..b] != x.shape[..b] {
        return Err(format!(
            "indices {:?} for data {:?} with batch_dims {b}",
            idx.shape, x.shape
        ));
    }
    let m = m as usize;
    let inner: i64 = x.shape[b..b + m].iter().product();
    let rest = &x.shape[b + m..];
    let batch: i64 = x.shape[..b].iter().product();
    let flat_shape: Vec<i64> = std::iter::once(batch * inner)
        .chain(rest.iter().copied())
        .collect();
    let data = format!("reshape({}, newshape={})", x.expr, list(&flat_shape));
    // Σ_k index_k · stride_k over the indexed axes, each index wrapped if negative.
    let i = format!("cast({}, dtype=\"int64\")", idx.expr);
    let mut terms = Vec::new();
    for k in 0..m {
        let n = x.shape[b + k];
        let stride: i64 = x.shape[b + k + 1..b + m].iter().product();
        let c = format!("take({i}, {k}, axis=-1)");
        let wrapped = format!("where(less({c}, 0i64), add({c}, {n}i64), {c})");
        terms.push(format!("multiply({wrapped}, {stride}i64)"));
    }
    let mut flat = terms
        .into_iter()
        .reduce(|acc, t| format!("add({acc}, {t})"))
        .unwrap_or_default();
    if b > 0 {
        // Each position's batch, as an offset of `inner` per batch element: a constant of
        // one element per batch element.
        if batch > 1 << 24 {
            return Err(format!("{batch} batch elements (at most 2^24)"));
        }
        let oshape: Vec<i64> = idx.shape[..b]
            .iter()
            .copied()
            .chain(std::iter::repeat_n(1, q - 1 - b))
            .collect();
        let offsets =
            g.int64_constant("gather_nd_offsets", &oshape, (0..batch).map(|p| p * inner))?;
        flat = format!("add({flat}, {})", offsets.expr);
    }
    let shape: Vec<i64> = idx.shape[..q - 1].iter().chain(rest).copied().collect();
    Ok(g.bind(format!("take({data}, {flat}, axis=0)"), shape, x.dtype))
}

/// `TopK` with a constant `k` (at most 256): `k` rounds of `argmax` (`argmin` when not
/// `largest`) along the axis, each taking the value there and masking it out, so the values
/// come sorted and ties go to the lower index, as ONNX specifies.
pub(super) fn top_k(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Vec<Value>, String> {
    let x = g.input(node, 0)?;
    let k = match ints_of(&g.input(node, 1)?).as_deref() {
        Some(&[k]) => k,
        _ => return Err("k is not a constant scalar".into()),
    };
    let rank = x.shape.len();
    let ax = axis(a.int("axis", -1)?, rank)?;
    let n = x.shape[ax];
    if !(1..=256.min(n)).contains(&k) || n > 1 << 24 {
        return Err(format!(
            "k = {k} for an axis of {n} (k from 1 to 256, axes up to 2^24)"
        ));
    }
    let largest = a.int("largest", 1)? != 0;
    let (pick, worst) = if largest {
        ("argmax", extreme(x.dtype, false))
    } else {
        ("argmin", extreme(x.dtype, true))
    };
    // The positions along the axis, broadcast over the axes after it.
    let positions = axis_positions(g, "top_k_positions", n, rank - ax - 1)?;
    let mut one = x.shape.clone();
    one[ax] = 1;
    let (mut values, mut indices) = (Vec::new(), Vec::new());
    let mut cur = x.clone();
    for t in 0..k {
        let i = g.bind(
            format!(
                "cast({pick}({}, axis=[{ax}], keepdims=True), dtype=\"int64\")",
                cur.expr
            ),
            one.clone(),
            DType::I64,
        );
        values.push(format!("gather({}, {}, axis={ax})", x.expr, i.expr));
        indices.push(i.expr.clone());
        if t + 1 < k {
            cur = g.bind(
                format!(
                    "where(equal({}, {}), {worst}, {})",
                    positions.expr, i.expr, cur.expr
                ),
                x.shape.clone(),
                x.dtype,
            );
        }
    }
    let mut shape = x.shape.clone();
    shape[ax] = k;
    let join = |g: &mut Graph, items: &[String], dtype| {
        g.bind(
            format!("concatenate(({},), axis={ax})", items.join(", ")),
            shape.clone(),
            dtype,
        )
    };
    let v = join(g, &values, x.dtype);
    let i = join(g, &indices, DType::I64);
    Ok(vec![v, i])
}

/// The value that never wins a `TopK` round, as Relay text: the lowest of `dtype` for
/// `argmax`, the highest (`high`) for `argmin` (a float's infinity is written as its largest
/// finite value).
/// `v` as a Relay literal of `dtype` (`0f`, `1i64`).
fn literal(dtype: DType, v: f64) -> String {
    if dtype.is_float() {
        super::float_text(v, dtype)
    } else {
        format!("{}{}", v as i64, super::slice::int_suffix(dtype))
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
pub(super) fn scatter_nd(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, String> {
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
        return Err(bad());
    }
    let q = q as usize;
    let rest = &x.shape[q..];
    if upd.shape != [lead, rest].concat() || upd.dtype != x.dtype || x.dtype == DType::BOOL {
        return Err(bad());
    }
    let (u, m): (i64, i64) = (lead.iter().product(), x.shape[..q].iter().product());
    let tail: i64 = rest.iter().product();
    if u.saturating_mul(m).saturating_mul(tail) > SCATTER_LIMIT {
        return Err(format!("{}: too large to scatter", bad()));
    }
    // Linear slice positions of the tuples, negative indices wrapped.
    let dims = g.int64_constant("scatter_dims", &[q as i64], x.shape[..q].iter().copied())?;
    let strides: Vec<i64> = (0..q).map(|d| x.shape[d + 1..q].iter().product()).collect();
    let strides = g.int64_constant("scatter_strides", &[q as i64], strides.into_iter())?;
    let i = format!("cast({}, dtype=\"int64\")", idx.expr);
    let wrapped = format!("where(less({i}, 0i64), add({i}, {}), {i})", dims.expr);
    let linear = format!(
        "reshape(sum(multiply({wrapped}, {}), axis=[-1]), newshape=[{u}, 1])",
        strides.expr
    );
    let positions = g.int64_constant("scatter_positions", &[m], 0..m)?;
    let eq = g.bind(
        format!("equal({linear}, {})", positions.expr),
        vec![u, m],
        DType::BOOL,
    );
    let ones = vec![1; rest.len()];
    let at = |first: &[i64]| list(&[first, &ones].concat());
    let slices = |first: &[i64]| list(&[first, rest].concat());
    let mask = format!("reshape({}, newshape={})", eq.expr, at(&[u, m]));
    let updates = format!("reshape({}, newshape={})", upd.expr, slices(&[u, 1]));
    let dt = x.dtype;
    let reduce =
        |f: &str, neutral: String| format!("{f}(where({mask}, {updates}, {neutral}), axis=[0])");
    let reduction = a.string("reduction", "none")?;
    let combined = match reduction.as_str() {
        "none" | "add" => reduce("sum", literal(dt, 0.0)),
        "mul" => reduce("prod", literal(dt, 1.0)),
        "max" => reduce("max", extreme(dt, false)),
        "min" => reduce("min", extreme(dt, true)),
        other => return Err(format!("reduction `{other}`")),
    };
    let hit = format!(
        "reshape(greater(sum(cast({}, dtype=\"int32\"), axis=[0]), 0), newshape={})",
        eq.expr,
        at(&[m])
    );
    let d = format!("reshape({}, newshape={})", x.expr, slices(&[m]));
    let out = match reduction.as_str() {
        "none" => format!("where({hit}, {combined}, {d})"),
        "add" => format!("add({d}, {combined})"),
        "mul" => format!("multiply({d}, {combined})"),
        "max" => format!("where({hit}, maximum({d}, {combined}), {d})"),
        _ => format!("where({hit}, minimum({d}, {combined}), {d})"),
    };
    let shape = x.shape.clone();
    Ok(g.bind(
        format!("reshape({out}, newshape={})", list(&shape)),
        shape,
        dt,
    ))
}

/// `Trilu(x, k)`: the upper (`upper` = 1) or lower triangle of the last two axes, from
/// diagonal `k` (a constant; above the main diagonal when positive), the rest zero. A mask
/// constant of the two axes selects (`torch.triu`/`tril`, causal masks).
pub(super) fn trilu(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, String> {
    let x = g.input(node, 0)?;
    let k = match g.optional_input(node, 1)? {
        None => 0,
        Some(k) => match ints_of(&k).as_deref() {
            Some(&[k]) => k,
            _ => return Err("k is not a constant integer".into()),
        },
    };
    let &[.., n, m] = x.shape.as_slice() else {
        return Err(format!(
            "input of shape {:?}: rank 2 or more is needed",
            x.shape
        ));
    };
    if n.saturating_mul(m) > 1 << 26 {
        return Err(format!("a {n}×{m} triangle is too large"));
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
    let mask = g.new_constant("trilu_mask", mask);
    let e = &x.expr;
    let shape = x.shape.clone();
    Ok(g.bind(
        format!("where({}, {e}, zeros_like({e}))", mask.expr),
        shape,
        x.dtype,
    ))
}

/// `EyeLike(x)`: a constant of `x`'s 2-D shape, ones on diagonal `k`, zeros elsewhere, of
/// `dtype` (an ONNX element type) or `x`'s.
pub(super) fn eye_like(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, String> {
    let x = g.input(node, 0)?;
    let &[n, m] = x.shape.as_slice() else {
        return Err(format!("input of shape {:?}: rank 2 is needed", x.shape));
    };
    if n.saturating_mul(m) > 1 << 26 {
        return Err(format!("a {n}×{m} identity is too large"));
    }
    let dtype = match a.int("dtype", -1)? {
        -1 => x.dtype,
        code => crate::tensor::dtype(code as i32)
            .ok_or_else(|| format!("element type {code} is not supported"))?,
    };
    let k = a.int("k", 0)?;
    let values: Vec<f64> = (0..n)
        .flat_map(|i| (0..m).map(move |j| f64::from(u8::from(j - i == k))))
        .collect();
    let eye = NDArray::from_f64_slice(dtype, &[n, m], &values).map_err(|e| e.to_string())?;
    Ok(g.new_constant("eye", eye))
}

fn extreme(dtype: DType, high: bool) -> String {
    if dtype.is_float() {
        let v = if high {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        };
        return super::float_text(v, dtype);
    }
    let bits = dtype.bits as u32;
    let signed = dtype.is_int();
    let v: i128 = match (signed, high) {
        (true, true) => (1i128 << (bits - 1)) - 1,
        (true, false) => -(1i128 << (bits - 1)),
        (false, true) => (1i128 << bits) - 1,
        (false, false) => 0,
    };
    format!("{v}{}", super::slice::int_suffix(dtype))
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
) -> Result<Value, String> {
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
        ));
    }
    let reduction = a.string("reduction", "none")?;
    // The positions of the axis, lining up with the axis after the updates'.
    let positions = axis_positions(g, "scatter_positions", n, r - k - 1)?;
    let i = format!("cast({}, dtype=\"int64\")", idx.expr);
    let wrapped = format!("where(less({i}, 0i64), add({i}, {n}i64), {i})");
    let mut eshape = idx.shape.clone();
    eshape.insert(k + 1, n);
    let eq = g.bind(
        format!(
            "equal(expand_dims({wrapped}, axis={}), {})",
            k + 1,
            positions.expr
        ),
        eshape,
        DType::BOOL,
    );
    let u = format!("expand_dims({}, axis={})", upd.expr, k + 1);
    let dt = x.dtype;
    let lit = |v: f64| literal(dt, v);
    // Reduced over the updates (axis k): the result has the axis as long as the data's.
    let reduce =
        |f: &str, neutral: String| format!("{f}(where({}, {u}, {neutral}), axis=[{k}])", eq.expr);
    let combined = match reduction.as_str() {
        "none" | "add" => reduce("sum", lit(0.0)),
        "mul" => reduce("prod", lit(1.0)),
        "max" => reduce("max", extreme(dt, false)),
        "min" => reduce("min", extreme(dt, true)),
        other => return Err(format!("reduction `{other}`")),
    };
    let hit = format!(
        "greater(sum(cast({}, dtype=\"int32\"), axis=[{k}]), 0)",
        eq.expr
    );
    // Both padded with nothing-landed to the data's shape where the indices are shorter.
    let mut short = idx.shape.clone();
    short[k] = n;
    let pad = |e: String, value: &str| {
        if short == x.shape {
            return e;
        }
        let width: Vec<String> = (0..r).map(|d| list(&[0, x.shape[d] - short[d]])).collect();
        format!("nn.pad({e}, {value}, pad_width=[{}])", width.join(", "))
    };
    let combined = pad(combined, &lit(0.0));
    let hit = pad(hit, "False");
    let d = &x.expr;
    let out = match reduction.as_str() {
        "none" => format!("where({hit}, {combined}, {d})"),
        "add" => format!("where({hit}, add({d}, {combined}), {d})"),
        "mul" => format!("where({hit}, multiply({d}, {combined}), {d})"),
        "max" => format!("where({hit}, maximum({d}, {combined}), {d})"),
        _ => format!("where({hit}, minimum({d}, {combined}), {d})"),
    };
    Ok(g.bind(out, x.shape.clone(), dt))
}
