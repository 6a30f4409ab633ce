//! `LSTM`, `GRU` and `RNN`. The input projection `X · Wᵀ` of all steps, with the biases that
//! do not depend on the state, is one `nn.dense` over the whole sequence, hoisted out of the
//! recurrence (ONNX Runtime's fused kernels do the same). A float32 LSTM or GRU with the
//! default activations and whole sequences (what PyTorch exports) then runs each direction as
//! one recurrence operator (`nn.lstm_recurrence`, `nn.gru_recurrence`: the kernel library's
//! fused cells, `relay_kernel::rnn`), given the recurrent weights transposed. Every other cell
//! is unrolled over its static sequence (the sequence length is known at import; a `Loop` or
//! `Scan` around a cell is the recursive form, `ops/control.rs`); each step adds `H · Rᵀ` and
//! applies the cell:
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

use crate::error::ConvertError;
use relay_ir::AttrValue;
use relay_runtime::DType;

use super::elementwise::clip_to;
use crate::attrs::Attrs;
use crate::builder::{Value, attr, finite, ints_of};
use crate::graph::Graph;
use crate::proto::NodeProto;

/// The longest sequence unrolled.
const MAX_STEPS: i64 = 10_000;

/// Elements `[from, to)` of `v` along its first axis.
fn rows(g: &mut Graph, v: &Value, from: i64, to: i64) -> Result<Value, ConvertError> {
    g.call(
        "strided_slice",
        &[v],
        &[
            ("begin", attr::ints(&[from])),
            ("end", attr::ints(&[to])),
            ("strides", attr::ints(&[1])),
            ("axes", attr::null()),
        ],
    )
}

/// `op(x, y)`.
fn bin(g: &mut Graph, op: &str, x: &Value, y: &Value) -> Result<Value, ConvertError> {
    g.call(op, &[x, y], &[])
}

/// `op(x)`.
fn un(g: &mut Graph, op: &str, x: &Value) -> Result<Value, ConvertError> {
    g.call(op, &[x], &[])
}

/// An activation function with its parameters.
#[derive(Clone, Debug)]
struct Act {
    name: String,
    alpha: f64,
    beta: f64,
}

impl Act {
    /// `f(x)` in `dt`.
    fn apply(&self, g: &mut Graph, x: &Value, dt: DType) -> Result<Value, ConvertError> {
        let (a, b) = (g.float(self.alpha, dt)?, g.float(self.beta, dt)?);
        let (zero, one) = (g.float(0.0, dt)?, g.float(1.0, dt)?);
        match self.name.to_ascii_lowercase().as_str() {
            "sigmoid" => un(g, "sigmoid", x),
            "tanh" => un(g, "tanh", x),
            "relu" => un(g, "nn.relu", x),
            "affine" => {
                let ax = bin(g, "multiply", x, &a)?;
                bin(g, "add", &ax, &b)
            }
            "leakyrelu" => {
                let alpha = attr::float(finite(self.alpha, DType::F32));
                g.call("nn.leaky_relu", &[x], &[("alpha", alpha)])
            }
            "thresholdedrelu" => {
                let above = bin(g, "greater", x, &a)?;
                g.call("where", &[&above, x, &zero], &[])
            }
            "scaledtanh" => {
                let bx = bin(g, "multiply", &b, x)?;
                let t = un(g, "tanh", &bx)?;
                bin(g, "multiply", &a, &t)
            }
            "hardsigmoid" => {
                let ax = bin(g, "multiply", x, &a)?;
                let y = bin(g, "add", &ax, &b)?;
                clip_to(g, &y, 0.0, 1.0)
            }
            "elu" => {
                let positive = bin(g, "greater", x, &zero)?;
                let e = un(g, "exp", x)?;
                let em1 = bin(g, "subtract", &e, &one)?;
                let negative = bin(g, "multiply", &a, &em1)?;
                g.call("where", &[&positive, x, &negative], &[])
            }
            "softsign" => {
                let ab = un(g, "abs", x)?;
                let d = bin(g, "add", &one, &ab)?;
                bin(g, "divide", x, &d)
            }
            "softplus" => {
                let e = un(g, "exp", x)?;
                let s = bin(g, "add", &one, &e)?;
                un(g, "log", &s)
            }
            other => Err(format!("activation `{other}` is not supported").into()),
        }
    }
}

