//! The bytecode validator: every register within the frame, every jump onto an instruction,
//! every table index in range, direct calls with the callee's arity, and no way to run past
//! the end. The checks follow the operand kinds of the instruction table, plus the few rules
//! that relate two operands (a call's arity).

use super::{Instruction, Operand, VmFunction};

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
    check_frame(func)?;
    for (pc, instr) in func.code.iter().enumerate() {
        let check = Check { func, tables, pc };
        check.registers(instr)?;
        instr.try_for_each_operand(|operand| check.operand(operand))?;
        check.rules(instr)?;
    }
    Ok(())
}

/// The error at instruction `pc` of `func`.
fn fail(func: &VmFunction, pc: usize, message: String) -> BytecodeError {
    BytecodeError {
        function: func.name.clone(),
        pc,
        message,
    }
}

/// Checks the function as a whole: the parameters fit the register file, the register file
/// is no larger than the code names, and the last instruction does not fall through.
fn check_frame(func: &VmFunction) -> Result<(), BytecodeError> {
    if func.params.len() > func.register_count as usize {
        return Err(fail(
            func,
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
            func,
            0,
            format!(
                "a register count of {}, but its parameters and instructions name at most {named}",
                func.register_count
            ),
        ));
    }
    match func.code.last() {
        None => Err(fail(func, 0, "the function has no instructions".into())),
        Some(last) if !last.ends_block() => Err(fail(
            func,
            func.code.len() - 1,
            format!("`{last}` would run past the end of the function"),
        )),
        Some(_) => Ok(()),
    }
}

/// The checks of one instruction, at `pc` of `func`.
struct Check<'a> {
    func: &'a VmFunction,
    tables: &'a Tables,
    pc: usize,
}

impl Check<'_> {
    fn fail(&self, message: String) -> BytecodeError {
        fail(self.func, self.pc, message)
    }

    /// Every register the instruction reads or writes is in the frame.
    fn registers(&self, instr: &Instruction) -> Result<(), BytecodeError> {
        let (reads, write) = instr.registers();
        match reads
            .iter()
            .chain(&write)
            .find(|r| r.0 >= self.func.register_count)
        {
            Some(r) => Err(self.fail(format!(
                "register {r} is outside the {} registers of the frame",
                self.func.register_count
            ))),
            None => Ok(()),
        }
    }

    /// The check of one operand by its kind (registers are checked by
    /// [`Check::registers`]).
    fn operand(&self, operand: Operand<'_>) -> Result<(), BytecodeError> {
        let tables = self.tables;
        match operand {
            Operand::Jump(offset) => self.jump(offset),
            Operand::FuncIndex(index) => self.arity_of(index).map(drop),
            // The number of inputs is the kernel's to check when called: an input register
            // holding a tuple passes its tensors.
            Operand::KernelIndex(kernel) if kernel as usize >= tables.kernels => {
                Err(self.fail(format!(
                    "kernel index {kernel} out of range ({} kernels)",
                    tables.kernels
                )))
            }
            Operand::ConstIndex(index) if index as usize >= tables.constants => {
                Err(self.fail(format!(
                    "constant index {index} out of range ({} constants)",
                    tables.constants
                )))
            }
            Operand::Alignment(alignment) if !alignment.is_power_of_two() => {
                Err(self.fail(format!("alignment {alignment} is not a power of two")))
            }
            Operand::Dims(shape) if shape.iter().any(|&d| d < 0) => {
                Err(self.fail(format!("negative dimension in shape {shape:?}")))
            }
            _ => Ok(()),
        }
    }

    /// A jump by `offset` lands on an instruction of the function.
    fn jump(&self, offset: i32) -> Result<(), BytecodeError> {
        let len = self.func.code.len() as i64;
        let target = self.pc as i64 + i64::from(offset);
        if offset == 0 || !(0..len).contains(&target) {
            return Err(self.fail(format!(
                "jump by {offset} lands outside the function's {len} instructions"
            )));
        }
        Ok(())
    }

    /// The parameter count of function `index`, which must be in the function table.
    fn arity_of(&self, index: u32) -> Result<u32, BytecodeError> {
        let arities = &self.tables.arities;
        arities.get(index as usize).copied().ok_or_else(|| {
            self.fail(format!(
                "function index {index} out of range ({} functions)",
                arities.len()
            ))
        })
    }

    /// The rules that relate two operands: a direct call passes the callee's arity, a closure
    /// captures no more than it, and a kernel call in destination-passing style has outputs.
    fn rules(&self, instr: &Instruction) -> Result<(), BytecodeError> {
        match instr {
            Instruction::Invoke { func: f, args, .. }
            | Instruction::TailInvoke { func: f, args } => {
                let arity = self.arity_of(*f)?;
                if args.len() != arity as usize {
                    return Err(self.fail(format!(
                        "VMFunc[{f}] takes {arity} arguments, the call passes {}",
                        args.len()
                    )));
                }
            }
            Instruction::AllocClosure {
                func: f, captured, ..
            } => {
                let arity = self.arity_of(*f)?;
                if captured.len() > arity as usize {
                    return Err(self.fail(format!(
                        "VMFunc[{f}] takes {arity} arguments, the closure captures {}",
                        captured.len()
                    )));
                }
            }
            Instruction::InvokePacked { outputs, .. } if outputs.is_empty() => {
                return Err(self.fail("a kernel call without outputs".into()));
            }
            Instruction::InvokePackedUpdate { inputs, .. } if inputs.is_empty() => {
                return Err(
                    self.fail("an updating kernel call without the input it updates".into())
                );
            }
            _ => {}
        }
        Ok(())
    }
}
