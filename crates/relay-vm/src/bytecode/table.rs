//! The generator of the instruction set: `instruction_table!` takes the list of instructions
//! in `instruction.rs` — each instruction once, with its name, its text form and its fields
//! with their operand kinds — and writes everything that used to be a `match` per instruction:
//! the [`Instruction`](super::Instruction) enum, the [`Opcode`](super::Opcode) enum and the
//! instruction names, the printer, the walk over operands (which the file encoder, the
//! register lists and the validator use) and the file decoder.
//!
//! An entry reads
//!
//! ```text
//! /// doc
//! Variant = "name", "text form {field} ..." {
//!     /// doc
//!     field: OperandKind,
//!     ...
//! }
//! ```
//!
//! The fields are listed in the executable file's operand order (the enum declares them in
//! the same order); the text form is a `format!` string naming every field, each printed as
//! its [`Operand`](super::Operand) prints. The position of an entry is its opcode:
//! instructions are only ever appended (the names of format version 1 are pinned by
//! `tests/format_v1.rs`).

/// Writes the instruction set from its table (see the module docs).
macro_rules! instruction_table {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $name:literal, $text:literal {
            $(
                $(#[$field_doc:meta])*
                $field:ident: $kind:ident
            ),+ $(,)?
        }
    )+) => {
        /// One instruction.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Instruction {
            $(
                $(#[$doc])*
                $variant {
                    $(
                        $(#[$field_doc])*
                        $field: operand!(type $kind),
                    )+
                },
            )+
        }

        /// The kind of an instruction, whose number is its opcode in the executable file.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Opcode {
            $(
                #[doc = concat!("`", $name, "`.")]
                $variant,
            )+
        }

        impl Opcode {
            /// Every opcode, in order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant),+];

            /// The instruction's name, as its text form starts and as the file's opcode table
            /// lists it.
            pub fn name(self) -> &'static str {
                match self {
                    $(Opcode::$variant => $name,)+
                }
            }
        }

        impl Instruction {
            /// The names of the instruction kinds, indexed by [`Instruction::kind`].
            pub const KINDS: [&'static str; Opcode::ALL.len()] = [$($name),+];

            /// The instruction's kind.
            pub fn opcode(&self) -> Opcode {
                match self {
                    $(Instruction::$variant { .. } => Opcode::$variant,)+
                }
            }

            /// Calls `f` on each operand, in the executable file's order, stopping at the first
            /// error.
            pub fn try_for_each_operand<E>(
                &self,
                mut f: impl FnMut(Operand<'_>) -> Result<(), E>,
            ) -> Result<(), E> {
                match self {
                    $(Instruction::$variant { $($field),+ } => {
                        $(f(operand!(view $kind, $field))?;)+
                    })+
                }
                Ok(())
            }

            /// Reads the operands of an `opcode` instruction from `d`, in the executable
            /// file's order (the mirror of [`Operand::encode`] over
            /// [`Instruction::try_for_each_operand`]).
            pub fn decode<D: DecodeOperand + ?Sized>(
                opcode: Opcode,
                d: &mut D,
            ) -> Result<Instruction, D::Error> {
                Ok(match opcode {
                    $(Opcode::$variant => Instruction::$variant {
                        $($field: operand!(decode $kind, d),)+
                    },)+
                })
            }
        }

        impl fmt::Display for Instruction {
            /// TVM's text form (`invoke $3 VMFunc[1]($0, $2)`), extended for tail calls and
            /// references.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $(Instruction::$variant { $($field),+ } => write!(
                        f,
                        $text,
                        $($field = operand!(view $kind, $field)),+
                    ),)+
                }
            }
        }
    };
}
