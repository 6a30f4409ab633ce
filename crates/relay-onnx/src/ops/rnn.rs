//! `LSTM`, `GRU` and `RNN`, unrolled over their static sequence (the sequence length is known
//! at import; a `Loop` or `Scan` around a cell is the recursive form, `ops/control.rs`).
//!
//! The input projection `X · Wᵀ` of all steps, with the biases that do not depend on the
//! state, is one `nn.dense` over the whole sequence, hoisted out of the recurrence (ONNX
//! Runtime's fused kernels do the same); each step adds `H · Rᵀ` and applies the cell:
//! - LSTM (gates in ONNX's order i, o, f, c): `i = f(..+ Pi ⊙ C)`, `f = f(..+ Pf ⊙ C)` (or
//!   `1 - i` with `input_forget`), `C' = f ⊙ C + i ⊙ g(c̃)`, `o = f(..+ Po ⊙ C')`,
//!   `H' = o ⊙ h(C')`;
//! - GRU (z, r, h): `z`, `r` as above, `h̃ = g(Xh + (r ⊙ H) · Rhᵀ + Rbh)`, or with
//!   `linear_before_reset` `g(Xh + r ⊙ (H · Rhᵀ + Rbh))`; `H' = (1 - z) ⊙ h̃ + z ⊙ H`;
//! - RNN: `H' = f(Xi + H · Rᵀ)`.
//!
//! Every direction (forward, reverse, bidirectional), the `activations` with their
//! `activation_alpha`/`activation_beta`, `clip` (on the gates' inputs), peepholes, `layout`
//! 0 and 1, and `sequence_lens` (a constant or an input): past a sequence's end its state is
//! kept and its outputs are zero, which for a reverse direction makes it start at its own
//! last step, as ONNX specifies.

use relay_runtime::DType;

use super::{Attrs, float_text, ints_of, list};
use crate::graph::{Graph, Value};
use crate::proto::NodeProto;

/// The longest sequence unrolled.
const MAX_STEPS: i64 = 10_000;

/// Elements `[from, to)` of the vector `v`.
fn rows(v: &str, from: i64, to: i64) -> String {
    format!("strided_slice({v}, begin=[{from}], end=[{to}], strides=[1], axes=None)")
}

/// An activation function with its parameters.
#[derive(Clone, Debug)]
struct Act {
    name: String,
    alpha: f64,
    beta: f64,
}

impl Act {
    /// `f(x)` as Relay text in `dt`.
    fn apply(&self, x: &str, dt: DType) -> Result<String, String> {
        let (a, b) = (float_text(self.alpha, dt), float_text(self.beta, dt));
        let (zero, one) = (float_text(0.0, dt), float_text(1.0, dt));
        Ok(match self.name.to_ascii_lowercase().as_str() {
            "sigmoid" => format!("sigmoid({x})"),
            "tanh" => format!("tanh({x})"),
            "relu" => format!("nn.relu({x})"),
            "affine" => format!("add(multiply({x}, {a}), {b})"),
            "leakyrelu" => format!(
                "nn.leaky_relu({x}, alpha={})",
                float_text(self.alpha, DType::F32)
            ),
            "thresholdedrelu" => format!("where(greater({x}, {a}), {x}, {zero})"),
            "scaledtanh" => format!("multiply({a}, tanh(multiply({b}, {x})))"),
            "hardsigmoid" => {
                format!("clip(add(multiply({x}, {a}), {b}), a_min={zero}, a_max={one})")
            }
            "elu" => format!(
                "where(greater({x}, {zero}), {x}, multiply({a}, subtract(exp({x}), {one})))"
            ),
            "softsign" => format!("divide({x}, add({one}, abs({x})))"),
            "softplus" => format!("log(add({one}, exp({x})))"),
            other => return Err(format!("activation `{other}` is not supported")),
        })
    }
}

