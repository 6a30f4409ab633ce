//! Whole models exported by ONNX's own Python package, imported and run by the interpreter
//! against ONNX Runtime's outputs: the MNIST CNN of the model zoo (`benches/models/`: two
//! convolutions with bias, relu, max pools, a reshape, a matrix product and a bias), with its
//! seeded input and ONNX Runtime 1.32's result (onnx 1.23.2 wrote the model) stored next to it.

use std::path::Path;

use relay_onnx::{ImportOptions, import};
use relay_runtime::Value;

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn the_zoo_mnist_cnn_matches_onnx_runtime() {
    let bytes = std::fs::read(data("mnist.onnx")).unwrap();
    let m = import(&bytes, &ImportOptions::default()).unwrap();
    assert_eq!(m.inputs.len(), 1);
    assert_eq!(
        (m.inputs[0].onnx_name.as_str(), m.inputs[0].shape.as_slice()),
        ("input", &[1, 1, 28, 28][..])
    );
    assert_eq!(m.outputs[0].shape, [1, 10]);
    let x = relay_runtime::npy::read_npy_file(&data("mnist_input.npy")).unwrap();
    let want = relay_runtime::npy::read_npy_file(&data("mnist_expected.npy")).unwrap();
    let args = std::iter::once(&x)
        .chain(m.params.iter().map(|(_, a)| a))
        .map(|a| Value::Tensor(std::sync::Arc::new(a.clone())))
        .collect();
    let Value::Tensor(y) = relay_interp::run(&m.module, "main", args, &Default::default()).unwrap()
    else {
        panic!("a tensor");
    };
    let (got, want) = (y.to_f64_vec(), want.to_f64_vec());
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-4 * w.abs().max(1.0),
            "{got:?}\n{want:?}"
        );
    }
}
