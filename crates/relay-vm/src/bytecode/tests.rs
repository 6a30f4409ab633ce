//! Tests of the instruction set: the text of every instruction, a function's text, and the
//! validator's acceptance and refusals.

use relay_ir::DType;

use super::*;

fn r(n: u32) -> Reg {
    Reg(n)
}

fn func(register_count: u32, code: Vec<Instruction>) -> VmFunction {
    VmFunction {
        name: "f".into(),
        params: vec!["x".into()],
        register_count,
        code,
        param_types: vec![None],
        ret_type: None,
        locations: vec![],
    }
}

fn tables() -> Tables {
    Tables {
        arities: vec![1, 2],
        kernels: 1,
        constants: 2,
    }
}

/// One instruction of every kind, with its text.
fn every_instruction() -> Vec<(Instruction, &'static str)> {
    use Instruction as I;
    vec![
        (
            I::Move {
                from: r(0),
                dst: r(1),
            },
            "move $1 $0",
        ),
        (I::Ret { result: r(1) }, "ret $1"),
        (
            I::Fatal {
                message: "t.relay:3:5: no clause matched".into(),
            },
            "fatal \"t.relay:3:5: no clause matched\"",
        ),
        (
            I::Invoke {
                func: 1,
                args: vec![r(0), r(2)],
                dst: r(3),
            },
            "invoke $3 VMFunc[1]($0, $2)",
        ),
        (
            I::InvokeClosure {
                closure: r(1),
                args: vec![r(0)],
                dst: r(2),
            },
            "invoke_closure $2 $1($0)",
        ),
        (
            I::TailInvoke {
                func: 0,
                args: vec![r(1)],
            },
            "tail_invoke VMFunc[0]($1)",
        ),
        (
            I::TailInvokeClosure {
                closure: r(1),
                args: vec![],
            },
            "tail_invoke_closure $1()",
        ),
        (
            I::InvokePacked {
                kernel: 0,
                inputs: vec![r(0), r(1)],
                outputs: vec![r(2)],
            },
            "invoke_packed PackedFunc[0] (in: $0, $1, out: $2)",
        ),
        (
            I::InvokePackedAlloc {
                kernel: 0,
                inputs: vec![r(0), r(1)],
                dst: r(2),
            },
            "invoke_packed_alloc $2 PackedFunc[0] (in: $0, $1)",
        ),
        (
            I::AllocTensor {
                storage: r(1),
                offset: r(2),
                shape: vec![2, 3],
                dtype: DType::F32,
                dst: r(3),
            },
            "alloc_tensor $3 $1 $2 [2, 3] float32",
        ),
        (
            I::AllocTensorReg {
                storage: r(1),
                offset: r(2),
                shape: r(3),
                dtype: DType::I64,
                assert_shape: None,
                dst: r(4),
            },
            "alloc_tensor_reg $4 $1 $2 $3 int64",
        ),
        (
            I::AllocTensorReg {
                storage: r(1),
                offset: r(2),
                shape: r(3),
                dtype: DType::F32,
                assert_shape: Some(vec![2, -1]),
                dst: r(4),
            },
            "alloc_tensor_reg $4 $1 $2 $3 float32 assert [2, -1]",
        ),
        (
            I::AllocStorage {
                size: r(1),
                alignment: 64,
                dtype_hint: DType::F32,
                dst: r(2),
            },
            "alloc_storage $2 $1 64 float32",
        ),
        (
            I::AllocAdt {
                tag: 1,
                fields: vec![r(0), r(1)],
                dst: r(2),
            },
            "alloc_data $2 tag(1) [$0, $1]",
        ),
        (
            I::AllocTuple {
                fields: vec![r(0), r(1)],
                dst: r(2),
            },
            "alloc_tuple $2 [$0, $1]",
        ),
        (
            I::AllocClosure {
                func: 1,
                captured: vec![r(0)],
                dst: r(2),
            },
            "alloc_closure $2 VMFunc[1]($0)",
        ),
        (
            I::GetField {
                object: r(0),
                index: 1,
                dst: r(1),
            },
            "get_field $1 $0[1]",
        ),
        (
            I::GetTag {
                object: r(0),
                dst: r(1),
            },
            "get_tag $1 $0",
        ),
        (
            I::If {
                test: r(0),
                target: r(1),
                true_offset: 1,
                false_offset: -2,
            },
            "if $0 $1 1 -2",
        ),
        (I::Goto { offset: -1 }, "goto -1"),
        (
            I::LoadConst {
                index: 1,
                dst: r(1),
            },
            "load_const $1 Const[1]",
        ),
        (
            I::LoadConsti {
                value: -7,
                dst: r(1),
            },
            "load_consti $1 -7",
        ),
        (
            I::ShapeOf {
                tensor: r(0),
                dst: r(1),
            },
            "shape_of $1 $0",
        ),
        (
            I::ReshapeTensor {
                tensor: r(0),
                shape: r(1),
                dst: r(2),
            },
            "reshape_tensor $2 $0 $1",
        ),
        (I::KillRegister { reg: r(0) }, "kill_register $0"),
        (
            I::AllocRef {
                value: r(0),
                dst: r(1),
            },
            "alloc_ref $1 $0",
        ),
        (
            I::RefRead {
                reference: r(1),
                dst: r(2),
            },
            "ref_read $2 $1",
        ),
        (
            I::RefWrite {
                reference: r(1),
                value: r(0),
                dst: r(2),
            },
            "ref_write $2 $1 $0",
        ),
        (
            I::InvokePackedUpdate {
                kernel: 0,
                inputs: vec![r(0), r(1)],
                dst: r(2),
            },
            "invoke_packed_update $2 PackedFunc[0] (in: $0, $1)",
        ),
    ]
}

