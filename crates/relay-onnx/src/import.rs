//! A model's graph into `@main`: its inputs become parameters (shapes from the model or
//! from [`ImportOptions::input_shapes`], symbolic dimensions as [`crate::symbolic`]
//! symbols), its initializers and the inputs given as constants become parameters bound by
//! name, and its nodes, in order, are converted ([`crate::ops`]); every node that cannot be
//! is reported, all together.

use crate::error::ConvertError;
use std::collections::{HashMap, HashSet};

use relay_ir::{Expr, Function};
use relay_runtime::{DType, NDArray};

use crate::attrs::Attrs;
use crate::builder::{self, Value};
use crate::error::{ImportError, NodeIssue};
use crate::graph::{Graph, shape_text};
use crate::proto::{DimensionValue, GraphProto, NodeProto, ValueInfoProto};
use crate::{ImportOptions, Port, ops, shape_vectors, symbolic, tensor};

/// What an import builds.
pub(crate) struct Built {
    pub main: Function,
    pub params: Vec<(String, NDArray)>,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
}

/// Imports `g` (of `ai.onnx` opset `opset`).
pub(crate) fn graph(
    g: &GraphProto,
    opset: i64,
    options: &ImportOptions,
) -> Result<Built, ImportError> {
    let mut graph = Graph::new(opset, node);
    let base = options.base_dir.as_deref();
    let mut initialized: HashSet<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    // Inputs given as constants: parameters after the inputs, like the initializers.
    let frozen: Vec<&(String, NDArray)> = options
        .constants
        .iter()
        .filter(|(name, _)| g.input.iter().any(|vi| vi.name == *name))
        .collect();
    initialized.extend(frozen.iter().map(|(name, _)| name.as_str()));
    let mut inputs = Vec::new();
    for vi in g
        .input
        .iter()
        .filter(|vi| !initialized.contains(vi.name.as_str()))
    {
        let (dtype, shape) = value_type(vi, options, &mut graph.symbols)?;
        let (name, v) = graph.parameter(&vi.name, shape.clone(), dtype);
        graph.define(vi.name.clone(), v);
        inputs.push(Port {
            onnx_name: vi.name.clone(),
            relay_name: name,
            dtype,
            shape: port_shape(&shape),
            dim_params: dim_params(vi),
        });
    }
    for (name, array) in frozen {
        let declared = g.input.iter().find(|vi| vi.name == *name);
        let declared = declared.and_then(|vi| vi.r#type.as_ref()).and_then(|t| {
            let elem = t.tensor_type.as_ref()?.elem_type;
            tensor::dtype(elem)
        });
        graph.named_constant(name, frozen_as(name, array, declared)?);
    }
    for t in &g.initializer {
        let array = tensor::array(t, base)?;
        graph.named_constant(&t.name, array);
    }
    let mut issues = Vec::new();
    for (index, n) in g.node.iter().enumerate() {
        if let Err(error) = node(&mut graph, n) {
            issues.push(NodeIssue {
                node: if n.name.is_empty() {
                    format!("#{index}")
                } else {
                    n.name.clone()
                },
                op_type: n.op_type.clone(),
                domain: n.domain.clone(),
                error,
            });
        }
    }
    if !issues.is_empty() {
        return Err(ImportError::Nodes(issues));
    }
    let mut outputs = Vec::new();
    let mut results = Vec::new();
    for vi in &g.output {
        let v = graph.value(&vi.name).ok_or_else(|| {
            ImportError::Model(format!("graph output `{}` is never computed", vi.name))
        })?;
        results.push(v.expr.clone());
        outputs.push(Port {
            onnx_name: vi.name.clone(),
            relay_name: relay_name(&v.expr),
            dtype: v.dtype,
            shape: port_shape(&v.shape),
            dim_params: dim_params(vi),
        });
    }
    let result = builder::tuple(results);
    let finished = graph.into_builder().finish(result, inputs.len());
    Ok(Built {
        main: finished.main,
        params: finished.params,
        inputs,
        outputs,
    })
}

/// The name a graph output's expression has in `@main` (a variable's; a literal has none).
fn relay_name(e: &Expr) -> String {
    match e.kind() {
        relay_ir::ExprKind::Var(v) => v.name().to_string(),
        _ => String::new(),
    }
}

