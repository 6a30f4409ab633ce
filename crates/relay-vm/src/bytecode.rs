//! The VM's instruction set (DESIGN §6, TVM's Relay VM in `reference/tvm-vm.md` §1.2, plus
//! tail calls and references): a Rust enum, one instruction per line in text form (`relayc
//! build --emit bytecode`, `relayc disasm`), and a validator that checks every register, jump
//! target and table index of a function — what the compiler asserts and what loading an
//! executable file checks before anything runs.
//!
//! Registers are per frame; a function's parameters occupy registers `0..n`. Jump offsets are
//! relative to the instruction's own position, as in TVM.

use std::fmt;

use relay_ir::{DType, Type};

/// A register of the current frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reg(pub u32);

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "${}", self.0)
    }
}

/// One instruction.
#[derive(Clone, Debug, PartialEq)]
pub enum Instruction {
    /// `dst = from` (the reference, not the data).
    Move {
        /// The source register.
        from: Reg,
        /// The destination register.
        dst: Reg,
    },
    /// Returns `result` to the caller (or from the VM when the frame is the first one).
    Ret {
        /// The returned register.
        result: Reg,
    },
    /// Stops with a run-time error: a `match` no clause matched, at `location`.
    Fatal {
        /// Where in the source (`file:line:column`) and what failed.
        message: String,
    },
    /// `dst = functions[func](args...)` in a new frame.
    Invoke {
        /// The callee's index in the executable's function table.
        func: u32,
        /// The arguments, in parameter order.
        args: Vec<Reg>,
        /// Where the result goes.
        dst: Reg,
    },
    /// `dst = closure(args...)`: the closure's captured values come first, then `args`.
    InvokeClosure {
        /// The closure.
        closure: Reg,
        /// The explicit arguments.
        args: Vec<Reg>,
        /// Where the result goes.
        dst: Reg,
    },
    /// A call in tail position: the callee replaces the current frame (its result is this
    /// function's result), so tail recursion runs in constant frames.
    TailInvoke {
        /// The callee's index in the executable's function table.
        func: u32,
        /// The arguments, in parameter order.
        args: Vec<Reg>,
    },
    /// A closure call in tail position, replacing the current frame.
    TailInvokeClosure {
        /// The closure.
        closure: Reg,
        /// The explicit arguments.
        args: Vec<Reg>,
    },
    /// Calls kernel `kernel` in destination-passing style: it reads `inputs` (tuples are
    /// flattened into their tensors) and writes `outputs`, which are allocated before.
    InvokePacked {
        /// The kernel's index in the executable's kernel table.
        kernel: u32,
        /// The input registers.
        inputs: Vec<Reg>,
        /// The output registers (tensors placed in storage).
        outputs: Vec<Reg>,
    },
    /// `dst` = a tensor view of `shape` and `dtype` in `storage` at byte offset `offset` (an
    /// integer scalar register).
    AllocTensor {
        /// The storage.
        storage: Reg,
        /// The byte offset (a scalar register).
        offset: Reg,
        /// The static shape.
        shape: Vec<i64>,
        /// The element type.
        dtype: DType,
        /// Where the tensor goes.
        dst: Reg,
    },
    /// As [`Instruction::AllocTensor`] with the shape read at run time from a 1-D integer
    /// tensor.
    AllocTensorReg {
        /// The storage.
        storage: Reg,
        /// The byte offset (a scalar register).
        offset: Reg,
        /// The shape (a 1-D integer tensor register).
        shape: Reg,
        /// The element type.
        dtype: DType,
        /// The shape the program's types promise (`assert_shape`; a negative extent accepts
        /// any), checked against the run-time shape.
        assert_shape: Option<Vec<i64>>,
        /// Where the tensor goes.
        dst: Reg,
    },
    /// `dst` = a storage buffer of `size` bytes (a scalar register) aligned to `alignment`.
    AllocStorage {
        /// The byte size (a scalar register).
        size: Reg,
        /// The alignment in bytes (a power of two).
        alignment: u64,
        /// The dtype the storage is planned for (informational, as TVM's `dtype_hint`).
        dtype_hint: DType,
        /// Where the storage goes.
        dst: Reg,
    },
    /// `dst` = a constructed value with constructor tag `tag` (tuples: tag 0) and `fields`.
    AllocAdt {
        /// The constructor's tag.
        tag: u32,
        /// The fields, in order.
        fields: Vec<Reg>,
        /// Where the value goes.
        dst: Reg,
    },
    /// `dst` = a tuple of `fields` (TVM used `AllocADT` with tag 0; a distinct instruction keeps
    /// tuples and constructed values apart in results).
    AllocTuple {
        /// The fields, in order.
        fields: Vec<Reg>,
        /// Where the tuple goes.
        dst: Reg,
    },
    /// Calls kernel `kernel` on `inputs`, allocating its outputs from the pool: the kernel of
    /// a primitive call whose result shape is known only at run time (`?` dimensions), which
    /// `manifest_alloc` leaves as a plain call. The kernel is specialized to the argument
    /// shapes on first call; `dst` gets the output tensor, or a tuple of them.
    InvokePackedAlloc {
        /// The kernel's index in the executable's kernel table.
        kernel: u32,
        /// The input registers.
        inputs: Vec<Reg>,
        /// Where the result goes.
        dst: Reg,
    },
    /// `dst` = a closure of function `func` capturing `captured` (also a global function used
    /// as a value, with nothing captured).
    AllocClosure {
        /// The function's index in the executable's function table.
        func: u32,
        /// The captured values, passed before the explicit arguments.
        captured: Vec<Reg>,
        /// Where the closure goes.
        dst: Reg,
    },
    /// `dst = object.index` (a tuple or constructed value's field).
    GetField {
        /// The tuple or ADT value.
        object: Reg,
        /// The field's position.
        index: u32,
        /// Where the field goes.
        dst: Reg,
    },
    /// `dst` = the constructor tag of `object`, as an integer scalar.
    GetTag {
        /// The ADT value.
        object: Reg,
        /// Where the tag goes.
        dst: Reg,
    },
    /// Jumps by `true_offset` when the scalars in `test` and `target` are equal, else by
    /// `false_offset`.
    If {
        /// The value tested.
        test: Reg,
        /// The value it is compared with.
        target: Reg,
        /// The jump when equal (relative, non-zero).
        true_offset: i32,
        /// The jump when not equal (relative, non-zero).
        false_offset: i32,
    },
    /// Jumps by `offset` (relative, non-zero).
    Goto {
        /// The relative jump.
        offset: i32,
    },
    /// `dst` = constant `index` of the executable's constant pool.
    LoadConst {
        /// The constant's index.
        index: u32,
        /// Where it goes.
        dst: Reg,
    },
    /// `dst` = the `int64` scalar `value`.
    LoadConsti {
        /// The value.
        value: i64,
        /// Where it goes.
        dst: Reg,
    },
    /// `dst` = the shape of `tensor`, as a 1-D `int64` tensor.
    ShapeOf {
        /// The tensor.
        tensor: Reg,
        /// Where the shape goes.
        dst: Reg,
    },
    /// `dst` = `tensor` viewed with the shape in `shape` (a 1-D integer tensor), no copy.
    ReshapeTensor {
        /// The tensor.
        tensor: Reg,
        /// The new shape.
        shape: Reg,
        /// Where the view goes.
        dst: Reg,
    },
    /// Drops the register's value (its memory may be reused at once).
    KillRegister {
        /// The register.
        reg: Reg,
    },
    /// `dst` = a new reference cell holding `value` (`ref(v)`).
    AllocRef {
        /// The initial value.
        value: Reg,
        /// Where the reference goes.
        dst: Reg,
    },
    /// `dst` = the value in the reference cell `reference` (`ref_read(r)`).
    RefRead {
        /// The reference.
        reference: Reg,
        /// Where the value goes.
        dst: Reg,
    },
    /// Stores `value` in the reference cell `reference` (`ref_write(r, v)`); `dst` gets the
    /// empty tuple, the expression's value.
    RefWrite {
        /// The reference.
        reference: Reg,
        /// The new value.
        value: Reg,
        /// Where `()` goes.
        dst: Reg,
    },
}

