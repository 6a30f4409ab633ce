//! A decoder with past, as Hugging Face's exporters write one (inputs `input_ids`,
//! `attention_mask`, optionally `position_ids`, and `past_key_values.N.key`/`.value`; outputs
//! `logits` and `present.N.key`/`.value`), wrapped in a greedy generation loop: one Relay
//! module whose `@main(%prompt, %new_tokens, %eos, weights...)` returns the generated ids.
//!
//! The imported decoder becomes `@decoder`. `@main` runs it on the prompt with empty caches
//! (the prefill), takes the argmax of the last position's logits, and then a tail-recursive
//! local `%decode` feeds each token back with the caches the decoder returned, until
//! `%new_tokens` ids or the id `%eos` (kept, as Hugging Face's `generate` keeps it; a negative
//! `%eos` never matches). The attention mask is all ones (one sequence, no padding) and the
//! positions continue from the caches' length. The decoder's language-model head, when it is a
//! product of the hidden state, computes the last position only ([`last_position_logits`]):
//! the loop reads no other. The weights stay parameters of `@main`, which
//! hands them to the decoder, so the module's text and a `.npz` of the initializers are an
//! import like any other (`relayc import --generate`), and binding them makes them constants.
//! ONNX Runtime users write this loop in Python around the same model (Hugging Face Optimum's
//! `ORTModelForCausalLM`); here it is compiled once and runs in the VM.

use relay_ir::{AttrValue, Attrs, Dim, Expr, ExprKind, Function, Module, Type, TypeKind};
use relay_onnx::{Imported, Port};
use relay_runtime::DType;

use crate::{Error, Result};

/// The name the imported decoder gets.
const DECODER: &str = "decoder";

/// The roles of a decoder's inputs and outputs, by position.
struct Signature {
    /// `input_ids`, `attention_mask` and `position_ids` (optional) among the inputs.
    ids: usize,
    mask: usize,
    positions: Option<usize>,
    /// The input of layer `i`'s key (`2i`) and value (`2i + 1`) cache.
    past: Vec<usize>,
    /// The output of the logits, and of layer `i`'s grown key and value caches.
    logits: usize,
    present: Vec<usize>,
    /// The cache's heads and head width.
    heads: i64,
    head_width: i64,
}

/// `imported`, a decoder with past, as a generation loop (see the module's documentation):
/// `@main(%prompt: Tensor[(?), int64], %new_tokens: int32, %eos: int64, weights...)`
/// returning `Tensor[(?), int64]`. Its inputs are the three; its parameters, the decoder's.
/// A model without the decoder's inputs and outputs is [`Error::NotADecoder`].
pub fn generation_loop(imported: &Imported) -> Result<Imported> {
    let sig = signature(imported)?;
    let decoder = imported
        .module
        .functions
        .iter()
        .find(|f| f.name.as_str() == "main")
        .ok_or_else(|| not_a_decoder("the import has no @main"))?;
    let weights: Vec<(String, String)> = decoder.func.params[imported.inputs.len()..]
        .iter()
        .map(|p| {
            let ty = (p.ty().or(p.checked_type())).map_or_else(|| "?".to_owned(), Type::to_string);
            (p.name().as_str().to_owned(), ty)
        })
        .collect();
    let ret = (decoder.func.ret_type.as_ref())
        .or(decoder.func.body.checked_type())
        .ok_or_else(|| not_a_decoder("the decoder's result type is unknown"))?;
    let pruned = last_position_logits(&decoder.func, &sig, imported);
    let last = if pruned.is_some() {
        "0i64"
    } else {
        "subtract(%n, 1i64)"
    };
    let text = driver(imported, &sig, &weights, &ret.to_string(), last);
    let mut module = crate::parse_unchecked(&text, "<generation loop>").map_err(|report| {
        not_a_decoder(format!("the generation loop does not parse: {report:?}"))
    })?;
    // The stub the driver was parsed with gives way to the decoder.
    let slot = module
        .functions
        .iter_mut()
        .find(|f| f.name.as_str() == DECODER)
        .ok_or_else(|| not_a_decoder("the generation loop has no decoder"))?;
    slot.func = pruned.unwrap_or_else(|| decoder.func.clone());
    let module = checked(module)?;
    Ok(Imported {
        module,
        params: imported.params.clone(),
        inputs: vec![
            port("prompt", DType::I64, vec![-1]),
            port("new_tokens", DType::I32, Vec::new()),
            port("eos", DType::I64, Vec::new()),
        ],
        outputs: vec![port("ids", DType::I64, vec![-1])],
    })
}

