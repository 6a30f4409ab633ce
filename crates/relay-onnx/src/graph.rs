//! A graph being imported: the value of each ONNX name (a Relay expression with its shape,
//! dtype and, for a constant, its contents), the builder writing `@main`, and the import of
//! subgraphs (`If` branches, `Loop` and `Scan` bodies) into nested blocks.

use crate::error::ConvertError;
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};

use relay_ir::Binding;
use relay_runtime::NDArray;

use crate::builder::{Builder, Value, attr};
use crate::proto::{GraphProto, NodeProto};
use crate::{symbolic, tensor};

/// Converts one node into `g`, recording its outputs (the importer's node step, given to
/// the graph so that a subgraph's nodes convert as the graph's do).
pub(crate) type NodeFn = fn(g: &mut Graph, node: &NodeProto) -> Result<(), ConvertError>;

/// An ONNX sequence of tensors that is only appended to (`ops/sequence.rs`).
#[derive(Clone, Debug)]
pub(crate) enum Sequence {
    /// Empty (`SequenceEmpty`): no element shape yet.
    Empty,
    /// Its elements stacked along a new first axis: `[n, element...]`.
    Stacked(Value),
    /// A sequence a `Loop` carries, as its body receives it: what the body appends becomes a
    /// scan output of the loop.
    Carried,
    /// A carried sequence with an element appended (the body's next value of it; the element
    /// is the value of the same name).
    Appended,
}

/// A subgraph imported into a block of its own ([`Graph::subgraph_carrying`]).
pub(crate) struct Body {
    /// The block's bindings.
    pub bindings: Vec<Binding>,
    /// The values of its outputs.
    pub outputs: Vec<Value>,
    /// Per output, whether it is the element appended to a carried sequence.
    pub appended: Vec<bool>,
}

/// The import of one graph.
pub(crate) struct Graph {
    /// The `ai.onnx` opset.
    pub opset: i64,
    /// The builder writing `@main`.
    builder: Builder,
    values: HashMap<String, Value>,
    /// The ONNX names that are sequences (also in `values`, as a placeholder or their stack).
    sequences: HashMap<String, Sequence>,
    /// The symbol of each `dim_param` name ([`symbolic::named`]).
    pub symbols: HashMap<String, i64>,
    node: NodeFn,
}

impl Deref for Graph {
    type Target = Builder;
    fn deref(&self) -> &Builder {
        &self.builder
    }
}

impl DerefMut for Graph {
    fn deref_mut(&mut self) -> &mut Builder {
        &mut self.builder
    }
}

impl Graph {
    /// An empty graph of `ai.onnx` opset `opset` whose nodes convert by `node`.
    pub(crate) fn new(opset: i64, node: NodeFn) -> Graph {
        Graph {
            opset,
            builder: Builder::new(),
            values: HashMap::new(),
            sequences: HashMap::new(),
            symbols: HashMap::new(),
            node,
        }
    }

    /// The builder, taken to finish `@main`.
    pub(crate) fn into_builder(self) -> Builder {
        self.builder
    }

    /// The value of ONNX name `name`, if it is computed.
    pub(crate) fn value(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    /// The sequence ONNX name `name` is, if it is one.
    pub(crate) fn sequence(&self, name: &str) -> Option<&Sequence> {
        self.sequences.get(name)
    }

    /// Makes ONNX name `name` the sequence `s`.
    pub(crate) fn define_sequence(&mut self, name: &str, s: Sequence) {
        self.sequences.insert(name.to_string(), s);
    }

    /// Makes ONNX value (or private key) `name` stand for `v`.
    pub(crate) fn define(&mut self, name: impl Into<String>, v: Value) {
        self.values.insert(name.into(), v);
    }

    /// Makes ONNX value `name` the constant `array`: a parameter of `@main`.
    pub(crate) fn named_constant(&mut self, name: &str, array: NDArray) -> Value {
        let v = self.builder.constant(name, array);
        self.values.insert(name.to_string(), v.clone());
        v
    }

    /// Input `i` of `node` (an error when absent or not yet computed).
    pub(crate) fn input(&self, node: &NodeProto, i: usize) -> Result<Value, ConvertError> {
        let name = node
            .input
            .get(i)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ConvertError::from(format!("input {i} is missing")))?;
        self.values.get(name).cloned().ok_or_else(|| {
            ConvertError::from(format!("input `{name}` is not computed before this node"))
        })
    }

    /// Input `i` of `node` when it is present (an empty name or no such input: `None`).
    pub(crate) fn optional_input(
        &self,
        node: &NodeProto,
        i: usize,
    ) -> Result<Option<Value>, ConvertError> {
        match node.input.get(i).filter(|n| !n.is_empty()) {
            None => Ok(None),
            Some(_) => self.input(node, i).map(Some),
        }
    }

    /// The inputs of `node` that are present and computed, by position (a missing one is
    /// the conversion's error).
    pub(crate) fn computed_inputs<'a>(
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