/// Writes `$a, $b, ...`.
fn regs(f: &mut fmt::Formatter<'_>, regs: &[Reg]) -> fmt::Result {
    for (i, r) in regs.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{r}")?;
    }
    Ok(())
}

impl fmt::Display for Instruction {
    /// TVM's text form (`invoke $3 VMFunc[1]($0, $2)`), extended for tail calls and
    /// references.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Instruction::Move { from, dst } => write!(f, "move {dst} {from}"),
            Instruction::Ret { result } => write!(f, "ret {result}"),
            Instruction::Fatal { message } => write!(f, "fatal {message:?}"),
            Instruction::Invoke { func, args, dst } => {
                write!(f, "invoke {dst} VMFunc[{func}](")?;
                regs(f, args)?;
                f.write_str(")")
            }
            Instruction::InvokeClosure { closure, args, dst } => {
                write!(f, "invoke_closure {dst} {closure}(")?;
                regs(f, args)?;
                f.write_str(")")
            }
            Instruction::TailInvoke { func, args } => {
                write!(f, "tail_invoke VMFunc[{func}](")?;
                regs(f, args)?;
                f.write_str(")")
            }
            Instruction::TailInvokeClosure { closure, args } => {
                write!(f, "tail_invoke_closure {closure}(")?;
                regs(f, args)?;
                f.write_str(")")
            }
            Instruction::InvokePacked {
                kernel,
                inputs,
                outputs,
            } => {
                write!(f, "invoke_packed PackedFunc[{kernel}] (in: ")?;
                regs(f, inputs)?;
                f.write_str(", out: ")?;
                regs(f, outputs)?;
                f.write_str(")")
            }
            Instruction::AllocTensor {
                storage,
                offset,
                shape,
                dtype,
                dst,
            } => {
                let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
                write!(
                    f,
                    "alloc_tensor {dst} {storage} {offset} [{}] {dtype}",
                    dims.join(", ")
                )
            }
            Instruction::AllocTensorReg {
                storage,
                offset,
                shape,
                dtype,
                assert_shape,
                dst,
            } => {
                write!(
                    f,
                    "alloc_tensor_reg {dst} {storage} {offset} {shape} {dtype}"
                )?;
                if let Some(dims) = assert_shape {
                    let dims: Vec<String> = dims.iter().map(i64::to_string).collect();
                    write!(f, " assert [{}]", dims.join(", "))?;
                }
                Ok(())
            }
            Instruction::AllocStorage {
                size,
                alignment,
                dtype_hint,
                dst,
            } => write!(f, "alloc_storage {dst} {size} {alignment} {dtype_hint}"),
            Instruction::AllocAdt { tag, fields, dst } => {
                write!(f, "alloc_data {dst} tag({tag}) [")?;
                regs(f, fields)?;
                f.write_str("]")
            }
            Instruction::AllocTuple { fields, dst } => {
                write!(f, "alloc_tuple {dst} [")?;
                regs(f, fields)?;
                f.write_str("]")
            }
            Instruction::InvokePackedAlloc {
                kernel,
                inputs,
                dst,
            } => {
                write!(f, "invoke_packed_alloc {dst} PackedFunc[{kernel}] (in: ")?;
                regs(f, inputs)?;
                f.write_str(")")
            }
            Instruction::AllocClosure {
                func,
                captured,
                dst,
            } => {
                write!(f, "alloc_closure {dst} VMFunc[{func}](")?;
                regs(f, captured)?;
                f.write_str(")")
            }
            Instruction::GetField { object, index, dst } => {
                write!(f, "get_field {dst} {object}[{index}]")
            }
            Instruction::GetTag { object, dst } => write!(f, "get_tag {dst} {object}"),
            Instruction::If {
                test,
                target,
                true_offset,
                false_offset,
            } => write!(f, "if {test} {target} {true_offset} {false_offset}"),
            Instruction::Goto { offset } => write!(f, "goto {offset}"),
            Instruction::LoadConst { index, dst } => write!(f, "load_const {dst} Const[{index}]"),
            Instruction::LoadConsti { value, dst } => write!(f, "load_consti {dst} {value}"),
            Instruction::ShapeOf { tensor, dst } => write!(f, "shape_of {dst} {tensor}"),
            Instruction::ReshapeTensor { tensor, shape, dst } => {
                write!(f, "reshape_tensor {dst} {tensor} {shape}")
            }
            Instruction::KillRegister { reg } => write!(f, "kill_register {reg}"),
            Instruction::AllocRef { value, dst } => write!(f, "alloc_ref {dst} {value}"),
            Instruction::RefRead { reference, dst } => write!(f, "ref_read {dst} {reference}"),
            Instruction::RefWrite {
                reference,
                value,
                dst,
            } => write!(f, "ref_write {dst} {reference} {value}"),
        }
    }
}