#[test]
fn every_instruction_prints_one_line() {
    for (instr, text) in every_instruction() {
        assert_eq!(instr.to_string(), text);
    }
}

#[test]
fn a_function_prints_its_registers_and_numbered_code() {
    let f = VmFunction {
        name: "main".into(),
        params: vec!["x".into(), "y".into()],
        register_count: 3,
        code: vec![
            Instruction::Invoke {
                func: 1,
                args: vec![r(0), r(1)],
                dst: r(2),
            },
            Instruction::Ret { result: r(2) },
        ],
        param_types: vec![None; 2],
        ret_type: None,
        locations: vec![],
    };
    assert_eq!(
        f.to_string(),
        "VMFunc main(%x, %y) registers=3\n  0: invoke $2 VMFunc[1]($0, $1)\n  1: ret $2\n"
    );
    assert_eq!(validate(&f, &tables()), Ok(()));
}

#[test]
fn every_instruction_validates_in_a_large_enough_frame() {
    for (instr, text) in every_instruction() {
        let mut code = vec![instr];
        if !code[0].ends_block() {
            code.push(Instruction::Ret { result: r(0) });
        }
        // `if` and `goto` jump to the `ret` that follows or precedes them.
        if let Instruction::If { .. } | Instruction::Goto { .. } = code[0] {
            code = vec![
                Instruction::Ret { result: r(0) },
                match &code[0] {
                    Instruction::If { test, target, .. } => Instruction::If {
                        test: *test,
                        target: *target,
                        true_offset: -1,
                        false_offset: -1,
                    },
                    _ => Instruction::Goto { offset: -1 },
                },
            ];
        }
        // A frame exactly as large as the registers the code names.
        let mut f = func(0, code);
        f.register_count = u32::try_from(f.registers_named()).unwrap_or(u32::MAX);
        assert!(f.register_count <= 5, "{text}");
        assert_eq!(validate(&f, &tables()), Ok(()), "{text}");
        // One register more than it names is refused: a corrupt count must not make
        // every call allocate a huge frame.
        f.register_count += 1;
        let err = validate(&f, &tables()).expect_err(text);
        assert!(err.message.contains("name at most"), "{text}: {err}");
    }
}

