//! Writing an executable file (the layout is in `docs/executable-format.md`).

use std::collections::HashMap;

use relay_ir::{
    DType, Dim, PrintOptions, Type, TypeDef, TypeKind, TypeVar, TypeVarId, print_expr,
    structural_hash,
};

use super::{
    CHECKSUM_LEN, CONSTANT_ALIGNMENT, ExeFileError, FORMAT_VERSION, HEADER_LEN, MAGIC, SECTIONS,
    xxh64,
};
use crate::bytecode::{EncodeOperand, Instruction, Reg, VmFunction};
use crate::executable::Executable;

/// The file's bytes, built front to back.
struct Encoder {
    out: Vec<u8>,
    /// The type variables of the current scope (a function's signature, a type definition),
    /// numbered in order of first appearance.
    vars: HashMap<TypeVarId, u32>,
}

/// A count as the format's `u32`, or why it does not fit.
fn count(n: usize, what: &str) -> Result<u32, ExeFileError> {
    u32::try_from(n).map_err(|_| ExeFileError::Unsavable {
        message: format!("{n} {what} do not fit the format's 32-bit counts"),
    })
}

/// The primitive writes, which the instruction table's operands encode with (and the rest of
/// the file uses too).
impl EncodeOperand for Encoder {
    type Error = ExeFileError;

    fn u8(&mut self, v: u8) {
        self.out.push(v);
    }

    fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    fn i32(&mut self, v: i32) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    fn i64(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    fn reg(&mut self, r: Reg) {
        self.u32(r.0);
    }

    fn regs(&mut self, regs: &[Reg]) -> Result<(), ExeFileError> {
        self.len(regs.len(), "registers")?;
        for &r in regs {
            self.reg(r);
        }
        Ok(())
    }

    fn i64s(&mut self, values: &[i64]) -> Result<(), ExeFileError> {
        self.len(values.len(), "dimensions")?;
        for &v in values {
            self.i64(v);
        }
        Ok(())
    }

    fn dtype(&mut self, d: DType) {
        self.u8(d.code as u8);
        self.u8(d.bits);
        self.u16(d.lanes);
    }

    fn str(&mut self, s: &str) -> Result<(), ExeFileError> {
        self.len(s.len(), "bytes of a string")?;
        self.out.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

impl Encoder {
    fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    fn len(&mut self, n: usize, what: &str) -> Result<(), ExeFileError> {
        let n = count(n, what)?;
        self.u32(n);
        Ok(())
    }

    /// Zero bytes up to the next multiple of `align` (a file offset).
    fn pad(&mut self, align: usize) {
        let rest = self.out.len() % align;
        if rest != 0 {
            self.out.resize(self.out.len() + align - rest, 0);
        }
    }

    fn var(&mut self, v: &TypeVar) -> Result<(), ExeFileError> {
        let next = self.vars.len() as u32;
        let index = *self.vars.entry(v.id()).or_insert(next);
        self.u32(index);
        self.str(v.name().as_str())
    }

    fn ty(&mut self, ty: &Type) -> Result<(), ExeFileError> {
        relay_ir::ensure_sufficient_stack(|| match ty.kind() {
            TypeKind::Tensor { shape, dtype } => {
                self.u8(0);
                self.len(shape.len(), "dimensions")?;
                for d in shape {
                    self.i64(match d {
                        Dim::Known(n) => *n,
                        Dim::Any => -1,
                    });
                }
                self.dtype(*dtype);
                Ok(())
            }
            TypeKind::Tuple(fields) => {
                self.u8(1);
                self.types(fields)
            }
            TypeKind::Func(f) => {
                self.u8(2);
                self.len(f.type_params.len(), "type parameters")?;
                for v in &f.type_params {
                    self.var(v)?;
                }
                self.types(&f.params)?;
                self.ty(&f.ret)
            }
            TypeKind::Var(v) => {
                self.u8(3);
                self.var(v)
            }
            TypeKind::Adt { name, args } => {
                self.u8(4);
                self.str(name.as_str())?;
                self.types(args)
            }
            TypeKind::Ref(inner) => {
                self.u8(5);
                self.ty(inner)
            }
            TypeKind::Incomplete => {
                self.u8(6);
                Ok(())
            }
        })
    }

    fn types(&mut self, types: &[Type]) -> Result<(), ExeFileError> {
        self.len(types.len(), "types")?;
        types.iter().try_for_each(|t| self.ty(t))
    }

    fn opt_ty(&mut self, ty: Option<&Type>) -> Result<(), ExeFileError> {
        match ty {
            None => {
                self.u8(0);
                Ok(())
            }
            Some(t) => {
                self.u8(1);
                self.ty(t)
            }
        }
    }

    /// Writes a section: its header, then `payload`'s bytes, then padding to 8 bytes.
    fn section(
        &mut self,
        index: usize,
        payload: impl FnOnce(&mut Encoder) -> Result<(), ExeFileError>,
    ) -> Result<(), ExeFileError> {
        self.out.extend_from_slice(&SECTIONS[index].0);
        self.u32(0);
        let length_at = self.out.len();
        self.u64(0);
        let start = self.out.len();
        payload(self)?;
        let length = (self.out.len() - start) as u64;
        self.out[length_at..length_at + 8].copy_from_slice(&length.to_le_bytes());
        self.pad(8);
        Ok(())
    }

    fn globals(&mut self, exe: &Executable) -> Result<(), ExeFileError> {
        let mut globals: Vec<(&String, &u32)> = exe.globals.iter().collect();
        globals.sort();
        self.len(globals.len(), "globals")?;
        for (name, &index) in globals {
            self.str(name)?;
            self.u32(index);
            let arity = exe
                .functions
                .get(index as usize)
                .map_or(0, |f| f.params.len());
            self.len(arity, "parameters")?;
        }
        Ok(())
    }

    fn constants(&mut self, exe: &Executable) -> Result<(), ExeFileError> {
        self.len(exe.constants.len(), "constants")?;
        for c in &exe.constants {
            self.dtype(c.dtype());
            self.i64s(c.shape())?;
            self.u64(c.as_bytes().len() as u64);
            self.pad(CONSTANT_ALIGNMENT);
            c.write_le_bytes(&mut self.out);
        }
        Ok(())
    }

    fn primitives(&mut self, exe: &Executable) -> Result<(), ExeFileError> {
        self.len(exe.kernels.len(), "kernels")?;
        for k in &exe.kernels {
            if k.function().is_none() {
                return Err(ExeFileError::Unsavable {
                    message: format!("kernel {} is not a function literal", k.name),
                });
            }
            self.str(&k.name)?;
            self.u64(structural_hash(&k.func));
            self.str(&print_expr(&k.func, &PrintOptions::default()))?;
        }
        Ok(())
    }

    fn type_defs(&mut self, types: &[TypeDef]) -> Result<(), ExeFileError> {
        self.len(types.len(), "type definitions")?;
        for def in types {
            self.vars.clear();
            self.str(def.name.as_str())?;
            self.u8(u8::from(def.external));
            self.len(def.params.len(), "type parameters")?;
            for v in &def.params {
                self.var(v)?;
            }
            self.len(def.ctors.len(), "constructors")?;
            for ctor in &def.ctors {
                self.str(ctor.name.as_str())?;
                self.types(&ctor.fields)?;
            }
        }
        Ok(())
    }

    fn code(&mut self, exe: &Executable) -> Result<(), ExeFileError> {
        self.len(Instruction::KINDS.len(), "opcodes")?;
        for name in Instruction::KINDS {
            self.str(name)?;
        }
        self.len(exe.functions.len(), "functions")?;
        for f in &exe.functions {
            self.function(f)?;
        }
        Ok(())
    }

    fn function(&mut self, f: &VmFunction) -> Result<(), ExeFileError> {
        self.vars.clear();
        self.str(&f.name)?;
        self.len(f.params.len(), "parameters")?;
        for (i, name) in f.params.iter().enumerate() {
            self.str(name)?;
            self.opt_ty(f.param_types.get(i).and_then(Option::as_ref))?;
        }
        self.opt_ty(f.ret_type.as_ref())?;
        self.u32(f.register_count);
        self.len(f.code.len(), "instructions")?;
        for instr in &f.code {
            self.instruction(instr)?;
        }
        self.len(f.locations.len(), "locations")?;
        for (pc, location) in &f.locations {
            self.u32(*pc);
            self.str(&location.text)?;
        }
        Ok(())
    }

    fn instruction(&mut self, instr: &Instruction) -> Result<(), ExeFileError> {
        // The opcode is the instruction's kind: its position in the opcode table written
        // before the functions.
        self.u8(instr.opcode() as u8);
        instr.try_for_each_operand(|operand| operand.encode(self))
    }
}

/// The executable file of `exe`.
pub(super) fn write(exe: &Executable) -> Result<Vec<u8>, ExeFileError> {
    let data: usize = exe.constants.iter().map(|c| c.as_bytes().len()).sum();
    let mut e = Encoder {
        out: Vec::with_capacity(data + exe.constants.len() * 2 * CONSTANT_ALIGNMENT + 4096),
        vars: HashMap::new(),
    };
    e.out.extend_from_slice(&MAGIC);
    e.u32(FORMAT_VERSION);
    e.len(SECTIONS.len(), "sections")?;
    e.u64(0); // The file length, filled in below.
    e.u64(0); // Reserved.
    debug_assert_eq!(e.out.len(), HEADER_LEN);
    e.section(0, |e| e.globals(exe))?;
    e.section(1, |e| e.constants(exe))?;
    e.section(2, |e| e.primitives(exe))?;
    e.section(3, |e| e.type_defs(&exe.types))?;
    e.section(4, |e| e.code(exe))?;
    let total = (e.out.len() + CHECKSUM_LEN) as u64;
    e.out[16..24].copy_from_slice(&total.to_le_bytes());
    let checksum = xxh64(&e.out);
    e.u64(checksum);
    Ok(e.out)
}
