//! `relayc.VM`: runs an executable on Python values, the GIL released while it runs; one VM
//! per thread, any number of them over one executable. Ctrl-C (`KeyboardInterrupt`) on the
//! main thread stops a run at its next function call or kernel boundary.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use relay::{Interrupt, Value, VmFunction, VmOptions};

use crate::errors::{Stage, from_relay, usage};
use crate::executable::Executable;
use crate::values::{from_python, to_python};

/// How often a run looks for a pending `KeyboardInterrupt` at most (it takes the GIL to).
const SIGNAL_CHECK_EVERY: Duration = Duration::from_millis(20);

type RelayVm<'e> = relay::Vm<'e>;

self_cell::self_cell!(
    /// A VM with the executable it borrows.
    struct VmCell {
        owner: Arc<relay::Executable>,
        #[covariant]
        dependent: RelayVm,
    }
);

/// A virtual machine running one executable (TVM's `VirtualMachine`): it keeps its storage
/// pool and profile between calls. A VM runs one call at a time: make one per thread (they
/// can all share one `Executable`).
///
/// `threads` is its kernel threads (default: the executable's, set by `compile(threads=)`;
/// 0 = every core); `max_frames` bounds the call depth (deeper recursion is a
/// `relayc.RunError`); `profile=True` records per-kernel timings for `profile()`; `isa`
/// picks the host kernels' instruction set (`"portable"`, `"avx2"` or `"avx512"`, one this CPU
/// runs; default: `$RELAYC_ISA`, else the best the CPU has), to test and benchmark every path
/// on one machine.
///
/// >>> vm = relayc.VM(exe)
/// >>> y = vm(x)                      # @main on x
/// >>> y = vm.run(x=x, entry="main")  # by parameter name
#[pyclass(module = "relayc")]
#[allow(clippy::upper_case_acronyms)]
pub struct VM {
    cell: VmCell,
    exe: Py<Executable>,
    /// A `KeyboardInterrupt` the run's interrupt check found, raised when the run stops.
    pending: Arc<Mutex<Option<PyErr>>>,
}

#[pymethods]
impl VM {
    #[new]
    #[pyo3(signature = (exe, threads = None, max_frames = 1_000_000, profile = false, isa = None))]
    fn new(
        exe: Bound<'_, Executable>,
        threads: Option<usize>,
        max_frames: usize,
        profile: bool,
        isa: Option<&str>,
    ) -> PyResult<VM> {
        let py = exe.py();
        let ops = match isa {
            Some(name) => name.parse().and_then(relay::Ops::for_isa).map(Some),
            // A bad `RELAYC_ISA` is an error here rather than silently ignored by the kernels.
            None => relay::Isa::from_env().map(|_| None),
        }
        .map_err(|error| {
            let what = if isa.is_some() { "isa" } else { relay::ISA_VAR };
            usage(py, Stage::Usage, format!("{what}: {error}"))
        })?;
        let pending = Arc::new(Mutex::new(None));
        let options = VmOptions {
            threads: threads.unwrap_or(exe.get().threads),
            max_frames,
            profile,
            interrupt: Some(keyboard_interrupt(pending.clone())),
            ops,
            ..VmOptions::default()
        };
        let cell = VmCell::new(exe.get().inner.clone(), |exe| {
            relay::Vm::with_options(exe, options)
        });
        Ok(VM {
            cell,
            exe: exe.unbind(),
            pending,
        })
    }

    /// Runs global function `entry` on the arguments, by position or by parameter name (an
    /// imported ONNX model's input names work too), and returns its result: numpy arrays
    /// (over the VM's memory, no copy), tuples, `relayc.ADT`, `relayc.Ref` or
    /// `relayc.Closure` values. Arrays that are 64-byte aligned and contiguous (see
    /// `relayc.empty`) are read in place; others are copied once. Raises `relayc.RunError`
    /// (a wrong input names the parameter, its type and what was given).
    #[pyo3(signature = (*args, entry = "main", **kwargs))]
    fn run<'py>(
        slf: &Bound<'py, Self>,
        args: &Bound<'py, PyTuple>,
        entry: &str,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let mut this = slf.try_borrow_mut().map_err(|_| {
            usage(
                py,
                Stage::Usage,
                "this VM is running a call on another thread: a VM runs one call at a time; \
                 make one VM per thread (they can share one Executable)",
            )
        })?;
        // Disjoint borrows of the executable (read) and the VM (run).
        let this = &mut *this;
        let exe = this.exe.get();
        let name = entry.strip_prefix('@').unwrap_or(entry);
        let func = exe.inner.global(name).map(|(_, f)| f);
        let values = arguments(py, exe, func, name, args, kwargs)?;
        let ret_type = func.and_then(|f| f.ret_type.as_ref());
        let cell = &mut this.cell;
        let result = py.detach(|| {
            cell.with_dependent_mut(|_, vm| vm.inner_mut().invoke(name, &values))
                .map_err(relay::Error::from)
        });
        match result {
            Ok(value) => to_python(py, value, ret_type, &exe.types),
            Err(error) => {
                let pending = this
                    .pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                Err(pending.unwrap_or_else(|| from_relay(py, &error)))
            }
        }
    }

    /// `run(*args, **kwargs)` of `@main`.
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        slf: &Bound<'py, Self>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        VM::run(slf, args, "main", kwargs)
    }

    /// The profile recorded so far (a VM made with `profile=True`), as a dict: every kernel's
    /// calls and times, the instructions by kind, and the storage allocator's counters (what
    /// `relayc run --profile-format json` writes).
    fn profile<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let vm = self.cell.borrow_dependent();
        let Some(profile) = vm.profile() else {
            return Err(usage(
                py,
                Stage::Usage,
                "this VM records no profile: make it with relayc.VM(exe, profile=True)",
            ));
        };
        let json = profile.to_json(&vm.allocator_stats()).to_string();
        py.import("json")?.call_method1("loads", (json,))
    }

    /// The executable this VM runs.
    #[getter]
    fn executable(&self, py: Python<'_>) -> Py<Executable> {
        self.exe.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        let options = self.cell.borrow_dependent().options();
        format!(
            "<relayc.VM threads={} max_frames={} profile={}>",
            options.threads, options.max_frames, options.profile
        )
    }
}