/// The activation functions of a cell with `per_dir` of them per direction: `activations`
/// with their `activation_alpha`/`activation_beta` taken in order by the functions that have
/// parameters (ONNX Runtime's reading), or `defaults` for each direction.
fn activations(a: &Attrs<'_>, defaults: &[&str], dirs: usize) -> Result<Vec<Act>, ConvertError> {
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
        )
        .into());
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
    /// Whether each direction runs as one recurrence operator: float32, every sequence
    /// whole, the default activations.
    fused: bool,
}

/// A cell's outputs of one step, by time step (filled in the direction's order).
type Steps = Vec<Option<Value>>;

impl Cell {
    /// Reads the inputs and attributes common to the cells, `gates` blocks of `hidden` rows
    /// in `W` and `R`, `defaults` the activations of one direction.
    fn new(
        g: &mut Graph,
        node: &NodeProto,
        a: &Attrs<'_>,
        gates: i64,
        defaults: &[&str],
    ) -> Result<Cell, ConvertError> {
        let (x, w, r) = (g.input(node, 0)?, g.input(node, 1)?, g.input(node, 2)?);
        let hidden = a.int("hidden_size", 0)?;
        let direction = a.string("direction", "forward")?;
        let dirs = match direction.as_str() {
            "forward" | "reverse" => 1,
            "bidirectional" => 2,
            other => return Err(format!("direction `{other}`").into()),
        };
        let layout = a.int("layout", 0)?;
        let x = match (layout, x.shape.as_slice()) {
            (0, [_, _, _]) => x,
            (1, [_, _, _]) => g.call("transpose", &[&x], &[("axes", attr::ints(&[1, 0, 2]))])?,
            _ => return Err(format!("X of shape {:?} with layout {layout}", x.shape).into()),
        };
        let &[seq, batch, input] = x.shape.as_slice() else {
            return Err(format!("X of shape {:?}", x.shape).into());
        };
        let rows = gates.checked_mul(hidden).filter(|_| hidden > 0);
        if rows.is_none_or(|n| w.shape != [dirs, n, input] || r.shape != [dirs, n, hidden]) {
            return Err(format!(
                "W {:?} and R {:?} for hidden_size {hidden}",
                w.shape, r.shape
            )
            .into());
        }
        let clip =
            a.0.iter()
                .find(|x| x.name == "clip")
                .map(|_| a.float("clip", 0.0).map(f64::from))
                .transpose()?;
        let acts = activations(a, defaults, dirs as usize)?;
        let dt = x.dtype;
        let lens = lengths(g, node, seq, batch)?;
        let fused = dt == DType::F32
            && lens.is_none()
            && acts
                .iter()
                .enumerate()
                .all(|(k, act)| act.name.eq_ignore_ascii_case(defaults[k % defaults.len()]));
        if !fused {
            unrolled(seq)?;
        }
        let masks = match lens {
            Some(lens) => masks(g, &lens, seq, batch)?,
            None => Vec::new(),
        };
        let flat = g.call(
            "reshape",
            &[&x],
            &[("newshape", attr::ints(&[seq * batch, input]))],
        )?;
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
            fused,
        })
    }

    /// Direction `d`'s slice of `v` (`[dirs, ...]`), reshaped to `shape`.
    fn take(&self, g: &mut Graph, v: &Value, d: i64, shape: &[i64]) -> Result<Value, ConvertError> {
        let d = g.int(d, DType::I32)?;
        let slice = g.call("take", &[v, &d], &[("axis", attr::int(0))])?;
        g.call("reshape", &[&slice], &[("newshape", attr::ints(shape))])
    }

    /// The attributes the recurrence operators share for direction `d`, then `flag` (the
    /// cell's own option) named `name`.
    fn recurrence_attrs(
        &self,
        d: i64,
        name: &'static str,
        flag: bool,
    ) -> [(&'static str, AttrValue); 3] {
        [
            ("reverse", attr::bool(self.backwards(d))),
            ("clip", self.clip.map_or_else(attr::null, attr::float)),
            (name, attr::bool(flag)),
        ]
    }

    /// `rd` (`[rows, hidden]`) transposed, as the recurrence operators take it.
    fn transposed(&self, g: &mut Graph, rd: &Value) -> Result<Value, ConvertError> {
        g.call("transpose", &[rd], &[("axes", attr::ints(&[1, 0]))])
    }

    /// `n` zeros of the cell's dtype.
    fn zeros(&self, g: &mut Graph, n: i64) -> Result<Value, ConvertError> {
        g.call(
            "zeros",
            &[],
            &[("shape", attr::ints(&[n])), ("dtype", attr::str(self.dt))],
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
    fn projection(
        &self,
        g: &mut Graph,
        wd: &Value,
        bias: Option<Value>,
    ) -> Result<Value, ConvertError> {
        let rows = wd.shape[0];
        let mut p = g.call("nn.dense", &[&self.flat, wd], &[("units", attr::int(rows))])?;
        if let Some(b) = bias {
            p = bin(g, "add", &p, &b)?;
        }
        let shape = [self.seq, self.batch, rows];
        g.call("reshape", &[&p], &[("newshape", attr::ints(&shape))])
    }

    /// The initial state of direction `d`: `init`'s slice (`[dirs, batch, hidden]`, or
    /// `[batch, dirs, hidden]` in layout 1), or zeros.
    fn state(&self, g: &mut Graph, init: &Option<Value>, d: i64) -> Result<Value, ConvertError> {
        let shape = [self.batch, self.hidden];
        match init {
            Some(v) if self.layout == 1 => {
                let d = g.int(d, DType::I32)?;
                g.call("take", &[v, &d], &[("axis", attr::int(1))])
            }
            Some(v) => self.take(g, v, d, &shape),
            None => g.call(
                "zeros",
                &[],
                &[("shape", attr::ints(&shape)), ("dtype", attr::str(self.dt))],
            ),
        }
    }

    /// Activation `k` of direction `d` (of `per_dir`) on `x`, after the clip.
    fn act(
        &self,
        g: &mut Graph,
        d: i64,
        per_dir: usize,
        k: usize,
        x: &Value,
    ) -> Result<Value, ConvertError> {
        let clipped;
        let x = match self.clip {
            Some(c) => {
                clipped = clip_to(g, x, -c, c)?;
                &clipped
            }
            None => x,
        };
        self.acts[d as usize * per_dir + k].apply(g, x, self.dt)
    }

    /// Row `t` of projection `p`: `[batch, rows]`.
    fn step_input(&self, g: &mut Graph, p: &Value, t: i64) -> Result<Value, ConvertError> {
        let t = g.int(t, DType::I32)?;
        g.call("take", &[p, &t], &[("axis", attr::int(0))])
    }

    /// `h · rdᵀ`: `[batch, rows]`.
    fn recur(&self, g: &mut Graph, h: &Value, rd: &Value) -> Result<Value, ConvertError> {
        let rows = rd.shape[0];
        g.call("nn.dense", &[h, rd], &[("units", attr::int(rows))])
    }

    /// Whether time step `t` lies inside each sequence, when some may be shorter.
    fn mask(&self, t: i64) -> Option<&Value> {
        self.masks.get(t as usize)
    }

    /// The state after step `t`: `new` inside the sequence, `old` past its end.
    fn keep(&self, g: &mut Graph, t: i64, new: Value, old: &Value) -> Result<Value, ConvertError> {
        match self.mask(t) {
            Some(m) => g.call("where", &[m, &new, old], &[]),
            None => Ok(new),
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
        outs: &mut Steps,
    ) -> Result<Value, ConvertError> {
        outs[t as usize] = Some(match self.mask(t) {
            Some(m) => {
                let zero = g.float(0.0, self.dt)?;
                g.call("where", &[m, &h_new, &zero], &[])?
            }
            None => h_new.clone(),
        });
        self.keep(g, t, h_new, h)
    }

    /// A direction's `Y` (`[seq, batch, hidden]`) from its unrolled steps' states.
    fn stacked(&self, g: &mut Graph, steps: &Steps) -> Result<Value, ConvertError> {
        let steps: Vec<&Value> = steps.iter().flatten().collect();
        g.call_tuple("stack", &steps, &[("axis", attr::int(0))])
    }

    /// The outputs: `Y` (`[seq, dirs, batch, hidden]`, or `[batch, seq, dirs, hidden]` in
    /// layout 1) from each direction's states in time order (`[seq, batch, hidden]`), then
    /// each final state stacked over the directions (`[dirs, batch, hidden]`, or
    /// `[batch, dirs, hidden]`).
    fn outputs(
        &self,
        g: &mut Graph,
        ys: Vec<Value>,
        finals: Vec<Vec<Value>>,
    ) -> Result<Vec<Value>, ConvertError> {
        let per_dir: Vec<&Value> = ys.iter().collect();
        let mut y = g.call_tuple("stack", &per_dir, &[("axis", attr::int(1))])?;
        if self.layout == 1 {
            y = g.call("transpose", &[&y], &[("axes", attr::ints(&[2, 0, 1, 3]))])?;
        }
        let mut out = vec![y];
        let axis = if self.layout == 1 { 1 } else { 0 };
        for k in 0..finals.first().map_or(0, Vec::len) {
            let items: Vec<&Value> = finals.iter().map(|f| &f[k]).collect();
            out.push(g.call_tuple("stack", &items, &[("axis", attr::int(axis))])?);
        }
        Ok(out)
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
    ) -> Result<Value, ConvertError> {
        let h = self.hidden;
        let bd = self.take(g, b, d, &[2 * gates * h])?;
        let wb = rows(g, &bd, from * h, to * h)?;
        if !recurrent {
            return Ok(wb);
        }
        let rb = rows(g, &bd, (gates + from) * h, (gates + to) * h)?;
        bin(g, "add", &wb, &rb)
    }
}

/// `sequence_lens` as `[batch, 1]` `int64`s when some sequence may be shorter than the input
/// (`None` when it is absent or a constant of whole lengths).
fn lengths(
    g: &mut Graph,
    node: &NodeProto,
    seq: i64,
    batch: i64,
) -> Result<Option<Value>, ConvertError> {
    let lens = match g.optional_input(node, 4)? {
        Some(l) if ints_of(&l).is_some_and(|v| v.iter().all(|&n| n == seq)) => return Ok(None),
        Some(l) if l.shape == [batch] => l,
        Some(l) => return Err(format!("sequence_lens of shape {:?}", l.shape).into()),
        None => return Ok(None),
    };
    let lens = g.call("cast", &[&lens], &[("dtype", attr::str(DType::I64))])?;
    g.call(
        "reshape",
        &[&lens],
        &[("newshape", attr::ints(&[batch, 1]))],
    )
    .map(Some)
}

/// Per time step, whether it lies inside each sequence of `lens` (`[batch, 1]`), computed
/// once for every direction: masks keep a finished sequence's state and zero its outputs.
fn masks(g: &mut Graph, lens: &Value, seq: i64, batch: i64) -> Result<Vec<Value>, ConvertError> {
    debug_assert_eq!(lens.shape, [batch, 1]);
    (0..seq)
        .map(|t| {
            let t = g.int(t, DType::I64)?;
            g.call("less", &[&t, lens], &[])
        })
        .collect()
}

/// The `N` fields of a recurrence operator's result.
fn fields<const N: usize>(values: Vec<Value>) -> Result<[Value; N], ConvertError> {
    let n = values.len();
    <[Value; N]>::try_from(values)
        .map_err(|_| ConvertError::from(format!("a recurrence returned {n} fields, not {N}")))
}

/// `split(x, sections, axis=1)`: the gates of a `[batch, sections·hidden]` value.
fn gates(g: &mut Graph, x: &Value, sections: i64) -> Result<Vec<Value>, ConvertError> {
    g.call_fields(
        "split",
        &[x],
        &[
            ("indices_or_sections", attr::int(sections)),
            ("axis", attr::int(1)),
        ],
    )
}

/// `LSTM`'s outputs `Y`, `Y_h`, `Y_c`.
pub(super) fn lstm(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Vec<Value>, ConvertError> {
    let cell = Cell::new(g, node, a, 4, &["Sigmoid", "Tanh", "Tanh"])?;
    let (w, r) = (g.input(node, 1)?, g.input(node, 2)?);
    let (b, h0, c0, p) = (
        g.optional_input(node, 3)?,
        g.optional_input(node, 5)?,
        g.optional_input(node, 6)?,
        g.optional_input(node, 7)?,
    );
    let coupled = a.int("input_forget", 0)? != 0;
    let fused = cell.fused;
    let (hs, input, dt) = (cell.hidden, cell.input, cell.dt);
    let (mut ys, mut finals) = (Vec::new(), Vec::new());
    for d in 0..cell.dirs {
        let wd = cell.take(g, &w, d, &[4 * hs, input])?;
        let rd = cell.take(g, &r, d, &[4 * hs, hs])?;
        let bias = b
            .as_ref()
            .map(|b| cell.bias(g, b, d, 4, (0, 4), true))
            .transpose()?;
        let proj = cell.projection(g, &wd, bias)?;
        let (h, c) = (cell.state(g, &h0, d)?, cell.state(g, &c0, d)?);
        if fused {
            let rt = cell.transposed(g, &rd)?;
            let pd = match &p {
                Some(p) => cell.take(g, p, d, &[3 * hs])?,
                None => cell.zeros(g, 3 * hs)?,
            };
            let attrs = cell.recurrence_attrs(d, "input_forget", coupled);
            let out = g.call_fields("nn.lstm_recurrence", &[&proj, &rt, &h, &c, &pd], &attrs)?;
            let [y, hn, cn] = fields::<3>(out)?;
            ys.push(y);
            finals.push(vec![hn, cn]);
            continue;
        }
        // The peepholes of gates i, o and f, in `P`'s order.
        let peep = match &p {
            Some(p) => {
                let pd = cell.take(g, p, d, &[3 * hs])?;
                let peeps: Result<Vec<Value>, ConvertError> =
                    (0..3).map(|k| rows(g, &pd, k * hs, (k + 1) * hs)).collect();
                Some(peeps?)
            }
            None => None,
        };
        let (mut h, mut c) = (h, c);
        let mut outs: Steps = vec![None; cell.seq as usize];
        for step in 0..cell.seq {
            let t = cell.time(d, step);
            let xt = cell.step_input(g, &proj, t)?;
            let rh = cell.recur(g, &h, &rd)?;
            let sum = bin(g, "add", &xt, &rh)?;
            let gates = gates(g, &sum, 4)?;
            // Gate `k` (i, o, f) with its peephole on `state`.
            let with_peep = |g: &mut Graph, k: usize, state: &Value| match &peep {
                Some(pv) => {
                    let ps = bin(g, "multiply", &pv[k], state)?;
                    bin(g, "add", &gates[k], &ps)
                }
                None => Ok(gates[k].clone()),
            };
            let pre_i = with_peep(g, 0, &c)?;
            let i = cell.act(g, d, 3, 0, &pre_i)?;
            let f = if coupled {
                let one = g.float(1.0, dt)?;
                bin(g, "subtract", &one, &i)?
            } else {
                let pre_f = with_peep(g, 2, &c)?;
                cell.act(g, d, 3, 0, &pre_f)?
            };
            let cc = cell.act(g, d, 3, 1, &gates[3])?;
            let fc = bin(g, "multiply", &f, &c)?;
            let ic = bin(g, "multiply", &i, &cc)?;
            let c_new = bin(g, "add", &fc, &ic)?;
            let pre_o = with_peep(g, 1, &c_new)?;
            let o = cell.act(g, d, 3, 0, &pre_o)?;
            let hc = cell.act(g, d, 3, 2, &c_new)?;
            let h_new = bin(g, "multiply", &o, &hc)?;
            c = cell.keep(g, t, c_new, &c)?;
            h = cell.advance(g, t, h_new, &h, &mut outs)?;
        }
        ys.push(cell.stacked(g, &outs)?);
        finals.push(vec![h, c]);
    }
    cell.outputs(g, ys, finals)
}

/// `GRU`'s outputs `Y`, `Y_h`.
pub(super) fn gru(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Vec<Value>, ConvertError> {
    let cell = Cell::new(g, node, a, 3, &["Sigmoid", "Tanh"])?;
    let (w, r) = (g.input(node, 1)?, g.input(node, 2)?);
    let (b, h0) = (g.optional_input(node, 3)?, g.optional_input(node, 5)?);
    let before_reset = a.int("linear_before_reset", 0)? != 0;
    let fused = cell.fused;
    let (hs, input, dt) = (cell.hidden, cell.input, cell.dt);
    let one = g.float(1.0, dt)?;
    let (mut ys, mut finals) = (Vec::new(), Vec::new());
    for d in 0..cell.dirs {
        let wd = cell.take(g, &w, d, &[3 * hs, input])?;
        let rd = cell.take(g, &r, d, &[3 * hs, hs])?;
        // z and r take both biases in the projection; h's recurrent bias goes there too
        // unless it is applied before the reset (or the recurrence operator applies it).
        let bias = match &b {
            Some(b) => {
                let zr = cell.bias(g, b, d, 3, (0, 2), true)?;
                let h = cell.bias(g, b, d, 3, (2, 3), !before_reset && !fused)?;
                Some(g.call_tuple("concatenate", &[&zr, &h], &[("axis", attr::int(0))])?)
            }
            None => None,
        };
        let rbh = match (&b, before_reset || fused) {
            (Some(b), true) => {
                let bd = cell.take(g, b, d, &[6 * hs])?;
                Some(rows(g, &bd, 5 * hs, 6 * hs)?)
            }
            _ => None,
        };
        let proj = cell.projection(g, &wd, bias)?;
        if fused {
            let rt = cell.transposed(g, &rd)?;
            let h0d = cell.state(g, &h0, d)?;
            let rbh = match rbh {
                Some(rbh) => rbh,
                None => cell.zeros(g, hs)?,
            };
            let attrs = cell.recurrence_attrs(d, "linear_before_reset", before_reset);
            let out = g.call_fields("nn.gru_recurrence", &[&proj, &rt, &h0d, &rbh], &attrs)?;
            let [y, hn] = fields::<2>(out)?;
            ys.push(y);
            finals.push(vec![hn]);
            continue;
        }
        let r_zr = rows(g, &rd, 0, 2 * hs)?;
        let r_h = rows(g, &rd, 2 * hs, 3 * hs)?;
        let mut h = cell.state(g, &h0, d)?;
        let mut outs: Steps = vec![None; cell.seq as usize];
        for step in 0..cell.seq {
            let t = cell.time(d, step);
            let xt = cell.step_input(g, &proj, t)?;
            let x3 = gates(g, &xt, 3)?;
            let hzr = cell.recur(g, &h, &r_zr)?;
            let xzr = g.call_tuple("concatenate", &[&x3[0], &x3[1]], &[("axis", attr::int(1))])?;
            let szr = bin(g, "add", &xzr, &hzr)?;
            let zr = gates(g, &szr, 2)?;
            let z = cell.act(g, d, 2, 0, &zr[0])?;
            let rg = cell.act(g, d, 2, 0, &zr[1])?;
            let inner = if before_reset {
                let hr = cell.recur(g, &h, &r_h)?;
                let hr = match &rbh {
                    Some(rb) => bin(g, "add", &hr, rb)?,
                    None => hr,
                };
                bin(g, "multiply", &rg, &hr)?
            } else {
                let rh = bin(g, "multiply", &rg, &h)?;
                cell.recur(g, &rh, &r_h)?
            };
            let pre = bin(g, "add", &x3[2], &inner)?;
            let ht = cell.act(g, d, 2, 1, &pre)?;
            let keep = bin(g, "subtract", &one, &z)?;
            let fresh = bin(g, "multiply", &keep, &ht)?;
            let old = bin(g, "multiply", &z, &h)?;
            let h_new = bin(g, "add", &fresh, &old)?;
            h = cell.advance(g, t, h_new, &h, &mut outs)?;
        }
        ys.push(cell.stacked(g, &outs)?);
        finals.push(vec![h]);
    }
    cell.outputs(g, ys, finals)
}

/// An error unless a cell of `seq` steps can be unrolled: each step is in the module, a bound
/// on the module and its kernels.
fn unrolled(seq: i64) -> Result<(), ConvertError> {
    if (0..=MAX_STEPS).contains(&seq) {
        return Ok(());
    }
    Err(format!(
        "a sequence of {seq} steps (unrolled: at most {MAX_STEPS}; a Loop or Scan around the \
         cell runs longer ones)"
    )
    .into())
}

/// `RNN`'s outputs `Y`, `Y_h`.
pub(super) fn rnn(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Vec<Value>, ConvertError> {
    let cell = Cell::new(g, node, a, 1, &["Tanh"])?;
    // There is no fused `RNN`: every cell is unrolled.
    unrolled(cell.seq)?;
    let (w, r) = (g.input(node, 1)?, g.input(node, 2)?);
    let (b, h0) = (g.optional_input(node, 3)?, g.optional_input(node, 5)?);
    let (hs, input) = (cell.hidden, cell.input);
    let (mut ys, mut finals) = (Vec::new(), Vec::new());
    for d in 0..cell.dirs {
        let wd = cell.take(g, &w, d, &[hs, input])?;
        let rd = cell.take(g, &r, d, &[hs, hs])?;
        let bias = b
            .as_ref()
            .map(|b| cell.bias(g, b, d, 1, (0, 1), true))
            .transpose()?;
        let proj = cell.projection(g, &wd, bias)?;
        let mut h = cell.state(g, &h0, d)?;
        let mut outs: Steps = vec![None; cell.seq as usize];
        for step in 0..cell.seq {
            let t = cell.time(d, step);
            let xt = cell.step_input(g, &proj, t)?;
            let rh = cell.recur(g, &h, &rd)?;
            let pre = bin(g, "add", &xt, &rh)?;
            let h_new = cell.act(g, d, 1, 0, &pre)?;
            h = cell.advance(g, t, h_new, &h, &mut outs)?;
        }
        ys.push(cell.stacked(g, &outs)?);
        finals.push(vec![h]);
    }
    cell.outputs(g, ys, finals)
}
