//! Format version 1 stays readable: `data/format_v1.ro`, an executable file written by the
//! first relayc that wrote format version 1 and committed, must load in every later relayc and
//! compute what its source program computes (docs/executable-format.md §10: a layout change
//! bumps the format version and keeps a reader for the old one). The instruction names of
//! version 1 are pinned too: the opcode table of a file names them, so renaming or removing one
//! would make old files unreadable.
//!
//! The file is never regenerated for a new relayc. `RELAY_WRITE_FORMAT_V1=1 cargo test -p
//! relay-vm --test format_v1` writes it only while `FORMAT_VERSION` is 1 and the file is
//! missing; a new format version gets a file of its own next to this one.

mod common;

use std::path::PathBuf;

use relay_interp::InterpOptions;
use relay_ir::{DType, Value};
use relay_vm::file::FORMAT_VERSION;
use relay_vm::{Executable, Instruction, Vm};

/// The instruction names of format version 1, in opcode order.
const V1_INSTRUCTIONS: [&str; 27] = [
    "move",
    "ret",
    "fatal",
    "invoke",
    "invoke_closure",
    "tail_invoke",
    "tail_invoke_closure",
    "invoke_packed",
    "invoke_packed_alloc",
    "alloc_tensor",
    "alloc_tensor_reg",
    "alloc_storage",
    "alloc_data",
    "alloc_tuple",
    "alloc_closure",
    "get_field",
    "get_tag",
    "if",
    "goto",
    "load_const",
    "load_consti",
    "shape_of",
    "reshape_tensor",
    "kill_register",
    "alloc_ref",
    "ref_read",
    "ref_write",
];

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The inputs the test runs `@main` on: `%x` of shape (2, 3), `%y` of shape (4, 3).
fn inputs() -> Vec<Value> {
    let x: Vec<f64> = (0..6).map(|i| f64::from(i) * 0.75 - 2.0).collect();
    let y: Vec<f64> = (0..12).map(|i| f64::from(i) * 0.1 - 0.6).collect();
    vec![
        common::tensor(DType::F32, &[2, 3], &x),
        common::tensor(DType::F32, &[4, 3], &y),
    ]
}

#[test]
fn version_1_instruction_names_are_kept() {
    assert!(Instruction::KINDS.len() >= V1_INSTRUCTIONS.len());
    assert_eq!(
        Instruction::KINDS[..V1_INSTRUCTIONS.len()],
        V1_INSTRUCTIONS,
        "instructions may be added at the end, never renamed, reordered or removed"
    );
}

#[test]
fn a_version_1_file_loads_and_computes_what_its_source_computes() {
    let text = std::fs::read_to_string(data("format_v1.relay")).expect("the source");
    let module = common::typed(&text, "format_v1.relay").expect("the source type-checks");
    let path = data("format_v1.ro");
    if std::env::var_os("RELAY_WRITE_FORMAT_V1").is_some() && !path.exists() {
        assert_eq!(
            FORMAT_VERSION, 1,
            "a new format version gets a file of its own"
        );
        let exe = common::compile(&module, common::Config::DEFAULT).expect("compiles");
        exe.save(&path).expect("saves");
    }
    let bytes = std::fs::read(&path).expect("tests/data/format_v1.ro is committed");
    assert_eq!(
        &bytes[8..12],
        &1u32.to_le_bytes(),
        "a format version 1 file"
    );
    let exe = Executable::load(&path).unwrap_or_else(|e| panic!("{e}"));
    for name in ["main", "map", "sum"] {
        assert!(exe.global(name).is_some(), "@{name} is a global");
    }

    let expected = relay_interp::run(&module, "main", inputs(), &InterpOptions::default())
        .expect("the interpreter runs the source");
    let got = Vm::new(&exe)
        .invoke("main", &inputs())
        .expect("the file runs");
    relay_interp::compare_values(&got, &expected, 1e-5, 1e-6).unwrap_or_else(|why| panic!("{why}"));

    // Results print with the constructor names the file keeps.
    let (_, main) = exe.global("main").expect("@main");
    let types = relay_ir::Module {
        types: exe.types.clone(),
        ..relay_ir::Module::default()
    };
    let shown = relay_interp::format_value(&got, main.ret_type.as_ref(), &types);
    assert!(shown.contains("Cons(") && shown.contains("Nil"), "{shown}");
}