/// The roles of `imported`'s inputs and outputs, by their ONNX names.
fn signature(imported: &Imported) -> Result<Signature> {
    let input = |name: &str| imported.inputs.iter().position(|p| p.onnx_name == name);
    let output = |name: &str| imported.outputs.iter().position(|p| p.onnx_name == name);
    let need = |found: Option<usize>, what: &str| {
        found.ok_or_else(|| not_a_decoder(format!("it has no {what}")))
    };
    let ids = need(input("input_ids"), "input `input_ids`")?;
    let mask = need(input("attention_mask"), "input `attention_mask`")?;
    let logits = need(output("logits"), "output `logits`")?;
    let (mut past, mut present) = (Vec::new(), Vec::new());
    let layers = (0..)
        .take_while(|layer| input(&format!("past_key_values.{layer}.key")).is_some())
        .count();
    for layer in 0..layers {
        for kind in ["key", "value"] {
            let p = input(&format!("past_key_values.{layer}.{kind}"));
            past.push(need(p, &format!("input `past_key_values.{layer}.{kind}`"))?);
            let o = output(&format!("present.{layer}.{kind}"));
            present.push(need(o, &format!("output `present.{layer}.{kind}`"))?);
        }
    }
    if past.is_empty() {
        return Err(not_a_decoder("it has no input `past_key_values.0.key`"));
    }
    let first = &imported.inputs[past[0]];
    let [_, heads, _, head_width] = first.shape[..] else {
        return Err(not_a_decoder(format!(
            "`{}` is not [batch, heads, past, head width]",
            first.onnx_name
        )));
    };
    if heads < 0 || head_width < 0 {
        return Err(not_a_decoder(format!(
            "`{}` has no static heads and head width",
            first.onnx_name
        )));
    }
    let expected = 2 + past.len() + usize::from(input("position_ids").is_some());
    if imported.inputs.len() != expected {
        return Err(not_a_decoder(format!(
            "it has {} inputs where a decoder with {} layers has {expected}",
            imported.inputs.len(),
            past.len() / 2
        )));
    }
    Ok(Signature {
        ids,
        mask,
        positions: input("position_ids"),
        past,
        logits,
        present,
        heads,
        head_width,
    })
}

