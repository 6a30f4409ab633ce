//! The LSTM and GRU recurrences (`nn.lstm_recurrence`, `nn.gru_recurrence`) on
//! [`relay_linalg::rnn`]: sequential over their steps, which a tensor expression cannot say. The
//! operators are opaque, so fusion leaves each alone in its primitive function: one call of the
//! operator on its parameters in order. Static shapes only.

use relay_ir::{Attrs, OpError};
use relay_linalg::KernelContext;
use relay_linalg::rnn::{Gru, Lstm, Sizes};
use relay_ops::support::attr_bool;

/// A recurrence with its attributes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Recurrence {
    /// `nn.lstm_recurrence`.
    Lstm {
        reverse: bool,
        clip: Option<f32>,
        input_forget: bool,
    },
    /// `nn.gru_recurrence`.
    Gru {
        reverse: bool,
        clip: Option<f32>,
        linear_before_reset: bool,
    },
}

/// The recurrence operator `name` with attributes `attrs`, if it is one.
pub(super) fn recognize(name: &str, attrs: &Attrs) -> Option<Result<Recurrence, OpError>> {
    Some(match name {
        "nn.lstm_recurrence" => lstm_attrs(attrs),
        "nn.gru_recurrence" => gru_attrs(attrs),
        _ => return None,
    })
}

/// The `clip` attribute as float32.
fn clip(attrs: &Attrs) -> Result<Option<f32>, OpError> {
    Ok(relay_ops::recurrence_clip(attrs)?.map(|c| c as f32))
}

fn lstm_attrs(attrs: &Attrs) -> Result<Recurrence, OpError> {
    Ok(Recurrence::Lstm {
        reverse: attr_bool(attrs, "reverse")?,
        clip: clip(attrs)?,
        input_forget: attr_bool(attrs, "input_forget")?,
    })
}

fn gru_attrs(attrs: &Attrs) -> Result<Recurrence, OpError> {
    Ok(Recurrence::Gru {
        reverse: attr_bool(attrs, "reverse")?,
        clip: clip(attrs)?,
        linear_before_reset: attr_bool(attrs, "linear_before_reset")?,
    })
}

impl Recurrence {
    /// The outputs' shapes for inputs of shapes `inputs`, checked against each other.
    pub(super) fn output_shapes(&self, inputs: &[&[i64]]) -> Result<Vec<Vec<i64>>, String> {
        let (s, outputs) = self.sizes(inputs)?;
        let (seq, batch, hidden) = (s.seq as i64, s.batch as i64, s.hidden as i64);
        let mut out = vec![vec![seq, batch, hidden]];
        out.extend(std::iter::repeat_n(vec![batch, hidden], outputs - 1));
        Ok(out)
    }

    /// The sizes of the recurrence and its number of outputs from its inputs' shapes.
    fn sizes(&self, shapes: &[&[i64]]) -> Result<(Sizes, usize), String> {
        let (gates, inputs, outputs) = match self {
            Recurrence::Lstm { .. } => (4, 5, 3),
            Recurrence::Gru { .. } => (3, 4, 2),
        };
        let (&[seq, batch, cols], &[hidden, rcols]) = (
            shapes.first().copied().unwrap_or_default(),
            shapes.get(1).copied().unwrap_or_default(),
        ) else {
            return Err("xw [seq, batch, gates·hidden] and r [hidden, gates·hidden]".into());
        };
        let state = [batch, hidden];
        let mut want: Vec<Vec<i64>> =
            vec![vec![seq, batch, cols], vec![hidden, rcols], state.to_vec()];
        match self {
            Recurrence::Lstm { .. } => want.extend([state.to_vec(), vec![3 * hidden]]),
            Recurrence::Gru { .. } => want.push(vec![hidden]),
        }
        let fits = shapes.len() == inputs
            && cols == gates * hidden
            && rcols == cols
            && shapes.iter().zip(&want).all(|(s, w)| *s == w.as_slice());
        if !fits {
            return Err(format!("argument shapes {shapes:?}, want {want:?}"));
        }
        let size = |n: i64| usize::try_from(n).map_err(|_| format!("a negative size {n}"));
        let sizes = Sizes {
            seq: size(seq)?,
            batch: size(batch)?,
            hidden: size(hidden)?,
        };
        Ok((sizes, outputs))
    }

    /// Runs the recurrence on `args` (inputs, then outputs, of `shapes`).
    pub(super) fn run(
        &self,
        ctx: &KernelContext,
        args: &mut [&mut [f32]],
        shapes: &[&[i64]],
    ) -> Result<(), String> {
        match *self {
            Recurrence::Lstm {
                reverse,
                clip,
                input_forget,
            } => {
                let (s, _) = self.sizes(shapes.get(..5).unwrap_or(shapes))?;
                let [xw, r, h0, c0, peephole, y, h, c] = args else {
                    return Err("an LSTM takes 8 arguments".into());
                };
                let args = Lstm {
                    xw,
                    r,
                    h0,
                    c0,
                    peephole,
                    reverse,
                    clip,
                    input_forget,
                };
                (ctx.ops().lstm)(s, &args, y, h, c);
            }
            Recurrence::Gru {
                reverse,
                clip,
                linear_before_reset,
            } => {
                let (s, _) = self.sizes(shapes.get(..4).unwrap_or(shapes))?;
                let [xw, r, h0, rbh, y, h] = args else {
                    return Err("a GRU takes 6 arguments".into());
                };
                let args = Gru {
                    xw,
                    r,
                    h0,
                    rbh,
                    reverse,
                    clip,
                    linear_before_reset,
                };
                (ctx.ops().gru)(s, &args, y, h);
            }
        }
        Ok(())
    }
}
