//! The executable file (`.ro`, docs/design.md §10): [`Executable::save`] writes one self-contained file
//! — globals, the constant pool, the primitive functions as canonical text with their
//! structural hashes, the type definitions, the bytecode with an explicit opcode table — and
//! [`Executable::load`] reads it back, validates every section and index, and re-JIT-compiles
//! the kernels through the kernel cache.
//!
//! The layout, byte by byte, is in `docs/executable-format.md`. In short: little-endian; a
//! 32-byte header (magic `RELAYVM\0`, the format version, the section count, the file length);
//! five sections, each a 16-byte header (a four-letter tag, a reserved word, the payload
//! length) then its payload padded to 8 bytes; then the XXH64 checksum of everything before
//! it. Constant data starts at file offsets that are multiples of 64.
//!
//! What TVM's users hit and this format avoids (`reference/tvm-vm.md` §3.5): the version is
//! the *format's*, not the compiler's, so a new relayc keeps loading old files; opcodes are
//! named in the file (an opcode table), so renumbering instructions cannot misread one; the
//! kernels travel as canonical Relay text in the same file, so there are no two artifacts to
//! keep in step; and a bad file is an [`ExeFileError`] naming the section and byte offset,
//! never a crash: every length is checked against the bytes that remain before anything is
//! allocated, and the decoded executable passes the same validator the compiler's output does.

mod read;
mod write;
mod xxh64;

use std::path::Path;
use std::sync::{Arc, OnceLock};

use relay_kernel::{KernelCache, KernelError};

use crate::executable::Executable;

pub use xxh64::xxh64;

/// The first eight bytes of every executable file.
pub const MAGIC: [u8; 8] = *b"RELAYVM\0";

/// The format version this relayc writes.
pub const FORMAT_VERSION: u32 = 1;

/// The oldest format version this relayc reads. Every version from this one to
/// [`FORMAT_VERSION`] loads; a change to the layout bumps [`FORMAT_VERSION`] and keeps a reader
/// for the versions before it.
pub const OLDEST_FORMAT_VERSION: u32 = 1;

/// Constant data starts at file offsets that are multiples of this (a cache line, and the
/// alignment the runtime gives tensors), so a reader may map the file and use the data in
/// place.
pub const CONSTANT_ALIGNMENT: usize = 64;

/// The sections of format version 1, in file order: tag and name.
pub const SECTIONS: [([u8; 4], &str); 5] = [
    (*b"GLOB", "globals"),
    (*b"CNST", "constants"),
    (*b"PRIM", "primitives"),
    (*b"TYPE", "types"),
    (*b"CODE", "code"),
];

/// The byte length of the file header: magic, version, section count, file length, reserved.
pub const HEADER_LEN: usize = 32;

/// The byte length of a section header: tag, reserved, payload length.
pub const SECTION_HEADER_LEN: usize = 16;

/// The byte length of the checksum at the end of the file.
pub const CHECKSUM_LEN: usize = 8;

