//! Activations beyond Relay's own: written as the compositions ONNX defines them with, in the
//! input's dtype (`LeakyRelu`, `PRelu`, `Elu`, `Selu`, `HardSigmoid`, `HardSwish`,
//! `Softsign`, `Celu`, `Mish`, `ThresholdedRelu`, `Shrink`, `Gelu`), so that each computes
//! its definition exactly as written.

use crate::error::ConvertError;
use relay_runtime::DType;

use crate::attrs::Attrs;
use crate::builder::{Value, attr, finite};
use crate::graph::Graph;
use crate::proto::NodeProto;

/// The activation `node` computes.
pub(super) fn activation(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    if !x.dtype.is_float() {
        return Err(format!("{} of {}", node.op_type, x.dtype).into());
    }
    let dt = x.dtype;
    let attr_of = |name: &str, default: f32| a.float(name, default).map(f64::from);
    match node.op_type.as_str() {
        "LeakyRelu" => {
            let alpha = finite(attr_of("alpha", 0.01)?, DType::F32);
            g.call("nn.leaky_relu", &[&x], &[("alpha", attr::float(alpha))])
        }
        "PRelu" => {
            let slope = g.input(node, 1)?;
            super::elementwise::broadcast(&x.shape, &slope.shape)?;
            let zero = g.float(0.0, dt)?;
            let neg = g.call("less", &[&x, &zero], &[])?;
            let scaled = g.call("multiply", &[&x, &slope], &[])?;
            g.call("where", &[&neg, &scaled, &x], &[])
        }
        "Elu" => elu(g, &x, "less", attr_of("alpha", 1.0)?),
        "Selu" => {
            let (alpha, gamma) = (attr_of("alpha", 1.673_263_2)?, attr_of("gamma", 1.050_701)?);
            let y = elu(g, &x, "less_equal", alpha)?;
            let gamma = g.float(gamma, dt)?;
            g.call("multiply", &[&gamma, &y], &[])
        }
        "HardSigmoid" => hard_sigmoid(g, &x, attr_of("alpha", 0.2)?, attr_of("beta", 0.5)?),
        "HardSwish" => {
            let s = hard_sigmoid(g, &x, 1.0 / 6.0, 0.5)?;
            g.call("multiply", &[&x, &s], &[])
        }
        "Softsign" => {
            let one = g.float(1.0, dt)?;
            let abs = g.call("abs", &[&x], &[])?;
            let d = g.call("add", &[&one, &abs], &[])?;
            g.call("divide", &[&x, &d], &[])
        }
        "Celu" => celu(g, &x, attr_of("alpha", 1.0)?),
        // x · tanh(softplus(x)).
        "Mish" => {
            let s = softplus(g, &x)?;
            let t = g.call("tanh", &[&s], &[])?;
            g.call("multiply", &[&x, &t], &[])
        }
        "ThresholdedRelu" => {
            let (alpha, zero) = (g.float(attr_of("alpha", 1.0)?, dt)?, g.float(0.0, dt)?);
            let above = g.call("greater", &[&x, &alpha], &[])?;
            g.call("where", &[&above, &x, &zero], &[])
        }
        "Shrink" => shrink(g, &x, attr_of("lambd", 0.5)?, attr_of("bias", 0.0)?),
        "Softplus" => softplus(g, &x),
        _ => gelu(g, &x, &a.string("approximate", "none")?),
    }
}

/// `where(cmp(x, 0), alpha · (exp(x) - 1), x)` (`Elu` with `less`, `Selu` with `less_equal`).
fn elu(g: &mut Graph, x: &Value, cmp: &str, alpha: f64) -> Result<Value, ConvertError> {
    let (zero, one, alpha) = (
        g.float(0.0, x.dtype)?,
        g.float(1.0, x.dtype)?,
        g.float(alpha, x.dtype)?,
    );
    let neg = g.call(cmp, &[x, &zero], &[])?;
    let e = g.call("exp", &[x], &[])?;
    let e = g.call("subtract", &[&e, &one], &[])?;
    let e = g.call("multiply", &[&alpha, &e], &[])?;
    g.call("where", &[&neg, &e, x], &[])
}