#[test]
fn malformed_code_is_an_error_naming_the_instruction() {
    use Instruction as I;
    let ret = I::Ret { result: r(0) };
    let cases: Vec<(VmFunction, &str)> = vec![
        (func(1, vec![]), "no instructions"),
        (
            func(
                1,
                vec![I::Move {
                    from: r(0),
                    dst: r(0),
                }],
            ),
            "run past the end",
        ),
        (func(0, vec![ret.clone()]), "do not fit"),
        (
            func(1, vec![I::Ret { result: r(1) }]),
            "register $1 is outside",
        ),
        (func(1, vec![I::Goto { offset: 0 }]), "jump by 0"),
        (func(1, vec![I::Goto { offset: 1 }]), "lands outside"),
        (
            func(
                2,
                vec![
                    I::If {
                        test: r(0),
                        target: r(1),
                        true_offset: 1,
                        false_offset: -5,
                    },
                    ret.clone(),
                ],
            ),
            "jump by -5",
        ),
        (
            func(
                1,
                vec![I::TailInvoke {
                    func: 7,
                    args: vec![],
                }],
            ),
            "function index 7 out of range",
        ),
        (
            func(
                1,
                vec![I::TailInvoke {
                    func: 1,
                    args: vec![r(0)],
                }],
            ),
            "takes 2 arguments, the call passes 1",
        ),
        (
            func(
                3,
                vec![
                    I::AllocClosure {
                        func: 0,
                        captured: vec![r(0), r(1)],
                        dst: r(2),
                    },
                    ret.clone(),
                ],
            ),
            "the closure captures 2",
        ),
        (
            func(
                2,
                vec![
                    I::InvokePacked {
                        kernel: 1,
                        inputs: vec![r(0)],
                        outputs: vec![r(1)],
                    },
                    ret.clone(),
                ],
            ),
            "kernel index 1 out of range",
        ),
        (
            func(
                2,
                vec![
                    I::InvokePacked {
                        kernel: 0,
                        inputs: vec![r(0), r(1)],
                        outputs: vec![],
                    },
                    ret.clone(),
                ],
            ),
            "without outputs",
        ),
        (
            func(
                3,
                vec![
                    I::InvokePackedAlloc {
                        kernel: 1,
                        inputs: vec![r(0)],
                        dst: r(2),
                    },
                    ret.clone(),
                ],
            ),
            "kernel index 1 out of range",
        ),
        (
            func(
                3,
                vec![
                    I::InvokePackedUpdate {
                        kernel: 0,
                        inputs: vec![],
                        dst: r(2),
                    },
                    ret.clone(),
                ],
            ),
            "without the input it updates",
        ),
        (
            func(
                2,
                vec![
                    I::LoadConst {
                        index: 2,
                        dst: r(1),
                    },
                    ret.clone(),
                ],
            ),
            "constant index 2",
        ),
        (
            func(
                2,
                vec![
                    I::AllocStorage {
                        size: r(0),
                        alignment: 48,
                        dtype_hint: DType::F32,
                        dst: r(1),
                    },
                    ret.clone(),
                ],
            ),
            "not a power of two",
        ),
        (
            func(
                3,
                vec![
                    I::AllocTensor {
                        storage: r(0),
                        offset: r(1),
                        shape: vec![2, -1],
                        dtype: DType::F32,
                        dst: r(2),
                    },
                    ret,
                ],
            ),
            "negative dimension",
        ),
    ];
    for (f, want) in cases {
        let err = validate(&f, &tables()).expect_err(want);
        let text = err.to_string();
        assert!(text.contains(want), "{text} (want {want})");
        assert!(text.starts_with("VMFunc f, instruction "), "{text}");
    }
}

#[test]
fn every_opcode_is_its_position_and_starts_its_text() {
    for (i, opcode) in Opcode::ALL.iter().enumerate() {
        assert_eq!(*opcode as usize, i);
        assert_eq!(Instruction::KINDS[i], opcode.name());
    }
    let mut seen: Vec<Opcode> = every_instruction()
        .iter()
        .map(|(i, _)| i.opcode())
        .collect();
    seen.dedup();
    assert_eq!(seen, Opcode::ALL, "one of each, in opcode order");
    for (instr, text) in every_instruction() {
        assert_eq!(Instruction::KINDS[instr.kind()], instr.opcode().name());
        let name = text.split([' ', '(']).next().unwrap_or_default();
        assert_eq!(name, instr.opcode().name(), "{text}");
    }
}
