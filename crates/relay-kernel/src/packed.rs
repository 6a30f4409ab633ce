//! [`PackedFunc`]: a compiled kernel, callable safely on `NDArray`s. It holds the kernel's
//! packed entry (TVM's six-argument C ABI), its [`KernelSpec`] and a share of the JIT code it
//! lives in, so the code stays alive while the function does.

use std::ffi::c_void;
use std::sync::Arc;

use relay_runtime::NDArray;

use crate::abi::{
    DEVICE_CPU, DLDataType, DLDevice, DLTensor, KernelContext, KernelSpec, PackedCFunc, TVMValue,
    TYPE_CODE_DLTENSOR_HANDLE,
};
use crate::codegen;
use crate::error::KernelError;
use crate::jit::{self, JitCode};
use crate::loops::{BufferRole, LoopFunc};

/// A compiled kernel.
pub struct PackedFunc {
    /// What runs it.
    entry: Entry,
    /// The kernel's name.
    name: String,
    /// What the entry checks its arguments against.
    spec: Arc<KernelSpec>,
    /// How many of the arguments are inputs (they come first).
    num_inputs: usize,
    /// Whether some extent of the spec is `-1` (any): see [`PackedFunc::is_generic`].
    generic: bool,
    /// A host operator's recent output shapes.
    memo: crate::host_op::ShapeMemo,
}

/// What a [`PackedFunc`] runs.
enum Entry {
    /// A JIT-compiled packed entry and the code it points into (held so that it lives while
    /// the entry does).
    Jit {
        entry: PackedCFunc,
        _code: Arc<JitCode>,
    },
    /// An operator of the kernel library ([`crate::host_op`]).
    Host(crate::host_op::HostOp),
    /// Loop nests for chunks of rows, walked over the arguments' rows (`crate::rows`).
    Rows(Box<crate::rows::Rows>),
    /// Loop nests for spans of the innermost dimension, walked over a broadcast
    /// (`crate::broadcast`).
    Broadcast(Box<crate::broadcast::Broadcast>),
}

impl std::fmt::Debug for PackedFunc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PackedFunc({})", self.name)
    }
}

/// Compiles one loop nest into its own JIT code.
pub fn compile(func: &LoopFunc) -> Result<PackedFunc, KernelError> {
    compile_aligned(func, crate::abi::DATA_ALIGNMENT)
}

/// [`compile`], its entry requiring `alignment` bytes of its arguments' data.
pub(crate) fn compile_aligned(func: &LoopFunc, alignment: u64) -> Result<PackedFunc, KernelError> {
    let mut all = compile_all_aligned(std::slice::from_ref(func), alignment)?;
    all.pop().ok_or_else(|| KernelError::Codegen {
        kernel: func.name.clone(),
        message: "no function was compiled".into(),
    })
}

/// Compiles several loop nests into one JIT module; the functions share its code, which is
/// freed when the last of them drops.
pub fn compile_all(funcs: &[LoopFunc]) -> Result<Vec<PackedFunc>, KernelError> {
    compile_all_aligned(funcs, crate::abi::DATA_ALIGNMENT)
}

/// [`compile_all`], the entries requiring `alignment` bytes of their arguments' data.
fn compile_all_aligned(funcs: &[LoopFunc], alignment: u64) -> Result<Vec<PackedFunc>, KernelError> {
    let mut module = jit::new_module()?;
    let mut defined = Vec::with_capacity(funcs.len());
    let mut inputs = Vec::with_capacity(funcs.len());
    let result = (|| {
        for (i, f) in funcs.iter().enumerate() {
            inputs.push(num_inputs(f)?);
            defined.push(codegen::define(&mut module, f, i, alignment, None)?);
        }
        module
            .finalize_definitions()
            .map_err(|e| KernelError::Codegen {
                kernel: funcs.first().map_or(String::new(), |f| f.name.clone()),
                message: e.to_string(),
            })
    })();
    if let Err(e) = result {
        // SAFETY: no pointer into the module has been handed out.
        unsafe { module.free_memory() };
        return Err(e);
    }
    let entries: Vec<*const u8> = defined
        .iter()
        .map(|d| module.get_finalized_function(d.entry))
        .collect();
    let code = JitCode::new(module, defined.iter().map(|d| d.spec.clone()).collect());
    Ok(defined
        .into_iter()
        .zip(entries)
        .zip(funcs.iter().zip(inputs))
        .map(|((d, ptr), (f, num_inputs))| PackedFunc {
            // SAFETY: `ptr` is the finalized code of a function with exactly the signature of
            // `PackedCFunc` (six arguments, `i32` result, the host's C calling convention).
            entry: Entry::Jit {
                entry: unsafe { std::mem::transmute::<*const u8, PackedCFunc>(ptr) },
                _code: code.clone(),
            },
            name: f.name.clone(),
            spec: d.spec,
            num_inputs,
            generic: false,
            memo: Default::default(),
        })
        .collect())
}

