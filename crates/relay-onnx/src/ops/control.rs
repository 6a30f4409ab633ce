//! Control flow: `If` as Relay's `if` over its two branches, `Loop` and `Scan` as local
//! tail-recursive functions carrying the loop's values (the VM runs them in constant frames).
//!
//! A body is imported as a nested block ([`Graph::subgraph`]) that reads the enclosing graphs'
//! values directly (a Relay closure captures them). Scan outputs are accumulated along a new
//! first axis of dynamic length (`Tensor[(?, ...)]`, grown by `concatenate` each iteration)
//! and, when the iteration count is known at import (a `Scan`, a `Loop` with a constant trip
//! count and no condition), reshaped to it at the end so that later nodes see static shapes.

use crate::error::ConvertError;
use relay_ir::{Attrs as IrAttrs, Binding, BindingKind, Expr, ExprKind, Function, Span, Var};
use relay_runtime::DType;

use crate::attrs::{Attrs, axis};
use crate::builder::{Value, attr, block, floats_of, ints_of, tuple};
use crate::graph::{Graph, Sequence, type_text};
use crate::proto::{GraphProto, NodeProto, attribute_type as at};
use crate::symbolic;

/// A graph attribute of `node`.
fn graph_attr<'a>(node: &'a NodeProto, name: &str) -> Result<&'a GraphProto, ConvertError> {
    node.attribute
        .iter()
        .find(|a| a.name == name && (a.r#type == at::GRAPH || a.r#type == 0))
        .and_then(|a| a.g.as_ref())
        .ok_or_else(|| ConvertError::from(format!("attribute `{name}` (a graph) is missing")))
}

/// `v` as a scalar (a one-element tensor reshaped to `()`).
fn scalar(g: &mut Graph, v: &Value, what: &str) -> Result<Value, ConvertError> {
    match symbolic::product(&v.shape) {
        1 if v.shape.is_empty() => Ok(v.clone()),
        1 => g.call("reshape", &[v], &[("newshape", attr::ints(&[]))]),
        _ => Err(format!("{what} of shape {:?} is not one element", v.shape).into()),
    }
}

/// What `build` computes, in a nested block of its own: the block's bindings and the result.
/// The block is closed whether `build` succeeds or not.
fn in_block<T>(
    g: &mut Graph,
    build: impl FnOnce(&mut Graph) -> Result<T, ConvertError>,
) -> Result<(Vec<Binding>, T), ConvertError> {
    g.open();
    let result = build(g);
    let bindings = g.close();
    result.map(|v| (bindings, v))
}

/// Imports `body` with `inputs` into the open block; its outputs.
fn import(
    g: &mut Graph,
    body: &GraphProto,
    inputs: Vec<Value>,
) -> Result<Vec<Value>, ConvertError> {
    let (bindings, outputs) = g.subgraph(body, inputs)?;
    for b in bindings {
        g.push(b);
    }
    Ok(outputs)
}

/// `expr`, a tuple of values of these shapes and types (one value alone: itself), bound
/// field by field.
fn bind_fields(g: &mut Graph, expr: Expr, shapes: Vec<(Vec<i64>, DType)>) -> Vec<Value> {
    if let [(shape, dtype)] = shapes.as_slice() {
        return vec![g.bind_value(expr, shape.clone(), *dtype)];
    }
    let tuple = g.bind(expr);
    g.fields(&tuple, shapes)
}

/// The shapes and types of `vs`.
fn types_of<'a>(vs: impl IntoIterator<Item = &'a Value>) -> Vec<(Vec<i64>, DType)> {
    vs.into_iter().map(|v| (v.shape.clone(), v.dtype)).collect()
}

