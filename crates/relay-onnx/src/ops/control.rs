//! Control flow: `If` as Relay's `if` over its two branches, `Loop` and `Scan` as local
//! tail-recursive functions carrying the loop's values (the VM runs them in constant frames).
//!
//! A body is imported as a nested block ([`Graph::subgraph`]) that reads the enclosing graphs'
//! values directly (a Relay closure captures them). Scan outputs are accumulated along a new
//! first axis of dynamic length (`Tensor[(?, ...)]`, grown by `concatenate` each iteration)
//! and, when the iteration count is known at import (a `Scan`, a `Loop` with a constant trip
//! count and no condition), reshaped to it at the end so that later nodes see static shapes.

use relay_runtime::DType;

use super::{Attrs, axis, ints_of, list};
use crate::graph::{Graph, Value, type_text};
use crate::proto::{GraphProto, NodeProto, attribute_type as at};

/// A graph attribute of `node`.
fn graph_attr<'a>(node: &'a NodeProto, name: &str) -> Result<&'a GraphProto, String> {
    node.attribute
        .iter()
        .find(|a| a.name == name && (a.r#type == at::GRAPH || a.r#type == 0))
        .and_then(|a| a.g.as_ref())
        .ok_or_else(|| format!("attribute `{name}` (a graph) is missing"))
}

/// `v` as a scalar (a one-element tensor reshaped to `()`).
fn scalar(g: &mut Graph, v: &Value, what: &str) -> Result<Value, String> {
    match crate::symbolic::product(&v.shape) {
        1 if v.shape.is_empty() => Ok(v.clone()),
        1 => Ok(g.bind(
            format!("reshape({}, newshape=[])", v.expr),
            Vec::new(),
            v.dtype,
        )),
        _ => Err(format!("{what} of shape {:?} is not one element", v.shape)),
    }
}

/// A block's text: `lines`, then `result`.
fn block(lines: &[String], result: &str) -> String {
    let mut out = String::from("{\n");
    for line in lines {
        out.push_str(&format!("    {line};\n"));
    }
    out.push_str(&format!("    {result}\n  }}"));
    out
}

/// The text of a tuple of `exprs` (one expression alone is itself).
fn tuple(exprs: &[String]) -> String {
    match exprs {
        [one] => one.clone(),
        _ => format!("({})", exprs.join(", ")),
    }
}

/// The fields of `v`, of these shapes and types: `v` itself when there is one.
fn fields(g: &mut Graph, v: Value, shapes: Vec<(Vec<i64>, DType)>) -> Vec<Value> {
    if let [(shape, dtype)] = shapes.as_slice() {
        return vec![Value {
            shape: shape.clone(),
            dtype: *dtype,
            ..v
        }];
    }
    shapes
        .into_iter()
        .enumerate()
        .map(|(i, (shape, dtype))| g.bind(format!("{}.{i}", v.expr), shape, dtype))
        .collect()
}

/// `If`: the branch a constant condition takes, inline; otherwise `if` over both branches,
/// whose outputs must agree in shape and type.
pub(super) fn if_(g: &mut Graph, node: &NodeProto) -> Result<Vec<Value>, String> {
    let cond = g.input(node, 0)?;
    let (then_g, else_g) = (
        graph_attr(node, "then_branch")?,
        graph_attr(node, "else_branch")?,
    );
    if let Some(c) = super::floats_of(&cond) {
        let [c] = c.as_slice() else {
            return Err(format!("the condition has {} elements, not 1", c.len()));
        };
        let taken = if *c != 0.0 { then_g } else { else_g };
        let (lines, outputs) = g.subgraph(taken, Vec::new())?;
        for line in lines {
            g.push_line(line);
        }
        return Ok(outputs);
    }
    let cond = scalar(g, &cond, "the condition")?;
    let (then_lines, then_out) = g.subgraph(then_g, Vec::new())?;
    let (else_lines, else_out) = g.subgraph(else_g, Vec::new())?;
    if then_out.len() != else_out.len() {
        return Err(format!(
            "the branches have {} and {} outputs",
            then_out.len(),
            else_out.len()
        ));
    }
    for (i, (t, e)) in then_out.iter().zip(&else_out).enumerate() {
        if (&t.shape, t.dtype) != (&e.shape, e.dtype) {
            return Err(format!(
                "output {i} is {} in one branch and {} in the other",
                type_text(&t.shape, t.dtype),
                type_text(&e.shape, e.dtype)
            ));
        }
    }
    let exprs = |vs: &[Value]| vs.iter().map(|v| v.expr.clone()).collect::<Vec<_>>();
    let text = format!(
        "if ({}) {} else {}",
        cond.expr,
        block(&then_lines, &tuple(&exprs(&then_out))),
        block(&else_lines, &tuple(&exprs(&else_out)))
    );
    let shapes = then_out
        .iter()
        .map(|v| (v.shape.clone(), v.dtype))
        .collect();
    let r = g.bind(text, Vec::new(), DType::BOOL);
    Ok(fields(g, r, shapes))
}

/// A local tail-recursive function: while `guard` holds, the body's lines then a call with
/// the next values; otherwise the carried values and the accumulators.
struct Recursion {
    /// Parameters (the iteration counter first), with their next and initial values.
    params: Vec<Value>,
    next: Vec<String>,
    init: Vec<String>,
    /// How many leading parameters (counter, condition) are not returned.
    hidden: usize,
    /// How many trailing parameters are accumulators.
    accumulators: usize,
    /// The condition of one more iteration, over the parameters.
    guard: String,
    lines: Vec<String>,
}

impl Recursion {
    /// A parameter `p` starting at `init` and becoming `next`.
    fn param(&mut self, p: Value, next: String, init: String) {
        self.params.push(p);
        self.next.push(next);
        self.init.push(init);
    }

    /// An accumulator of the per-iteration values `y`, stacked along a new first axis.
    fn accumulate(&mut self, g: &mut Graph, y: &Value) {
        let (acc, empty, grown) = accumulator(g, y);
        self.param(acc, grown, empty);
        self.accumulators += 1;
    }

    /// Binds the function and its call; the values returned, carried ones then accumulated.
    fn emit(self, g: &mut Graph) -> (Vec<Value>, Vec<Value>) {
        let f = g.fresh_local("loop");
        let params: Vec<String> = self
            .params
            .iter()
            .map(|v| format!("{}: {}", v.expr, type_text(&v.shape, v.dtype)))
            .collect();
        let returned = &self.params[self.hidden..];
        let results: Vec<String> = returned.iter().map(|v| v.expr.clone()).collect();
        let call = format!("{f}({})", self.next.join(", "));
        g.push_line(format!(
            "let {f} = fn ({}) {{\n  if ({}) {} else {{\n    {}\n  }}\n  }}",
            params.join(", "),
            self.guard,
            block(&self.lines, &call),
            tuple(&results)
        ));
        let r = g.bind(
            format!("{f}({})", self.init.join(", ")),
            Vec::new(),
            DType::BOOL,
        );
        let shapes = returned
            .iter()
            .map(|v| (v.shape.clone(), v.dtype))
            .collect();
        let mut carried = fields(g, r, shapes);
        let accumulated = carried.split_off(carried.len() - self.accumulators);
        (carried, accumulated)
    }
}

/// A counter parameter and the expression for its next value.
fn counter(g: &mut Graph) -> (Value, String) {
    let it = Value {
        expr: g.fresh_local("i"),
        shape: Vec::new(),
        dtype: DType::I64,
        konst: None,
        elems: None,
    };
    let next = format!("add({}, 1i64)", it.expr);
    (it, next)
}

/// A carried parameter of `v`'s type.
fn param_like(g: &mut Graph, shape: &[i64], dtype: DType) -> Value {
    Value {
        expr: g.fresh_local("v"),
        shape: shape.to_vec(),
        dtype,
        konst: None,
        elems: None,
    }
}

/// An accumulator of per-iteration values `y` (`Tensor[(?, y...)]`): its parameter, its
/// initial (empty) value and its next value.
fn accumulator(g: &mut Graph, y: &Value) -> (Value, String, String) {
    let acc = param_like(
        g,
        &[[crate::symbolic::ANY].as_slice(), &y.shape].concat(),
        y.dtype,
    );
    let empty: Vec<i64> = [[0].as_slice(), &y.shape].concat();
    let init = format!("zeros(shape={}, dtype=\"{}\")", list(&empty), y.dtype);
    let next = format!(
        "concatenate(({}, expand_dims({}, axis=0)), axis=0)",
        acc.expr, y.expr
    );
    (acc, init, next)
}

/// The carried values' checks: each body output keeps its input's shape and type.
fn same_types(carried: &[Value], outputs: &[Value]) -> Result<(), String> {
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
            ));
        }
    }
    Ok(())
}