impl Instruction {
    /// The registers the instruction reads, then the one it writes (if any).
    pub fn registers(&self) -> (Vec<Reg>, Option<Reg>) {
        use Instruction as I;
        match self {
            I::Move { from, dst } => (vec![*from], Some(*dst)),
            I::Ret { result } => (vec![*result], None),
            I::Fatal { .. } | I::Goto { .. } => (vec![], None),
            I::Invoke { args, dst, .. } => (args.clone(), Some(*dst)),
            I::InvokeClosure { closure, args, dst } => {
                let mut r = vec![*closure];
                r.extend(args);
                (r, Some(*dst))
            }
            I::TailInvoke { args, .. } => (args.clone(), None),
            I::TailInvokeClosure { closure, args } => {
                let mut r = vec![*closure];
                r.extend(args);
                (r, None)
            }
            I::InvokePacked {
                inputs, outputs, ..
            } => (inputs.iter().chain(outputs).copied().collect(), None),
            I::AllocTensor {
                storage,
                offset,
                dst,
                ..
            } => (vec![*storage, *offset], Some(*dst)),
            I::AllocTensorReg {
                storage,
                offset,
                shape,
                dst,
                ..
            } => (vec![*storage, *offset, *shape], Some(*dst)),
            I::AllocStorage { size, dst, .. } => (vec![*size], Some(*dst)),
            I::AllocAdt { fields, dst, .. } | I::AllocTuple { fields, dst } => {
                (fields.clone(), Some(*dst))
            }
            I::InvokePackedAlloc { inputs, dst, .. } => (inputs.clone(), Some(*dst)),
            I::AllocClosure { captured, dst, .. } => (captured.clone(), Some(*dst)),
            I::GetField { object, dst, .. } | I::GetTag { object, dst } => {
                (vec![*object], Some(*dst))
            }
            I::If { test, target, .. } => (vec![*test, *target], None),
            I::LoadConst { dst, .. } | I::LoadConsti { dst, .. } => (vec![], Some(*dst)),
            I::ShapeOf { tensor, dst } => (vec![*tensor], Some(*dst)),
            I::ReshapeTensor { tensor, shape, dst } => (vec![*tensor, *shape], Some(*dst)),
            I::KillRegister { reg } => (vec![], Some(*reg)),
            I::AllocRef { value, dst } => (vec![*value], Some(*dst)),
            I::RefRead { reference, dst } => (vec![*reference], Some(*dst)),
            I::RefWrite {
                reference,
                value,
                dst,
            } => (vec![*reference, *value], Some(*dst)),
        }
    }

