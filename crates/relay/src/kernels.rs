//! The last stage of [`crate::Compiler`]: JIT-compiling every static kernel of an executable,
//! each timed, and [`KernelFailure`], the report of a kernel that cannot be compiled.

use std::fmt;
use std::time::{Duration, Instant};

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode};
use relay_ir::{Function, Source};
use relay_kernel::KernelError;
use relay_vm::Executable;

/// JIT-compiles every static kernel of `exe` now, and every dynamic one's generic kernel (a
/// dynamic one without is compiled per argument shapes when called; as [`Executable::jit`]),
/// trying each one before failing. Returns the compile time of each static kernel, in
/// kernel-table order (`None` for a dynamic one), or a failure for
/// every kernel that cannot be compiled, labelled in `source` (the program's text) when known.
pub(crate) fn jit(
    exe: &Executable,
    source: Option<&Source>,
) -> Result<Vec<Option<Duration>>, Vec<KernelFailure>> {
    let mut times = Vec::with_capacity(exe.kernels.len());
    let mut failures = Vec::new();
    for kernel in &exe.kernels {
        if kernel.dynamic {
            kernel.generic_kernel();
            times.push(None);
            continue;
        }
        let start = Instant::now();
        let compiled = kernel.get();
        times.push(Some(start.elapsed()));
        if let Err(error) = compiled {
            let func = kernel.function().cloned();
            failures.push(KernelFailure::new(&kernel.name, func, error, source));
        }
    }
    if failures.is_empty() {
        Ok(times)
    } else {
        Err(failures)
    }
}

/// A kernel that could not be compiled, as a diagnostic: the kernel compiler's error, with the
/// kernel's name when the error does not already give it, its code and help, and a label on the
/// kernel's root expression in the program's text when its span is known.
pub struct KernelFailure {
    /// The kernel's name.
    kernel: String,
    /// Its primitive function, when known.
    func: Option<Function>,
    /// Why it could not be compiled.
    error: KernelError,
    /// The message: the error naming the kernel.
    message: String,
    /// The program's text, when the label is in it.
    src: Option<NamedSource<String>>,
    /// Where in it the kernel's root expression is.
    label: Option<LabeledSpan>,
}

impl KernelFailure {
    /// The report of kernel `kernel` (primitive function `func`, when known) failing with
    /// `error`, in a program compiled from `source` (when known).
    pub fn new(
        kernel: &str,
        func: Option<Function>,
        error: KernelError,
        source: Option<&Source>,
    ) -> KernelFailure {
        let text = error.to_string();
        let named = format!("kernel {kernel}");
        let message = if text.contains(&named) {
            format!("cannot compile {text}")
        } else {
            format!("cannot compile {named}: {text}")
        };
        let label = source.and_then(|source| kernel_label(kernel, func.as_ref()?, source));
        let src = match (&label, source) {
            (Some(_), Some(source)) => Some(NamedSource::new(&source.name, source.text.clone())),
            _ => None,
        };
        KernelFailure {
            kernel: kernel.to_owned(),
            func,
            error,
            message,
            src,
            label,
        }
    }

    /// The kernel's name.
    pub fn kernel(&self) -> &str {
        &self.kernel
    }

    /// Its primitive function, when known.
    pub fn function(&self) -> Option<&Function> {
        self.func.as_ref()
    }

    /// The kernel compiler's error.
    pub fn error(&self) -> &KernelError {
        &self.error
    }
}

/// A label on the root expression of failed kernel `kernel`'s primitive function `func`, if its
/// span lies within the source text.
fn kernel_label(kernel: &str, func: &Function, source: &Source) -> Option<LabeledSpan> {
    let span = func.body.span();
    let (lo, hi) = (span.lo as usize, span.hi as usize);
    let valid = lo < hi && hi <= source.text.len();
    valid.then(|| {
        LabeledSpan::new_with_span(
            Some(format!("kernel {kernel} computes this")),
            (lo, hi - lo),
        )
    })
}

impl fmt::Debug for KernelFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.error, f)
    }
}

impl fmt::Display for KernelFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for KernelFailure {}

impl Diagnostic for KernelFailure {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.error.code()
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.error.help()
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.src.as_ref().map(|src| src as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let label = self.label.clone()?;
        Some(Box::new(std::iter::once(label)))
    }
}
