//! The executable: what the compiler produces and the VM runs (docs/design.md §9). Immutable once
//! built, so many VMs on many threads can share one (`Send + Sync`).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use relay_ir::{Expr, Function, NDArray, Type, TypeDef, TypeKind};
use relay_kernel::{KernelCache, KernelError, PackedFunc};
use relay_linalg::gemm::prepacked::PackedConstants;

use crate::bytecode::{BytecodeError, Tables, VmFunction, validate};
use crate::scalar::ScalarKernel;
use crate::specialized::Specializations;

/// A kernel of an executable: the primitive function it is compiled from (kept so kernels can
/// be re-JIT-compiled when an executable is loaded, and specialized for dynamic shapes) and
/// its name.
#[derive(Clone, Debug)]
pub struct KernelEntry {
    /// The kernel's name (`fused_nn_dense_add_...`).
    pub name: String,
    /// The type-checked primitive function (`Primitive=1`), as a function expression (the
    /// kernel cache's key).
    pub func: Expr,
    /// Whether its types have `?` dimensions: it is compiled per argument shapes when called.
    pub dynamic: bool,
    /// The compiled kernel of a static primitive, once compiled ([`Executable::jit`], or on
    /// first call).
    pub compiled: OnceLock<Arc<PackedFunc>>,
    /// The unboxed evaluation of a scalar primitive (`invoke_packed_alloc` of it computes a
    /// scalar without a packed call).
    pub scalar: Option<ScalarKernel>,
    /// A dynamic primitive's kernels by argument shapes, kept at the call site so that a
    /// call with already seen shapes finds its kernel without the kernel cache.
    pub specialized: Specializations,
    /// A dynamic primitive's one kernel for every shape, when it has one
    /// ([`relay_kernel::compile_generic`]; made when the executable is compiled or loaded,
    /// [`KernelEntry::generic_kernel`]): nothing is specialized then.
    pub generic: OnceLock<Option<Arc<PackedFunc>>>,
}

impl KernelEntry {
    /// An entry for the primitive function `func` (a `Primitive=1` function expression).
    pub fn new(name: String, func: Expr) -> KernelEntry {
        let (dynamic, scalar) = match func.kind() {
            relay_ir::ExprKind::Function(f) => (relay_kernel::is_dynamic(f), ScalarKernel::of(f)),
            _ => (false, None),
        };
        KernelEntry {
            name,
            func,
            dynamic,
            compiled: OnceLock::new(),
            scalar,
            specialized: Specializations::default(),
            generic: OnceLock::new(),
        }
    }

    /// The primitive function.
    pub fn function(&self) -> Option<&Function> {
        match self.func.kind() {
            relay_ir::ExprKind::Function(f) => Some(f),
            _ => None,
        }
    }

    /// The compiled kernel of a static primitive (compiling it on first use).
    pub fn get(&self) -> Result<&Arc<PackedFunc>, KernelError> {
        if let Some(k) = self.compiled.get() {
            return Ok(k);
        }
        let func = self.function().ok_or_else(|| KernelError::Lower {
            message: format!("kernel {}: not a function literal", self.name),
        })?;
        let compiled = Arc::new(relay_kernel::compile_primitive(func, &self.name)?);
        Ok(self.compiled.get_or_init(|| compiled))
    }

    /// The compiled kernel of a static primitive, compiling it through `cache` on first use
    /// (structurally equal primitives, in this executable or another sharing the cache,
    /// compile once): how a loaded executable's kernels are compiled.
    pub fn get_through(&self, cache: &KernelCache) -> Result<&Arc<PackedFunc>, KernelError> {
        if let Some(k) = self.compiled.get() {
            return Ok(k);
        }
        let func = self.function().ok_or_else(|| KernelError::Lower {
            message: format!("kernel {}: not a function literal", self.name),
        })?;
        let compiled = cache.get_or_compile_for(&self.func, &tensor_arguments(func), &self.name)?;
        Ok(self.compiled.get_or_init(|| compiled))
    }

    /// The kernel for the argument tensors `inputs`: a static primitive's compiled kernel, or
    /// a dynamic primitive's specialization to their shapes — found among this call site's
    /// [`Specializations`], or compiled through `cache` and filed there.
    pub fn get_for(
        &self,
        cache: &KernelCache,
        inputs: &[Arc<NDArray>],
    ) -> Result<Arc<PackedFunc>, KernelError> {
        if !self.dynamic {
            return self.get().cloned();
        }
        if let Some(k) = self.generic_kernel() {
            let shapes: Vec<&[i64]> = inputs.iter().map(|t| t.shape()).collect();
            if k.serves(&shapes) {
                return Ok(k);
            }
        }
        if let Some(k) = self.specialized.find(inputs) {
            return Ok(k);
        }
        let types: Vec<Type> = inputs
            .iter()
            .map(|t| Type::tensor(t.shape(), t.dtype()))
            .collect();
        let kernel = cache.get_or_compile_for(&self.func, &types, &self.name)?;
        self.specialized.insert(inputs, kernel.clone());
        Ok(kernel)
    }
}

impl KernelEntry {
    /// The generic kernel of a dynamic primitive, compiled on first use, if it has one (a
    /// primitive that cannot compile that way is specialized instead, which reports the
    /// error).
    pub fn generic_kernel(&self) -> Option<Arc<PackedFunc>> {
        self.generic
            .get_or_init(|| {
                let func = self.function()?;
                relay_kernel::compile_generic(func, &self.name)?
                    .ok()
                    .map(Arc::new)
            })
            .clone()
    }
}

