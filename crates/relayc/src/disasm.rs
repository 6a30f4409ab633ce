//! `relayc disasm EXE.ro`: prints the bytecode of an executable file — every VM function, in
//! function-index order — exactly as `relayc build FILE --emit bytecode` prints it for the
//! source the file was built from. The file is decoded and validated in full
//! ([`Executable::decode`]: every section and index, every primitive function re-parsed,
//! type-checked and checked against its hash) but no kernel is compiled.

use std::path::Path;

use relay::{ExeFileError, Executable};

use crate::diagnostics::report_diagnostic;
use crate::{Exit, write_stdout};

/// `relayc disasm EXE.ro`.
pub fn disasm(file: &Path) -> Exit {
    let decoded = std::fs::read(file)
        .map_err(|error| ExeFileError::Io {
            action: "read",
            path: file.display().to_string(),
            message: error.to_string(),
        })
        .and_then(|bytes| Executable::decode(&bytes));
    match decoded {
        Ok(exe) => write_stdout(&exe.disassemble()),
        Err(error) => {
            report_diagnostic(&error);
            Exit::UserError
        }
    }
}