    /// The instruction's kind: its index in [`Instruction::KINDS`] (the `--profile` table's
    /// rows, and the opcode of the file format).
    pub fn kind(&self) -> usize {
        use Instruction as I;
        match self {
            I::Move { .. } => 0,
            I::Ret { .. } => 1,
            I::Fatal { .. } => 2,
            I::Invoke { .. } => 3,
            I::InvokeClosure { .. } => 4,
            I::TailInvoke { .. } => 5,
            I::TailInvokeClosure { .. } => 6,
            I::InvokePacked { .. } => 7,
            I::InvokePackedAlloc { .. } => 8,
            I::AllocTensor { .. } => 9,
            I::AllocTensorReg { .. } => 10,
            I::AllocStorage { .. } => 11,
            I::AllocAdt { .. } => 12,
            I::AllocTuple { .. } => 13,
            I::AllocClosure { .. } => 14,
            I::GetField { .. } => 15,
            I::GetTag { .. } => 16,
            I::If { .. } => 17,
            I::Goto { .. } => 18,
            I::LoadConst { .. } => 19,
            I::LoadConsti { .. } => 20,
            I::ShapeOf { .. } => 21,
            I::ReshapeTensor { .. } => 22,
            I::KillRegister { .. } => 23,
            I::AllocRef { .. } => 24,
            I::RefRead { .. } => 25,
            I::RefWrite { .. } => 26,
        }
    }