/// The importer's node step: converts `node`, recording its outputs.
fn node(g: &mut Graph, node: &NodeProto) -> Result<(), ConvertError> {
    if !(node.domain.is_empty() || node.domain == "ai.onnx") {
        return Err(format!("domain `{}` is not supported", node.domain).into());
    }
    check_dynamic(g, node)?;
    let outputs = ops::convert(g, node)?;
    let outputs = symbolic_outputs(g, node, outputs)?;
    // Every value's element count fits the shape arithmetic of the nodes that read it.
    for v in &outputs {
        let count = v
            .shape
            .iter()
            .try_fold(1i64, |p, &d| if d < 0 { Some(p) } else { p.checked_mul(d) });
        if count.is_none_or(|n| n >= 1 << 48) {
            return Err(format!("an output of shape {:?} is too large", v.shape).into());
        }
    }
    for (name, v) in node.output.iter().zip(outputs) {
        if !name.is_empty() {
            g.define(name.clone(), v);
        }
    }
    Ok(())
}

/// An error when an input of `node` has a dynamic dimension that its conversion does not
/// take ([`symbolic::accepts_dynamic`]).
fn check_dynamic(g: &Graph, node: &NodeProto) -> Result<(), ConvertError> {
    let inputs: Vec<(usize, &Value)> = g.computed_inputs(node).collect();
    let rank = match inputs.first() {
        Some((0, x)) => x.shape.len(),
        _ => 0,
    };
    let accepts = symbolic::accepts_dynamic(node, rank);
    for (i, v) in inputs {
        let dynamic = match accepts {
            Some(true) => false,
            Some(false) => symbolic::is_dynamic(v.shape.get(1..).unwrap_or_default()),
            None => symbolic::is_dynamic(&v.shape),
        };
        if dynamic {
            return Err(format!(
                "input {i} has the dynamic shape {}, which this operator does not take{}: \
                 fix the model's symbolic dimensions with --input-shape",
                shape_text(&v.shape),
                if accepts == Some(false) {
                    " (only its first, batch dimension may be dynamic)"
                } else {
                    ""
                }
            )
            .into());
        }
        if accepts.is_none() && v.elems.is_some() {
            return Err(format!(
                "input {i} is computed from a dynamic dimension, and this operator needs \
                 it at import: fix the model's symbolic dimensions with --input-shape"
            )
            .into());
        }
    }
    Ok(())
}

/// `outputs` of `node` with the elements of a shape vector computed from dynamic
/// dimensions recorded ([`shape_vectors::elements`]), or made a constant when none of them
/// is dynamic after all (a static dimension of a dynamic shape).
fn symbolic_outputs(
    g: &mut Graph,
    node: &NodeProto,
    mut outputs: Vec<Value>,
) -> Result<Vec<Value>, ConvertError> {
    let involved = g.computed_inputs(node).any(|(_, v)| {
        v.elems.is_some() || node.op_type == "Shape" && symbolic::is_dynamic(&v.shape)
    });
    let Some(first) = outputs.first_mut().filter(|_| involved) else {
        return Ok(outputs);
    };
    let Some(elems) = shape_vectors::elements(g, node, &Attrs(&node.attribute)) else {
        return Ok(outputs);
    };
    let integers = first.dtype.is_int() || first.dtype == DType::BOOL;
    if elems.len() as i64 != symbolic::product(&first.shape) || !integers {
        return Ok(outputs);
    }
    if elems.iter().any(|&e| symbolic::is_symbol(e)) {
        first.elems = Some(elems);
        return Ok(outputs);
    }
    let values: Vec<i128> = elems.iter().map(|&e| i128::from(e)).collect();
    let array =
        NDArray::from_i128_slice(first.dtype, &first.shape, &values).map_err(|e| e.to_string())?;
    let hint = node.output.first().cloned().unwrap_or_default();
    outputs[0] = g.constant(&format!("{hint}_known"), array);
    Ok(outputs)
}

