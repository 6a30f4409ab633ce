//! The operands of instructions, by kind: a register read or written, a list of registers, an
//! index into one of the executable's tables, an immediate. The instruction table
//! (`instruction.rs`) gives each field of each instruction one of these kinds; what a kind
//! means is written once here — how it prints, how the executable file encodes and decodes it
//! — and the validator (`validate.rs`) checks it by kind.

use std::fmt;

use relay_ir::DType;

use super::Reg;

/// A view of one operand of an instruction, tagged with its kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand<'a> {
    /// A register the instruction reads.
    RegIn(Reg),
    /// The register the instruction writes (or kills).
    RegOut(Reg),
    /// Registers the instruction reads, in order.
    RegsIn(&'a [Reg]),
    /// An index into the executable's function table.
    FuncIndex(u32),
    /// An index into the executable's kernel table.
    KernelIndex(u32),
    /// An index into the executable's constant pool.
    ConstIndex(u32),
    /// A constructor tag.
    Tag(u32),
    /// A field's position in a tuple or constructed value.
    FieldIndex(u32),
    /// A jump, relative to the instruction's own position.
    Jump(i32),
    /// An `int64` immediate.
    Int(i64),
    /// An alignment in bytes.
    Alignment(u64),
    /// A static shape.
    Dims(&'a [i64]),
    /// An element type.
    DType(DType),
    /// The shape the program's types promise for a run-time shape, if any (a negative extent
    /// accepts any).
    AssertDims(Option<&'a [i64]>),
    /// A message.
    Message(&'a str),
}

/// Writes `a, b, ...`.
fn comma_separated<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

impl fmt::Display for Operand<'_> {
    /// The operand as an instruction's text shows it (`$3`, `$0, $2`, `2, 3`, `float32`); an
    /// instruction's format puts the brackets and table names around it (`VMFunc[1]`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::RegIn(r) | Operand::RegOut(r) => write!(f, "{r}"),
            Operand::RegsIn(regs) => comma_separated(f, regs),
            Operand::FuncIndex(n)
            | Operand::KernelIndex(n)
            | Operand::ConstIndex(n)
            | Operand::Tag(n)
            | Operand::FieldIndex(n) => write!(f, "{n}"),
            Operand::Jump(offset) => write!(f, "{offset}"),
            Operand::Int(value) => write!(f, "{value}"),
            Operand::Alignment(bytes) => write!(f, "{bytes}"),
            Operand::Dims(dims) => comma_separated(f, dims),
            Operand::DType(dtype) => write!(f, "{dtype}"),
            Operand::AssertDims(None) => Ok(()),
            Operand::AssertDims(Some(dims)) => {
                f.write_str(" assert [")?;
                comma_separated(f, dims)?;
                f.write_str("]")
            }
            Operand::Message(message) => write!(f, "{message:?}"),
        }
    }
}

/// The primitive writes of the executable file's instruction encoding (the file's encoder
/// implements it). Counts that do not fit the format are the encoder's error.
pub trait EncodeOperand {
    /// Why an operand could not be written.
    type Error;
    /// A register, as its `u32` number.
    fn reg(&mut self, r: Reg);
    /// A `u32` count, then the registers.
    fn regs(&mut self, regs: &[Reg]) -> Result<(), Self::Error>;
    /// A byte.
    fn u8(&mut self, v: u8);
    /// A little-endian `u32`.
    fn u32(&mut self, v: u32);
    /// A little-endian `i32`.
    fn i32(&mut self, v: i32);
    /// A little-endian `u64`.
    fn u64(&mut self, v: u64);
    /// A little-endian `i64`.
    fn i64(&mut self, v: i64);
    /// A `u32` count, then the values.
    fn i64s(&mut self, values: &[i64]) -> Result<(), Self::Error>;
    /// A dtype: code, bits, lanes.
    fn dtype(&mut self, d: DType);
    /// A `u32` byte length, then the UTF-8 bytes.
    fn str(&mut self, s: &str) -> Result<(), Self::Error>;
}

/// The primitive reads of the executable file's instruction decoding, the mirror of
/// [`EncodeOperand`] (the file's reader implements it, bounds-checking every read). `what`
/// names the value for errors ("a function index").
pub trait DecodeOperand {
    /// Why an operand could not be read.
    type Error;
    /// A register.
    fn reg(&mut self) -> Result<Reg, Self::Error>;
    /// A `u32` count, then the registers.
    fn regs(&mut self) -> Result<Vec<Reg>, Self::Error>;
    /// A byte that is 0 or 1.
    fn bool(&mut self, what: &str) -> Result<bool, Self::Error>;
    /// A little-endian `u32`.
    fn u32(&mut self, what: &str) -> Result<u32, Self::Error>;
    /// A little-endian `i32`.
    fn i32(&mut self, what: &str) -> Result<i32, Self::Error>;
    /// A little-endian `u64`.
    fn u64(&mut self, what: &str) -> Result<u64, Self::Error>;
    /// A little-endian `i64`.
    fn i64(&mut self, what: &str) -> Result<i64, Self::Error>;
    /// A `u32` count, then the values.
    fn i64s(&mut self, what: &str) -> Result<Vec<i64>, Self::Error>;
    /// A valid dtype.
    fn dtype(&mut self) -> Result<DType, Self::Error>;
    /// A `u32` byte length, then UTF-8 bytes.
    fn string(&mut self, what: &str) -> Result<String, Self::Error>;
}

