//! TVM's `bind_params_by_name`: parameters of an entry function replaced by constants, by name.

use std::collections::HashMap;

use relay_ir::visit::substitute;
use relay_ir::{Expr, Module, Symbol, VarId};
use relay_runtime::NDArray;

use crate::error::Reported;
use crate::tensor::describe;
use crate::{Error, Result};

/// Binds parameters of global function `entry` (with or without `@`) to constants by name
/// (with or without `%`), as TVM's `bind_params_by_name`: each bound parameter's uses become
/// the constant and the parameter is removed; names that are not parameters are ignored. The
/// result is type-checked again, so its types reflect the constants.
///
/// Each value must fit its parameter's type: the same dtype and rank, and every known
/// dimension equal (a `?` dimension takes the value's). A mismatch is
/// [`Error::BindParams`], naming the parameter; a name shared by several parameters is
/// [`Error::AmbiguousParam`].
pub fn bind_params(
    mut module: Module,
    entry: &str,
    params: &HashMap<String, NDArray>,
) -> Result<Module> {
    let entry = entry.strip_prefix('@').unwrap_or(entry);
    let params: HashMap<&str, &NDArray> = params
        .iter()
        .map(|(name, array)| (name.strip_prefix('%').unwrap_or(name), array))
        .collect();
    if !params.is_empty() {
        let name = Symbol::intern(entry);
        let Some(global) = module.functions.iter_mut().find(|f| f.name == name) else {
            return Err(Error::NoEntry {
                entry: entry.to_owned(),
            });
        };
        let func = &mut global.func;
        let mut map: HashMap<VarId, Expr> = HashMap::new();
        for param in &func.params {
            let param_name = param.name().as_str();
            let Some(&array) = params.get(param_name) else {
                continue;
            };
            let count = func
                .params
                .iter()
                .filter(|p| p.name().as_str() == param_name)
                .count();
            if count > 1 {
                return Err(Error::AmbiguousParam {
                    name: param_name.to_owned(),
                    entry: entry.to_owned(),
                    count,
                });
            }
            let ty = param.checked_type().or(param.ty());
            if let Some(ty) = ty
                && !relay_ir::tensor_fits(ty, array)
            {
                return Err(Error::BindParams {
                    name: param_name.to_owned(),
                    entry: entry.to_owned(),
                    expected: ty.to_string(),
                    got: describe(array),
                });
            }
            map.insert(param.id(), Expr::constant(array.clone()));
        }
        if !map.is_empty() {
            func.params.retain(|p| !map.contains_key(&p.id()));
            func.body = substitute(&func.body, &map);
        }
    }
    if let Err(errors) = relay_types::check_module(&module) {
        return Err(Error::Program(Reported(miette::Report::new(errors))));
    }
    Ok(module)
}