/// The body's outputs `[cond?, carried..., scan...]` split, checked against `carried`.
fn body_outputs<'a>(
    outputs: &'a [Value],
    skip: usize,
    carried: &[Value],
) -> Result<(&'a [Value], &'a [Value]), String> {
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
fn stacked(g: &mut Graph, acc: Value, count: Option<i64>) -> Value {
    match count {
        Some(n) => {
            let shape: Vec<i64> = [[n].as_slice(), &acc.shape[1..]].concat();
            g.bind(
                format!("reshape({}, newshape={})", acc.expr, list(&shape)),
                shape,
                acc.dtype,
            )
        }
        None => acc,
    }
}

/// `Loop(M, cond, v...)`: while `i < M` (when given) and the condition holds (when given),
/// the body computes `(cond, v..., scan...)` from `(i, cond, v...)`.
pub(super) fn loop_(g: &mut Graph, node: &NodeProto) -> Result<Vec<Value>, String> {
    let body = graph_attr(node, "body")?;
    let max = g.optional_input(node, 0)?;
    let cond = g.optional_input(node, 1)?;
    let carried: Vec<Value> = (2..node.input.len())
        .map(|i| g.input(node, i))
        .collect::<Result<_, _>>()?;
    let max = max.map(|m| scalar(g, &m, "the trip count")).transpose()?;
    let cond_init = match &cond {
        Some(c) => scalar(g, c, "the condition")?.expr,
        None => "True".into(),
    };
    // A constant trip count without a condition: the number of iterations is known.
    let count = match (&max, &cond) {
        (Some(m), None) => ints_of(m)
            .and_then(|v| v.first().copied())
            .map(|n| n.max(0)),
        _ => None,
    };
    let (it, it_next) = counter(g);
    let cond_p = param_like(g, &[], DType::BOOL);
    let vs: Vec<Value> = carried
        .iter()
        .map(|v| param_like(g, &v.shape, v.dtype))
        .collect();
    let inputs = [vec![it.clone(), cond_p.clone()], vs.clone()].concat();
    let (lines, outputs) = g.subgraph(body, inputs)?;
    let (next, scans) = body_outputs(&outputs, 1, &carried)?;
    let cond_next = match (&cond, outputs.first()) {
        (None, _) => cond_p.expr.clone(),
        (Some(_), Some(c)) if c.shape.is_empty() => c.expr.clone(),
        (Some(_), Some(c)) if c.shape == [1] => format!("reshape({}, newshape=[])", c.expr),
        (Some(_), _) => return Err("the body's condition output is not one element".into()),
    };
    let guard = match &max {
        Some(m) => format!(
            "logical_and({}, less({}, {}))",
            cond_p.expr, it.expr, m.expr
        ),
        None => cond_p.expr.clone(),
    };
    let mut r = Recursion {
        params: Vec::new(),
        next: Vec::new(),
        init: Vec::new(),
        hidden: 2,
        accumulators: 0,
        guard,
        lines,
    };
    r.param(it, it_next, "0i64".into());
    r.param(cond_p, cond_next, cond_init);
    for ((p, n), c) in vs.into_iter().zip(next).zip(&carried) {
        r.param(p, n.expr.clone(), c.expr.clone());
    }
    for y in scans {
        r.accumulate(g, y);
    }
    let (mut out, accumulated) = r.emit(g);
    for acc in accumulated {
        let v = stacked(g, acc, count);
        out.push(v);
    }
    Ok(out)
}

/// `Scan` (opset 9 on): the body maps `(state..., x_t...)` to `(state..., y_t...)` along axis
/// `scan_input_axes` of each scan input (backwards where `scan_input_directions` says 1);
/// the `y_t` are stacked along `scan_output_axes` (reversed where `scan_output_directions`
/// says 1).
pub(super) fn scan(g: &mut Graph, node: &NodeProto, a: &Attrs) -> Result<Vec<Value>, String> {
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
    let per = |name: &str, len: usize| -> Result<Vec<i64>, String> {
        let v = a.ints(name)?.unwrap_or_else(|| vec![0; len]);
        if v.len() == len {
            Ok(v)
        } else {
            Err(format!("`{name}` has {} entries, not {len}", v.len()))
        }
    };
    let (in_axes, in_dirs) = (per("scan_input_axes", k)?, per("scan_input_directions", k)?);
    let mut length = None;
    let mut slices = Vec::new();
    let (it, it_next) = counter(g);
    for (x, (&ax, &dir)) in xs.iter().zip(in_axes.iter().zip(&in_dirs)) {
        let ax = axis(ax, x.shape.len())?;
        let len = x.shape[ax];
        if *length.get_or_insert(len) != len {
            return Err(format!("scan inputs of lengths {length:?} and {len}"));
        }
        let mut shape = x.shape.clone();
        shape.remove(ax);
        let index = if dir == 0 {
            it.expr.clone()
        } else {
            format!("subtract({}i64, {})", len - 1, it.expr)
        };
        slices.push((
            format!("take({}, {index}, axis={ax})", x.expr),
            shape,
            x.dtype,
        ));
    }
    let length = length.ok_or("`Scan` has no scan input")?;
    let ss: Vec<Value> = states
        .iter()
        .map(|v| param_like(g, &v.shape, v.dtype))
        .collect();
    let mut lines = Vec::new();
    let mut inputs = ss.clone();
    for (text, shape, dtype) in slices {
        let v = param_like(g, &shape, dtype);
        lines.push(format!("let {} = {text}", v.expr));
        inputs.push(v);
    }
    let (body_lines, outputs) = g.subgraph(body, inputs)?;
    lines.extend(body_lines);
    let (next, ys) = body_outputs(&outputs, 0, states)?;
    let mut r = Recursion {
        params: Vec::new(),
        next: Vec::new(),
        init: Vec::new(),
        hidden: 1,
        accumulators: 0,
        guard: format!("less({}, {length}i64)", it.expr),
        lines,
    };
    r.param(it, it_next, "0i64".into());
    for ((p, n), s0) in ss.into_iter().zip(next).zip(states) {
        r.param(p, n.expr.clone(), s0.expr.clone());
    }
    for y in ys {
        r.accumulate(g, y);
    }
    let (mut out, accs_out) = r.emit(g);
    let m = accs_out.len();
    let (out_axes, out_dirs) = (
        per("scan_output_axes", m)?,
        per("scan_output_directions", m)?,
    );
    for (acc, (&ax, &dir)) in accs_out.into_iter().zip(out_axes.iter().zip(&out_dirs)) {
        let mut y = stacked(g, acc, Some(length));
        if dir != 0 {
            y = g.bind(
                format!("reverse({}, axis=0)", y.expr),
                y.shape.clone(),
                y.dtype,
            );
        }
        let ax = axis(ax, y.shape.len())?;
        if ax != 0 {
            let mut perm: Vec<i64> = (1..y.shape.len() as i64).collect();
            perm.insert(ax, 0);
            let shape: Vec<i64> = perm.iter().map(|&p| y.shape[p as usize]).collect();
            y = g.bind(
                format!("transpose({}, axes={})", y.expr, list(&perm)),
                shape,
                y.dtype,
            );
        }
        out.push(y);
    }
    Ok(out)
}