    /// The names of the instruction kinds, indexed by [`Instruction::kind`].
    pub const KINDS: [&'static str; 27] = [
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

    /// Whether execution never continues with the next instruction.
    pub fn ends_block(&self) -> bool {
        matches!(
            self,
            Instruction::Ret { .. }
                | Instruction::Fatal { .. }
                | Instruction::Goto { .. }
                | Instruction::If { .. }
                | Instruction::TailInvoke { .. }
                | Instruction::TailInvokeClosure { .. }
        )
    }
}

/// One function of an executable: its bytecode and the size of its register file.
#[derive(Clone, Debug)]
pub struct VmFunction {
    /// Its name (a global's name, or a lifted function's).
    pub name: String,
    /// Its parameters' names, in order; they occupy registers `0..params.len()`.
    pub params: Vec<String>,
    /// How many registers a frame of it has.
    pub register_count: u32,
    /// The instructions.
    pub code: Vec<Instruction>,
    /// Each parameter's type, when known (an entry function's arguments are checked against
    /// it: tensors and tuples of tensors).
    pub param_types: Vec<Option<Type>>,
    /// The type of its result, when known (how `relayc run` prints a result: constructor
    /// names).
    pub ret_type: Option<Type>,
    /// Source locations (`file:line:column`) of the instructions that can fail at run time
    /// (calls, kernel calls, `fatal`), by instruction position, sorted.
    pub locations: Vec<(u32, String)>,
}

impl PartialEq for VmFunction {
    /// Equal code, names and register counts, and structurally equal parameter types.
    fn eq(&self, other: &VmFunction) -> bool {
        self.name == other.name
            && self.params == other.params
            && self.register_count == other.register_count
            && self.code == other.code
            && self.locations == other.locations
            && self.param_types.len() == other.param_types.len()
            && self
                .param_types
                .iter()
                .zip(&other.param_types)
                .chain([(&self.ret_type, &other.ret_type)])
                .all(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) => relay_ir::type_eq(a, b),
                    (None, None) => true,
                    _ => false,
                })
    }
}

impl VmFunction {
    /// The most registers the function can use: its parameters or the highest register its
    /// instructions name plus one, whichever is larger, and at most one register per parameter
    /// and per register operand. The compiler numbers registers densely, so its functions
    /// never ask for more; a larger `register_count` (from a corrupt file) would only make
    /// every call allocate a huge frame.
    pub fn registers_named(&self) -> u64 {
        let (mut highest, mut operands) = (0u64, 0u64);
        for instr in &self.code {
            let (reads, write) = instr.registers();
            for r in reads.iter().chain(&write) {
                highest = highest.max(u64::from(r.0) + 1);
                operands += 1;
            }
        }
        let params = self.params.len() as u64;
        highest.max(params).min(params + operands)
    }

    /// The source location of instruction `pc`, when known.
    pub fn location(&self, pc: usize) -> Option<&str> {
        let i = self
            .locations
            .binary_search_by_key(&(pc as u32), |(p, _)| *p)
            .ok()?;
        Some(self.locations[i].1.as_str())
    }
}

impl fmt::Display for VmFunction {
    /// `VMFunc name(%a, %b) registers=N` then one numbered instruction per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let params: Vec<String> = self.params.iter().map(|p| format!("%{p}")).collect();
        writeln!(
            f,
            "VMFunc {}({}) registers={}",
            self.name,
            params.join(", "),
            self.register_count
        )?;
        let width = self.code.len().saturating_sub(1).to_string().len();
        for (pc, instr) in self.code.iter().enumerate() {
            writeln!(f, "  {pc:>width$}: {instr}")?;
        }
        Ok(())
    }
}

/// What a function's instructions may refer to: the executable's tables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tables {
    /// Each function's parameter count, by function index.
    pub arities: Vec<u32>,
    /// How many kernels there are.
    pub kernels: usize,
    /// How many constants there are.
    pub constants: usize,
}

/// A function whose bytecode is malformed: where, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("VMFunc {function}, instruction {pc}: {message}")]
pub struct BytecodeError {
    /// The function's name.
    pub function: String,
    /// The instruction's position.
    pub pc: usize,
    /// What is wrong.
    pub message: String,
}

