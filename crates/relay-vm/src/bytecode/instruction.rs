//! The instruction table: every instruction of the VM once, with its name, its text form and
//! its fields' operand kinds, in opcode order (append-only: the position is the opcode of
//! format version 1). `instruction_table!` (`table.rs`) generates the enum, the names, the
//! printer, the operand walk and the file decoder from it; the few rules that are not about
//! one operand (which instructions end a block) are written below the table.

use std::convert::Infallible;
use std::fmt;

use super::{DecodeOperand, Operand, Reg};

instruction_table! {
    /// `dst = from` (the reference, not the data).
    Move = "move", "move {dst} {from}" {
        /// The destination register.
        dst: RegOut,
        /// The source register.
        from: RegIn,
    }
    /// Returns `result` to the caller (or from the VM when the frame is the first one).
    Ret = "ret", "ret {result}" {
        /// The returned register.
        result: RegIn,
    }
    /// Stops with a run-time error: a `match` no clause matched, at `location`.
    Fatal = "fatal", "fatal {message}" {
        /// Where in the source (`file:line:column`) and what failed.
        message: Message,
    }
    /// `dst = functions[func](args...)` in a new frame.
    Invoke = "invoke", "invoke {dst} VMFunc[{func}]({args})" {
        /// The callee's index in the executable's function table.
        func: FuncIndex,
        /// The arguments, in parameter order.
        args: RegsIn,
        /// Where the result goes.
        dst: RegOut,
    }
    /// `dst = closure(args...)`: the closure's captured values come first, then `args`.
    InvokeClosure = "invoke_closure", "invoke_closure {dst} {closure}({args})" {
        /// The closure.
        closure: RegIn,
        /// The explicit arguments.
        args: RegsIn,
        /// Where the result goes.
        dst: RegOut,
    }
    /// A call in tail position: the callee replaces the current frame (its result is this
    /// function's result), so tail recursion runs in constant frames.
    TailInvoke = "tail_invoke", "tail_invoke VMFunc[{func}]({args})" {
        /// The callee's index in the executable's function table.
        func: FuncIndex,
        /// The arguments, in parameter order.
        args: RegsIn,
    }
    /// A closure call in tail position, replacing the current frame.
    TailInvokeClosure = "tail_invoke_closure", "tail_invoke_closure {closure}({args})" {
        /// The closure.
        closure: RegIn,
        /// The explicit arguments.
        args: RegsIn,
    }
    /// Calls kernel `kernel` in destination-passing style: it reads `inputs` (tuples are
    /// flattened into their tensors) and writes `outputs`, which are allocated before.
    InvokePacked = "invoke_packed",
        "invoke_packed PackedFunc[{kernel}] (in: {inputs}, out: {outputs})" {
        /// The kernel's index in the executable's kernel table.
        kernel: KernelIndex,
        /// The input registers.
        inputs: RegsIn,
        /// The output registers (tensors placed in storage).
        outputs: RegsIn,
    }
    /// Calls kernel `kernel` on `inputs`, allocating its outputs from the pool: the kernel of
    /// a primitive call whose result shape is known only at run time (`?` dimensions), which
    /// `manifest_alloc` leaves as a plain call. The kernel is specialized to the argument
    /// shapes on first call; `dst` gets the output tensor, or a tuple of them.
    InvokePackedAlloc = "invoke_packed_alloc",
        "invoke_packed_alloc {dst} PackedFunc[{kernel}] (in: {inputs})" {
        /// The kernel's index in the executable's kernel table.
        kernel: KernelIndex,
        /// The input registers.
        inputs: RegsIn,
        /// Where the result goes.
        dst: RegOut,
    }
    /// `dst` = a tensor view of `shape` and `dtype` in `storage` at byte offset `offset` (an
    /// integer scalar register).
    AllocTensor = "alloc_tensor", "alloc_tensor {dst} {storage} {offset} [{shape}] {dtype}" {
        /// The storage.
        storage: RegIn,
        /// The byte offset (a scalar register).
        offset: RegIn,
        /// The static shape.
        shape: Dims,
        /// The element type.
        dtype: DType,
        /// Where the tensor goes.
        dst: RegOut,
    }
    /// As [`Instruction::AllocTensor`] with the shape read at run time from a 1-D integer
    /// tensor.
    AllocTensorReg = "alloc_tensor_reg",
        "alloc_tensor_reg {dst} {storage} {offset} {shape} {dtype}{assert_shape}" {
        /// The storage.
        storage: RegIn,
        /// The byte offset (a scalar register).
        offset: RegIn,
        /// The shape (a 1-D integer tensor register).
        shape: RegIn,
        /// The element type.
        dtype: DType,
        /// The shape the program's types promise (`assert_shape`; a negative extent accepts
        /// any), checked against the run-time shape.
        assert_shape: AssertDims,
        /// Where the tensor goes.
        dst: RegOut,
    }
    /// `dst` = a storage buffer of `size` bytes (a scalar register) aligned to `alignment`.
    AllocStorage = "alloc_storage", "alloc_storage {dst} {size} {alignment} {dtype_hint}" {
        /// The byte size (a scalar register).
        size: RegIn,
        /// The alignment in bytes (a power of two).
        alignment: Alignment,
        /// The dtype the storage is planned for (informational, as TVM's `dtype_hint`).
        dtype_hint: DType,
        /// Where the storage goes.
        dst: RegOut,
    }
    /// `dst` = a constructed value with constructor tag `tag` (tuples: tag 0) and `fields`.
    AllocAdt = "alloc_data", "alloc_data {dst} tag({tag}) [{fields}]" {
        /// The constructor's tag.
        tag: Tag,
        /// The fields, in order.
        fields: RegsIn,
        /// Where the value goes.
        dst: RegOut,
    }
    /// `dst` = a tuple of `fields` (TVM used `AllocADT` with tag 0; a distinct instruction keeps
    /// tuples and constructed values apart in results).
    AllocTuple = "alloc_tuple", "alloc_tuple {dst} [{fields}]" {
        /// The fields, in order.
        fields: RegsIn,
        /// Where the tuple goes.
        dst: RegOut,
    }
    /// `dst` = a closure of function `func` capturing `captured` (also a global function used
    /// as a value, with nothing captured).
    AllocClosure = "alloc_closure", "alloc_closure {dst} VMFunc[{func}]({captured})" {
        /// The function's index in the executable's function table.
        func: FuncIndex,
        /// The captured values, passed before the explicit arguments.
        captured: RegsIn,
        /// Where the closure goes.
        dst: RegOut,
    }
    /// `dst = object.index` (a tuple or constructed value's field).
    GetField = "get_field", "get_field {dst} {object}[{index}]" {
        /// The tuple or ADT value.
        object: RegIn,
        /// The field's position.
        index: FieldIndex,
        /// Where the field goes.
        dst: RegOut,
    }
    /// `dst` = the constructor tag of `object`, as an integer scalar.
    GetTag = "get_tag", "get_tag {dst} {object}" {
        /// The ADT value.
        object: RegIn,
        /// Where the tag goes.
        dst: RegOut,
    }
    /// Jumps by `true_offset` when the scalars in `test` and `target` are equal, else by
    /// `false_offset`.
    If = "if", "if {test} {target} {true_offset} {false_offset}" {
        /// The value tested.
        test: RegIn,
        /// The value it is compared with.
        target: RegIn,
        /// The jump when equal (relative, non-zero).
        true_offset: Jump,
        /// The jump when not equal (relative, non-zero).
        false_offset: Jump,
    }
    /// Jumps by `offset` (relative, non-zero).
    Goto = "goto", "goto {offset}" {
        /// The relative jump.
        offset: Jump,
    }
    /// `dst` = constant `index` of the executable's constant pool.
    LoadConst = "load_const", "load_const {dst} Const[{index}]" {
        /// The constant's index.
        index: ConstIndex,
        /// Where it goes.
        dst: RegOut,
    }
    /// `dst` = the `int64` scalar `value`.
    LoadConsti = "load_consti", "load_consti {dst} {value}" {
        /// The value.
        value: Int,
        /// Where it goes.
        dst: RegOut,
    }
    /// `dst` = the shape of `tensor`, as a 1-D `int64` tensor.
    ShapeOf = "shape_of", "shape_of {dst} {tensor}" {
        /// The tensor.
        tensor: RegIn,
        /// Where the shape goes.
        dst: RegOut,
    }
    /// `dst` = `tensor` viewed with the shape in `shape` (a 1-D integer tensor), no copy.
    ReshapeTensor = "reshape_tensor", "reshape_tensor {dst} {tensor} {shape}" {
        /// The tensor.
        tensor: RegIn,
        /// The new shape.
        shape: RegIn,
        /// Where the view goes.
        dst: RegOut,
    }
    /// Drops the register's value (its memory may be reused at once).
    KillRegister = "kill_register", "kill_register {reg}" {
        /// The register.
        reg: RegOut,
    }
    /// `dst` = a new reference cell holding `value` (`ref(v)`).
    AllocRef = "alloc_ref", "alloc_ref {dst} {value}" {
        /// The initial value.
        value: RegIn,
        /// Where the reference goes.
        dst: RegOut,
    }
    /// `dst` = the value in the reference cell `reference` (`ref_read(r)`).
    RefRead = "ref_read", "ref_read {dst} {reference}" {
        /// The reference.
        reference: RegIn,
        /// Where the value goes.
        dst: RegOut,
    }
    /// Stores `value` in the reference cell `reference` (`ref_write(r, v)`); `dst` gets the
    /// empty tuple, the expression's value.
    RefWrite = "ref_write", "ref_write {dst} {reference} {value}" {
        /// The reference.
        reference: RegIn,
        /// The new value.
        value: RegIn,
        /// Where `()` goes.
        dst: RegOut,
    }
    /// As [`Instruction::InvokePackedAlloc`] for a kernel that may write its result over its
    /// first input (`strided_set`'s data), which is dead after the call: the VM takes that
    /// input out of its register, and when nothing else holds its buffer (no other register,
    /// tuple, reference or caller; not a constant or a caller's array) passes it as the output
    /// too, so the kernel writes only what changes; otherwise it allocates the output as
    /// `invoke_packed_alloc` does. TVM Relax's `call_tir_inplace`, decided at run time.
    InvokePackedUpdate = "invoke_packed_update",
        "invoke_packed_update {dst} PackedFunc[{kernel}] (in: {inputs})" {
        /// The kernel's index in the executable's kernel table.
        kernel: KernelIndex,
        /// The input registers; the first is consumed.
        inputs: RegsIn,
        /// Where the result goes.
        dst: RegOut,
    }
}

impl Instruction {
    /// The registers the instruction reads, then the one it writes (if any).
    pub fn registers(&self) -> (Vec<Reg>, Option<Reg>) {
        let (mut reads, mut write) = (Vec::new(), None);
        self.for_each_operand(|operand| match operand {
            Operand::RegIn(r) => reads.push(r),
            Operand::RegsIn(regs) => reads.extend_from_slice(regs),
            Operand::RegOut(r) => write = Some(r),
            _ => {}
        });
        (reads, write)
    }

    /// Calls `f` on each operand, in the executable file's order.
    pub fn for_each_operand(&self, mut f: impl FnMut(Operand<'_>)) {
        let walked: Result<(), Infallible> = self.try_for_each_operand(|operand| {
            f(operand);
            Ok(())
        });
        match walked {
            Ok(()) => {}
            Err(never) => match never {},
        }
    }

    /// The instruction's kind: its index in [`Instruction::KINDS`] (the `--profile` table's
    /// rows, and the opcode of the file format).
    pub fn kind(&self) -> usize {
        self.opcode() as usize
    }

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
