//! The recurrences of LSTM and GRU layers, one operator per direction of a layer:
//! `nn.lstm_recurrence` and `nn.gru_recurrence`. They take the input projection of every step
//! already computed (`X · Wᵀ` plus the biases that do not depend on the state: one GEMM over
//! the whole sequence, as ONNX Runtime's fused kernels do) and run the steps, each one product
//! of the state with all the gates' recurrent weights at once and the gate math, computed by
//! the kernel library whole (`relay_kernel::rnn`); the importer makes them of ONNX's `LSTM`
//! and `GRU` (`relay-onnx/src/ops/rnn.rs`). They are relayc's own: TVM unrolls recurrent
//! layers into their steps.
//!
//! The gates are in ONNX's order (LSTM i, o, f, c; GRU z, r, h) with its default activations
//! (sigmoid for the gates, tanh for the cell), `clip` bounding the input of every activation
//! to `[-clip, clip]`:
//! - LSTM: `g = xw[t] + h · r`; `i = σ(g_i + p_i ⊙ c)`; `f = σ(g_f + p_f ⊙ c)` (or `1 - i`
//!   with `input_forget`); `c' = f ⊙ c + i ⊙ tanh(g_c)`; `o = σ(g_o + p_o ⊙ c')`;
//!   `h' = o ⊙ tanh(c')`.
//! - GRU: `z = σ(xw_z[t] + h · r_z)`, `r = σ(xw_r[t] + h · r_r)`; `h̃ = tanh(xw_h[t] + (r ⊙ h)
//!   · r_h + rb_h)`, or with `linear_before_reset` `tanh(xw_h[t] + r ⊙ (h · r_h + rb_h))`;
//!   `h' = (1 - z) ⊙ h̃ + z ⊙ h`.
//!
//! `r` is the recurrent weights transposed (`[hidden, gates·hidden]`: a step's product reads
//! its rows contiguously); `reverse` runs the steps from the last. The results are the state
//! after every step (`Y`, by time step), then the final states. float32 only (the importer
//! unrolls the other dtypes into their steps).

use relay_ir::OpError;
use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, Attrs, DType, Dim, NDArray, OpPattern as P,
    OpSchema, RelationFn, Type, Value,
};

use crate::support::{arg_tensor, attr_bool, inputs_n, tensor, tensor_type, value};
use crate::{field, nullable, op};

/// `nn.lstm_recurrence`'s attributes.
const LSTM_ATTRS: &[AttrField] = &[
    field("reverse", K::Bool, D::Bool(false)),
    nullable("clip", K::Float),
    field("input_forget", K::Bool, D::Bool(false)),
];

/// `nn.gru_recurrence`'s attributes.
const GRU_ATTRS: &[AttrField] = &[
    field("reverse", K::Bool, D::Bool(false)),
    nullable("clip", K::Float),
    field("linear_before_reset", K::Bool, D::Bool(false)),
];

/// The recurrence operators.
pub(super) static OPS: &[OpSchema] = &[
    op(
        "nn.lstm_recurrence",
        &["xw", "r", "h0", "c0", "peephole"],
        "relay.attrs.LstmRecurrenceAttrs",
        LSTM_ATTRS,
    )
    .with(P::Opaque, lstm_rel, lstm_eval),
    op(
        "nn.gru_recurrence",
        &["xw", "r", "h0", "rbh"],
        "relay.attrs.GruRecurrenceAttrs",
        GRU_ATTRS,
    )
    .with(P::Opaque, gru_rel, gru_eval),
];

/// The sizes of a recurrence: steps, batch and hidden size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RecurrenceShape {
    seq: i64,
    batch: i64,
    hidden: i64,
}

/// `xw: [seq, batch, gates·hidden]` and `r: [hidden, gates·hidden]`, float32: the sizes (a
/// `?` dimension stays unknown, `None`).
fn shape_of(types: &[Type], gates: i64, op: &str) -> Result<[Option<i64>; 3], OpError> {
    let (xw, xd) = tensor_type(&types[0], "xw")?;
    let (r, rd) = tensor_type(&types[1], "r")?;
    for (what, d) in [("xw", xd), ("r", rd)] {
        if d != DType::F32 {
            return Err(OpError::dtype(format!(
                "{op} computes float32, got {what} of {d}"
            )));
        }
    }
    let (&[seq, batch, cols], &[hidden, rcols]) = (xw, r) else {
        return Err(OpError::shape(format!(
            "xw must be [seq, batch, {gates}·hidden] and r [hidden, {gates}·hidden], got ranks {} \
             and {}",
            xw.len(),
            r.len()
        )));
    };
    let known = |d: Dim| match d {
        Dim::Known(n) => Some(n),
        Dim::Any => None,
    };
    let (cols, rcols, hidden) = (known(cols), known(rcols), known(hidden));
    let fits = |c: Option<i64>| match (c, hidden) {
        (Some(c), Some(h)) => Some(c) == h.checked_mul(gates),
        _ => true,
    };
    if !fits(cols) || !fits(rcols) || hidden == Some(0) {
        return Err(OpError::shape(format!(
            "xw's last dimension and r's columns must be {gates} × r's rows (the hidden size), \
             got `{}` and `{}`",
            types[0], types[1]
        )));
    }
    Ok([known(seq), known(batch), hidden])
}