/// The activation functions of a cell with `per_dir` of them per direction: `activations`
/// with their `activation_alpha`/`activation_beta` taken in order by the functions that have
/// parameters (ONNX Runtime's reading), or `defaults` for each direction.
fn activations(a: &Attrs<'_>, defaults: &[&str], dirs: usize) -> Result<Vec<Act>, String> {
    let names: Vec<String> = match a.0.iter().find(|x| x.name == "activations") {
        Some(attr) => attr
            .strings
            .iter()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect(),
        None => (0..dirs)
            .flat_map(|_| defaults.iter().map(|s| s.to_string()))
            .collect(),
    };
    if names.len() != defaults.len() * dirs {
        return Err(format!(
            "{} activations for {dirs} direction(s) of {} each",
            names.len(),
            defaults.len()
        ));
    }
    let floats = |name: &str| {
        a.0.iter()
            .find(|x| x.name == name)
            .map(|x| x.floats.clone())
            .unwrap_or_default()
    };
    let (alphas, betas) = (floats("activation_alpha"), floats("activation_beta"));
    let (mut ai, mut bi) = (alphas.iter(), betas.iter());
    let next =
        |it: &mut std::slice::Iter<f32>, default: f64| it.next().map_or(default, |&v| f64::from(v));
    names
        .into_iter()
        .map(|name| {
            // Which parameters the function takes, and their defaults.
            let (takes, defaults) = match name.to_ascii_lowercase().as_str() {
                "affine" => ((true, true), (1.0, 0.0)),
                "scaledtanh" => ((true, true), (1.0, 1.0)),
                "hardsigmoid" => ((true, true), (0.2, 0.5)),
                "leakyrelu" => ((true, false), (0.01, 0.0)),
                "thresholdedrelu" | "elu" => ((true, false), (1.0, 0.0)),
                _ => ((false, false), (0.0, 0.0)),
            };
            let alpha = if takes.0 {
                next(&mut ai, defaults.0)
            } else {
                0.0
            };
            let beta = if takes.1 {
                next(&mut bi, defaults.1)
            } else {
                0.0
            };
            Act { name, alpha, beta }
        })
        .map(Ok)
        .collect()
}

/// What the three cells share: the sequence, its shape, the directions and the options.
struct Cell {
    /// `X` as `[seq·batch, input]`.
    flat: Value,
    seq: i64,
    batch: i64,
    input: i64,
    hidden: i64,
    dirs: i64,
    reverse_only: bool,
    layout: i64,
    clip: Option<f64>,
    acts: Vec<Act>,
    dt: DType,
    /// Per time step, whether it lies inside each sequence (`[batch, 1]` booleans); empty
    /// when every sequence is as long as the input.
    masks: Vec<Value>,
}

impl Cell {
    /// Reads the inputs and attributes common to the cells, `gates` blocks of `hidden` rows
    /// in `W` and `R`, `defaults` the activations of one direction.
    fn new(
        g: &mut Graph,
        node: &NodeProto,
        a: &Attrs<'_>,
        gates: i64,
        defaults: &[&str],
    ) -> Result<Cell, String> {
        let (x, w, r) = (g.input(node, 0)?, g.input(node, 1)?, g.input(node, 2)?);
        let hidden = a.int("hidden_size", 0)?;
        let direction = a.string("direction", "forward")?;
        let dirs = match direction.as_str() {
            "forward" | "reverse" => 1,
            "bidirectional" => 2,
            other => return Err(format!("direction `{other}`")),
        };
        let layout = a.int("layout", 0)?;
        let x = match (layout, x.shape.as_slice()) {
            (0, [_, _, _]) => x,
            (1, &[b, s, i]) => g.bind(
                format!("transpose({}, axes=[1, 0, 2])", x.expr),
                vec![s, b, i],
                x.dtype,
            ),
            _ => return Err(format!("X of shape {:?} with layout {layout}", x.shape)),
        };
        let &[seq, batch, input] = x.shape.as_slice() else {
            return Err(format!("X of shape {:?}", x.shape));
        };
        // Each step is unrolled into the module: a bound on the text and the kernels.
        if seq > MAX_STEPS {
            return Err(format!(
                "a sequence of {seq} steps (unrolled: at most {MAX_STEPS}; a Loop or Scan \
                 around the cell runs longer ones)"
            ));
        }
        let rows = gates.checked_mul(hidden).filter(|_| hidden > 0);
        if rows.is_none_or(|n| w.shape != [dirs, n, input] || r.shape != [dirs, n, hidden]) {
            return Err(format!(
                "W {:?} and R {:?} for hidden_size {hidden}",
                w.shape, r.shape
            ));
        }
        // Sequences of their own lengths: masks keep a finished sequence's state and zero its
        // outputs (none when every length is known to be the whole sequence).
        let lens = match g.optional_input(node, 4)? {
            Some(l) if ints_of(&l).is_some_and(|v| v.iter().all(|&n| n == seq)) => None,
            Some(l) if l.shape == [batch] => Some(g.bind(
                format!(
                    "reshape(cast({}, dtype=\"int64\"), newshape=[{batch}, 1])",
                    l.expr
                ),
                vec![batch, 1],
                DType::I64,
            )),
            Some(l) => return Err(format!("sequence_lens of shape {:?}", l.shape)),
            None => None,
        };
        // Per time step, whether it lies inside each sequence (`[batch, 1]`), computed once
        // for every direction.
        let masks: Vec<Value> = lens.map_or_else(Vec::new, |lens| {
            (0..seq)
                .map(|t| {
                    g.bind(
                        format!("less({t}i64, {})", lens.expr),
                        vec![batch, 1],
                        DType::BOOL,
                    )
                })
                .collect()
        });
        let clip =
            a.0.iter()
                .find(|x| x.name == "clip")
                .map(|_| a.float("clip", 0.0).map(f64::from))
                .transpose()?;
        let acts = activations(a, defaults, dirs as usize)?;
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
        Ok(Cell {
            flat,
            seq,
            batch,
            input,
            hidden,
            dirs,
            reverse_only: direction == "reverse",
            layout,
            clip,
            acts,
            dt,
            masks,
        })
    }

