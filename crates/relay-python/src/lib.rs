//! The `relayc` Python package's native module, `relayc._relayc` (SPEC §8): parse, check and
//! compile Relay programs, import ONNX models, save and load executables, and run them on
//! numpy arrays from any number of Python threads.
//!
//! Everything here is a binding over the `relay` library crate: the compiler, the VM and the
//! file format are the ones `relayc` and `relay` use; this crate converts between Python and
//! Rust values, releases the GIL around compiling and running, and turns `relay::Error`s into
//! Python exceptions (`errors`). The Python package around it (`python/relayc/`) adds the type
//! stubs.

mod convert;
mod errors;
mod executable;
mod module;
mod values;
mod vm;

use pyo3::prelude::*;

/// The native module; `relayc/__init__.py` re-exports it.
#[pymodule]
fn _relayc(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<module::Module>()?;
    m.add_class::<executable::Executable>()?;
    m.add_class::<executable::Function>()?;
    m.add_class::<vm::VM>()?;
    m.add_class::<values::ADT>()?;
    m.add_class::<values::Ref>()?;
    m.add_class::<values::Closure>()?;
    m.add_function(wrap_pyfunction!(module::parse, m)?)?;
    m.add_function(wrap_pyfunction!(module::check, m)?)?;
    m.add_function(wrap_pyfunction!(executable::compile, m)?)?;
    m.add_function(wrap_pyfunction!(executable::load, m)?)?;
    m.add_function(wrap_pyfunction!(module::import_onnx, m)?)?;
    m.add_function(wrap_pyfunction!(convert::empty, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