/// Checks that `t` is float32 `[batch, hidden]` (`what` names it).
fn check_state(
    t: &Type,
    batch: Option<i64>,
    hidden: Option<i64>,
    what: &str,
) -> Result<(), OpError> {
    check_shape(t, &[batch, hidden], what)
}

/// Checks that `t` is a float32 tensor of `shape` (`None`: any extent).
fn check_shape(t: &Type, shape: &[Option<i64>], what: &str) -> Result<(), OpError> {
    let (dims, dtype) = tensor_type(t, what)?;
    let fits = dims.len() == shape.len()
        && dims.iter().zip(shape).all(|(d, want)| match (d, want) {
            (Dim::Known(n), Some(w)) => n == w,
            _ => true,
        });
    if dtype != DType::F32 || !fits {
        let want: Vec<String> = shape
            .iter()
            .map(|d| d.map_or("?".to_owned(), |n| n.to_string()))
            .collect();
        return Err(OpError::dtype(format!(
            "{what} must be float32 [{}], got `{t}`",
            want.join(", ")
        )));
    }
    Ok(())
}

/// The dimension `n`, or `?`.
fn dim(n: Option<i64>) -> Dim {
    n.map_or(Dim::Any, Dim::Known)
}

/// `(Y: [seq, batch, hidden], states...: [batch, hidden])`.
fn results(sizes: [Option<i64>; 3], states: usize) -> Type {
    let [seq, batch, hidden] = sizes.map(dim);
    let state = tensor(vec![batch, hidden], DType::F32);
    let mut fields = vec![tensor(vec![seq, batch, hidden], DType::F32)];
    fields.extend(std::iter::repeat_n(state, states));
    Type::tuple(fields)
}

/// The `clip` bound of a recurrence's attributes, if set (positive); the kernel library
/// reads it too (`relay_kernel::host_op`).
pub fn recurrence_clip(attrs: &Attrs) -> Result<Option<f64>, OpError> {
    match attrs.get("clip") {
        None => Ok(None),
        Some(v) if v.is_null() => Ok(None),
        Some(v) => match v.as_float() {
            Some(c) if c > 0.0 => Ok(Some(c)),
            _ => Err(OpError::attribute(
                "clip",
                format!("`clip` must be a positive number, got {v:?}"),
            )),
        },
    }
}

fn lstm_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [.., h0, c0, p] = inputs_n::<5>(types)?;
    let sizes @ [_, batch, hidden] = shape_of(types, 4, "nn.lstm_recurrence")?;
    check_state(h0, batch, hidden, "h0")?;
    check_state(c0, batch, hidden, "c0")?;
    check_shape(p, &[hidden.map(|h| 3 * h)], "the peepholes")?;
    recurrence_clip(attrs)?;
    attr_bool(attrs, "reverse")?;
    attr_bool(attrs, "input_forget")?;
    Ok(results(sizes, 2))
}

fn gru_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [.., h0, rbh] = inputs_n::<4>(types)?;
    let sizes @ [_, batch, hidden] = shape_of(types, 3, "nn.gru_recurrence")?;
    check_state(h0, batch, hidden, "h0")?;
    check_shape(rbh, &[hidden], "rbh")?;
    recurrence_clip(attrs)?;
    attr_bool(attrs, "reverse")?;
    attr_bool(attrs, "linear_before_reset")?;
    Ok(results(sizes, 1))
}

// ----- Reference evaluation -----
//
// In `f64`, the state rounded to float32 after every step (as the unrolled graph of float32
// operators computes it).