/// `If`: the branch a constant condition takes, inline; otherwise `if` over both branches,
/// whose outputs must agree in shape and type.
pub(super) fn if_(g: &mut Graph, node: &NodeProto) -> Result<Vec<Value>, ConvertError> {
    let cond = g.input(node, 0)?;
    let (then_g, else_g) = (
        graph_attr(node, "then_branch")?,
        graph_attr(node, "else_branch")?,
    );
    if let Some(c) = floats_of(&cond) {
        let [c] = c.as_slice() else {
            return Err(format!("the condition has {} elements, not 1", c.len()).into());
        };
        let taken = if *c != 0.0 { then_g } else { else_g };
        return import(g, taken, Vec::new());
    }
    let cond = scalar(g, &cond, "the condition")?;
    let (then_bindings, then_out) = g.subgraph(then_g, Vec::new())?;
    let (else_bindings, else_out) = g.subgraph(else_g, Vec::new())?;
    if then_out.len() != else_out.len() {
        return Err(format!(
            "the branches have {} and {} outputs",
            then_out.len(),
            else_out.len()
        )
        .into());
    }
    for (i, (t, e)) in then_out.iter().zip(&else_out).enumerate() {
        if (&t.shape, t.dtype) != (&e.shape, e.dtype) {
            return Err(format!(
                "output {i} is {} in one branch and {} in the other",
                type_text(&t.shape, t.dtype),
                type_text(&e.shape, e.dtype)
            )
            .into());
        }
    }
    let exprs = |vs: &[Value]| vs.iter().map(|v| v.expr.clone()).collect::<Vec<_>>();
    let expr = Expr::new(
        ExprKind::If {
            cond: cond.expr,
            then_branch: block(then_bindings, tuple(exprs(&then_out))),
            else_branch: block(else_bindings, tuple(exprs(&else_out))),
        },
        Span::DUMMY,
    );
    Ok(bind_fields(g, expr, types_of(&then_out)))
}

/// A local tail-recursive function: while its guard holds, the body's bindings then a call
/// with the next values; otherwise the carried values and the accumulators.
struct Recursion {
    /// Parameters (the iteration counter first), as variables and as values.
    params: Vec<(Var, Value)>,
    /// The initial values of the parameters before the accumulators (which start empty).
    init: Vec<Value>,
    /// The next value of each parameter, computed in the body.
    next: Vec<Value>,
    /// How many leading parameters (counter, condition) are not returned.
    hidden: usize,
    /// How many trailing parameters are accumulators.
    accumulators: usize,
}

impl Recursion {
    fn new(hidden: usize) -> Recursion {
        Recursion {
            params: Vec::new(),
            init: Vec::new(),
            next: Vec::new(),
            hidden,
            accumulators: 0,
        }
    }

    /// A parameter of `shape` and `dtype` named after `hint`, starting at `init`.
    fn param(
        &mut self,
        g: &mut Graph,
        hint: &str,
        shape: &[i64],
        dtype: DType,
        init: Value,
    ) -> Value {
        let (var, v) = g.local(hint, shape, dtype);
        self.params.push((var, v.clone()));
        self.init.push(init);
        v
    }

    /// The iteration counter, from 0, and (in the open block) its next value.
    fn counter(&mut self, g: &mut Graph) -> Result<Value, ConvertError> {
        let zero = g.int(0, DType::I64)?;
        Ok(self.param(g, "i", &[], DType::I64, zero))
    }

    /// The counter's next value `i + 1`, in the open block.
    fn count(&self, g: &mut Graph) -> Result<Value, ConvertError> {
        let one = g.int(1, DType::I64)?;
        g.call("add", &[&self.params[0].1, &one], &[])
    }

    /// An accumulator of the per-iteration values `y` (`Tensor[(?, y...)]`), stacked along a
    /// new first axis; its next value is grown in the open block.
    fn accumulate(&mut self, g: &mut Graph, y: &Value) -> Result<(), ConvertError> {
        let shape = [[symbolic::ANY].as_slice(), &y.shape].concat();
        let (var, acc) = g.local("acc", &shape, y.dtype);
        let row = g.call("expand_dims", &[y], &[("axis", attr::int(0))])?;
        let grown = g.call_tuple("concatenate", &[&acc, &row], &[("axis", attr::int(0))])?;
        self.params.push((var, acc));
        self.next.push(grown);
        self.accumulators += 1;
        Ok(())
    }

