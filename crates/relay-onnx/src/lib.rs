//! ONNX models into Relay: [`import`] decodes a `ModelProto` (`prost` messages written from
//! ONNX's field numbers, [`proto`]), turns its initializers into parameters of `@main` (bound
//! by name, as `relayc --params` binds a `.npz`), and its nodes, in order, into Relay calls,
//! written as canonical Relay text that is then parsed and type-checked.
//!
//! Values keep their shapes through the import ([`graph`]): the operators whose Relay
//! form needs them (`Reshape`'s `0` and `-1`, `Flatten`, `MatMul` of rank above 2, `Squeeze`,
//! `auto_pad`) compute them, and inputs given as constants (`Reshape`'s shape, `Clip`'s
//! bounds, `Unsqueeze`'s axes from opset 13) are read from the initializers. A dimension
//! the model leaves symbolic, unless an input shape fixes it, stays dynamic (`symbolic.rs`):
//! `?` in the text, run by the VM at whatever size the inputs have. Every node the
//! importer cannot convert is reported, all together, with its name, type and domain.

pub mod error;
mod graph;
mod ops;
pub mod proto;
mod symbolic;
mod tensor;

use std::path::PathBuf;

pub use error::{ImportError, NodeIssue};
use prost::Message;
use relay_ir::Module;
use relay_runtime::{DType, NDArray};

/// The `ai.onnx` operator sets the importer reads.
pub const OPSETS: (i64, i64) = (7, 21);

/// How to import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// The directory external-data files are relative to (the model's directory).
    pub base_dir: Option<PathBuf>,
    /// Shapes for graph inputs by ONNX name, replacing their declared ones (which fixes
    /// `dim_param` and unknown dimensions; those not fixed stay dynamic, `?`).
    pub input_shapes: Vec<(String, Vec<i64>)>,
    /// Graph inputs whose values are known at import, by ONNX name: they become constants
    /// (shapes, axes and bounds given as inputs then fold), and the module is specialized to
    /// them.
    pub constants: Vec<(String, NDArray)>,
}

/// A graph input or output: its ONNX name, its Relay parameter name, dtype and shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Port {
    /// The name in the ONNX graph.
    pub onnx_name: String,
    /// The Relay identifier (without `%`) it became.
    pub relay_name: String,
    /// Its element type.
    pub dtype: DType,
    /// Its shape; `-1` for a dynamic dimension (a `dim_param` or unknown one that no
    /// [`ImportOptions::input_shapes`] fixed), `?` in the Relay text.
    pub shape: Vec<i64>,
    /// The model's name for each dimension that it declares symbolic (`dim_param`, such as
    /// `batch`), `None` for the others; empty when the model declares no shape.
    pub dim_params: Vec<Option<String>>,
}

/// An imported model.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The module as canonical Relay text.
    pub text: String,
    /// The module, parsed and type-checked.
    pub module: Module,
    /// The parameters of `@main` that are the model's initializers, by Relay name.
    pub params: Vec<(String, NDArray)>,
    /// The graph's inputs (those that are not initializers), in order.
    pub inputs: Vec<Port>,
    /// The graph's outputs, in order (`@main` returns a tuple when there are several).
    pub outputs: Vec<Port>,
}

/// Imports the ONNX model `bytes`.
pub fn import(bytes: &[u8], options: &ImportOptions) -> Result<Imported, ImportError> {
    // Decoded from a buffer the tensors' raw data then slice, rather than copy.
    let buffer = prost::bytes::Bytes::copy_from_slice(bytes);
    let model =
        proto::ModelProto::decode(buffer).map_err(|e| ImportError::Decode(e.to_string()))?;
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .ok_or_else(|| ImportError::Model("the model imports no ai.onnx operator set".into()))?;
    if !(OPSETS.0..=OPSETS.1).contains(&opset) {
        return Err(ImportError::Opset(opset, OPSETS.0, OPSETS.1));
    }
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| ImportError::Model("the model has no graph".into()))?;
    let built = graph::Graph::import(graph, opset, options)?;
    let module = relay_syntax::parse(&built.text, "model.relay")
        .map_err(|e| ImportError::Check(format!("{e:?}\n{}", built.text)))?;
    relay_types::check_module(&module)
        .map_err(|e| ImportError::Check(format!("{e:?}\n{}", built.text)))?;
    Ok(Imported {
        text: built.text,
        module,
        params: built.params,
        inputs: built.inputs,
        outputs: built.outputs,
    })
}

#[cfg(test)]
mod tests;