/// What both evaluations start from: the arguments as `f64`s, checked by the relation, the
/// sizes, the direction, the cell's own option and the clip bound (infinite when unset).
struct Run {
    a: Vec<Vec<f64>>,
    shape: RecurrenceShape,
    seq: usize,
    batch: usize,
    hs: usize,
    reverse: bool,
    flag: bool,
    bound: f64,
}

/// The [`Run`] of a recurrence with `inputs` inputs, relation `rel` and option `flag`.
fn prepare(
    args: &[Value],
    attrs: &Attrs,
    rel: RelationFn,
    inputs: usize,
    flag: &str,
) -> Result<Run, OpError> {
    check(args, attrs, rel)?;
    let a = (0..inputs)
        .map(|i| arg_tensor(args, i).map(|t| t.to_f64_vec()))
        .collect::<Result<Vec<_>, _>>()?;
    let (xw, r) = (arg_tensor(args, 0)?.shape(), arg_tensor(args, 1)?.shape());
    let shape = RecurrenceShape {
        seq: xw[0],
        batch: xw[1],
        hidden: r[0],
    };
    Ok(Run {
        a,
        shape,
        seq: shape.seq as usize,
        batch: shape.batch as usize,
        hs: shape.hidden as usize,
        reverse: attr_bool(attrs, "reverse")?,
        flag: attr_bool(attrs, flag)?,
        bound: recurrence_clip(attrs)?.unwrap_or(f64::INFINITY),
    })
}