    /// Binds the function, whose body is `guard`'s bindings then `if (guard) { body; again }
    /// else { results }`, and its call on the initial values (the accumulators' empty ones
    /// made here); the values returned, carried ones then accumulated.
    fn emit(
        self,
        g: &mut Graph,
        (guard_bindings, guard): (Vec<Binding>, Value),
        body: Vec<Binding>,
    ) -> Result<(Vec<Value>, Vec<Value>), ConvertError> {
        let mut init = self.init;
        for (_, acc) in &self.params[self.params.len() - self.accumulators..] {
            let empty: Vec<i64> = [[0].as_slice(), &acc.shape[1..]].concat();
            let attrs = [
                ("shape", attr::ints(&empty)),
                ("dtype", attr::str(acc.dtype)),
            ];
            init.push(g.call("zeros", &[], &attrs)?);
        }
        let f = g.local_untyped("loop");
        let returned: Vec<&Value> = self.params[self.hidden..].iter().map(|(_, v)| v).collect();
        let again = Expr::call(
            Expr::var(&f),
            self.next.iter().map(|v| v.expr.clone()).collect(),
        );
        let results = tuple(returned.iter().map(|v| v.expr.clone()).collect());
        let branch = Expr::new(
            ExprKind::If {
                cond: guard.expr,
                then_branch: block(body, again),
                else_branch: results,
            },
            Span::DUMMY,
        );
        let function = Function {
            type_params: Vec::new(),
            params: self.params.iter().map(|(var, _)| var.clone()).collect(),
            ret_type: None,
            body: block(guard_bindings, branch),
            attrs: IrAttrs::empty(),
        };
        g.push(Binding {
            var: f.clone(),
            value: Expr::new(ExprKind::Function(function), Span::DUMMY),
            kind: BindingKind::Let,
        });
        let call = Expr::call(Expr::var(&f), init.iter().map(|v| v.expr.clone()).collect());
        let mut carried = bind_fields(g, call, types_of(returned));
        let accumulated = carried.split_off(carried.len() - self.accumulators);
        Ok((carried, accumulated))
    }
}

/// The carried values' checks: each body output keeps its input's shape and type.
fn same_types(carried: &[Value], outputs: &[Value]) -> Result<(), ConvertError> {
    for (i, (c, o)) in carried.iter().zip(outputs).enumerate() {
        // A dynamic dimension may leave as another symbol: both are `?` to Relay.
        let dims_agree = c.shape.len() == o.shape.len()
            && c.shape
                .iter()
                .zip(&o.shape)
                .all(|(&a, &b)| a == b || a < 0 && b < 0);
        if !dims_agree || c.dtype != o.dtype {
            return Err(format!(
                "loop-carried value {i} enters as {} and leaves the body as {}",
                type_text(&c.shape, c.dtype),
                type_text(&o.shape, o.dtype)
            )
            .into());
        }
    }
    Ok(())
}

/// The body's outputs `[cond?, carried..., scan...]` split, checked against `carried`.
fn body_outputs<'a>(
    outputs: &'a [Value],
    skip: usize,
    carried: &[Value],
) -> Result<(&'a [Value], &'a [Value]), ConvertError> {
    let rest = outputs
        .get(skip..)
        .filter(|r| r.len() >= carried.len())
        .ok_or_else(|| {
            format!(
                "the body has {} outputs, fewer than its {} carried values",
                outputs.len(),
                carried.len()
            )
        })?;
    let (next, scans) = rest.split_at(carried.len());
    same_types(carried, next)?;
    Ok((next, scans))
}

/// The final value of scan output `acc` after `count` iterations (when known): reshaped to
/// its static length.
fn stacked(g: &mut Graph, acc: Value, count: Option<i64>) -> Result<Value, ConvertError> {
    match count {
        Some(n) => {
            let shape: Vec<i64> = [[n].as_slice(), &acc.shape[1..]].concat();
            g.reshape(&acc, shape)
        }
        None => Ok(acc),
    }
}