/// The number of input buffers, which must all come before the outputs.
fn num_inputs(f: &LoopFunc) -> Result<usize, KernelError> {
    let n = f
        .buffers
        .iter()
        .take_while(|b| b.role == BufferRole::Input)
        .count();
    if f.buffers[n..].iter().any(|b| b.role == BufferRole::Input) {
        return Err(KernelError::Malformed {
            kernel: f.name.clone(),
            message: "an input buffer after an output".into(),
        });
    }
    Ok(n)
}

/// The DLPack description of an array at `data`.
fn dl_tensor(a: &NDArray, data: *mut u8, shape: &mut [i64]) -> DLTensor {
    dl_tensor_of(a, data, shape.as_mut_ptr())
}

/// The DLTensor of `a` with its data at `data` and its `a.ndim()` extents at `shape`.
fn dl_tensor_of(a: &NDArray, data: *mut u8, shape: *mut i64) -> DLTensor {
    let d = a.dtype();
    DLTensor {
        data: data.cast::<c_void>(),
        device: DLDevice {
            device_type: DEVICE_CPU,
            device_id: 0,
        },
        ndim: a.ndim() as i32,
        dtype: DLDataType {
            code: d.code as u8,
            bits: d.bits,
            lanes: d.lanes,
        },
        shape,
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

impl PackedFunc {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The argument whose bytes its output is, reshaped (a reshape-only primitive with `?`
    /// dimensions): a caller owning that argument's storage makes the output a view of it at
    /// the shape [`Self::output_shapes`] gives instead of calling the kernel, which copies.
    pub fn view_source(&self) -> Option<usize> {
        match &self.entry {
            Entry::Host(crate::host_op::HostOp::View(v)) => Some(v.chain.data),
            Entry::Host(crate::host_op::HostOp::Dynamic(d)) => d.view_source(),
            _ => None,
        }
    }

    /// The input whose buffer may also be passed as its output, the kernel then writing only
    /// what changes (a `strided_set`'s data, [`relay_ops::updates_input`]); `None` for a
    /// kernel whose outputs must not overlap its inputs.
    pub fn updates_input(&self) -> Option<usize> {
        match &self.entry {
            Entry::Host(crate::host_op::HostOp::StridedSet(_)) => Some(0),
            _ => None,
        }
    }

    /// Whether it serves arguments of any extent where its spec says `-1` (a host operator
    /// compiled from a primitive with `?` dimensions): its outputs' shapes come from
    /// [`Self::output_shapes`].
    pub fn is_generic(&self) -> bool {
        self.generic
    }

    /// Whether [`Self::output_shapes`] reads the inputs' bytes (an operator whose output
    /// shape depends on values, TVM's data-dependent shape function).
    pub fn reads_values(&self) -> bool {
        matches!(&self.entry, Entry::Host(op) if op.reads_values())
    }

    /// The shapes of its outputs for inputs of shapes `inputs` and, when it
    /// [reads values](Self::reads_values), bytes `bytes` (TVM's shape function): the spec's
    /// for a static kernel, the operator's shape function for a generic one; an error when
    /// the inputs do not fit.
    pub fn output_shapes(
        &self,
        inputs: &[&[i64]],
        bytes: &[&[u8]],
    ) -> Result<Vec<Vec<i64>>, KernelError> {
        let outputs = &self.spec.args[self.num_inputs.min(self.spec.args.len())..];
        match self.entry {
            Entry::Host(ref op) if self.generic => self
                .memo
                .output_shapes(op, &self.spec, inputs, bytes)
                .map(|shapes| shapes.to_vec())
                .map_err(|m| self.call_error(m)),
            Entry::Rows(ref rows) => rows
                .output_shapes(inputs, self.num_inputs)
                .map_err(|m| self.call_error(m)),
            Entry::Broadcast(ref b) => b
                .output_shape(inputs)
                .map(|s| vec![s])
                .map_err(|m| self.call_error(m)),
            _ => Ok(outputs.iter().map(|a| a.shape.clone()).collect()),
        }
    }

    /// What the kernel expects of its arguments.
    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }

    /// The packed entry of JIT code, for callers that keep this `PackedFunc` alive while they
    /// call it; `None` for a host operator (called through [`Self::call_raw`]).
    pub fn entry(&self) -> Option<PackedCFunc> {
        match self.entry {
            Entry::Jit { entry, .. } => Some(entry),
            Entry::Host(_) | Entry::Rows(_) | Entry::Broadcast(_) => None,
        }
    }

    /// The function of host operator `op` with arguments `spec` (`inputs` of them inputs).
    pub(crate) fn host(
        name: String,
        spec: KernelSpec,
        inputs: usize,
        op: crate::host_op::HostOp,
    ) -> PackedFunc {
        let generic = spec.args.iter().any(|a| a.shape.iter().any(|&d| d < 0));
        PackedFunc {
            entry: Entry::Host(op),
            name,
            spec: Arc::new(spec),
            num_inputs: inputs,
            generic,
            memo: Default::default(),
        }
    }

    /// The row kernel `rows` with arguments `spec` (`inputs` of them inputs).
    pub(crate) fn rows(
        name: String,
        spec: KernelSpec,
        inputs: usize,
        rows: crate::rows::Rows,
    ) -> PackedFunc {
        PackedFunc {
            entry: Entry::Rows(Box::new(rows)),
            name,
            spec: Arc::new(spec),
            num_inputs: inputs,
            generic: true,
            memo: Default::default(),
        }
    }

    /// The broadcast kernel `b` with arguments `spec` (`inputs` of them inputs).
    pub(crate) fn broadcast(
        name: String,
        spec: KernelSpec,
        inputs: usize,
        b: crate::broadcast::Broadcast,
    ) -> PackedFunc {
        PackedFunc {
            entry: Entry::Broadcast(Box::new(b)),
            name,
            spec: Arc::new(spec),
            num_inputs: inputs,
            generic: true,
            memo: Default::default(),
        }
    }

    /// Packs the constant operands of its products before the first call, `inputs` its
    /// inputs that are constants of the executable (`None` for the others): a product of the
    /// kernel library by a constant weight is prepacked as `ctx`'s constants hold it
    /// (`relay_linalg::gemm::prepack`). Other kernels pack on their first call.
    pub fn prepack(&self, ctx: &KernelContext, inputs: &[Option<&NDArray>]) {
        if let Entry::Host(crate::host_op::HostOp::Matmul(m)) = &self.entry {
            let data = self
                .spec
                .args
                .first()
                .map_or(&[][..], |a| a.shape.as_slice());
            m.prepack(ctx, data, inputs.get(1).copied().flatten());
        }
    }

    /// Whether it computes inputs of shapes `inputs`: always, but for a row kernel whose
    /// batched inputs do not share their rows (a `?` that broadcasts at run time), and a
    /// broadcast kernel whose arguments do not broadcast as its spans read them, which a
    /// caller specializes instead.
    pub fn serves(&self, inputs: &[&[i64]]) -> bool {
        match &self.entry {
            Entry::Rows(rows) => rows.serves(inputs),
            Entry::Broadcast(b) => b.serves(inputs),
            _ => true,
        }
    }

    /// What a listing or `relayc build` says of a generic kernel
    /// ([`crate::listing::GENERIC_NOTE`] or [`crate::listing::ROWS_NOTE`]).
    pub fn generic_note(&self) -> Option<&'static str> {
        match (&self.entry, self.generic) {
            (Entry::Rows(_), _) => Some(crate::listing::ROWS_NOTE),
            (Entry::Broadcast(_), _) => Some(crate::listing::BROADCAST_NOTE),
            (Entry::Host(_), true) => Some(crate::listing::GENERIC_NOTE),
            _ => None,
        }
    }

    /// The number of inputs (the arguments before the outputs).
    pub fn num_inputs(&self) -> usize {
        self.num_inputs
    }

    /// Runs the kernel: reads `inputs`, writes `outputs` (destination passing), with a fresh
    /// [`KernelContext`] using every core. An argument that does not match the kernel (count,
    /// dtype, rank, shape) is an error naming it, and then nothing is written.
    pub fn call(
        &self,
        inputs: &[&NDArray],
        outputs: &mut [&mut NDArray],
    ) -> Result<(), KernelError> {
        self.call_with(&mut KernelContext::default(), inputs, outputs)
    }

    /// As [`PackedFunc::call`], in the kernel context `ctx`: its threads, and its workspace
    /// (kept for the next call).
    pub fn call_with(
        &self,
        ctx: &mut KernelContext,
        inputs: &[&NDArray],
        outputs: &mut [&mut NDArray],
    ) -> Result<(), KernelError> {
        self.check_split(inputs.len(), outputs.len())?;
        let mut shapes: Vec<Vec<i64>> = inputs
            .iter()
            .map(|a| a.shape().to_vec())
            .chain(outputs.iter().map(|a| a.shape().to_vec()))
            .collect();
        let (in_shapes, out_shapes) = shapes.split_at_mut(inputs.len());
        let mut tensors: Vec<DLTensor> = Vec::with_capacity(inputs.len() + outputs.len());
        for (a, s) in inputs.iter().zip(in_shapes.iter_mut()) {
            // The kernel only reads inputs.
            tensors.push(dl_tensor(a, a.as_bytes().as_ptr().cast_mut(), s));
        }
        for (a, s) in outputs.iter_mut().zip(out_shapes.iter_mut()) {
            let data = a.as_bytes_mut().as_mut_ptr();
            tensors.push(dl_tensor(a, data, s));
        }
        // SAFETY: the tensors describe live arrays (data valid for their byte sizes, shapes
        // valid for `ndim`); outputs are exclusively borrowed.
        unsafe { self.call_tensors(&mut tensors, ctx) }
    }

    /// Runs the kernel on `args` (inputs then outputs) through shared references, writing
    /// the outputs, which must be views into a `Storage` (the VM's tensors).
    ///
    /// # Safety
    ///
    /// The aliasing contract of `NDArray::view` for the outputs: no slice of their bytes is
    /// alive during the call and no other thread accesses them; inputs may be read meanwhile
    /// but not written.
    pub unsafe fn call_views(&self, args: &[&NDArray]) -> Result<(), KernelError> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.call_views_with(&mut KernelContext::default(), args) }
    }

    /// As [`PackedFunc::call_views`], in the kernel context `ctx` (its threads and workspace).
    ///
    /// # Safety
    ///
    /// As [`PackedFunc::call_views`].
    pub unsafe fn call_views_with(
        &self,
        ctx: &mut KernelContext,
        args: &[&NDArray],
    ) -> Result<(), KernelError> {
        if args.len() != self.spec.args.len() {
            return Err(self.call_error(format!(
                "expected {} arguments, got {}",
                self.spec.args.len(),
                args.len()
            )));
        }
        // Up to `STACK_ARGS` arguments (every kernel relayc makes in practice) the call
        // allocates nothing: the DLTensors live on the stack and point at the arrays' own
        // shapes (the entry only reads them).
        const STACK_ARGS: usize = 16;
        let empty = DLTensor {
            data: std::ptr::null_mut(),
            device: DLDevice {
                device_type: DEVICE_CPU,
                device_id: 0,
            },
            ndim: 0,
            dtype: DLDataType {
                code: 0,
                bits: 0,
                lanes: 0,
            },
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        let mut on_stack = [empty; STACK_ARGS];
        let mut on_heap = Vec::new();
        let tensors: &mut [DLTensor] = if args.len() <= STACK_ARGS {
            &mut on_stack[..args.len()]
        } else {
            on_heap.resize(args.len(), empty);
            &mut on_heap
        };
        for (i, (a, t)) in args.iter().zip(tensors.iter_mut()).enumerate() {
            let data = if i < self.num_inputs {
                a.as_bytes().as_ptr().cast_mut()
            } else {
                match a.storage() {
                    // An address derived from the storage's own pointer, valid for writes.
                    Some((storage, offset)) if a.num_elements() > 0 => {
                        storage.as_ptr().wrapping_add(offset)
                    }
                    Some(_) => a.as_bytes().as_ptr().cast_mut(),
                    None => {
                        return Err(self.call_error(format!(
                            "argument {i} ({}): an output written through a shared reference must be a view",
                            self.spec.args[i].name
                        )));
                    }
                }
            };
            *t = dl_tensor_of(a, data, a.shape().as_ptr().cast_mut());
        }
        // SAFETY: the tensors describe live arrays (the entry never writes through `shape`);
        // the caller guarantees exclusive access to the outputs' bytes.
        unsafe { self.call_tensors(tensors, ctx) }
    }

    /// Calls the entry on `tensors` with a fresh kernel context.
    ///
    /// # Safety
    ///
    /// Every tensor's data is valid for its byte size (reads, and writes for the outputs) and
    /// its shape for `ndim` elements.
    unsafe fn call_tensors(
        &self,
        tensors: &mut [DLTensor],
        ctx: &mut KernelContext,
    ) -> Result<(), KernelError> {
        const STACK_ARGS: usize = 16;
        let null = TVMValue { v_int64: 0 };
        let mut values_on_stack = [null; STACK_ARGS];
        let codes_on_stack = [TYPE_CODE_DLTENSOR_HANDLE; STACK_ARGS];
        let mut values_on_heap = Vec::new();
        let mut codes_on_heap = Vec::new();
        let n = tensors.len();
        let (values, codes): (&mut [TVMValue], &[i32]) = if n <= STACK_ARGS {
            (&mut values_on_stack[..n], &codes_on_stack[..n])
        } else {
            values_on_heap.resize(n, null);
            codes_on_heap.resize(n, TYPE_CODE_DLTENSOR_HANDLE);
            (&mut values_on_heap, &codes_on_heap)
        };
        for (v, t) in values.iter_mut().zip(tensors.iter_mut()) {
            *v = TVMValue {
                v_handle: (t as *mut DLTensor).cast(),
            };
        }
        ctx.error = None;
        let num = i32::try_from(n).map_err(|_| self.call_error("too many arguments".into()))?;
        // SAFETY: by this function's contract; `values` and `codes` hold `num` elements.
        let rc = unsafe { self.call_raw(values.as_ptr(), codes.as_ptr(), num, ctx) };
        if rc == 0 {
            Ok(())
        } else {
            Err(KernelError::Call {
                kernel: self.name.clone(),
                message: ctx
                    .error
                    .take()
                    .unwrap_or_else(|| format!("kernel {}: failed with code {rc}", self.name)),
            })
        }
    }

    /// Calls the packed entry directly (the ABI tests and the VM): returns its code; on
    /// failure the message is in `ctx.error`.
    ///
    /// # Safety
    ///
    /// `args` and `type_codes` are valid for `num_args` elements; each tensor argument points
    /// to a `DLTensor` whose shape and strides are valid for `ndim` elements and whose data, if
    /// the tensor passes the entry's checks, is valid for reads (inputs) or writes (outputs) of
    /// its whole byte size, with no other access to the outputs meanwhile.
    pub unsafe fn call_raw(
        &self,
        args: *const TVMValue,
        type_codes: *const i32,
        num_args: i32,
        ctx: &mut KernelContext,
    ) -> i32 {
        let entry = match &self.entry {
            Entry::Jit { entry, .. } => *entry,
            // SAFETY: by this function's contract.
            Entry::Host(op) => {
                return unsafe { self.call_host(Some(op), args, type_codes, num_args, ctx) };
            }
            // SAFETY: by this function's contract.
            Entry::Rows(_) | Entry::Broadcast(_) => {
                return unsafe { self.call_host(None, args, type_codes, num_args, ctx) };
            }
        };
        let mut ret = TVMValue { v_int64: 0 };
        let mut ret_code = 0i32;
        // SAFETY: by this function's contract; the entry lives while its code (held by
        // `self.entry`) does.
        unsafe {
            entry(
                args,
                type_codes,
                num_args,
                &mut ret,
                &mut ret_code,
                (ctx as *mut KernelContext).cast(),
            )
        }
    }

    /// [`Self::call_raw`] of a host operator (`op`) or a row kernel (`None`): the arguments
    /// checked to be tensors of the spec, then the library function or the chunks run; a
    /// failure's message goes to `ctx.error`.
    ///
    /// # Safety
    ///
    /// As [`Self::call_raw`].
    unsafe fn call_host(
        &self,
        op: Option<&crate::host_op::HostOp>,
        args: *const TVMValue,
        type_codes: *const i32,
        num_args: i32,
        ctx: &mut KernelContext,
    ) -> i32 {
        let n = usize::try_from(num_args).unwrap_or(0);
        let mut tensors: Vec<&DLTensor> = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: `args` and `type_codes` hold `num_args` elements; a tensor handle points
            // to a live DLTensor.
            let tensor = unsafe {
                match *type_codes.add(i) {
                    TYPE_CODE_DLTENSOR_HANDLE => {
                        (*args.add(i)).v_handle.cast::<DLTensor>().as_ref()
                    }
                    _ => None,
                }
            };
            match tensor {
                Some(t) => tensors.push(t),
                None => {
                    ctx.error = Some(format!(
                        "kernel {}: argument {i} is not a tensor",
                        self.name
                    ));
                    return -1;
                }
            }
        }
        // SAFETY: by this function's contract.
        let result = match (op, &self.entry) {
            (Some(op), _) => unsafe {
                crate::host_op::call(op, &self.memo, ctx, &self.spec, self.num_inputs, &tensors)
            },
            // SAFETY: by this function's contract.
            (None, Entry::Rows(rows)) => unsafe {
                crate::rows::call(rows, ctx, self.num_inputs, &tensors)
            },
            // SAFETY: by this function's contract.
            (None, Entry::Broadcast(b)) => unsafe { crate::broadcast::call(b, ctx, &tensors) },
            (None, _) => Err("not a kernel of the library".into()),
        };
        match result {
            Ok(()) => 0,
            Err(message) => {
                ctx.error = Some(format!("kernel {}: {message}", self.name));
                -1
            }
        }
    }

    fn check_split(&self, inputs: usize, outputs: usize) -> Result<(), KernelError> {
        let want_out = self.spec.args.len() - self.num_inputs;
        if inputs != self.num_inputs || outputs != want_out {
            return Err(self.call_error(format!(
                "expected {} inputs and {want_out} outputs, got {inputs} and {outputs}",
                self.num_inputs
            )));
        }
        Ok(())
    }

    fn call_error(&self, message: String) -> KernelError {
        KernelError::Call {
            kernel: self.name.clone(),
            message: format!("kernel {}: {message}", self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use relay_ir::DType;
    use relay_ir::te::BinaryOp;
    use relay_runtime::Storage;

    use super::*;
    use crate::abi::DLTensor;
    use crate::loops::{Buffer, BufferId, ForKind, LExpr, Local, LocalId, Stmt};

    /// `out[i, j] = a[i, j] + b[i, j]` on float32 `[2, 3]`.
    fn add_2x3() -> LoopFunc {
        let buffer = |name: &str, role| Buffer {
            name: name.into(),
            dtype: DType::F32,
            shape: vec![2, 3],
            role,
        };
        let at = |b: u32| LExpr::Load {
            buffer: BufferId(b),
            index: Box::new(LExpr::Local(LocalId(0))),
        };
        LoopFunc {
            name: "fused_add".into(),
            buffers: vec![
                buffer("p0", BufferRole::Input),
                buffer("p1", BufferRole::Input),
                buffer("T_add", BufferRole::Output),
            ],
            locals: vec![Local {
                name: "i".into(),
                dtype: DType::I64,
            }],
            body: Stmt::For {
                var: LocalId(0),
                extent: 6,
                kind: ForKind::Vectorized { lanes: 4 },
                body: Box::new(Stmt::Store {
                    buffer: BufferId(2),
                    index: LExpr::Local(LocalId(0)),
                    value: LExpr::Binary(BinaryOp::Add, Box::new(at(0)), Box::new(at(1))),
                }),
            },
        }
    }

    fn f32s(values: &[f32], shape: &[i64]) -> NDArray {
        let v: Vec<f64> = values.iter().map(|&x| f64::from(x)).collect();
        NDArray::from_f64_slice(DType::F32, shape, &v).unwrap()
    }

    /// Owned tensors for the raw ABI: three 64-byte aligned float32 `[2, 3]` arrays.
    struct Raw {
        arrays: Vec<NDArray>,
        shapes: Vec<Vec<i64>>,
        tensors: Vec<DLTensor>,
        codes: Vec<i32>,
    }

    impl Raw {
        fn new() -> Raw {
            let arrays = vec![
                f32s(&[1., 2., 3., 4., 5., 6.], &[2, 3]),
                f32s(&[10., 20., 30., 40., 50., 60.], &[2, 3]),
                f32s(&[-7.0; 6], &[2, 3]),
            ];
            let mut raw = Raw {
                shapes: arrays.iter().map(|a| a.shape().to_vec()).collect(),
                arrays,
                tensors: Vec::new(),
                codes: vec![TYPE_CODE_DLTENSOR_HANDLE; 3],
            };
            for i in 0..3 {
                let data = raw.arrays[i].as_bytes_mut().as_mut_ptr();
                let t = dl_tensor(&raw.arrays[i], data, &mut raw.shapes[i]);
                raw.tensors.push(t);
            }
            raw
        }

        /// Calls `f` with the first `n` arguments; returns the code and the message.
        fn call(&mut self, f: &PackedFunc, n: i32) -> (i32, Option<String>) {
            let args: Vec<TVMValue> = self
                .tensors
                .iter_mut()
                .map(|t| TVMValue {
                    v_handle: (t as *mut DLTensor).cast(),
                })
                .collect();
            let mut ctx = KernelContext::default();
            // SAFETY: the tensors describe live arrays of `self` whose shapes and strides
            // outlive the call; tests that break a check never let the kernel run.
            let rc = unsafe { f.call_raw(args.as_ptr(), self.codes.as_ptr(), n, &mut ctx) };
            (rc, ctx.error)
        }

        fn output(&self) -> Vec<f64> {
            self.arrays[2].to_f64_vec()
        }
    }

    #[test]
    fn calls_through_the_packed_abi() {
        let f = compile(&add_2x3()).unwrap();
        let mut raw = Raw::new();
        assert_eq!(raw.call(&f, 3), (0, None));
        assert_eq!(raw.output(), vec![11., 22., 33., 44., 55., 66.]);
        // And through the safe wrapper.
        let (a, b) = (f32s(&[1.; 6], &[2, 3]), f32s(&[2.; 6], &[2, 3]));
        let mut out = NDArray::zeros(DType::F32, &[2, 3]).unwrap();
        f.call(&[&a, &b], &mut [&mut out]).unwrap();
        assert_eq!(out.to_f64_vec(), vec![3.0; 6]);
    }

    /// Breaks one thing about the arguments, calls, and checks the message and that the
    /// output kept its sentinel.
    fn rejects(break_it: impl FnOnce(&mut Raw) -> i32, expected: &str) {
        let f = compile(&add_2x3()).unwrap();
        let mut raw = Raw::new();
        let n = break_it(&mut raw);
        let (rc, message) = raw.call(&f, n);
        assert_ne!(rc, 0, "{expected}");
        let message = message.unwrap_or_default();
        assert!(
            message.contains(expected),
            "{message:?} should contain {expected:?}"
        );
        assert!(message.starts_with("kernel fused_add: "), "{message}");
        assert_eq!(raw.output(), vec![-7.0; 6], "the output was written");
    }

    #[test]
    fn abi_errors_name_the_argument_and_touch_nothing() {
        rejects(|_| 2, "expected 3 arguments, got 2");
        rejects(|_| 4, "expected 3 arguments, got 4");
        rejects(
            |r| {
                r.codes[1] = 0;
                3
            },
            "argument 1 (p1): expected a tensor (type code 7), got type code 0",
        );
        rejects(
            |r| {
                r.tensors[0].dtype.code = 0;
                3
            },
            "argument 0 (p0): expected dtype float32, got int32",
        );
        rejects(
            |r| {
                r.tensors[2].ndim = 1;
                3
            },
            "argument 2 (T_add): expected rank 2, got 1",
        );
        rejects(
            |r| {
                r.shapes[1].swap(0, 1);
                3
            },
            "argument 1 (p1): expected shape [2, 3], got [3, 2]",
        );
        let mut strides = vec![1i64, 2];
        let strides_ptr = strides.as_mut_ptr();
        rejects(
            |r| {
                r.tensors[0].strides = strides_ptr;
                3
            },
            "argument 0 (p0): expected compact row-major strides [3, 1], got [1, 2]",
        );
        rejects(
            |r| {
                r.tensors[1].byte_offset = 4;
                3
            },
            "argument 1 (p1): data at",
        );
        rejects(
            |r| {
                r.tensors[2].device.device_type = 2;
                3
            },
            "argument 2 (T_add): expected a CPU tensor (device type 1), got device type 2",
        );
        rejects(
            |r| {
                r.tensors[0].data = std::ptr::null_mut();
                3
            },
            "argument 0 (p0): null data",
        );
        // Compact strides given explicitly are accepted.
        let f = compile(&add_2x3()).unwrap();
        let mut raw = Raw::new();
        let mut compact = vec![3i64, 1];
        raw.tensors[2].strides = compact.as_mut_ptr();
        assert_eq!(raw.call(&f, 3).0, 0);
        assert_eq!(raw.output(), vec![11., 22., 33., 44., 55., 66.]);
    }

    #[test]
    fn safe_call_checks_shapes_and_arity() {
        let f = compile(&add_2x3()).unwrap();
        let a = f32s(&[1.; 6], &[2, 3]);
        let b = f32s(&[1.; 6], &[3, 2]);
        let mut out = f32s(&[-7.0; 6], &[2, 3]);
        let err = f.call(&[&a, &b], &mut [&mut out]).unwrap_err().to_string();
        assert_eq!(
            err,
            "kernel fused_add: argument 1 (p1): expected shape [2, 3], got [3, 2]"
        );
        assert_eq!(out.to_f64_vec(), vec![-7.0; 6]);
        let err = f.call(&[&a], &mut [&mut out]).unwrap_err().to_string();
        assert!(
            err.contains("expected 2 inputs and 1 outputs, got 1 and 1"),
            "{err}"
        );
    }

    #[test]
    fn writes_views_through_shared_references() {
        let f = compile(&add_2x3()).unwrap();
        let storage = Arc::new(Storage::new(256, 64).unwrap());
        // SAFETY: the views are used one at a time on this thread.
        let (a, b, out, misaligned) = unsafe {
            (
                NDArray::view(storage.clone(), 0, DType::F32, &[2, 3]).unwrap(),
                NDArray::view(storage.clone(), 64, DType::F32, &[2, 3]).unwrap(),
                NDArray::view(storage.clone(), 128, DType::F32, &[2, 3]).unwrap(),
                NDArray::view(storage.clone(), 196, DType::F32, &[2, 3]).unwrap(),
            )
        };
        // SAFETY: no slice of the storage is alive.
        unsafe {
            a.write_view(f32s(&[1., 2., 3., 4., 5., 6.], &[2, 3]).as_bytes())
                .unwrap();
            b.write_view(f32s(&[1.; 6], &[2, 3]).as_bytes()).unwrap();
            f.call_views(&[&a, &b, &out]).unwrap();
        }
        assert_eq!(out.to_f64_vec(), vec![2., 3., 4., 5., 6., 7.]);
        // A view at an offset that is not 64-byte aligned is rejected.
        // SAFETY: as above.
        let err = unsafe { f.call_views(&[&a, &b, &misaligned]) }.unwrap_err();
        assert!(err.to_string().contains("is not 64-byte aligned"), "{err}");
        // An owned output cannot be written through a shared reference.
        let owned = NDArray::zeros(DType::F32, &[2, 3]).unwrap();
        // SAFETY: as above.
        let err = unsafe { f.call_views(&[&a, &b, &owned]) }.unwrap_err();
        assert!(err.to_string().contains("must be a view"), "{err}");
    }

    #[test]
    fn reports_run_time_errors_through_the_context() {
        // out[i] = a[i] / b[i] on int32.
        let mut func = add_2x3();
        for b in &mut func.buffers {
            b.dtype = DType::I32;
        }
        if let Stmt::For { body, .. } = &mut func.body
            && let Stmt::Store {
                value: LExpr::Binary(op, ..),
                ..
            } = body.as_mut()
        {
            *op = BinaryOp::Div;
        }
        let f = compile(&func).unwrap();
        let a = NDArray::from_i128_slice(DType::I32, &[2, 3], &[1, 2, 3, 4, 5, 6]).unwrap();
        let b = NDArray::from_i128_slice(DType::I32, &[2, 3], &[1, 1, 0, 1, 1, 1]).unwrap();
        let mut out = NDArray::zeros(DType::I32, &[2, 3]).unwrap();
        let err = f.call(&[&a, &b], &mut [&mut out]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "kernel fused_add: integer division by zero"
        );
    }

    #[test]
    fn scalars_and_ndarray_handles() {
        // out[] = a[] * 3 on rank-0 int64 tensors, called with NDArray-handle type codes.
        let buffer = |name: &str, role| Buffer {
            name: name.into(),
            dtype: DType::I64,
            shape: vec![],
            role,
        };
        let func = LoopFunc {
            name: "fused_scale".into(),
            buffers: vec![
                buffer("p0", BufferRole::Input),
                buffer("out", BufferRole::Output),
            ],
            locals: vec![],
            body: Stmt::Store {
                buffer: BufferId(1),
                index: LExpr::Int(0, DType::I64),
                value: LExpr::Binary(
                    BinaryOp::Mul,
                    Box::new(LExpr::Load {
                        buffer: BufferId(0),
                        index: Box::new(LExpr::Int(0, DType::I64)),
                    }),
                    Box::new(LExpr::Int(3, DType::I64)),
                ),
            },
        };
        let f = compile(&func).unwrap();
        let a = NDArray::scalar_i128(DType::I64, -14).unwrap();
        let mut out = NDArray::zeros(DType::I64, &[]).unwrap();
        let out_data = out.as_bytes_mut().as_mut_ptr();
        let mut tensors = [
            dl_tensor(&a, a.as_bytes().as_ptr().cast_mut(), &mut []),
            dl_tensor(&out, out_data, &mut []),
        ];
        tensors[0].shape = std::ptr::null_mut();
        tensors[1].shape = std::ptr::null_mut();
        let args: Vec<TVMValue> = tensors
            .iter_mut()
            .map(|t| TVMValue {
                v_handle: (t as *mut DLTensor).cast(),
            })
            .collect();
        let codes = [crate::abi::TYPE_CODE_NDARRAY_HANDLE; 2];
        let mut ctx = KernelContext::default();
        // SAFETY: both tensors describe live rank-0 arrays; `out` is not otherwise accessed.
        let rc = unsafe { f.call_raw(args.as_ptr(), codes.as_ptr(), 2, &mut ctx) };
        assert_eq!((rc, ctx.error), (0, None));
        assert_eq!(out.to_i128_vec(), vec![-42]);
    }

    #[test]
    fn packed_funcs_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<PackedFunc>();
        let f = Arc::new(compile(&add_2x3()).unwrap());
        let handles: Vec<_> = (0..4)
            .map(|k| {
                let f = f.clone();
                std::thread::spawn(move || {
                    let a = f32s(&[k as f32; 6], &[2, 3]);
                    let mut out = NDArray::zeros(DType::F32, &[2, 3]).unwrap();
                    f.call(&[&a, &a], &mut [&mut out]).unwrap();
                    out.to_f64_vec()[0]
                })
            })
            .collect();
        for (k, h) in handles.into_iter().enumerate() {
            assert_eq!(h.join().unwrap(), 2.0 * k as f64);
        }
    }

    #[test]
    fn several_kernels_share_one_module() {
        let mut second = add_2x3();
        second.name = "fused_add_again".into();
        let funcs = compile_all(&[add_2x3(), second]).unwrap();
        assert_eq!(funcs[1].name(), "fused_add_again");
        let a = f32s(&[1.; 6], &[2, 3]);
        for f in &funcs {
            let mut out = NDArray::zeros(DType::F32, &[2, 3]).unwrap();
            f.call(&[&a, &a], &mut [&mut out]).unwrap();
            assert_eq!(out.to_f64_vec(), vec![2.0; 6]);
        }
    }
}