/// Why an executable could not be saved or loaded.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ExeFileError {
    /// The file could not be read or written.
    #[error("cannot {action} `{path}`: {message}")]
    #[diagnostic(code(relay::exe::io))]
    Io {
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// The file does not start with [`MAGIC`].
    #[error("not a relayc executable: the file starts with {found}, not `RELAYVM\\0`")]
    #[diagnostic(
        code(relay::exe::magic),
        help("executables (`.ro`) are written by `relayc build FILE -o OUT.ro`")
    )]
    Magic {
        /// The first bytes of the file, escaped.
        found: String,
    },
    /// The file's format version is not one this relayc reads.
    #[error("{}", version_message(*found))]
    #[diagnostic(
        code(relay::exe::version),
        help(
            "rebuild the executable from its source with this relayc (`relayc build FILE -o OUT.ro`)"
        )
    )]
    Version {
        /// The version the file has.
        found: u32,
    },
    /// The checksum at the end of the file does not match its contents.
    #[error(
        "the executable is corrupt: its checksum is {stored:#018x} but its contents hash to \
         {computed:#018x}"
    )]
    #[diagnostic(
        code(relay::exe::checksum),
        help("the file was truncated or modified after it was written; rebuild it")
    )]
    Checksum {
        /// The checksum the file stores.
        stored: u64,
        /// The XXH64 of the bytes before it.
        computed: u64,
    },
    /// A section's contents are inconsistent.
    #[error("malformed executable: section `{section}` at byte {offset}: {message}")]
    #[diagnostic(code(relay::exe::malformed))]
    Malformed {
        /// The section (`header`, `globals`, `constants`, `primitives`, `types`, `code`).
        section: &'static str,
        /// The byte offset in the file where the problem was found.
        offset: u64,
        /// What is wrong.
        message: String,
    },
    /// A kernel of the file does not compile.
    #[error("kernel `{name}` (section `primitives` at byte {offset}) does not compile: {error}")]
    #[diagnostic(code(relay::exe::kernel))]
    Kernel {
        /// The kernel's name.
        name: String,
        /// Where its primitive function is in the file.
        offset: u64,
        /// The kernel compiler's error.
        error: KernelError,
    },
    /// The executable cannot be written in this format (a table larger than the format's
    /// 32-bit counts, a kernel that is not a function).
    #[error("cannot save the executable: {message}")]
    #[diagnostic(code(relay::exe::unsavable))]
    Unsavable {
        /// Why.
        message: String,
    },
}

/// The message for a file of format version `found`.
fn version_message(found: u32) -> String {
    let supported = if OLDEST_FORMAT_VERSION == FORMAT_VERSION {
        format!("format version {FORMAT_VERSION}")
    } else {
        format!("format versions {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION}")
    };
    if found > FORMAT_VERSION {
        format!(
            "the executable has format version {found}, which is newer than this relayc \
             supports ({supported}): it was written by a newer relayc"
        )
    } else {
        format!(
            "the executable has format version {found}, which this relayc does not read \
             (it supports {supported})"
        )
    }
}

/// The kernel cache every loaded executable shares: loading the same file twice, or two files
/// with structurally equal primitives, compiles each kernel once while any executable using it
/// is alive (the cache holds kernels weakly).
fn shared_cache() -> Arc<KernelCache> {
    static CACHE: OnceLock<Arc<KernelCache>> = OnceLock::new();
    CACHE.get_or_init(Arc::default).clone()
}

impl Executable {
    /// The executable as the bytes of an executable file.
    pub fn to_bytes(&self) -> Result<Vec<u8>, ExeFileError> {
        write::write(self)
    }

    /// Writes the executable to the file `path` (`.ro` by convention).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), ExeFileError> {
        let path = path.as_ref();
        let bytes = self.to_bytes()?;
        std::fs::write(path, bytes).map_err(|e| ExeFileError::Io {
            action: "write",
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Reads the executable file `path`, validates it and JIT-compiles its kernels
    /// ([`Executable::from_bytes`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Executable, ExeFileError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| ExeFileError::Io {
            action: "read",
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Executable::from_bytes(&bytes)
    }

    /// The executable in `bytes` (an executable file's contents), validated
    /// ([`Executable::decode`]), with every static kernel JIT-compiled through the shared
    /// kernel cache (a kernel that does not compile is an error now, not when it is called),
    /// and every dynamic kernel's generic kernel, if it has one.
    pub fn from_bytes(bytes: &[u8]) -> Result<Executable, ExeFileError> {
        let (exe, offsets) = read::read(bytes, shared_cache())?;
        for (kernel, offset) in exe.kernels.iter().zip(offsets) {
            if kernel.dynamic {
                kernel.generic_kernel();
                continue;
            }
            kernel
                .get_through(&exe.cache)
                .map_err(|error| ExeFileError::Kernel {
                    name: kernel.name.clone(),
                    offset,
                    error,
                })?;
        }
        Ok(exe)
    }

    /// The executable in `bytes`, with every section and index validated and every primitive
    /// function parsed, type-checked and checked against its hash, but no kernel compiled yet
    /// (each compiles on its first call): what `relayc disasm` needs.
    pub fn decode(bytes: &[u8]) -> Result<Executable, ExeFileError> {
        read::read(bytes, shared_cache()).map(|(exe, _)| exe)
    }
}