/// `Loop(M, cond, v...)`: while `i < M` (when given) and the condition holds (when given),
/// the body computes `(cond, v..., scan...)` from `(i, cond, v...)`.
pub(super) fn loop_(g: &mut Graph, node: &NodeProto) -> Result<Vec<Value>, ConvertError> {
    let body = graph_attr(node, "body")?;
    let max = g.optional_input(node, 0)?;
    let cond = g.optional_input(node, 1)?;
    // Carried sequences (appended to in the body: scan outputs, `sequence.rs`) and values.
    let sequences: Vec<(usize, Sequence)> = (2..node.input.len())
        .filter_map(|i| g.sequence(&node.input[i]).map(|s| (i - 2, s.clone())))
        .collect();
    let is_sequence = |k: usize| sequences.iter().any(|(j, _)| *j == k);
    let carried: Vec<Value> = (2..node.input.len())
        .filter(|&i| !is_sequence(i - 2))
        .map(|i| g.input(node, i))
        .collect::<Result<_, _>>()?;
    let max = max.map(|m| scalar(g, &m, "the trip count")).transpose()?;
    let cond_init = match &cond {
        Some(c) => scalar(g, c, "the condition")?,
        None => g.int(1, DType::BOOL)?,
    };
    let trips = max
        .as_ref()
        .and_then(ints_of)
        .and_then(|v| v.first().copied());
    let always = |c: &Value| ints_of(c).is_some_and(|v| v == [1]);
    let cond_always = cond.as_ref().is_none_or(|_| always(&cond_init));
    let mut r = Recursion::new(2);
    let it = r.counter(g)?;
    let cond_p = r.param(g, "c", &[], DType::BOOL, cond_init);
    let vs: Vec<Value> = carried
        .iter()
        .map(|c| r.param(g, "v", &c.shape, c.dtype, c.clone()))
        .collect();
    let inputs = [vec![it.clone(), cond_p.clone()], vs].concat();
    let positions: Vec<usize> = sequences.iter().map(|(k, _)| k + 2).collect();
    let (lines, appended) = in_block(g, |g| {
        let imported = g.subgraph_carrying(body, inputs, &positions)?;
        for b in imported.bindings {
            g.push(b);
        }
        let outputs = with_appended_last(imported.outputs, &imported.appended, &positions)?;
        let (next, scans) = body_outputs(&outputs, 1, &carried)?;
        let cond_next = match (&cond, outputs.first()) {
            (None, _) => cond_p.clone(),
            (Some(_), Some(c)) if c.shape.is_empty() => c.clone(),
            (Some(_), Some(c)) if c.shape == [1] => scalar(g, c, "the body's condition")?,
            (Some(_), _) => return Err("the body's condition output is not one element".into()),
        };
        let it_next = r.count(g)?;
        r.next = [vec![it_next, cond_next], next.to_vec()].concat();
        scans.iter().try_for_each(|y| r.accumulate(g, y))?;
        Ok((positions.len(), always(&r.next[1])))
    })?;
    let (appended, cond_stays) = appended;
    // A constant trip count, and a condition that is absent or constantly true: the number
    // of iterations is known.
    let count = trips
        .filter(|_| cond_always && (cond.is_none() || cond_stays))
        .map(|n| n.max(0));
    let guard = in_block(g, |g| match &max {
        Some(m) => {
            let more = g.call("less", &[&it, m], &[])?;
            g.call("logical_and", &[&cond_p, &more], &[])
        }
        None => Ok(cond_p.clone()),
    })?;
    let (mut out, accumulated) = r.emit(g, guard, lines)?;
    let mut scans = Vec::with_capacity(accumulated.len());
    for acc in accumulated {
        scans.push(stacked(g, acc, count)?);
    }
    // The carried sequences' stacks come last among the scan outputs: back in their places.
    let grown = scans.split_off(scans.len() - appended);
    for ((k, initial), stack) in sequences.into_iter().zip(grown) {
        let stack = match initial {
            Sequence::Stacked(s) => {
                g.call_tuple("concatenate", &[&s, &stack], &[("axis", attr::int(0))])?
            }
            _ => stack,
        };
        if let Some(name) = node.output.get(k).filter(|n| !n.is_empty()) {
            g.define_sequence(name, Sequence::Stacked(stack.clone()));
        }
        out.insert(k, stack);
    }
    out.extend(scans);
    Ok(out)
}

/// A body's outputs `[cond, carried..., scan...]` with the elements appended to carried
/// sequences (at `positions` of the body's inputs, so `position - 1` of its outputs) moved
/// after the scan outputs, as more scan outputs.
fn with_appended_last(
    outputs: Vec<Value>,
    appended: &[bool],
    positions: &[usize],
) -> Result<Vec<Value>, ConvertError> {
    let (mut kept, mut moved) = (Vec::new(), Vec::new());
    for (j, v) in outputs.into_iter().enumerate() {
        let carries = positions.contains(&(j + 1));
        match (carries, appended.get(j).copied().unwrap_or(false)) {
            (true, true) => moved.push(v),
            (false, false) => kept.push(v),
            (true, false) => {
                return Err(format!(
                    "body output {j} is a sequence the loop carries but does not append to"
                )
                .into());
            }
            (false, true) => return Err(format!("body output {j} is a sequence").into()),
        }
    }
    kept.extend(moved);
    Ok(kept)
}