/// The driver's text: `@main` and a stub `@decoder` of the decoder's type.
fn driver(
    imported: &Imported,
    sig: &Signature,
    weights: &[(String, String)],
    ret: &str,
    last: &str,
) -> String {
    let (heads, width) = (sig.heads, sig.head_width);
    let cache = format!("Tensor[(1, {heads}, ?, {width}), float32]");
    let caches = format!("({})", vec![cache.as_str(); sig.past.len()].join(", "));
    let typed = |names: &[(String, String)]| {
        names
            .iter()
            .map(|(n, t)| format!(", %{n}: {t}"))
            .collect::<String>()
    };
    let inputs: Vec<(String, String)> = imported
        .inputs
        .iter()
        .map(|p| (p.relay_name.clone(), input_type(p)))
        .collect();
    let stub_params = format!(
        "{}{}",
        typed(&inputs).trim_start_matches(", "),
        typed(weights)
    );
    let stub_args: String = inputs
        .iter()
        .chain(weights)
        .map(|(n, _)| format!("%{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let weight_args: String = weights.iter().map(|(n, _)| format!(", %{n}")).collect();
    let mut args = vec![String::new(); imported.inputs.len()];
    args[sig.ids] = "%ids".into();
    args[sig.mask] = "dyn.ones(stack((1i64, %total)), dtype=\"int64\")".into();
    if let Some(p) = sig.positions {
        args[p] = "expand_dims(arange(%past_len, %total, 1i64, dtype=\"int64\"), axis=0)".into();
    }
    for (slot, &input) in sig.past.iter().enumerate() {
        args[input] = format!("%past.{slot}");
    }
    let presents: Vec<String> = sig.present.iter().map(|o| format!("%r.{o}")).collect();
    let empties =
        vec![format!("zeros(shape=[1, {heads}, 0, {width}], dtype=\"float32\")"); sig.past.len()];
    format!(
        r#"#[version = "0.0.5"]
def @{DECODER}({stub_params}) -> {ret} {{
  @{DECODER}({stub_args})
}}
def @main(%prompt: Tensor[(?), int64], %new_tokens: int32, %eos: int64{weights_typed}) -> Tensor[(?), int64] {{
  let %step = fn (%ids: Tensor[(1, ?), int64], %past: {caches}) -> (Tensor[(1), int64], {caches}) {{
    let %n = take(shape_of(%ids, dtype="int64"), 1);
    let %past_len = take(shape_of(%past.0, dtype="int64"), 2);
    let %total = add(%past_len, %n);
    let %r = @{DECODER}({args}{weight_args});
    let %last = take(%r.{logits}, {last}, axis=1);
    (cast(argmax(%last, axis=[-1]), dtype="int64"), ({presents}))
  }};
  let %decode = fn (%token: Tensor[(1), int64], %past: {caches}, %count: int32, %out: Tensor[(?), int64]) -> Tensor[(?), int64] {{
    if (logical_or(greater_equal(%count, %new_tokens), equal(take(%token, 0), %eos))) {{
      %out
    }} else {{
      let %s = %step(expand_dims(%token, axis=0), %past);
      %decode(%s.0, %s.1, add(%count, 1), concatenate((%out, %s.0), axis=0))
    }}
  }};
  if (less_equal(%new_tokens, 0)) {{
    zeros(shape=[0], dtype="int64")
  }} else {{
    let %first = %step(expand_dims(%prompt, axis=0), ({empties}));
    %decode(%first.0, %first.1, 1, %first.0)
  }}
}}
"#,
        weights_typed = typed(weights),
        args = args.join(", "),
        logits = sig.logits,
        presents = presents.join(", "),
        empties = empties.join(", "),
    )
}

/// The Relay type of graph input `p` (its `-1` dimensions `?`), as the IR prints it.
fn input_type(p: &Port) -> String {
    let shape = p
        .shape
        .iter()
        .map(|&d| if d < 0 { Dim::Any } else { Dim::Known(d) })
        .collect();
    Type::from_kind(TypeKind::Tensor {
        shape,
        dtype: p.dtype,
    })
    .to_string()
}

/// `func`, the decoder, with its logits computed for the last position only, when they are a
/// product (`nn.dense`, `nn.matmul`) of a `[batch, sequence, width]` hidden state, as
/// Hugging Face's exports write the language-model head: the hidden state's last row is sliced
/// first, so the logits have one position. The loop reads no other, and the head over every
/// prompt position was most of a prefill (GPT-2 small, a 32-token prompt: 35 of about 110 ms,
/// AVX2, one thread). `None` for logits of another form, whose last position the loop takes.
fn last_position_logits(func: &Function, sig: &Signature, imported: &Imported) -> Option<Function> {
    let rank3 = imported.outputs.get(sig.logits)?.shape.len() == 3;
    if !rank3 {
        return None;
    }
    let mut pruned = func.clone();
    // The outputs' tuple is the body, or the body of the body's bindings (graph form).
    let body = match func.body.kind() {
        ExprKind::Tuple(outputs) => {
            let head = last_position_head(outputs.get(sig.logits)?)?;
            let mut outputs = outputs.clone();
            outputs[sig.logits] = head;
            Expr::new(ExprKind::Tuple(outputs), func.body.span())
        }
        ExprKind::Let { bindings, body } => {
            let ExprKind::Tuple(outputs) = body.kind() else {
                return None;
            };
            let ExprKind::Var(logits) = outputs.get(sig.logits)?.kind() else {
                return None;
            };
            let mut bindings = bindings.clone();
            let bound = bindings.iter_mut().find(|b| &b.var == logits)?;
            bound.value = last_position_head(&bound.value)?;
            let kind = ExprKind::Let {
                bindings,
                body: body.clone(),
            };
            Expr::new(kind, func.body.span())
        }
        _ => return None,
    };
    pruned.body = body;
    // The logits have one position now: the result's annotation, if any, is inferred anew.
    pruned.ret_type = None;
    Some(pruned)
}

/// `head`, a product (`nn.dense`, `nn.matmul`) of a `[batch, sequence, width]` hidden state,
/// of the hidden state's last position only; `None` for anything else.
fn last_position_head(head: &Expr) -> Option<Expr> {
    let (op, args, attrs) = head.op_call()?;
    let [hidden, weight] = args else {
        return None;
    };
    if !matches!(op.name, "nn.dense" | "nn.matmul") {
        return None;
    }
    let ints = |v: &[i64]| AttrValue::Array(v.iter().map(|&i| AttrValue::Int(i)).collect());
    let slice = Attrs::empty()
        .with("begin", ints(&[-1]))
        .with("end", ints(&[i64::from(i32::MAX)]))
        .with("strides", ints(&[1]))
        .with("slice_mode", AttrValue::Str("end".into()))
        .with("axes", ints(&[1]));
    let call =
        |name: &str, args: Vec<Expr>, attrs: Attrs| relay_ops::call(name, args, attrs, head.span());
    let last_row = call("strided_slice", vec![hidden.clone()], slice)?;
    call(op.name, vec![last_row, weight.clone()], attrs.clone())
}

/// `module`, type-checked.
fn checked(module: Module) -> Result<Module> {
    crate::check(&module).map_err(|report| {
        not_a_decoder(format!(
            "the generation loop does not type-check: {report:?}"
        ))
    })?;
    Ok(module)
}

/// A graph port named `name`.
fn port(name: &str, dtype: DType, shape: Vec<i64>) -> Port {
    Port {
        onnx_name: name.to_owned(),
        relay_name: name.to_owned(),
        dtype,
        shape,
        dim_params: Vec::new(),
    }
}

fn not_a_decoder(reason: impl Into<String>) -> Error {
    Error::NotADecoder {
        reason: reason.into(),
    }
}