/// Checks that every register of `func` is within its register file, every jump lands on an
/// instruction of the function, every function, kernel and constant index is in `tables`,
/// direct calls pass the callee's number of arguments, the parameters fit in the registers,
/// and the code cannot run past its end.
pub fn validate(func: &VmFunction, tables: &Tables) -> Result<(), BytecodeError> {
    let fail = |pc: usize, message: String| BytecodeError {
        function: func.name.clone(),
        pc,
        message,
    };
    if func.params.len() > func.register_count as usize {
        return Err(fail(
            0,
            format!(
                "{} parameters do not fit in {} registers",
                func.params.len(),
                func.register_count
            ),
        ));
    }
    let named = func.registers_named();
    if u64::from(func.register_count) > named {
        return Err(fail(
            0,
            format!(
                "a register count of {}, but its parameters and instructions name at most {named}",
                func.register_count
            ),
        ));
    }
    match func.code.last() {
        None => return Err(fail(0, "the function has no instructions".into())),
        Some(last) if !last.ends_block() => {
            return Err(fail(
                func.code.len() - 1,
                format!("`{last}` would run past the end of the function"),
            ));
        }
        Some(_) => {}
    }
    let len = func.code.len() as i64;
    for (pc, instr) in func.code.iter().enumerate() {
        let (reads, write) = instr.registers();
        for r in reads.iter().chain(&write) {
            if r.0 >= func.register_count {
                return Err(fail(
                    pc,
                    format!(
                        "register {r} is outside the {} registers of the frame",
                        func.register_count
                    ),
                ));
            }
        }
        let jump = |offset: i32| -> Result<(), BytecodeError> {
            let target = pc as i64 + i64::from(offset);
            if offset == 0 || !(0..len).contains(&target) {
                return Err(fail(
                    pc,
                    format!("jump by {offset} lands outside the function's {len} instructions"),
                ));
            }
            Ok(())
        };
        let function = |index: u32| -> Result<u32, BytecodeError> {
            tables.arities.get(index as usize).copied().ok_or_else(|| {
                fail(
                    pc,
                    format!(
                        "function index {index} out of range ({} functions)",
                        tables.arities.len()
                    ),
                )
            })
        };
        // The number of inputs is the kernel's to check when called: an input register
        // holding a tuple passes its tensors.
        let kernel_call = |kernel: u32| -> Result<(), BytecodeError> {
            if kernel as usize >= tables.kernels {
                return Err(fail(
                    pc,
                    format!(
                        "kernel index {kernel} out of range ({} kernels)",
                        tables.kernels
                    ),
                ));
            }
            Ok(())
        };
        match instr {
            Instruction::If {
                true_offset,
                false_offset,
                ..
            } => {
                jump(*true_offset)?;
                jump(*false_offset)?;
            }
            Instruction::Goto { offset } => jump(*offset)?,
            Instruction::Invoke { func: f, args, .. }
            | Instruction::TailInvoke { func: f, args } => {
                let arity = function(*f)?;
                if args.len() != arity as usize {
                    return Err(fail(
                        pc,
                        format!(
                            "VMFunc[{f}] takes {arity} arguments, the call passes {}",
                            args.len()
                        ),
                    ));
                }
            }
            Instruction::AllocClosure {
                func: f, captured, ..
            } => {
                let arity = function(*f)?;
                if captured.len() > arity as usize {
                    return Err(fail(
                        pc,
                        format!(
                            "VMFunc[{f}] takes {arity} arguments, the closure captures {}",
                            captured.len()
                        ),
                    ));
                }
            }
            Instruction::InvokePackedAlloc { kernel, .. } => kernel_call(*kernel)?,
            Instruction::InvokePacked {
                kernel, outputs, ..
            } => {
                kernel_call(*kernel)?;
                if outputs.is_empty() {
                    return Err(fail(pc, "a kernel call without outputs".into()));
                }
            }
            Instruction::LoadConst { index, .. } if *index as usize >= tables.constants => {
                return Err(fail(
                    pc,
                    format!(
                        "constant index {index} out of range ({} constants)",
                        tables.constants
                    ),
                ));
            }
            Instruction::AllocStorage { alignment, .. } if !alignment.is_power_of_two() => {
                return Err(fail(
                    pc,
                    format!("alignment {alignment} is not a power of two"),
                ));
            }
            Instruction::AllocTensor { shape, .. } if shape.iter().any(|&d| d < 0) => {
                return Err(fail(pc, format!("negative dimension in shape {shape:?}")));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
}