/// Checks the arguments' types with `rel`.
fn check(args: &[Value], attrs: &Attrs, rel: RelationFn) -> Result<(), OpError> {
    let types = args
        .iter()
        .map(|a| match a {
            Value::Tensor(t) => Ok(Type::tensor(t.shape(), t.dtype())),
            other => Err(OpError::type_error(format!(
                "expected tensors, got {}",
                other.kind_name()
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    rel(&types, attrs).map(|_| ())
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The time step of iteration `step` of `seq`.
fn time(step: usize, seq: usize, reverse: bool) -> usize {
    if reverse { seq - 1 - step } else { step }
}

/// `Σ_k h[k] · r[k, col]` for the state row `h`.
fn product(h: &[f64], r: &[f64], cols: usize, col: usize) -> f64 {
    h.iter()
        .enumerate()
        .map(|(k, &v)| v * r[k * cols + col])
        .sum()
}

/// Rounds to float32.
fn f32r(x: f64) -> f64 {
    f64::from(x as f32)
}

/// The results: `Y` and the final states, as float32 tensors.
fn outputs(shape: RecurrenceShape, y: &[f64], states: &[&[f64]]) -> Result<Value, OpError> {
    let RecurrenceShape { seq, batch, hidden } = shape;
    let mut fields = vec![value(NDArray::from_f64_slice(
        DType::F32,
        &[seq, batch, hidden],
        y,
    ))?];
    for s in states {
        fields.push(value(NDArray::from_f64_slice(
            DType::F32,
            &[batch, hidden],
            s,
        ))?);
    }
    Ok(Value::tuple(fields))
}

impl Run {
    /// `x` clipped to the bound.
    fn clip(&self, x: f64) -> f64 {
        x.clamp(-self.bound, self.bound)
    }

    /// Runs the steps in the direction's order: for each time step and batch row, `cell`
    /// maps the row's states (`states[k]`'s row, each `[batch, hidden]`) to their next values,
    /// which are rounded to float32 and stored; `states[0]`, the hidden state, is also
    /// recorded in `Y`, which this returns.
    fn steps(
        &self,
        states: &mut [Vec<f64>],
        mut cell: impl FnMut(usize, usize, &[&[f64]]) -> Vec<Vec<f64>>,
    ) -> Vec<f64> {
        let (batch, hs) = (self.batch, self.hs);
        let mut y = vec![0.0; self.seq * batch * hs];
        for step in 0..self.seq {
            let t = time(step, self.seq, self.reverse);
            for b in 0..batch {
                let rows = b * hs..(b + 1) * hs;
                let old: Vec<&[f64]> = states.iter().map(|s| &s[rows.clone()]).collect();
                let new = cell(t, b, &old);
                for (state, row) in states.iter_mut().zip(new) {
                    for (to, v) in state[rows.clone()].iter_mut().zip(row) {
                        *to = f32r(v);
                    }
                }
                y[(t * batch + b) * hs..][..hs].copy_from_slice(&states[0][rows]);
            }
        }
        y
    }
}

fn lstm_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let run = prepare(args, attrs, lstm_rel, 5, "input_forget")?;
    let (xw, r, p) = (&run.a[0], &run.a[1], &run.a[4]);
    let (batch, hs, coupled) = (run.batch, run.hs, run.flag);
    let mut states = vec![run.a[2].clone(), run.a[3].clone()];
    let y = run.steps(&mut states, |t, b, old| {
        let (h, c) = (old[0], old[1]);
        let g = |gate: usize, j: usize| {
            let col = gate * hs + j;
            xw[(t * batch + b) * 4 * hs + col] + product(h, r, 4 * hs, col)
        };
        let (mut hn, mut cn) = (vec![0.0; hs], vec![0.0; hs]);
        for j in 0..hs {
            let i = sigmoid(run.clip(g(0, j) + p[j] * c[j]));
            let f = if coupled {
                1.0 - i
            } else {
                sigmoid(run.clip(g(2, j) + p[2 * hs + j] * c[j]))
            };
            cn[j] = f32r(f * c[j] + i * run.clip(g(3, j)).tanh());
            let o = sigmoid(run.clip(g(1, j) + p[hs + j] * cn[j]));
            hn[j] = o * run.clip(cn[j]).tanh();
        }
        vec![hn, cn]
    });
    outputs(run.shape, &y, &[&states[0], &states[1]])
}

fn gru_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let run = prepare(args, attrs, gru_rel, 4, "linear_before_reset")?;
    let (xw, r, rbh) = (&run.a[0], &run.a[1], &run.a[3]);
    let (batch, hs, before_reset) = (run.batch, run.hs, run.flag);
    let mut states = vec![run.a[2].clone()];
    let y = run.steps(&mut states, |t, b, old| {
        let h = old[0];
        let x = |gate: usize, j: usize| xw[(t * batch + b) * 3 * hs + gate * hs + j];
        let gate =
            |k: usize, j: usize| sigmoid(run.clip(x(k, j) + product(h, r, 3 * hs, k * hs + j)));
        let (z, rg): (Vec<f64>, Vec<f64>) = (0..hs).map(|j| (gate(0, j), gate(1, j))).unzip();
        let reset: Vec<f64> = h.iter().zip(&rg).map(|(v, g)| v * g).collect();
        let next = (0..hs)
            .map(|j| {
                let col = 2 * hs + j;
                let inner = if before_reset {
                    rg[j] * (product(h, r, 3 * hs, col) + rbh[j])
                } else {
                    product(&reset, r, 3 * hs, col) + rbh[j]
                };
                let candidate = run.clip(x(2, j) + inner).tanh();
                (1.0 - z[j]) * candidate + z[j] * h[j]
            })
            .collect();
        vec![next]
    });
    outputs(run.shape, &y, &[&states[0]])
}

#[cfg(test)]
mod tests {
    use relay_ir::{AttrValue as V, Value};

    use super::super::testing::{assert_close, err, eval, f32s, ok, t, ty};

    fn sig(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    /// The fields of a tuple result as `f64`s.
    fn fields(v: Value) -> Vec<Vec<f64>> {
        match v {
            Value::Tuple(fs) => fs
                .iter()
                .map(|f| f.as_tensor().unwrap().to_f64_vec())
                .collect(),
            other => panic!("a tuple, got {other:?}"),
        }
    }

    #[test]
    fn relations_give_the_states_and_check_every_operand() {
        let (x, r, s) = (f32s(&[5, 2, 12]), f32s(&[3, 12]), f32s(&[2, 3]));
        let lstm = [x.clone(), r.clone(), s.clone(), s.clone(), f32s(&[9])];
        assert_eq!(
            ok("nn.lstm_recurrence", &lstm, &[]),
            "(Tensor[(5, 2, 3), float32], Tensor[(2, 3), float32], Tensor[(2, 3), float32])"
        );
        let dynamic = [
            f32s(&[-1, -1, 12]),
            r.clone(),
            f32s(&[-1, 3]),
            f32s(&[-1, 3]),
            f32s(&[9]),
        ];
        assert_eq!(
            ok("nn.lstm_recurrence", &dynamic, &[]),
            "(Tensor[(?, ?, 3), float32], Tensor[(?, 3), float32], Tensor[(?, 3), float32])"
        );
        let gru = [f32s(&[5, 2, 9]), f32s(&[3, 9]), s.clone(), f32s(&[3])];
        assert_eq!(
            ok(
                "nn.gru_recurrence",
                &gru,
                &[("linear_before_reset", V::Bool(true))]
            ),
            "(Tensor[(5, 2, 3), float32], Tensor[(2, 3), float32])"
        );
        let mut wrong = lstm.clone();
        wrong[4] = f32s(&[6]);
        assert!(err("nn.lstm_recurrence", &wrong, &[]).contains("peepholes"));
        wrong = lstm.clone();
        wrong[1] = f32s(&[4, 12]);
        assert!(err("nn.lstm_recurrence", &wrong, &[]).contains("4 ×"));
        wrong = lstm.clone();
        wrong[2] = f32s(&[3, 3]);
        assert!(err("nn.lstm_recurrence", &wrong, &[]).contains("h0"));
        wrong = lstm.clone();
        wrong[0] = ty(&[5, 2, 12], "float64");
        assert!(err("nn.lstm_recurrence", &wrong, &[]).contains("float32"));
        assert!(err("nn.lstm_recurrence", &lstm, &[("clip", V::Float(-1.0))]).contains("clip"));
        assert!(err("nn.gru_recurrence", &lstm[..4], &[]).contains("3 ×"));
    }

    #[test]
    fn one_lstm_step_follows_the_equations() {
        // hidden 1, batch 1: gates i, o, f, c; no recurrent weights (h0 = 0), peepholes on.
        let (gi, go, gf, gc, c0) = (0.3, -0.2, 0.9, 0.5, 0.4);
        let (pi, po, pf) = (0.1, 0.2, 0.3);
        let args = [
            t(&[1, 1, 4], &[gi, go, gf, gc]),
            t(&[1, 4], &[1.0, 1.0, 1.0, 1.0]),
            t(&[1, 1], &[0.0]),
            t(&[1, 1], &[c0]),
            t(&[3], &[pi, po, pf]),
        ];
        let out = fields(eval("nn.lstm_recurrence", &args, &[]).unwrap());
        let i = sig(gi + pi * c0);
        let f = sig(gf + pf * c0);
        let c = f * c0 + i * f64::tanh(gc);
        let h = sig(go + po * c) * c.tanh();
        assert_close(&out[0], &[h]);
        assert_close(&out[1], &[h]);
        assert_close(&out[2], &[c]);
        // input_forget couples f to 1 - i; clip bounds every activation's input.
        let coupled = fields(
            eval(
                "nn.lstm_recurrence",
                &args,
                &[("input_forget", V::Bool(true))],
            )
            .unwrap(),
        );
        let c = (1.0 - i) * c0 + i * f64::tanh(gc);
        assert_close(&coupled[2], &[c]);
        let clipped =
            fields(eval("nn.lstm_recurrence", &args, &[("clip", V::Float(0.25))]).unwrap());
        let i = sig(0.25f64.min(gi + pi * c0));
        let c = sig(0.25) * c0 + i * f64::tanh(0.25);
        assert_close(&clipped[2], &[c]);
    }

    #[test]
    fn gru_steps_run_in_either_direction() {
        // hidden 1: the state after two steps, forwards and backwards.
        let xw = [0.2, -0.1, 0.5, -0.3, 0.4, 0.1];
        let (rz, rr, rh, rbh, h0) = (0.5, -0.4, 0.3, 0.2, 0.6);
        let args = [
            t(&[2, 1, 3], &xw),
            t(&[1, 3], &[rz, rr, rh]),
            t(&[1, 1], &[h0]),
            t(&[1], &[rbh]),
        ];
        let step = |h: f64, x: &[f64], before_reset: bool| {
            let z = sig(x[0] + rz * h);
            let r = sig(x[1] + rr * h);
            let inner = if before_reset {
                r * (rh * h + rbh)
            } else {
                rh * (r * h) + rbh
            };
            let cand = (x[2] + inner).tanh();
            (1.0 - z) * cand + z * h
        };
        for before_reset in [false, true] {
            let set = [("linear_before_reset", V::Bool(before_reset))];
            let forward = fields(eval("nn.gru_recurrence", &args, &set).unwrap());
            let h1 = step(h0, &xw[..3], before_reset);
            let h2 = step(h1, &xw[3..], before_reset);
            assert_close(&forward[0], &[h1, h2]);
            assert_close(&forward[1], &[h2]);
            let set = [set[0].clone(), ("reverse", V::Bool(true))];
            let backward = fields(eval("nn.gru_recurrence", &args, &set).unwrap());
            let h1 = step(h0, &xw[3..], before_reset);
            let h2 = step(h1, &xw[..3], before_reset);
            assert_close(&backward[0], &[h2, h1]);
            assert_close(&backward[1], &[h2]);
        }
    }
}
