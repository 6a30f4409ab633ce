//! Tail position in the interpreter: a call whose value a `let` chain binds and returns
//! (`let %x = f(...); %x`, as the source and the lowered IR write it) replaces the caller's
//! frame, so a loop of 10^6 iterations runs in a limit of 100 frames before and after the pass
//! pipeline; and the `let` chains that do something with the value after the call keep their
//! frames.

use relay_interp::{InterpOptions, RunError, RunErrorKind, format_value, result_type, run};
use relay_ir::{DType, Module, NDArray, PrintOptions, Value};
use relay_passes::{PassManager, PipelineConfig};

/// The frame limit of every run here: far below the depth of any loop.
const FRAMES: usize = 100;

/// Parses and type-checks `text`.
fn module(text: &str) -> Module {
    let m = parse(text);
    if let Err(e) = relay_types::check_module(&m) {
        panic!("{}", relay_syntax::render_plain(&e));
    }
    m
}

/// Parses `text` without type-checking it (`memory.kill` of a returned variable is ill-formed
/// on purpose).
fn parse(text: &str) -> Module {
    relay_syntax::parse(text, "tail.relay")
        .unwrap_or_else(|e| panic!("{}", relay_syntax::render_plain(&e)))
}

/// `m` after the default pass pipeline, as `relayc opt` prints it.
fn lowered(m: Module) -> Module {
    let manager = PassManager::from_config(&PipelineConfig::default_pipeline());
    match manager.run(m) {
        Ok((m, _)) => m,
        Err(e) => panic!("{e}"),
    }
}

/// The int32 scalar `n`.
fn i32_scalar(n: i128) -> Value {
    Value::tensor(NDArray::scalar_i128(DType::I32, n).expect("an int32 scalar"))
}

/// Runs `entry` on `args` under the limit of [`FRAMES`], and prints the result.
fn run_args(m: &Module, entry: &str, args: Vec<Value>) -> Result<String, RunError> {
    let opts = InterpOptions { max_frames: FRAMES };
    let v = run(m, entry, args, &opts)?;
    Ok(format_value(&v, result_type(m, entry).as_ref(), m))
}

/// Runs `entry` on the int32 scalar `n` under the limit of [`FRAMES`], and prints the result.
fn run_n(m: &Module, entry: &str, n: i128) -> Result<String, RunError> {
    run_args(m, entry, vec![i32_scalar(n)])
}

/// Runs `entry` on `n` and expects a result.
fn eval(m: &Module, entry: &str, n: i128) -> String {
    run_n(m, entry, n).unwrap_or_else(|e| panic!("@{entry}({n}): {e}"))
}

/// Runs `entry` on `n` and expects an error of `kind`.
fn eval_err(m: &Module, entry: &str, n: i128, kind: RunErrorKind) {
    match run_n(m, entry, n) {
        Ok(v) => panic!("@{entry}({n}): expected {kind:?}, got {v}"),
        Err(e) => assert_eq!(e.kind(), kind, "@{entry}({n}): {e}"),
    }
}

/// Runs `f` on a thread with a 2 MB stack: nothing here may recurse natively.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic")
}

/// A countdown over an int32 scalar accumulating a float tensor: the issue's loop.
const COUNTDOWN: &str = r#"#[version = "0.0.5"]
def @loop(%i: int32, %acc: Tensor[(4), float32]) -> Tensor[(4), float32] {
  if (%i == 0) {
    %acc
  } else {
    @loop(%i - 1, %acc + ones(shape=[4], dtype="float32"))
  }
}

def @main(%n: int32) -> Tensor[(4), float32] {
  @loop(%n, zeros(shape=[4], dtype="float32"))
}
"#;

const MILLION: &str = "[1000000., 1000000., 1000000., 1000000.]";

#[test]
fn source_loop_runs_a_million_times_in_constant_frames() {
    on_small_stack(|| {
        let m = module(COUNTDOWN);
        assert_eq!(eval(&m, "main", 1_000_000), MILLION);
    });
}

#[test]
fn lowered_loop_runs_a_million_times_in_constant_frames() {
    on_small_stack(|| {
        let m = lowered(module(COUNTDOWN));
        // The lowered forms this test is about: the memory dialect, and the recursive call
        // bound by `let`, marked, and returned through the `let` of the `if`.
        let text = relay_ir::print_module(&m, &PrintOptions::default());
        for form in ["vm.invoke_tvm_op", "memory.alloc_storage", "tail=True);"] {
            assert!(text.contains(form), "no `{form}` in:\n{text}");
        }
        assert_eq!(eval(&m, "main", 1_000_000), MILLION);
    });
}

/// Tail calls of the other kinds, lowered as the loop above is: mutual recursion, a closure
/// capturing a variable (a `Closure=1` global after `lambda_lift`) and a `match` over a list.
const LOOPS: &str = r#"#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @ping(%n: int32, %acc: float32) -> float32 {
  if (%n == 0) { %acc } else { @pong(%n - 1, %acc + 1f) }
}

def @pong(%n: int32, %acc: float32) -> float32 {
  if (%n == 0) { %acc } else { @ping(%n - 1, %acc + 1f) }
}

def @closure_loop(%n: int32, %step: float32) -> float32 {
  let %go = fn (%i: int32, %acc: float32) -> float32 {
    if (%i == 0) { %acc } else { %go(%i - 1, %acc + %step) }
  };
  %go(%n, 0f)
}

def @build(%n: int32, %xs: List[float32]) -> List[float32] {
  if (%n == 0) { %xs } else { @build(%n - 1, Cons(1f, %xs)) }
}

def @sum(%xs: List[float32], %acc: float32) -> float32 {
  match (%xs) {
    Cons(%x, %rest) => @sum(%rest, %acc + %x),
    Nil => %acc,
  }
}