/// The arguments of `@name`, from positional and keyword arguments, each converted for its
/// parameter's type.
fn arguments(
    py: Python<'_>,
    exe: &Executable,
    func: Option<&VmFunction>,
    name: &str,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Vec<Value>> {
    let Some(func) = func else {
        // Unknown: the VM's error lists the functions there are.
        return args
            .iter()
            .enumerate()
            .map(|(i, a)| from_python(&a, None, &exe.types, &|| format!("{i} of `@{name}`")))
            .collect();
    };
    let params = &func.params;
    let type_of = |i: usize| func.param_types.get(i).and_then(Option::as_ref);
    let what = |i: usize| format!("`%{}` of `@{name}`", params[i]);
    let list = || format!("%{}", params.join(", %"));
    if args.len() > params.len() {
        return Err(usage(
            py,
            Stage::Run,
            format!(
                "`@{name}` takes {} inputs ({}), got {} by position",
                params.len(),
                list(),
                args.len()
            ),
        ));
    }
    if kwargs.is_none_or(|k| k.is_empty()) && args.len() == params.len() {
        // Every input by position: no slots to fill.
        return args
            .iter()
            .enumerate()
            .map(|(i, arg)| from_python(&arg, type_of(i), &exe.types, &|| what(i)))
            .collect();
    }
    let mut slots: Vec<Option<Value>> = vec![None; params.len()];
    for (i, arg) in args.iter().enumerate() {
        slots[i] = Some(from_python(&arg, type_of(i), &exe.types, &|| what(i))?);
    }
    for (key, arg) in kwargs.into_iter().flat_map(|k| k.iter()) {
        let key: String = key.extract()?;
        let bare = key.strip_prefix('%').unwrap_or(&key);
        let relay_name = exe.aliases.get(bare).map(String::as_str).unwrap_or(bare);
        let Some(i) = params.iter().position(|p| p == relay_name) else {
            return Err(usage(
                py,
                Stage::Run,
                format!(
                    "`@{name}` has no parameter `{key}`; its parameters are {}",
                    list()
                ),
            ));
        };
        if slots[i].is_some() {
            return Err(usage(
                py,
                Stage::Run,
                format!("input {} is given twice", what(i)),
            ));
        }
        slots[i] = Some(from_python(&arg, type_of(i), &exe.types, &|| what(i))?);
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(i, slot)| {
            slot.ok_or_else(|| {
                let ty = type_of(i).map(|t| format!(" (`{t}`)")).unwrap_or_default();
                usage(py, Stage::Run, format!("missing input {}{ty}", what(i)))
            })
        })
        .collect()
}

/// An interrupt that, at most every [`SIGNAL_CHECK_EVERY`], takes the GIL and runs Python's
/// signal handlers (on the main thread; elsewhere Python delivers none): a
/// `KeyboardInterrupt` they raise is kept in `pending` and stops the run.
fn keyboard_interrupt(pending: Arc<Mutex<Option<PyErr>>>) -> Interrupt {
    let last = Mutex::new(Instant::now());
    Interrupt::new(move || {
        {
            let mut last = last.lock().unwrap_or_else(PoisonError::into_inner);
            if last.elapsed() < SIGNAL_CHECK_EVERY {
                return false;
            }
            *last = Instant::now();
        }
        Python::attach(|py| match py.check_signals() {
            Ok(()) => false,
            Err(error) => {
                *pending.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
                true
            }
        })
    })
}