/// `Scan` (opset 9 on): the body maps `(state..., x_t...)` to `(state..., y_t...)` along axis
/// `scan_input_axes` of each scan input (backwards where `scan_input_directions` says 1);
/// the `y_t` are stacked along `scan_output_axes` (reversed where `scan_output_directions`
/// says 1).
pub(super) fn scan(g: &mut Graph, node: &NodeProto, a: &Attrs) -> Result<Vec<Value>, ConvertError> {
    if g.opset < 9 {
        return Err("`Scan` before opset 9 (with a batch axis) is not supported".into());
    }
    let body = graph_attr(node, "body")?;
    let k = usize::try_from(a.int("num_scan_inputs", -1)?)
        .map_err(|_| "attribute `num_scan_inputs` is missing".to_string())?;
    let all: Vec<Value> = (0..node.input.len())
        .map(|i| g.input(node, i))
        .collect::<Result<_, _>>()?;
    let n = all
        .len()
        .checked_sub(k)
        .ok_or("fewer inputs than `num_scan_inputs`")?;
    let (states, xs) = all.split_at(n);
    let per = |name: &str, len: usize| -> Result<Vec<i64>, ConvertError> {
        let v = a.ints(name)?.unwrap_or_else(|| vec![0; len]);
        if v.len() == len {
            Ok(v)
        } else {
            Err(format!("`{name}` has {} entries, not {len}", v.len()).into())
        }
    };
    let (in_axes, in_dirs) = (per("scan_input_axes", k)?, per("scan_input_directions", k)?);
    let mut length = None;
    let mut axes = Vec::new();
    for (x, &ax) in xs.iter().zip(&in_axes) {
        let ax = axis(ax, x.shape.len())?;
        let len = x.shape[ax];
        if *length.get_or_insert(len) != len {
            return Err(format!("scan inputs of lengths {length:?} and {len}").into());
        }
        axes.push(ax);
    }
    let length = length.ok_or("`Scan` has no scan input")?;
    let mut r = Recursion::new(1);
    let it = r.counter(g)?;
    let ss: Vec<Value> = states
        .iter()
        .map(|s| r.param(g, "v", &s.shape, s.dtype, s.clone()))
        .collect();
    let (lines, ()) = in_block(g, |g| {
        let mut inputs = ss;
        for ((x, &ax), &dir) in xs.iter().zip(&axes).zip(&in_dirs) {
            inputs.push(slice_at(g, x, ax, &it, (dir != 0).then_some(length))?);
        }
        let outputs = import(g, body, inputs)?;
        let (next, ys) = body_outputs(&outputs, 0, states)?;
        let it_next = r.count(g)?;
        r.next = [vec![it_next], next.to_vec()].concat();
        ys.iter().try_for_each(|y| r.accumulate(g, y))
    })?;
    let guard = in_block(g, |g| {
        let length = g.int(length, DType::I64)?;
        g.call("less", &[&it, &length], &[])
    })?;
    let (mut out, accs_out) = r.emit(g, guard, lines)?;
    let m = accs_out.len();
    let (out_axes, out_dirs) = (
        per("scan_output_axes", m)?,
        per("scan_output_directions", m)?,
    );
    for (acc, (&ax, &dir)) in accs_out.into_iter().zip(out_axes.iter().zip(&out_dirs)) {
        let mut y = stacked(g, acc, Some(length))?;
        if dir != 0 {
            let shape = y.shape.clone();
            y = g.call_as("reverse", &[&y], &[("axis", attr::int(0))], &shape)?;
        }
        let ax = axis(ax, y.shape.len())?;
        if ax != 0 {
            let mut perm: Vec<i64> = (1..y.shape.len() as i64).collect();
            perm.insert(ax, 0);
            let shape: Vec<i64> = perm.iter().map(|&p| y.shape[p as usize]).collect();
            y = g.call_as("transpose", &[&y], &[("axes", attr::ints(&perm))], &shape)?;
        }
        out.push(y);
    }
    Ok(out)
}

/// Slice `i` of `x` along axis `ax` (of `length` slices, counted from the end when
/// `backwards` gives it), keeping `x`'s symbols.
fn slice_at(
    g: &mut Graph,
    x: &Value,
    ax: usize,
    i: &Value,
    backwards: Option<i64>,
) -> Result<Value, ConvertError> {
    let index = match backwards {
        Some(length) => {
            let last = g.int(length - 1, DType::I64)?;
            g.call("subtract", &[&last, i], &[])?
        }
        None => i.clone(),
    };
    let mut shape = x.shape.clone();
    shape.remove(ax);
    g.call_as(
        "take",
        &[x, &index],
        &[("axis", attr::int(ax as i64))],
        &shape,
    )
}
