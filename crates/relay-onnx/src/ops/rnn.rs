//! `LSTM`, unrolled over its static sequence (the choice for now: a sequence length known at
//! import; the recursive form for long or dynamic sequences is later work). The input
//! projection `X · Wᵀ + Wb + Rb` of all steps is one `nn.dense` over the whole sequence, hoisted
//! out of the recurrence (ONNX Runtime's fused LSTM does the same); each step then adds
//! `H · Rᵀ`, splits the four gates (ONNX's order: input, output, forget, cell) and updates
//! `C = f ⊙ C + i ⊙ g(c̃)`, `H = o ⊙ h(C)`. Forward, reverse and bidirectional; the default
//! activations (sigmoid, tanh, tanh), no clip, no peepholes, no `input_forget`, layout 0, and
//! every sequence as long as the input.

use super::{Attrs, ints_of, list};
use crate::graph::{Graph, Value};
use crate::proto::NodeProto;

/// `LSTM`'s outputs `Y`, `Y_h`, `Y_c`.
pub(super) fn lstm(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Vec<Value>, String> {
    let (x, w, r) = (g.input(node, 0)?, g.input(node, 1)?, g.input(node, 2)?);
    let hidden = a.int("hidden_size", 0)?;
    let direction = a.string("direction", "forward")?;
    if a.ints("activations").ok().flatten().is_some() || a.0.iter().any(|x| x.name == "activations")
    {
        return Err("LSTM with other activations is not supported".into());
    }
    if a.0.iter().any(|x| x.name == "clip")
        || a.int("input_forget", 0)? != 0
        || a.int("layout", 0)? != 0
    {
        return Err("LSTM with clip, input_forget or layout 1 is not supported".into());
    }
    if g.optional_input(node, 7)?.is_some() {
        return Err("LSTM with peepholes is not supported".into());
    }
    let &[seq, batch, input] = x.shape.as_slice() else {
        return Err(format!("X of shape {:?}", x.shape));
    };
    let dirs = if direction == "bidirectional" { 2 } else { 1 };
    if w.shape != [dirs, 4 * hidden, input] || r.shape != [dirs, 4 * hidden, hidden] || hidden <= 0
    {
        return Err(format!(
            "W {:?} and R {:?} for hidden_size {hidden}",
            w.shape, r.shape
        ));
    }
    if let Some(lens) = g.optional_input(node, 4)? {
        let lens = ints_of(&lens).ok_or("sequence_lens is not a constant")?;
        if lens.iter().any(|&l| l != seq) {
            return Err("sequences shorter than the input are not supported".into());
        }
    }
    let (b, h0, c0) = (
        g.optional_input(node, 3)?,
        g.optional_input(node, 5)?,
        g.optional_input(node, 6)?,
    );
    let dt = x.dtype;
    let flat = g.bind(
        format!(
            "reshape({}, newshape={})",
            x.expr,
            list(&[seq * batch, input])
        ),
        vec![seq * batch, input],
        dt,
    );
    let mut ys = Vec::new();
    let (mut hs, mut cs) = (Vec::new(), Vec::new());
    for d in 0..dirs {
        let reverse = direction == "reverse" || d == 1;
        let take = |g: &mut Graph, v: &Value, shape: Vec<i64>| {
            g.bind(
                format!(
                    "reshape(take({}, {d}, axis=0), newshape={})",
                    v.expr,
                    list(&shape)
                ),
                shape,
                dt,
            )
        };
        let (wd, rd) = (
            take(g, &w, vec![4 * hidden, input]),
            take(g, &r, vec![4 * hidden, hidden]),
        );
        // All steps' input projection at once, with both biases.
        let mut proj = g.bind(
            format!("nn.dense({}, {}, units={})", flat.expr, wd.expr, 4 * hidden),
            vec![seq * batch, 4 * hidden],
            dt,
        );
        if let Some(b) = &b {
            let bd = take(g, b, vec![8 * hidden]);
            let halves = g.bind(
                format!(
                    "split({}, indices_or_sections=[{}], axis=0)",
                    bd.expr,
                    4 * hidden
                ),
                vec![],
                dt,
            );
            let sum = g.bind(
                format!("add({}.0, {}.1)", halves.expr, halves.expr),
                vec![4 * hidden],
                dt,
            );
            proj = g.bind(
                format!("add({}, {})", proj.expr, sum.expr),
                vec![seq * batch, 4 * hidden],
                dt,
            );
        }
        let proj = g.bind(
            format!(
                "reshape({}, newshape={})",
                proj.expr,
                list(&[seq, batch, 4 * hidden])
            ),
            vec![seq, batch, 4 * hidden],
            dt,
        );
        let state = |g: &mut Graph, v: &Option<Value>| match v {
            Some(v) => take(g, v, vec![batch, hidden]),
            None => g.bind(
                format!("zeros(shape={}, dtype=\"{dt}\")", list(&[batch, hidden])),
                vec![batch, hidden],
                dt,
            ),
        };
        let (mut h, mut c) = (state(g, &h0), state(g, &c0));
        let mut outs = vec![None; seq as usize];
        for step in 0..seq {
            let t = if reverse { seq - 1 - step } else { step };
            let xt = g.bind(
                format!("take({}, {t}, axis=0)", proj.expr),
                vec![batch, 4 * hidden],
                dt,
            );
            let rh = g.bind(
                format!("nn.dense({}, {}, units={})", h.expr, rd.expr, 4 * hidden),
                vec![batch, 4 * hidden],
                dt,
            );
            let gates = g.bind(
                format!(
                    "split(add({}, {}), indices_or_sections=4, axis=1)",
                    xt.expr, rh.expr
                ),
                vec![],
                dt,
            );
            let gate = |k: usize, f: &str| format!("{f}({}.{k})", gates.expr);
            let (i, o, f, cc) = (
                gate(0, "sigmoid"),
                gate(1, "sigmoid"),
                gate(2, "sigmoid"),
                gate(3, "tanh"),
            );
            c = g.bind(
                format!("add(multiply({f}, {}), multiply({i}, {cc}))", c.expr),
                vec![batch, hidden],
                dt,
            );
            h = g.bind(
                format!("multiply({o}, tanh({}))", c.expr),
                vec![batch, hidden],
                dt,
            );
            outs[t as usize] = Some(h.expr.clone());
        }
        let outs: Vec<String> = outs.into_iter().flatten().collect();
        ys.push(g.bind(
            format!("stack(({},), axis=0)", outs.join(", ")),
            vec![seq, batch, hidden],
            dt,
        ));
        hs.push(h);
        cs.push(c);
    }
    let stack = |g: &mut Graph, vs: &[Value], axis: usize, mut shape: Vec<i64>| {
        let items: Vec<&str> = vs.iter().map(|v| v.expr.as_str()).collect();
        shape.insert(axis, dirs);
        g.bind(
            format!("stack(({},), axis={axis})", items.join(", ")),
            shape,
            dt,
        )
    };
    let y = stack(g, &ys, 1, vec![seq, batch, hidden]);
    let yh = stack(g, &hs, 0, vec![batch, hidden]);
    let yc = stack(g, &cs, 0, vec![batch, hidden]);
    Ok(vec![y, yh, yc])
}
