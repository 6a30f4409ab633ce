//! A graph's import: its values (each a Relay expression with its static shape and dtype,
//! and its contents when it is a constant), the `let`-chain of `@main` being written, and the
//! parameters the initializers become.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use relay_runtime::{DType, NDArray};

use crate::error::{ImportError, NodeIssue};
use crate::ops::Attrs;
use crate::proto::{DimensionValue, GraphProto, NodeProto, ValueInfoProto};
use crate::{ImportOptions, Port, ops, symbolic, tensor};

/// A value of the graph.
#[derive(Clone, Debug)]
pub(crate) struct Value {
    /// The Relay expression naming it (`%x`, `%3`).
    pub expr: String,
    /// Its shape.
    pub shape: Vec<i64>,
    /// Its element type.
    pub dtype: DType,
    /// Its contents, when it is an initializer or a constant (shared, not copied).
    pub konst: Option<Arc<NDArray>>,
    /// Its elements, when it is a small integer vector computed from dynamic dimensions
    /// (some elements symbols: [`crate::symbolic`]).
    pub elems: Option<Vec<i64>>,
}

/// What an import builds.
pub(crate) struct Built {
    pub text: String,
    pub params: Vec<(String, NDArray)>,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
}

/// The import of one graph.
pub(crate) struct Graph {
    /// The `ai.onnx` opset.
    pub opset: i64,
    values: HashMap<String, Value>,
    lines: Vec<String>,
    next: usize,
    names: HashSet<String>,
    /// `@main`'s parameters: (Relay name, type text), inputs first.
    main_params: Vec<(String, String)>,
    params: Vec<(String, Arc<NDArray>)>,
    /// The symbol of each `dim_param` name ([`symbolic::named`]).
    symbols: HashMap<String, i64>,
}

