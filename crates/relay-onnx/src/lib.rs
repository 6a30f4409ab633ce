//! ONNX models into Relay: [`import`] decodes a `ModelProto` (`prost` messages written from
//! ONNX's field numbers, [`proto`]), turns its initializers into parameters of `@main` (bound
//! by name, as `relayc --params` binds a `.npz`), and its nodes, in order, into Relay calls
//! ([`ops`]), built as IR by a typed builder ([`builder`]: operators by name with
//! attributes, result types from the operators' relations, calls on constants evaluated at
//! once) and then type-checked.
//!
//! Values keep their shapes through the import ([`graph`]): the operators whose Relay
//! form needs them (`Reshape`'s `0` and `-1`, `Flatten`, `MatMul` of rank above 2, `Squeeze`,
//! `auto_pad`) compute them, and inputs given as constants (`Reshape`'s shape, `Clip`'s
//! bounds, `Unsqueeze`'s axes from opset 13) are read from the initializers. A dimension
//! the model leaves symbolic, unless an input shape fixes it, stays dynamic (`symbolic.rs`):
//! `?` in the text, run by the VM at whatever size the inputs have. Every node the
//! importer cannot convert is reported, all together, with its name, type and domain.

mod attrs;
mod builder;
pub mod error;
mod graph;
mod import;
mod ops;
pub mod proto;
mod shape_vectors;
mod symbolic;
mod tensor;

use std::path::PathBuf;

pub use error::{ConvertError, ImportError, NodeIssue};
use prost::Message;
use relay_ir::{GlobalFunc, Module, PrintOptions, Span, Symbol};
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
    /// The module, type-checked.
    pub module: Module,
    /// The parameters of `@main` that are the model's initializers, by Relay name.
    pub params: Vec<(String, NDArray)>,
    /// The graph's inputs (those that are not initializers), in order.
    pub inputs: Vec<Port>,
    /// The graph's outputs, in order (`@main` returns a tuple when there are several).
    pub outputs: Vec<Port>,
}

impl Imported {
    /// The module as canonical Relay text, its version line followed by [`Imported::comment`].
    pub fn text(&self) -> String {
        with_comment(&self.module, &self.comment())
    }

    /// A comment naming each input's ONNX name and the parameter it became.
    pub fn comment(&self) -> String {
        let mut out =
            String::from("// Imported from ONNX by relayc. Inputs (ONNX name -> parameter):");
        for p in &self.inputs {
            out.push_str(&format!(" `{}` -> %{};", p.onnx_name, p.relay_name));
        }
        out
    }
}

/// `module`'s text with the comment line `comment` after its version line.
pub fn with_comment(module: &Module, comment: &str) -> String {
    let text = relay_ir::print_module(module, &PrintOptions::default());
    match text.split_once('\n') {
        Some((version, rest)) if version.starts_with("#[version") => {
            format!("{version}\n{comment}\n{rest}")
        }
        _ => format!("{comment}\n{text}"),
    }
}

/// Imports the ONNX model `bytes` (copied once into the buffer the model is decoded from;
/// [`import_owned`] takes a buffer of its own instead).
pub fn import(bytes: &[u8], options: &ImportOptions) -> Result<Imported, ImportError> {
    import_owned(bytes.to_vec(), options)
}

/// Imports the ONNX model `bytes`, decoded in place: the tensors' raw data are slices of
/// it until each is copied into its aligned array.
pub fn import_owned(bytes: Vec<u8>, options: &ImportOptions) -> Result<Imported, ImportError> {
    let buffer = prost::bytes::Bytes::from(bytes);
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
    let built = import::graph(graph, opset, options)?;
    let module = Module {
        functions: vec![GlobalFunc {
            name: Symbol::intern("main"),
            func: built.main,
            span: Span::DUMMY,
        }],
        ..Module::default()
    };
    relay_types::check_module(&module).map_err(|e| ImportError::Check(e.to_string()))?;
    Ok(Imported {
        module,
        params: built.params,
        inputs: built.inputs,
        outputs: built.outputs,
    })
}

#[cfg(test)]
mod tests;