def @main(%n: int32) -> (float32, float32, float32) {
  (@ping(%n, 0f), @closure_loop(%n, 1f), @sum(@build(%n, Nil), 0f))
}
"#;

#[test]
fn mutual_closure_and_match_loops_run_in_constant_frames_lowered() {
    on_small_stack(|| {
        let source = module(LOOPS);
        let expected = "(100000., 100000., 100000.)";
        assert_eq!(eval(&source, "main", 100_000), expected);
        assert_eq!(eval(&lowered(source), "main", 100_000), expected);
    });
}

/// The `let` forms of a tail call: each function counts `%n` down to 0 and returns `%n`'s
/// start value, with the recursive call's value bound by `let` and returned.
const TAIL_LETS: &str = r#"#[version = "0.0.5"]
def @bound(%n: int32, %acc: int32) -> int32 {
  if (%n == 0) {
    %acc
  } else {
    let %x = @bound(%n - 1, %acc + 1, tail=True);
    %x
  }
}

def @aliased(%n: int32, %acc: int32) -> int32 {
  if (%n == 0) {
    %acc
  } else {
    let %x = @aliased(%n - 1, %acc + 1);
    let %y = %x;
    let %z = %y;
    %z
  }
}

def @killing(%n: int32, %acc: int32) -> int32 {
  if (%n == 0) {
    %acc
  } else {
    let %m = %n - 1;
    let %a = %acc + 1;
    let %x = @killing(%m, %a);
    memory.kill(%m);
    memory.kill(%n);
    %x
  }
}

def @nested(%n: int32, %acc: int32) -> int32 {
  let %r = if (%n == 0) {
    %acc
  } else {
    let %x = @nested(%n - 1, %acc + 1);
    %x
  };
  %r
}

def @closure(%n: int32) -> int32 {
  let %go = fn (%i: int32, %acc: int32) -> int32 {
    let %r = if (%i == 0) {
      %acc
    } else {
      let %x = %go(%i - 1, %acc + 1);
      %x
    };
    %r
  };
  let %x = %go(%n, 0);
  %x
}
"#;

#[test]
fn let_bound_tail_calls_run_in_constant_frames() {
    on_small_stack(|| {
        let m = module(TAIL_LETS);
        let n = 100_000;
        for f in ["bound", "aliased", "killing", "nested"] {
            let v = run_args(&m, f, vec![i32_scalar(n), i32_scalar(0)]);
            assert_eq!(v.unwrap_or_else(|e| panic!("@{f}: {e}")), n.to_string());
        }
        assert_eq!(eval(&m, "closure", n), n.to_string());
    });
}

/// `let` chains that do more with a call's value than return it: each recursion is `%n` deep
/// and not a tail recursion, so it needs more than [`FRAMES`] frames at depth 1,000.
const NON_TAIL_LETS: &str = r#"#[version = "0.0.5"]
def @id(%x: int32) -> int32 {
  %x
}

def @passed_on(%n: int32) -> int32 {
  if (%n == 0) {
    0
  } else {
    let %x = @passed_on(%n - 1);
    @id(%x + 1)
  }
}

def @marked(%n: int32) -> int32 {
  if (%n == 0) {
    0
  } else {
    let %x = @marked(%n - 1, tail=True);
    %x + 1
  }
}

def @computed_after(%n: int32) -> int32 {
  if (%n == 0) {
    0
  } else {
    let %x = @computed_after(%n - 1);
    let %unused = %n + 1;
    %x
  }
}

def @count(%n: int32) -> int32 {
  if (%n == 0) {
    0
  } else {
    let %p = @tupled(%n - 1);
    %p.0 + %p.1
  }
}

def @tupled(%n: int32) -> (int32, int32) {
  let %x = @count(%n);
  (%x, 1)
}
"#;

#[test]
fn let_chains_using_the_value_keep_their_frames() {
    on_small_stack(|| {
        let m = module(NON_TAIL_LETS);
        // `tail=True` on a call whose value is used does not make it a tail call.
        for (f, result) in [
            ("passed_on", "40"),
            ("marked", "40"),
            ("computed_after", "0"),
        ] {
            assert_eq!(eval(&m, f, 40), result, "@{f}");
            eval_err(&m, f, 1000, RunErrorKind::RecursionLimit);
        }
        // `@tupled`'s call keeps its frame too: depth `n` takes `2n` frames.
        assert_eq!(eval(&m, "tupled", 3), "(3, 1)");
        assert_eq!(eval(&m, "count", 49), "49");
        eval_err(&m, "count", 50, RunErrorKind::RecursionLimit);
    });
}

/// Kills after the call that fail when they run: of the returned variable, of a variable
/// already killed, and of one variable twice. They are not skipped as a tail call's kills are.
const FAILING_KILLS: &str = r#"#[version = "0.0.5"]
def @down(%n: int32) -> int32 {
  if (%n == 0) { 0 } else { @down(%n - 1) }
}

def @kill_result(%n: int32) -> int32 {
  let %x = @down(%n);
  memory.kill(%x);
  %x
}

def @kill_killed(%n: int32) -> int32 {
  let %m = %n + 1;
  memory.kill(%m);
  let %x = @down(%n);
  memory.kill(%m);
  %x
}

def @kill_twice(%n: int32) -> int32 {
  let %m = %n + 1;
  let %x = @down(%n);
  memory.kill(%m);
  memory.kill(%m);
  %x
}
"#;

#[test]
fn failing_kills_after_a_call_still_fail() {
    let m = parse(FAILING_KILLS);
    for f in ["kill_result", "kill_killed", "kill_twice"] {
        eval_err(&m, f, 10, RunErrorKind::UnboundVariable);
    }
}
