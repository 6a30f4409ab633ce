//! The two properties every parsed program must have (SPEC §1): the printed text re-parses to
//! a structurally equal module, and printing is a fixpoint.

use relay_ir::structural::module_eq;
use relay_ir::{Module, PrintOptions, print_module};

use crate::Failure;
use crate::failure::indent;
use crate::golden::diff;

/// Parses `text`; on errors fails with the rendered diagnostics.
pub fn parse(text: &str, name: &str) -> Result<Module, Failure> {
    relay_syntax::parse(text, name).map_err(|errors| {
        Failure::new(format!(
            "the file does not parse\n\n{}",
            relay_syntax::render_plain(&errors)
        ))
    })
}

/// Prints `module`, checks that `module_eq(parse(print(m)), m)` and
/// `print(parse(print(m))) == print(m)`, and returns the printed text. `name` is the source
/// name used in messages.
pub fn check(module: &Module, name: &str) -> Result<String, Failure> {
    let options = PrintOptions::default();
    let printed = print_module(module, &options);

    let reparsed =
        relay_syntax::parse(&printed, &format!("{name} (printed)")).map_err(|errors| {
            Failure::new(format!(
                "the printed text does not parse\n\n{}\nprinted text:\n{}",
                relay_syntax::render_plain(&errors),
                indent(&printed)
            ))
        })?;

    let reprinted = print_module(&reparsed, &options);
    if reprinted != printed {
        return Err(Failure::new(format!(
            "printing is not a fixpoint: print(parse(print(m))) differs from print(m)\n\n{}",
            diff(&printed, &reprinted)
        )));
    }

    if !module_eq(&reparsed, module) {
        return Err(Failure::new(format!(
            "the printed text re-parses to a module that is not structurally equal to the \
             original\n\nprinted text:\n{}",
            indent(&printed)
        )));
    }

    Ok(printed)
}