/// `max(x, 0) + min(0, alpha · (exp(x / alpha) - 1))`.
fn celu(g: &mut Graph, x: &Value, alpha: f64) -> Result<Value, ConvertError> {
    let (zero, one, alpha) = (
        g.float(0.0, x.dtype)?,
        g.float(1.0, x.dtype)?,
        g.float(alpha, x.dtype)?,
    );
    let pos = g.call("maximum", &[x, &zero], &[])?;
    let e = g.call("divide", &[x, &alpha], &[])?;
    let e = g.call("exp", &[&e], &[])?;
    let e = g.call("subtract", &[&e, &one], &[])?;
    let e = g.call("multiply", &[&alpha, &e], &[])?;
    let neg = g.call("minimum", &[&zero, &e], &[])?;
    g.call("add", &[&pos, &neg], &[])
}

/// `log(1 + exp(x))`, which is `x` itself where exp would overflow (above 30).
fn softplus(g: &mut Graph, x: &Value) -> Result<Value, ConvertError> {
    let (limit, one) = (g.float(30.0, x.dtype)?, g.float(1.0, x.dtype)?);
    let large = g.call("greater", &[x, &limit], &[])?;
    let e = g.call("exp", &[x], &[])?;
    let e = g.call("add", &[&one, &e], &[])?;
    let e = g.call("log", &[&e], &[])?;
    g.call("where", &[&large, x, &e], &[])
}

/// `max(0, min(1, alpha·x + beta))`.
fn hard_sigmoid(g: &mut Graph, x: &Value, alpha: f64, beta: f64) -> Result<Value, ConvertError> {
    let (alpha, beta) = (g.float(alpha, x.dtype)?, g.float(beta, x.dtype)?);
    let y = g.call("multiply", &[x, &alpha], &[])?;
    let y = g.call("add", &[&y, &beta], &[])?;
    super::elementwise::clip_to(g, &y, 0.0, 1.0)
}

/// `x + bias` below `-lambd`, `x - bias` above `lambd`, 0 between (hard and soft shrink).
fn shrink(g: &mut Graph, x: &Value, lambd: f64, bias: f64) -> Result<Value, ConvertError> {
    let dt = x.dtype;
    let (low, high) = (g.float(-lambd, dt)?, g.float(lambd, dt)?);
    let (bias, zero) = (g.float(bias, dt)?, g.float(0.0, dt)?);
    let below = g.call("less", &[x, &low], &[])?;
    let above = g.call("greater", &[x, &high], &[])?;
    let up = g.call("add", &[x, &bias], &[])?;
    let down = g.call("subtract", &[x, &bias], &[])?;
    let inner = g.call("where", &[&above, &down, &zero], &[])?;
    g.call("where", &[&below, &up, &inner], &[])
}

/// `Gelu` (opset 20), `0.5 · x · (1 + f)`: exact with `f = erf(x / √2)`, or the tanh
/// approximation `f = tanh(√(2/π) · (x + 0.044715 · x³))`.
fn gelu(g: &mut Graph, x: &Value, approximate: &str) -> Result<Value, ConvertError> {
    let dt = x.dtype;
    let f = match approximate {
        "none" => {
            let r = g.float(std::f64::consts::FRAC_1_SQRT_2, dt)?;
            let y = g.call("multiply", &[x, &r], &[])?;
            g.call("erf", &[&y], &[])?
        }
        "tanh" => {
            let (three, c) = (g.float(3.0, dt)?, g.float(0.044715, dt)?);
            let k = g.float((2.0 / std::f64::consts::PI).sqrt(), dt)?;
            let cube = g.call("power", &[x, &three], &[])?;
            let y = g.call("multiply", &[&c, &cube], &[])?;
            let y = g.call("add", &[x, &y], &[])?;
            let y = g.call("multiply", &[&k, &y], &[])?;
            g.call("tanh", &[&y], &[])?
        }
        other => return Err(format!("Gelu approximation `{other}`").into()),
    };
    let (half, one) = (g.float(0.5, dt)?, g.float(1.0, dt)?);
    let h = g.call("multiply", &[&half, x], &[])?;
    let f = g.call("add", &[&one, &f], &[])?;
    g.call("multiply", &[&h, &f], &[])
}