    /// Converts `node` by the importer's node step.
    pub(crate) fn convert(&mut self, node: &NodeProto) -> Result<(), ConvertError> {
        (self.node)(self, node)
    }

    /// Imports subgraph `body` (an `If` branch, a `Loop` or `Scan` body) with its inputs
    /// bound to `inputs`, in order, into a nested block; the values of the enclosing graphs
    /// stay visible (a body captures them). Returns the block's bindings and the body's
    /// outputs; the body's own names are gone afterwards. Its initializers become parameters
    /// of `@main`, like the graph's.
    pub(crate) fn subgraph(
        &mut self,
        body: &GraphProto,
        inputs: Vec<Value>,
    ) -> Result<(Vec<Binding>, Vec<Value>), ConvertError> {
        let b = self.subgraph_carrying(body, inputs, &[])?;
        Ok((b.bindings, b.outputs))
    }

    /// [`Graph::subgraph`] of a `Loop` body whose inputs at the positions `sequences` are
    /// carried sequences ([`Sequence::Carried`]; `inputs` has the others' values, in order),
    /// with, per output, whether it is the element appended to a carried sequence.
    pub(crate) fn subgraph_carrying(
        &mut self,
        body: &GraphProto,
        inputs: Vec<Value>,
        sequences: &[usize],
    ) -> Result<Body, ConvertError> {
        if body.input.len() != inputs.len() + sequences.len() {
            return Err(format!(
                "the body takes {} inputs, not {}",
                body.input.len(),
                inputs.len() + sequences.len()
            )
            .into());
        }
        let outer = (self.values.clone(), self.sequences.clone());
        self.builder.open();
        let result = self.body(body, inputs, sequences);
        let appended = body
            .output
            .iter()
            .map(|o| matches!(self.sequences.get(&o.name), Some(Sequence::Appended)))
            .collect();
        let bindings = self.builder.close();
        (self.values, self.sequences) = outer;
        result.map(|outputs| Body {
            bindings,
            outputs,
            appended,
        })
    }

    /// [`Graph::subgraph`]'s import, into the open block.
    fn body(
        &mut self,
        body: &GraphProto,
        inputs: Vec<Value>,
        sequences: &[usize],
    ) -> Result<Vec<Value>, ConvertError> {
        let mut inputs = inputs.into_iter();
        for (i, vi) in body.input.iter().enumerate() {
            if sequences.contains(&i) {
                self.sequences.insert(vi.name.clone(), Sequence::Carried);
            } else if let Some(v) = inputs.next() {
                self.values.insert(vi.name.clone(), v);
            }
        }
        for t in &body.initializer {
            let array = tensor::array(t, None).map_err(|e| e.to_string())?;
            self.named_constant(&t.name, array);
        }
        for (index, node) in body.node.iter().enumerate() {
            self.convert(node).map_err(|message| {
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
                self.values.get(&vi.name).cloned().ok_or_else(|| {
                    ConvertError::from(format!("body output `{}` is never computed", vi.name))
                })
            })
            .collect()
    }

    /// `x` reshaped to `to` (dimensions dynamic or not), or `x` itself when it has that shape
    /// already. A dynamic target is a `reshape` with Relay's `0` and `-1` codes
    /// ([`symbolic::newshape`]), or else, when it only adds or removes axes of 1, a `squeeze`
    /// and an `expand_dims`.
    pub(crate) fn reshape(&mut self, x: &Value, to: Vec<i64>) -> Result<Value, ConvertError> {
        if x.shape == to {
            return Ok(x.clone());
        }
        if let Some(codes) = symbolic::newshape(&x.shape, &to) {
            return self.call_as("reshape", &[x], &[("newshape", attr::ints(&codes))], &to);
        }
        let kept = |s: &[i64]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
        if kept(&x.shape) != kept(&to) {
            return Err(format!(
                "reshaping {} to {}: give the model's symbolic dimensions with --input-shape",
                shape_text(&x.shape),
                shape_text(&to)
            )
            .into());
        }
        let ones: Vec<i64> = (0..x.shape.len() as i64)
            .filter(|&i| x.shape[i as usize] == 1)
            .collect();
        let mut y = x.clone();
        if !ones.is_empty() {
            let squeezed = kept(&x.shape);
            y = self.call_as("squeeze", &[&y], &[("axis", attr::ints(&ones))], &squeezed)?;
        }
        for (i, _) in to.iter().enumerate().filter(|(_, d)| **d == 1) {
            let mut shape = y.shape.clone();
            shape.insert(i, 1);
            y = self.call_as(
                "expand_dims",
                &[&y],
                &[("axis", attr::int(i as i64))],
                &shape,
            )?;
        }
        Ok(y)
    }
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

/// The text of a tensor type, `Tensor[(1, ?, 3), float32]`, for messages.
pub(crate) fn type_text(shape: &[i64], dtype: relay_runtime::DType) -> String {
    format!("Tensor[{}, {dtype}]", shape_text(shape))
}