impl Graph {
    /// Imports `g` (of `ai.onnx` opset `opset`).
    pub(crate) fn import(
        g: &GraphProto,
        opset: i64,
        options: &ImportOptions,
    ) -> Result<Built, ImportError> {
        let mut graph = Graph {
            opset,
            values: HashMap::new(),
            lines: Vec::new(),
            next: 0,
            names: HashSet::new(),
            main_params: Vec::new(),
            params: Vec::new(),
            symbols: HashMap::new(),
        };
        let base = options.base_dir.as_deref();
        let mut initialized: HashSet<&str> =
            g.initializer.iter().map(|t| t.name.as_str()).collect();
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
            let name = graph.fresh(&vi.name);
            graph
                .main_params
                .push((name.clone(), type_text(&shape, dtype)));
            graph.values.insert(
                vi.name.clone(),
                Value {
                    expr: format!("%{name}"),
                    shape: shape.clone(),
                    dtype,
                    konst: None,
                    elems: None,
                },
            );
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
            graph.constant(name, frozen_as(name, array, declared)?);
        }
        for t in &g.initializer {
            let array = tensor::array(t, base)?;
            graph.constant(&t.name, array);
        }
        let mut issues = Vec::new();
        for (index, node) in g.node.iter().enumerate() {
            if let Err(message) = graph.node(node) {
                issues.push(NodeIssue {
                    node: if node.name.is_empty() {
                        format!("#{index}")
                    } else {
                        node.name.clone()
                    },
                    op_type: node.op_type.clone(),
                    domain: node.domain.clone(),
                    message,
                });
            }
        }
        if !issues.is_empty() {
            return Err(ImportError::Nodes(issues));
        }
        let mut outputs = Vec::new();
        let mut results = Vec::new();
        for vi in &g.output {
            let v = graph.values.get(&vi.name).ok_or_else(|| {
                ImportError::Model(format!("graph output `{}` is never computed", vi.name))
            })?;
            results.push(v.expr.clone());
            outputs.push(Port {
                onnx_name: vi.name.clone(),
                relay_name: v.expr.trim_start_matches('%').to_string(),
                dtype: v.dtype,
                shape: port_shape(&v.shape),
                dim_params: dim_params(vi),
            });
        }
        let result = match results.as_slice() {
            [one] => one.clone(),
            _ => format!("({})", results.join(", ")),
        };
        graph.drop_unused(&result, inputs.len());
        let text = graph.text(&inputs, &result);
        // The values are gone: each constant is the parameter's alone, moved out.
        drop(graph.values);
        let params = graph
            .params
            .into_iter()
            .map(|(n, a)| (n, Arc::try_unwrap(a).unwrap_or_else(|a| (*a).clone())))
            .collect();
        Ok(Built {
            text,
            params,
            inputs,
            outputs,
        })
    }

    /// Drops the bindings and constants nothing reads (an initializer replaced by its
    /// transposed copy, a shape read at import, a dynamic shape a `reshape` did not need),
    /// keeping the first `inputs` parameters, the graph's inputs.
    fn drop_unused(&mut self, result: &str, inputs: usize) {
        let mut used = HashSet::new();
        let read = |text: &str, used: &mut HashSet<String>| {
            for token in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '%'))
            {
                if let Some(name) = token.strip_prefix('%') {
                    used.insert(name.to_string());
                }
            }
        };
        read(result, &mut used);
        // Last to first: a `%v = ...` binding is kept when a kept line (or the result) reads
        // `%v`; the `let` of a local function is kept.
        let mut kept = Vec::with_capacity(self.lines.len());
        for line in std::mem::take(&mut self.lines).into_iter().rev() {
            let bound = line
                .split_once(" = ")
                .and_then(|(v, _)| v.strip_prefix('%'))
                .filter(|v| v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
            if bound.is_some_and(|v| !used.contains(v)) {
                continue;
            }
            read(&line, &mut used);
            kept.push(line);
        }
        kept.reverse();
        self.lines = kept;
        let keep = |(i, (name, _)): &(usize, &(String, String))| *i < inputs || used.contains(name);
        self.main_params = self
            .main_params
            .iter()
            .enumerate()
            .filter(keep)
            .map(|(_, p)| p.clone())
            .collect();
        self.params.retain(|(name, _)| used.contains(name));
    }

    /// The module's text.
    fn text(&self, inputs: &[Port], result: &str) -> String {
        let mut out = String::from("#[version = \"0.0.5\"]\n");
        out.push_str("// Imported from ONNX by relayc. Inputs (ONNX name -> parameter):");
        for p in inputs {
            out.push_str(&format!(" `{}` -> %{};", p.onnx_name, p.relay_name));
        }
        out.push('\n');
        let params: Vec<String> = self
            .main_params
            .iter()
            .map(|(n, t)| format!("%{n}: {t}"))
            .collect();
        out.push_str(&format!("def @main({}) {{\n", params.join(", ")));
        for line in &self.lines {
            out.push_str(&format!("  {line};\n"));
        }
        out.push_str(&format!("  {result}\n}}\n"));
        out
    }

    /// A Relay identifier for ONNX name `name`, unique in the module.
    fn fresh(&mut self, name: &str) -> String {
        let mut base: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if !base.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            base.insert(0, 'v');
        }
        let mut candidate = base.clone();
        let mut k = 1;
        while !self.names.insert(candidate.clone()) {
            candidate = format!("{base}_{k}");
            k += 1;
        }
        candidate
    }

    /// Makes ONNX value `name` the constant `array`: a parameter of `@main`.
    pub(crate) fn constant(&mut self, name: &str, array: NDArray) -> Value {
        self.named_constant(name, name, array)
    }

    /// [`Graph::constant`] with the Relay name made from `hint`.
    fn named_constant(&mut self, name: &str, hint: &str, array: NDArray) -> Value {
        let relay = self.fresh(hint);
        let (shape, dtype) = (array.shape().to_vec(), array.dtype());
        let array = Arc::new(array);
        self.main_params
            .push((relay.clone(), type_text(&shape, dtype)));
        self.params.push((relay.clone(), Arc::clone(&array)));
        let v = Value {
            expr: format!("%{relay}"),
            shape,
            dtype,
            konst: Some(array),
            elems: None,
        };
        self.values.insert(name.to_string(), v.clone());
        v
    }

    /// A new constant (not an ONNX value) holding `array`, named after `hint`.
    pub(crate) fn new_constant(&mut self, hint: &str, array: NDArray) -> Value {
        // A key no ONNX name has.
        let key = format!("\u{0}{hint}{}", self.next);
        self.next += 1;
        self.named_constant(&key, hint, array)
    }

    /// A new int64 constant of `shape` holding `values` (indices, offsets), named after `hint`.
    pub(crate) fn int64_constant(
        &mut self,
        hint: &str,
        shape: &[i64],
        values: impl IntoIterator<Item = i64>,
    ) -> Result<Value, String> {
        elements(shape)?;
        let values: Vec<i128> = values.into_iter().map(i128::from).collect();
        let array =
            NDArray::from_i128_slice(DType::I64, shape, &values).map_err(|e| e.to_string())?;
        Ok(self.new_constant(hint, array))
    }

    /// Binds `expr` (of `shape` and `dtype`) to the next `let` and returns the bound value.
    pub(crate) fn bind(&mut self, expr: String, shape: Vec<i64>, dtype: DType) -> Value {
        let var = format!("%{}", self.next);
        self.next += 1;
        self.lines.push(format!("{var} = {expr}"));
        Value {
            expr: var,
            shape,
            dtype,
            konst: None,
            elems: None,
        }
    }

    /// `x` reshaped to `to` (dimensions dynamic or not), or `x` itself when it has that shape
    /// already. A dynamic target is a `reshape` with Relay's `0` and `-1` codes
    /// ([`symbolic::newshape`]), or else, when it only adds or removes axes of 1, a `squeeze`
    /// and an `expand_dims`.
    pub(crate) fn reshape(&mut self, x: &Value, to: Vec<i64>) -> Result<Value, String> {
        if x.shape == to {
            return Ok(x.clone());
        }
        use crate::ops::list;
        if let Some(codes) = symbolic::newshape(&x.shape, &to) {
            let text = format!("reshape({}, newshape={})", x.expr, list(&codes));
            return Ok(self.bind(text, to, x.dtype));
        }
        let kept = |s: &[i64]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
        if kept(&x.shape) != kept(&to) {
            return Err(format!(
                "reshaping {} to {}: give the model's symbolic dimensions with --input-shape",
                shape_text(&x.shape),
                shape_text(&to)
            ));
        }
        let ones: Vec<i64> = (0..x.shape.len() as i64)
            .filter(|&i| x.shape[i as usize] == 1)
            .collect();
        let mut text = if ones.is_empty() {
            x.expr.clone()
        } else {
            format!("squeeze({}, axis={})", x.expr, list(&ones))
        };
        for (i, _) in to.iter().enumerate().filter(|(_, d)| **d == 1) {
            text = format!("expand_dims({text}, axis={i})");
        }
        Ok(self.bind(text, to, x.dtype))
    }

    /// A fresh local variable (`%hintN`) for a function's parameter or a `let`.
    pub(crate) fn fresh_local(&mut self, hint: &str) -> String {
        let var = format!("%{}", self.fresh(&format!("{hint}{}", self.next)));
        self.next += 1;
        var
    }

    /// Appends a line as written (a `let` of a local function).
    pub(crate) fn push_line(&mut self, line: String) {
        self.lines.push(line);
    }

    /// Imports subgraph `body` (an `If` branch, a `Loop` or `Scan` body) with its inputs
    /// bound to `inputs`, in order; the values of the enclosing graphs stay visible (a body
    /// captures them). Returns the lines that compute its outputs — to be placed in a nested
    /// block — and the outputs; the body's own names are gone afterwards. Its initializers
    /// become parameters of `@main`, like the graph's.
    pub(crate) fn subgraph(
        &mut self,
        body: &GraphProto,
        inputs: Vec<Value>,
    ) -> Result<(Vec<String>, Vec<Value>), String> {
        if body.input.len() != inputs.len() {
            return Err(format!(
                "the body takes {} inputs, not {}",
                body.input.len(),
                inputs.len()
            ));
        }
        let outer_values = self.values.clone();
        let outer_lines = std::mem::take(&mut self.lines);
        let result = self.body(body, inputs);
        let lines = std::mem::replace(&mut self.lines, outer_lines);
        self.values = outer_values;
        result.map(|outputs| (lines, outputs))
    }

    /// [`Graph::subgraph`]'s import, into `self.lines`.
    fn body(&mut self, body: &GraphProto, inputs: Vec<Value>) -> Result<Vec<Value>, String> {
        for (vi, v) in body.input.iter().zip(inputs) {
            self.values.insert(vi.name.clone(), v);
        }
        for t in &body.initializer {
            let array = tensor::array(t, None).map_err(|e| e.to_string())?;
            self.constant(&t.name, array);
        }
        for (index, node) in body.node.iter().enumerate() {
            self.node(node).map_err(|message| {
                let name = if node.name.is_empty() {
                    format!("#{index}")
                } else {
                    node.name.clone()
                };
                format!("in its body, node `{name}` ({}): {message}", node.op_type)
            })?;
        }
        body.output
            .iter()
            .map(|vi| {
                self.values
                    .get(&vi.name)
                    .cloned()
                    .ok_or_else(|| format!("body output `{}` is never computed", vi.name))
            })
            .collect()
    }

    /// Makes `key` (a name no ONNX value has) stand for `v`.
    pub(crate) fn define(&mut self, key: String, v: Value) {
        self.values.insert(key, v);
    }

    /// Input `i` of `node` (an error when absent or not yet computed).
    pub(crate) fn input(&self, node: &NodeProto, i: usize) -> Result<Value, String> {
        let name = node
            .input
            .get(i)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("input {i} is missing"))?;
        self.values
            .get(name)
            .cloned()
            .ok_or_else(|| format!("input `{name}` is not computed before this node"))
    }

    /// Input `i` of `node` when it is present (an empty name or no such input: `None`).
    pub(crate) fn optional_input(
        &self,
        node: &NodeProto,
        i: usize,
    ) -> Result<Option<Value>, String> {
        match node.input.get(i).filter(|n| !n.is_empty()) {
            None => Ok(None),
            Some(_) => self.input(node, i).map(Some),
        }
    }

    /// The inputs of `node` that are present and computed, by position (borrowed: the checks
    /// before and after a conversion read them; a missing one is the conversion's error).
    fn computed_inputs<'a>(
        &'a self,
        node: &'a NodeProto,
    ) -> impl Iterator<Item = (usize, &'a Value)> + 'a {
        node.input.iter().enumerate().filter_map(|(i, name)| {
            let v = self
                .values
                .get(name.as_str())
                .filter(|_| !name.is_empty())?;
            Some((i, v))
        })
    }

    /// Converts `node`, recording its outputs.
    fn node(&mut self, node: &NodeProto) -> Result<(), String> {
        if !(node.domain.is_empty() || node.domain == "ai.onnx") {
            return Err(format!("domain `{}` is not supported", node.domain));
        }
        self.check_dynamic(node)?;
        let first_line = self.lines.len();
        let outputs = ops::convert(self, node)?;
        let outputs = self.symbolic(node, outputs)?;
        // Every value's element count fits the shape arithmetic of the nodes that read it.
        for v in &outputs {
            let count = v
                .shape
                .iter()
                .try_fold(1i64, |p, &d| if d < 0 { Some(p) } else { p.checked_mul(d) });
            if count.is_none_or(|n| n >= 1 << 48) {
                return Err(format!("an output of shape {:?} is too large", v.shape));
            }
        }
        let outputs = self.fold(node, first_line, outputs);
        for (name, v) in node.output.iter().zip(outputs) {
            if !name.is_empty() {
                self.values.insert(name.clone(), v);
            }
        }
        Ok(())
    }

    /// An error when an input of `node` has a dynamic dimension that its conversion does not
    /// take ([`symbolic::accepts_dynamic`]).
    fn check_dynamic(&self, node: &NodeProto) -> Result<(), String> {
        let inputs: Vec<(usize, &Value)> = self.computed_inputs(node).collect();
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
                ));
            }
            if accepts.is_none() && v.elems.is_some() {
                return Err(format!(
                    "input {i} is computed from a dynamic dimension, and this operator needs \
                     it at import: fix the model's symbolic dimensions with --input-shape"
                ));
            }
        }
        Ok(())
    }

    /// `outputs` of `node` with the elements of a shape vector computed from dynamic
    /// dimensions recorded ([`symbolic::elements`]), or made a constant when none of them
    /// is dynamic after all (a static dimension of a dynamic shape).
    fn symbolic(
        &mut self,
        node: &NodeProto,
        mut outputs: Vec<Value>,
    ) -> Result<Vec<Value>, String> {
        let involved = self.computed_inputs(node).any(|(_, v)| {
            v.elems.is_some() || node.op_type == "Shape" && symbolic::is_dynamic(&v.shape)
        });
        let Some(first) = outputs.first_mut().filter(|_| involved) else {
            return Ok(outputs);
        };
        let Some(elems) = symbolic::elements(self, node, &Attrs(&node.attribute)) else {
            return Ok(outputs);
        };
        if elems.len() as i64 != symbolic::product(&first.shape) || !first.dtype.is_int() {
            return Ok(outputs);
        }
        if elems.iter().any(|&e| symbolic::is_symbol(e)) {
            first.elems = Some(elems);
            return Ok(outputs);
        }
        let values: Vec<i128> = elems.iter().map(|&e| i128::from(e)).collect();
        let array = NDArray::from_i128_slice(first.dtype, &first.shape, &values)
            .map_err(|e| e.to_string())?;
        let hint = node.output.first().cloned().unwrap_or_default();
        outputs[0] = self.new_constant(&format!("{hint}_known"), array);
        Ok(outputs)
    }

    /// `outputs` of `node`, computed by the lines from `first_line` on, evaluated now when
    /// every input is a constant and each output small (a shape computation: `Shape` →
    /// `Gather` → `Concat` → `Reshape`): the reference interpreter runs those lines on the
    /// constants, and the outputs become constants that later nodes read as such.
    fn fold(&mut self, node: &NodeProto, first_line: usize, outputs: Vec<Value>) -> Vec<Value> {
        const SMALL: i64 = 4096;
        let inputs: Vec<Value> = (0..node.input.len())
            .filter_map(|i| self.optional_input(node, i).ok().flatten())
            .collect();
        // Control flow is not run at import (a loop may iterate a million times); the nodes
        // of a branch taken at import fold one by one.
        let control = matches!(node.op_type.as_str(), "If" | "Loop" | "Scan");
        let foldable = !control
            && !inputs.is_empty()
            && inputs.iter().all(|v| v.konst.is_some())
            && outputs
                .iter()
                .all(|v| v.konst.is_none() && (0..=SMALL).contains(&symbolic::product(&v.shape)))
            && self.lines.len() > first_line;
        if !foldable {
            return outputs;
        }
        let params: Vec<String> = inputs
            .iter()
            .map(|v| format!("{}: {}", v.expr, type_text(&v.shape, v.dtype)))
            .collect();
        let body: Vec<String> = self.lines[first_line..]
            .iter()
            .map(|l| format!("  {l};"))
            .collect();
        let results: Vec<&str> = outputs.iter().map(|v| v.expr.as_str()).collect();
        let text = format!(
            "#[version = \"0.0.5\"]\ndef @main({}) {{\n{}\n  ({},)\n}}\n",
            params.join(", "),
            body.join("\n"),
            results.join(", ")
        );
        let Some(values) = evaluate(&text, &inputs) else {
            return outputs;
        };
        self.lines.truncate(first_line);
        let hint = node.output.first().cloned().unwrap_or_default();
        values
            .into_iter()
            .zip(&outputs)
            .map(|(array, v)| {
                let c = self.new_constant(&format!("{hint}_folded"), array);
                Value {
                    shape: v.shape.clone(),
                    dtype: v.dtype,
                    ..c
                }
            })
            .collect()
    }
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