/// A graph input given as a constant, as the element type the graph declares for it:
/// `bfloat16` and 8-bit floats given as their bits or as float values are converted; another
/// element type than the declared one is an error.
fn frozen_as(name: &str, array: &NDArray, declared: Option<DType>) -> Result<NDArray, ImportError> {
    let Some(declared) = declared.filter(|&d| d != array.dtype()) else {
        return Ok(array.clone());
    };
    array.to_minifloat(declared).ok_or_else(|| {
        ImportError::Model(format!(
            "graph input `{name}` is declared with {declared} elements, and is given {}",
            array.dtype()
        ))
    })
}

/// A shape as a [`Port`] gives it: `-1` for a dynamic dimension.
fn port_shape(shape: &[i64]) -> Vec<i64> {
    shape.iter().map(|&d| d.max(-1)).collect()
}

/// The `dim_param` names `vi` declares, per dimension.
fn dim_params(vi: &ValueInfoProto) -> Vec<Option<String>> {
    let dims = vi
        .r#type
        .as_ref()
        .and_then(|t| t.tensor_type.as_ref())
        .and_then(|t| t.shape.as_ref())
        .map(|s| s.dim.as_slice())
        .unwrap_or_default();
    dims.iter()
        .map(|d| match &d.value {
            Some(DimensionValue::DimParam(p)) => Some(p.clone()),
            _ => None,
        })
        .collect()
}
/// The dtype and static shape of graph input `vi` (its shape from `options` when given).
fn value_type(
    vi: &ValueInfoProto,
    options: &ImportOptions,
    symbols: &mut HashMap<String, i64>,
) -> Result<(DType, Vec<i64>), ImportError> {
    let bad = |m: &str| ImportError::Model(format!("graph input `{}`: {m}", vi.name));
    let t = vi
        .r#type
        .as_ref()
        .and_then(|t| t.tensor_type.as_ref())
        .ok_or_else(|| bad("not a tensor"))?;
    let dtype =
        tensor::dtype(t.elem_type).ok_or_else(|| bad("its element type is not supported"))?;
    // Element counts must fit comfortably in 64 bits for the shape arithmetic of the import.
    let checked = |shape: Vec<i64>| {
        let fits = shape
            .iter()
            .try_fold(1i64, |n, &d| if d < 0 { Some(n) } else { n.checked_mul(d) })
            .is_some_and(|n| n < 1 << 48);
        if fits {
            Ok(shape)
        } else {
            Err(bad(&format!("shape {shape:?} is too large")))
        }
    };
    let dims = t
        .shape
        .as_ref()
        .map(|s| s.dim.as_slice())
        .unwrap_or_default();
    if let Some((_, shape)) = options.input_shapes.iter().find(|(n, _)| *n == vi.name) {
        // A given shape fixes the symbolic dimensions; the static ones must agree.
        let agrees = t.shape.is_none()
            || dims.len() == shape.len()
                && dims.iter().zip(shape).all(|(d, &n)| match &d.value {
                    Some(DimensionValue::DimValue(v)) => *v == n,
                    _ => true,
                });
        if !agrees {
            let declared: Vec<String> = dims
                .iter()
                .map(|d| match &d.value {
                    Some(DimensionValue::DimValue(v)) => v.to_string(),
                    Some(DimensionValue::DimParam(p)) => p.clone(),
                    None => "?".into(),
                })
                .collect();
            return Err(bad(&format!(
                "shape {shape:?} given, the model declares [{}]",
                declared.join(", ")
            )));
        }
        return Ok((dtype, checked(shape.clone())?));
    }
    if t.shape.is_none() {
        return Err(bad(
            "the model declares no shape: give it with --input-shape",
        ));
    }
    // A symbolic or unknown dimension stays dynamic: a symbol, one per `dim_param` name.
    let shape = dims
        .iter()
        .map(|d| match &d.value {
            Some(DimensionValue::DimValue(n)) if *n >= 0 => *n,
            Some(DimensionValue::DimParam(p)) if !p.is_empty() => {
                let next = symbolic::named(symbols.len());
                *symbols.entry(p.clone()).or_insert(next)
            }
            _ => symbolic::ANY,
        })
        .collect::<Vec<i64>>();
    Ok((dtype, checked(shape)?))
}