/// The types of a kernel's tensor arguments in call order: its parameters' types, tuples
/// flattened depth first (what [`KernelCache::get_or_compile_for`] takes).
fn tensor_arguments(func: &Function) -> Vec<Type> {
    fn leaves(ty: &Type, out: &mut Vec<Type>) {
        match ty.kind() {
            TypeKind::Tuple(fields) => fields.iter().for_each(|f| leaves(f, out)),
            _ => out.push(ty.clone()),
        }
    }
    let mut out = Vec::new();
    for p in &func.params {
        if let Some(ty) = p.checked_type().or(p.ty()) {
            leaves(ty, &mut out);
        }
    }
    out
}

/// Bytecode functions, the constant pool and the kernel table.
#[derive(Clone, Debug, Default)]
pub struct Executable {
    /// The functions; `Invoke`, `TailInvoke` and `AllocClosure` index them.
    pub functions: Vec<VmFunction>,
    /// The constant pool; `LoadConst` indexes it.
    pub constants: Vec<Arc<NDArray>>,
    /// The kernels; `InvokePacked` indexes them.
    pub kernels: Vec<KernelEntry>,
    /// Global functions by name (the entry points `invoke` looks up).
    pub globals: HashMap<String, u32>,
    /// The module's type definitions (ADTs), so that results can be printed with their
    /// constructors' names.
    pub types: Vec<TypeDef>,
    /// Specializations of dynamic kernels, shared by every VM running this executable.
    pub cache: Arc<KernelCache>,
    /// The packed forms of the constants' GEMM operands (weights), made on first use by the
    /// VMs running this executable and freed when its last clone drops
    /// ([`Executable::packed_constants`]).
    pub packed: OnceLock<Arc<PackedConstants>>,
}

impl Executable {
    /// The packed constant operands of this executable: the constant pool's arrays that own
    /// their bytes, by constant index, with the packed forms GEMMs made of them so far
    /// ([`relay_linalg::gemm::prepacked`]). Every VM running the executable hands it to its
    /// kernel calls, so a weight is packed once per executable, not per VM or per call.
    pub fn packed_constants(&self) -> &Arc<PackedConstants> {
        self.packed.get_or_init(|| {
            let owned: Vec<(usize, Arc<NDArray>)> = self
                .constants
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.is_view())
                .map(|(i, c)| (i, c.clone()))
                .collect();
            let ranges: Vec<(usize, usize, usize)> = owned
                .iter()
                .map(|(i, c)| (*i, c.as_bytes().as_ptr() as usize, c.as_bytes().len()))
                .collect();
            // SAFETY: the table holds the arrays, which own their bytes, and tensors are
            // immutable values: no kernel stores to an input, and a shared array is copied
            // before being written (the table's clones keep every one shared).
            Arc::new(unsafe { PackedConstants::new(ranges, owned) })
        })
    }

    /// The tables the functions' instructions refer to.
    pub fn tables(&self) -> Tables {
        Tables {
            arities: self
                .functions
                .iter()
                .map(|f| u32::try_from(f.params.len()).unwrap_or(u32::MAX))
                .collect(),
            kernels: self.kernels.len(),
            constants: self.constants.len(),
        }
    }

    /// Checks every function's bytecode against the tables ([`validate`]) and every global
    /// against the function table.
    pub fn validate(&self) -> Result<(), BytecodeError> {
        let tables = self.tables();
        for f in &self.functions {
            validate(f, &tables)?;
        }
        for (name, &index) in &self.globals {
            if index as usize >= self.functions.len() {
                return Err(BytecodeError {
                    function: name.clone(),
                    pc: 0,
                    message: format!(
                        "global @{name} names function {index} of {}",
                        self.functions.len()
                    ),
                });
            }
        }
        Ok(())
    }

    /// JIT-compiles every static kernel and every dynamic one's generic kernel now (a dynamic
    /// one without is compiled per argument shapes when called), so the first run pays no
    /// compile time. Every failure is reported: the errors of all kernels that do not compile.
    pub fn jit(&self) -> Result<(), Vec<KernelError>> {
        for k in self.kernels.iter().filter(|k| k.dynamic) {
            k.generic_kernel();
        }
        let errors: Vec<KernelError> = self
            .kernels
            .iter()
            .filter(|k| !k.dynamic)
            .filter_map(|k| k.get().err())
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// The function a global names.
    pub fn global(&self, name: &str) -> Option<(u32, &VmFunction)> {
        let &index = self.globals.get(name)?;
        Some((index, self.functions.get(index as usize)?))
    }

    /// Every VM function, in function-index order, separated by blank lines: what
    /// `relayc build --emit bytecode` and `relayc disasm` print.
    pub fn disassemble(&self) -> String {
        let mut text = String::new();
        for (i, function) in self.functions.iter().enumerate() {
            if i > 0 {
                text.push('\n');
            }
            text.push_str(&function.to_string());
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytecode::{Instruction, Reg};

    fn exe() -> Executable {
        let id = VmFunction {
            name: "main".into(),
            params: vec!["x".into()],
            register_count: 1,
            code: vec![Instruction::Ret { result: Reg(0) }],
            param_types: vec![None],
            ret_type: None,
            locations: vec![],
        };
        Executable {
            functions: vec![id],
            globals: HashMap::from([("main".to_string(), 0)]),
            ..Executable::default()
        }
    }

    #[test]
    fn executables_are_shared_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Executable>();
        let e = exe();
        assert_eq!(e.validate(), Ok(()));
        assert_eq!(
            e.global("main").map(|(i, f)| (i, f.name.as_str())),
            Some((0, "main"))
        );
        assert!(e.global("nope").is_none());
    }

    #[test]
    fn a_global_naming_a_missing_function_is_an_error() {
        let mut e = exe();
        e.globals.insert("ghost".into(), 3);
        let err = e.validate().expect_err("a dangling global");
        assert!(err.to_string().contains("names function 3 of 1"), "{err}");
    }
}