    /// Direction `d`'s slice of `v` (`[dirs, ...]`), reshaped to `shape`.
    fn take(&self, g: &mut Graph, v: &Value, d: i64, shape: Vec<i64>) -> Value {
        g.bind(
            format!(
                "reshape(take({}, {d}, axis=0), newshape={})",
                v.expr,
                list(&shape)
            ),
            shape,
            self.dt,
        )
    }

    /// Whether direction `d` runs backwards.
    fn backwards(&self, d: i64) -> bool {
        self.reverse_only || d == 1
    }

    /// The time step of iteration `step` of direction `d`.
    fn time(&self, d: i64, step: i64) -> i64 {
        if self.backwards(d) {
            self.seq - 1 - step
        } else {
            step
        }
    }

    /// `X · Wdᵀ + bias` for every step, as `[seq, batch, rows]`.
    fn projection(&self, g: &mut Graph, wd: &Value, bias: Option<String>) -> Value {
        let rows = wd.shape[0];
        let (n, dt) = (self.seq * self.batch, self.dt);
        let mut p = g.bind(
            format!("nn.dense({}, {}, units={rows})", self.flat.expr, wd.expr),
            vec![n, rows],
            dt,
        );
        if let Some(b) = bias {
            p = g.bind(format!("add({}, {b})", p.expr), vec![n, rows], dt);
        }
        g.bind(
            format!(
                "reshape({}, newshape={})",
                p.expr,
                list(&[self.seq, self.batch, rows])
            ),
            vec![self.seq, self.batch, rows],
            dt,
        )
    }

    /// The initial state of direction `d`: `init`'s slice (`[dirs, batch, hidden]`, or
    /// `[batch, dirs, hidden]` in layout 1), or zeros.
    fn state(&self, g: &mut Graph, init: &Option<Value>, d: i64) -> Value {
        let shape = vec![self.batch, self.hidden];
        match init {
            Some(v) if self.layout == 1 => {
                g.bind(format!("take({}, {d}, axis=1)", v.expr), shape, self.dt)
            }
            Some(v) => self.take(g, v, d, shape),
            None => g.bind(
                format!("zeros(shape={}, dtype=\"{}\")", list(&shape), self.dt),
                shape,
                self.dt,
            ),
        }
    }

    /// Activation `k` of direction `d` (of `per_dir`) on `x`, after the clip.
    fn act(&self, d: i64, per_dir: usize, k: usize, x: &str) -> Result<String, String> {
        let x = match self.clip {
            Some(c) => format!(
                "clip({x}, a_min={}, a_max={})",
                float_text(-c, self.dt),
                float_text(c, self.dt)
            ),
            None => x.to_string(),
        };
        self.acts[d as usize * per_dir + k].apply(&x, self.dt)
    }

    /// Row `t` of projection `p`: `[batch, rows]`.
    fn step_input(&self, g: &mut Graph, p: &Value, t: i64) -> Value {
        g.bind(
            format!("take({}, {t}, axis=0)", p.expr),
            vec![self.batch, p.shape[2]],
            self.dt,
        )
    }