impl Operand<'_> {
    /// Writes the operand in the executable file's encoding; the `decode` arms of `operand!`
    /// read it back.
    pub fn encode<E: EncodeOperand + ?Sized>(self, e: &mut E) -> Result<(), E::Error> {
        match self {
            Operand::RegIn(r) | Operand::RegOut(r) => e.reg(r),
            Operand::RegsIn(regs) => e.regs(regs)?,
            Operand::FuncIndex(n)
            | Operand::KernelIndex(n)
            | Operand::ConstIndex(n)
            | Operand::Tag(n)
            | Operand::FieldIndex(n) => e.u32(n),
            Operand::Jump(offset) => e.i32(offset),
            Operand::Int(value) => e.i64(value),
            Operand::Alignment(bytes) => e.u64(bytes),
            Operand::Dims(dims) => e.i64s(dims)?,
            Operand::DType(dtype) => e.dtype(dtype),
            Operand::AssertDims(None) => e.u8(0),
            Operand::AssertDims(Some(dims)) => {
                e.u8(1);
                e.i64s(dims)?;
            }
            Operand::Message(message) => e.str(message)?,
        }
        Ok(())
    }
}

/// What each operand kind of the instruction table is: `operand!(type Kind)` is the field's
/// Rust type, `operand!(view Kind, field)` the [`Operand`] of a field bound by reference, and
/// `operand!(decode Kind, d)` reads one from a [`DecodeOperand`] (the mirror of
/// [`Operand::encode`], with the name errors give the value).
macro_rules! operand {
    (type RegIn) => { $crate::bytecode::Reg };
    (view RegIn, $x:ident) => { $crate::bytecode::Operand::RegIn(*$x) };
    (decode RegIn, $d:ident) => { $d.reg()? };

    (type RegOut) => { $crate::bytecode::Reg };
    (view RegOut, $x:ident) => { $crate::bytecode::Operand::RegOut(*$x) };
    (decode RegOut, $d:ident) => { $d.reg()? };

    (type RegsIn) => { Vec<$crate::bytecode::Reg> };
    (view RegsIn, $x:ident) => { $crate::bytecode::Operand::RegsIn($x.as_slice()) };
    (decode RegsIn, $d:ident) => { $d.regs()? };

    (type FuncIndex) => { u32 };
    (view FuncIndex, $x:ident) => { $crate::bytecode::Operand::FuncIndex(*$x) };
    (decode FuncIndex, $d:ident) => { $d.u32("a function index")? };

    (type KernelIndex) => { u32 };
    (view KernelIndex, $x:ident) => { $crate::bytecode::Operand::KernelIndex(*$x) };
    (decode KernelIndex, $d:ident) => { $d.u32("a kernel index")? };

    (type ConstIndex) => { u32 };
    (view ConstIndex, $x:ident) => { $crate::bytecode::Operand::ConstIndex(*$x) };
    (decode ConstIndex, $d:ident) => { $d.u32("a constant index")? };

    (type Tag) => { u32 };
    (view Tag, $x:ident) => { $crate::bytecode::Operand::Tag(*$x) };
    (decode Tag, $d:ident) => { $d.u32("a constructor tag")? };

    (type FieldIndex) => { u32 };
    (view FieldIndex, $x:ident) => { $crate::bytecode::Operand::FieldIndex(*$x) };
    (decode FieldIndex, $d:ident) => { $d.u32("a field index")? };

    (type Jump) => { i32 };
    (view Jump, $x:ident) => { $crate::bytecode::Operand::Jump(*$x) };
    (decode Jump, $d:ident) => { $d.i32("a jump offset")? };

    (type Int) => { i64 };
    (view Int, $x:ident) => { $crate::bytecode::Operand::Int(*$x) };
    (decode Int, $d:ident) => { $d.i64("an integer")? };

    (type Alignment) => { u64 };
    (view Alignment, $x:ident) => { $crate::bytecode::Operand::Alignment(*$x) };
    (decode Alignment, $d:ident) => { $d.u64("an alignment")? };

    (type Dims) => { Vec<i64> };
    (view Dims, $x:ident) => { $crate::bytecode::Operand::Dims($x.as_slice()) };
    (decode Dims, $d:ident) => { $d.i64s("a tensor's dimensions")? };

    (type DType) => { relay_ir::DType };
    (view DType, $x:ident) => { $crate::bytecode::Operand::DType(*$x) };
    (decode DType, $d:ident) => { $d.dtype()? };

    (type AssertDims) => { Option<Vec<i64>> };
    (view AssertDims, $x:ident) => { $crate::bytecode::Operand::AssertDims($x.as_deref()) };
    (decode AssertDims, $d:ident) => {
        if $d.bool("whether a shape assertion follows")? {
            Some($d.i64s("an asserted shape")?)
        } else {
            None
        }
    };

    (type Message) => { String };
    (view Message, $x:ident) => { $crate::bytecode::Operand::Message($x.as_str()) };
    (decode Message, $d:ident) => { $d.string("a fatal message")? };
}
