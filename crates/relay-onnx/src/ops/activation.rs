//! Activations beyond Relay's own: written as the compositions ONNX defines them with, in the
//! input's dtype (`LeakyRelu`, `PRelu`, `Elu`, `Selu`, `HardSigmoid`, `HardSwish`,
//! `Softsign`, `Celu`, `Mish`, `ThresholdedRelu`, `Shrink`, `Gelu`), so that each computes
//! its definition exactly as written.

use super::{Attrs, float_text};
use crate::graph::{Graph, Value};
use crate::proto::NodeProto;

/// The activation `node` computes.
pub(super) fn activation(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, String> {
    let x = g.input(node, 0)?;
    if !x.dtype.is_float() {
        return Err(format!("{} of {}", node.op_type, x.dtype));
    }
    let c = |v: f64| float_text(v, x.dtype);
    let e = &x.expr;
    let neg = format!("less({e}, {})", c(0.0));
    let body = match node.op_type.as_str() {
        "LeakyRelu" => {
            let alpha = float_text(
                f64::from(a.float("alpha", 0.01)?),
                relay_runtime::DType::F32,
            );
            format!("nn.leaky_relu({e}, alpha={alpha})")
        }
        "PRelu" => {
            let slope = g.input(node, 1)?;
            super::elementwise::broadcast(&x.shape, &slope.shape)?;
            format!("where({neg}, multiply({e}, {}), {e})", slope.expr)
        }
        "Elu" => {
            let alpha = c(f64::from(a.float("alpha", 1.0)?));
            format!(
                "where({neg}, multiply({alpha}, subtract(exp({e}), {})), {e})",
                c(1.0)
            )
        }
        "Selu" => {
            let alpha = c(f64::from(a.float("alpha", 1.673_263_2)?));
            let gamma = c(f64::from(a.float("gamma", 1.050_701)?));
            format!(
                "multiply({gamma}, where(less_equal({e}, {}), multiply({alpha}, subtract(exp({e}), {})), {e}))",
                c(0.0),
                c(1.0)
            )
        }
        "HardSigmoid" => {
            let (alpha, beta) = (a.float("alpha", 0.2)?, a.float("beta", 0.5)?);
            hard_sigmoid(e, c(f64::from(alpha)), c(f64::from(beta)), &c)
        }
        "HardSwish" => format!(
            "multiply({e}, {})",
            hard_sigmoid(e, c(1.0 / 6.0), c(0.5), &c)
        ),
        "Softsign" => format!("divide({e}, add({}, abs({e})))", c(1.0)),
        // max(0, x) + min(0, alpha·(exp(x / alpha) - 1)).
        "Celu" => {
            let alpha = c(f64::from(a.float("alpha", 1.0)?));
            format!(
                "add(maximum({e}, {zero}), minimum({zero}, multiply({alpha}, subtract(exp(divide({e}, {alpha})), {one}))))",
                zero = c(0.0),
                one = c(1.0)
            )
        }
        // x · tanh(softplus(x)).
        "Mish" => format!(
            "multiply({e}, tanh(where(greater({e}, {}), {e}, log(add({}, exp({e}))))))",
            c(30.0),
            c(1.0)
        ),
        "ThresholdedRelu" => {
            let alpha = c(f64::from(a.float("alpha", 1.0)?));
            format!("where(greater({e}, {alpha}), {e}, {})", c(0.0))
        }
        // x + bias below -lambd, x - bias above lambd, 0 between (hard and soft shrink).
        "Shrink" => {
            let lambd = c(f64::from(a.float("lambd", 0.5)?));
            let bias = c(f64::from(a.float("bias", 0.0)?));
            format!(
                "where(less({e}, negative({lambd})), add({e}, {bias}), where(greater({e}, {lambd}), subtract({e}, {bias}), {}))",
                c(0.0)
            )
        }
        // log(1 + exp(x)), which is x itself where exp would overflow.
        "Softplus" => format!(
            "where(greater({e}, {}), {e}, log(add({}, exp({e}))))",
            c(30.0),
            c(1.0)
        ),
        _ => {
            // Gelu (opset 20): exact with erf, or the tanh approximation.
            match a.string("approximate", "none")?.as_str() {
                "none" => format!(
                    "multiply(multiply({}, {e}), add({}, erf(multiply({e}, {}))))",
                    c(0.5),
                    c(1.0),
                    c(std::f64::consts::FRAC_1_SQRT_2)
                ),
                "tanh" => format!(
                    "multiply(multiply({}, {e}), add({}, tanh(multiply({}, add({e}, multiply({}, power({e}, {})))))))",
                    c(0.5),
                    c(1.0),
                    c((2.0 / std::f64::consts::PI).sqrt()),
                    c(0.044715),
                    c(3.0)
                ),
                other => return Err(format!("Gelu approximation `{other}`")),
            }
        }
    };
    let shape = x.shape.clone();
    Ok(g.bind(body, shape, x.dtype))
}

/// `max(0, min(1, alpha·x + beta))`.
fn hard_sigmoid(e: &str, alpha: String, beta: String, c: &dyn Fn(f64) -> String) -> String {
    format!(
        "clip(add(multiply({e}, {alpha}), {beta}), a_min={}, a_max={})",
        c(0.0),
        c(1.0)
    )
}