    /// `h · rdᵀ`: `[batch, rows]`.
    fn recur(&self, g: &mut Graph, h: &str, rd: &Value) -> Value {
        let rows = rd.shape[0];
        g.bind(
            format!("nn.dense({h}, {}, units={rows})", rd.expr),
            vec![self.batch, rows],
            self.dt,
        )
    }

    /// Whether time step `t` lies inside each sequence, when some may be shorter.
    fn mask(&self, t: i64) -> Option<&Value> {
        self.masks.get(t as usize)
    }

    /// The state after step `t`: `new` inside the sequence, `old` past its end.
    fn keep(&self, g: &mut Graph, t: i64, new: Value, old: &Value) -> Value {
        match self.mask(t) {
            Some(m) => {
                let text = format!("where({}, {}, {})", m.expr, new.expr, old.expr);
                self.state_value(g, text)
            }
            None => new,
        }
    }

    /// Ends step `t` of a cell whose new hidden state is `h_new`: records the step's output
    /// (zero past the sequence's end) in `outs` and returns the state carried on.
    fn advance(
        &self,
        g: &mut Graph,
        t: i64,
        h_new: Value,
        h: &Value,
        outs: &mut [String],
    ) -> Value {
        outs[t as usize] = match self.mask(t) {
            Some(m) => format!(
                "where({}, {}, {})",
                m.expr,
                h_new.expr,
                float_text(0.0, self.dt)
            ),
            None => h_new.expr.clone(),
        };
        self.keep(g, t, h_new, h)
    }

    /// A `[batch, hidden]` value.
    fn state_value(&self, g: &mut Graph, expr: String) -> Value {
        g.bind(expr, vec![self.batch, self.hidden], self.dt)
    }

    /// The outputs: `Y` (`[seq, dirs, batch, hidden]`, or `[batch, seq, dirs, hidden]` in
    /// layout 1) from each direction's states in time order, then each final state stacked
    /// over the directions (`[dirs, batch, hidden]`, or `[batch, dirs, hidden]`).
    fn outputs(&self, g: &mut Graph, ys: Vec<Vec<String>>, finals: Vec<Vec<Value>>) -> Vec<Value> {
        let (seq, batch, hidden, dirs, dt) =
            (self.seq, self.batch, self.hidden, self.dirs, self.dt);
        let per_dir: Vec<String> = ys
            .iter()
            .map(|steps| {
                g.bind(
                    format!("stack(({},), axis=0)", steps.join(", ")),
                    vec![seq, batch, hidden],
                    dt,
                )
                .expr
            })
            .collect();
        let mut y = g.bind(
            format!("stack(({},), axis=1)", per_dir.join(", ")),
            vec![seq, dirs, batch, hidden],
            dt,
        );
        if self.layout == 1 {
            y = g.bind(
                format!("transpose({}, axes=[2, 0, 1, 3])", y.expr),
                vec![batch, seq, dirs, hidden],
                dt,
            );
        }
        let mut out = vec![y];
        for k in 0..finals.first().map_or(0, Vec::len) {
            let items: Vec<&str> = finals.iter().map(|f| f[k].expr.as_str()).collect();
            let (axis, shape) = if self.layout == 1 {
                (1, vec![batch, dirs, hidden])
            } else {
                (0, vec![dirs, batch, hidden])
            };
            out.push(g.bind(
                format!("stack(({},), axis={axis})", items.join(", ")),
                shape,
                dt,
            ));
        }
        out
    }

    /// Direction `d`'s bias `B` (`[dirs, 2·gates·hidden]`) as `Wb + Rb` of the gate rows
    /// `[from, to)` (in units of `hidden`), or `Wb` alone when `recurrent` is false.
    fn bias(
        &self,
        g: &mut Graph,
        b: &Value,
        d: i64,
        gates: i64,
        (from, to): (i64, i64),
        recurrent: bool,
    ) -> String {
        let h = self.hidden;
        let bd = self.take(g, b, d, vec![2 * gates * h]);
        let part = |start: i64| rows(&bd.expr, start + from * h, start + to * h);
        if recurrent {
            format!("add({}, {})", part(0), part(gates * h))
        } else {
            part(0)
        }
    }
}