/// The tensors `text`'s `@main` returns on `inputs`' constants, by the reference
/// interpreter; `None` if it does not parse, check or run.
fn evaluate(text: &str, inputs: &[Value]) -> Option<Vec<NDArray>> {
    let module = relay_syntax::parse(text, "fold.relay").ok()?;
    relay_types::check_module(&module).ok()?;
    let args = inputs
        .iter()
        .map(|v| Some(relay_runtime::Value::Tensor(Arc::clone(v.konst.as_ref()?))))
        .collect::<Option<Vec<_>>>()?;
    match relay_interp::run(&module, "main", args, &Default::default()).ok()? {
        relay_runtime::Value::Tuple(fields) => fields
            .iter()
            .map(|f| match f {
                relay_runtime::Value::Tensor(t) => Some((**t).clone()),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// The most elements a constant computed at import (`Range`, `ConstantOfShape`, index tables) may have.
pub(crate) const MAX_ELEMENTS: usize = 1 << 24;

/// The element count of `shape`, checked against [`MAX_ELEMENTS`].
pub(crate) fn elements(shape: &[i64]) -> Result<usize, String> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| {
            usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
        })
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| format!("a constant of shape {shape:?}"))
}

/// The text of a tensor type; a negative dimension is dynamic (`?`).
pub(crate) fn type_text(shape: &[i64], dtype: DType) -> String {
    format!("Tensor[{}, {dtype}]", shape_text(shape))
}

/// The text of a shape, `(1, ?, 3)`; a negative dimension is dynamic (`?`).
pub(crate) fn shape_text(shape: &[i64]) -> String {
    let dims: Vec<String> = shape
        .iter()
        .map(|&d| if d < 0 { "?".into() } else { d.to_string() })
        .collect();
    match dims.len() {
        1 => format!("({})", dims[0]),
        _ => format!("({})", dims.join(", ")),
    }
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