/// `LSTM`'s outputs `Y`, `Y_h`, `Y_c`.
pub(super) fn lstm(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Vec<Value>, String> {
    let cell = Cell::new(g, node, a, 4, &["Sigmoid", "Tanh", "Tanh"])?;
    let (w, r) = (g.input(node, 1)?, g.input(node, 2)?);
    let (b, h0, c0, p) = (
        g.optional_input(node, 3)?,
        g.optional_input(node, 5)?,
        g.optional_input(node, 6)?,
        g.optional_input(node, 7)?,
    );
    let coupled = a.int("input_forget", 0)? != 0;
    let (hs, input, dt) = (cell.hidden, cell.input, cell.dt);
    let (mut ys, mut finals) = (Vec::new(), Vec::new());
    for d in 0..cell.dirs {
        let wd = cell.take(g, &w, d, vec![4 * hs, input]);
        let rd = cell.take(g, &r, d, vec![4 * hs, hs]);
        let bias = b.as_ref().map(|b| cell.bias(g, b, d, 4, (0, 4), true));
        let proj = cell.projection(g, &wd, bias);
        let peep = p.as_ref().map(|p| cell.take(g, p, d, vec![3 * hs]));
        let peep_of = |k: i64| peep.as_ref().map(|p| rows(&p.expr, k * hs, (k + 1) * hs));
        let (mut h, mut c) = (cell.state(g, &h0, d), cell.state(g, &c0, d));
        let mut outs = vec![String::new(); cell.seq as usize];
        for step in 0..cell.seq {
            let t = cell.time(d, step);
            let xt = cell.step_input(g, &proj, t);
            let rh = cell.recur(g, &h.expr, &rd);
            let gates = g.bind(
                format!(
                    "split(add({}, {}), indices_or_sections=4, axis=1)",
                    xt.expr, rh.expr
                ),
                vec![],
                dt,
            );
            let with_peep = |k: usize, pk: i64, state: &str| match peep_of(pk) {
                Some(pv) => format!("add({}.{k}, multiply({pv}, {state}))", gates.expr),
                None => format!("{}.{k}", gates.expr),
            };
            let i = cell.act(d, 3, 0, &with_peep(0, 0, &c.expr))?;
            // Coupled gates read the input gate twice: computed once.
            let i = if coupled {
                g.bind(i, vec![cell.batch, hs], dt).expr
            } else {
                i
            };
            let f = if coupled {
                format!("subtract({}, {i})", float_text(1.0, dt))
            } else {
                cell.act(d, 3, 0, &with_peep(2, 2, &c.expr))?
            };
            let cc = cell.act(d, 3, 1, &format!("{}.3", gates.expr))?;
            let c_new = cell.state_value(
                g,
                format!("add(multiply({f}, {}), multiply({i}, {cc}))", c.expr),
            );
            let o = cell.act(d, 3, 0, &with_peep(1, 1, &c_new.expr))?;
            let hc = cell.act(d, 3, 2, &c_new.expr)?;
            let h_new = cell.state_value(g, format!("multiply({o}, {hc})"));
            c = cell.keep(g, t, c_new, &c);
            h = cell.advance(g, t, h_new, &h, &mut outs);
        }
        ys.push(outs);
        finals.push(vec![h, c]);
    }
    Ok(cell.outputs(g, ys, finals))
}

/// `GRU`'s outputs `Y`, `Y_h`.
pub(super) fn gru(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Vec<Value>, String> {
    let cell = Cell::new(g, node, a, 3, &["Sigmoid", "Tanh"])?;
    let (w, r) = (g.input(node, 1)?, g.input(node, 2)?);
    let (b, h0) = (g.optional_input(node, 3)?, g.optional_input(node, 5)?);
    let before_reset = a.int("linear_before_reset", 0)? != 0;
    let (hs, input, dt) = (cell.hidden, cell.input, cell.dt);
    let one = float_text(1.0, dt);
    let (mut ys, mut finals) = (Vec::new(), Vec::new());
    for d in 0..cell.dirs {
        let wd = cell.take(g, &w, d, vec![3 * hs, input]);
        let rd = cell.take(g, &r, d, vec![3 * hs, hs]);
        // z and r take both biases in the projection; h's recurrent bias goes there too
        // unless it is applied before the reset.
        let bias = b.as_ref().map(|b| {
            let zr = cell.bias(g, b, d, 3, (0, 2), true);
            let h = cell.bias(g, b, d, 3, (2, 3), !before_reset);
            format!("concatenate(({zr}, {h}), axis=0)")
        });
        let rbh = match (&b, before_reset) {
            (Some(b), true) => {
                let bd = cell.take(g, b, d, vec![6 * hs]);
                Some(rows(&bd.expr, 5 * hs, 6 * hs))
            }
            _ => None,
        };
        let proj = cell.projection(g, &wd, bias);
        let split_rows = |g: &mut Graph, v: &Value, from: i64, to: i64, shape: Vec<i64>| {
            g.bind(rows(&v.expr, from * hs, to * hs), shape, dt)
        };
        let r_zr = split_rows(g, &rd, 0, 2, vec![2 * hs, hs]);
        let r_h = split_rows(g, &rd, 2, 3, vec![hs, hs]);
        let mut h = cell.state(g, &h0, d);
        let mut outs = vec![String::new(); cell.seq as usize];
        for step in 0..cell.seq {
            let t = cell.time(d, step);
            let xt = cell.step_input(g, &proj, t);
            let x3 = g.bind(
                format!("split({}, indices_or_sections=3, axis=1)", xt.expr),
                vec![],
                dt,
            );
            let hzr = cell.recur(g, &h.expr, &r_zr);
            let zr = g.bind(
                format!(
                    "split(add(concatenate(({x}.0, {x}.1), axis=1), {}), indices_or_sections=2, axis=1)",
                    hzr.expr,
                    x = x3.expr
                ),
                vec![],
                dt,
            );
            let z = cell.act(d, 2, 0, &format!("{}.0", zr.expr))?;
            let rg = cell.act(d, 2, 0, &format!("{}.1", zr.expr))?;
            let inner = if before_reset {
                let hr = cell.recur(g, &h.expr, &r_h);
                let hr = match &rbh {
                    Some(rb) => format!("add({}, {rb})", hr.expr),
                    None => hr.expr.clone(),
                };
                format!("multiply({rg}, {hr})")
            } else {
                cell.recur(g, &format!("multiply({rg}, {})", h.expr), &r_h)
                    .expr
            };
            let ht = cell.act(d, 2, 1, &format!("add({}.2, {inner})", x3.expr))?;
            let zv = g.bind(z, vec![cell.batch, hs], dt);
            let h_new = cell.state_value(
                g,
                format!(
                    "add(multiply(subtract({one}, {z}), {ht}), multiply({z}, {}))",
                    h.expr,
                    z = zv.expr
                ),
            );
            h = cell.advance(g, t, h_new, &h, &mut outs);
        }
        ys.push(outs);
        finals.push(vec![h]);
    }
    Ok(cell.outputs(g, ys, finals))
}

/// `RNN`'s outputs `Y`, `Y_h`.
pub(super) fn rnn(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Vec<Value>, String> {
    let cell = Cell::new(g, node, a, 1, &["Tanh"])?;
    let (w, r) = (g.input(node, 1)?, g.input(node, 2)?);
    let (b, h0) = (g.optional_input(node, 3)?, g.optional_input(node, 5)?);
    let (hs, input) = (cell.hidden, cell.input);
    let (mut ys, mut finals) = (Vec::new(), Vec::new());
    for d in 0..cell.dirs {
        let wd = cell.take(g, &w, d, vec![hs, input]);
        let rd = cell.take(g, &r, d, vec![hs, hs]);
        let bias = b.as_ref().map(|b| cell.bias(g, b, d, 1, (0, 1), true));
        let proj = cell.projection(g, &wd, bias);
        let mut h = cell.state(g, &h0, d);
        let mut outs = vec![String::new(); cell.seq as usize];
        for step in 0..cell.seq {
            let t = cell.time(d, step);
            let xt = cell.step_input(g, &proj, t);
            let rh = cell.recur(g, &h.expr, &rd);
            let pre = format!("add({}, {})", xt.expr, rh.expr);
            let h_new = cell.state_value(g, cell.act(d, 1, 0, &pre)?);
            h = cell.advance(g, t, h_new, &h, &mut outs);
        }
        ys.push(outs);
        finals.push(vec![h]);
    }
    Ok(cell.outputs(g, ys, finals))
}
