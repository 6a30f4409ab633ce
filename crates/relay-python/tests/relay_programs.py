"""Relay programs the tests compile and run (Relay text, version 0.0.5).

Every entry function a test runs is reachable from `@main`: the default pipeline's
`eliminate_dead_code` drops the global functions `@main` does not use.
"""

HEADER = '#[version = "0.0.5"]\n'

# x + y on (2, 3) float32 tensors.
ADD = HEADER + """
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] {
  add(%x, %y)
}
"""

# A dense layer, relu, and a tuple of (relu(x . w^T + b), sum of the pre-activation).
DENSE = HEADER + """
def @main(%x: Tensor[(2, 4), float32], %w: Tensor[(3, 4), float32], %b: Tensor[(3), float32])
    -> (Tensor[(2, 3), float32], float32) {
  let %y = nn.bias_add(nn.dense(%x, %w, units=3), %b);
  (nn.relu(%y), sum(%y))
}
"""

# Scalars, a vector, tuples in and out (nested).
SCALARS_AND_TUPLES = HEADER + """
def @main(%a: float32, %v: Tensor[(3), int64], %p: (Tensor[(2), float32], int32))
    -> (float32, Tensor[(3), int64], (int32, Tensor[(2), float32])) {
  (multiply(%a, 2f), add(%v, 1i64), (%p.1 + 1, multiply(%p.0, %a)))
}
"""

# Lists and options: `@main` builds [1, ..., n] and returns it with its sum and a lookup.
ADT = HEADER + """
type List[A] {
  Cons(A, List[A]),
  Nil,
}

type Option[A] {
  Some(A),
  None,
}

def @range(%n: int32, %acc: List[int32]) -> List[int32] {
  if (%n <= 0) { %acc } else { @range(%n - 1, Cons(%n, %acc)) }
}

def @sum(%xs: List[int32]) -> int32 {
  match (%xs) {
    Cons(%x, %rest) => %x + @sum(%rest),
    Nil => 0,
  }
}

def @find(%xs: List[int32], %v: int32) -> Option[int32] {
  match (%xs) {
    Cons(%x, %rest) => if (%x == %v) { Some(%x * 10) } else { @find(%rest, %v) },
    Nil => None,
  }
}

def @main(%n: int32) -> (List[int32], int32, Option[int32]) {
  let %xs = @range(%n, Nil);
  (%xs, @sum(%xs), @find(%xs, 3))
}
"""

# References: `@main(x)` returns (r, bump(r), peek(r)) where r starts at x + 1 and `@bump`
# doubles it: (ref(2 (x + 1)), x + 1, 2 (x + 1)).
REFS = HEADER + """
def @bump(%r: ref(int32)) -> int32 {
  let %old = ref_read(%r);
  let %u = ref_write(%r, %old * 2);
  %old
}

def @peek(%r: ref(int32)) -> int32 {
  ref_read(%r)
}

def @main(%x: int32) -> (ref(int32), int32, int32) {
  let %r = ref(%x);
  let %u = ref_write(%r, ref_read(%r) + 1);
  (%r, @bump(%r), @peek(%r))
}
"""

# Closures: `@make_adder(k)` returns fn(x) = x + k, `@apply(f, x)` calls it.
CLOSURES = HEADER + """
def @make_adder(%k: int32) -> fn(int32) -> int32 {
  fn (%x: int32) -> int32 { %x + %k }
}

def @apply(%f: fn(int32) -> int32, %x: int32) -> int32 {
  %f(%x)
}

def @main(%k: int32) -> (fn(int32) -> int32, int32) {
  let %f = @make_adder(%k);
  (%f, @apply(%f, 1))
}
"""

# Non-tail recursion n deep: sum_to(n) = n (n + 1) / 2, n + 1 frames.
SUM_TO = HEADER + """
def @sum_to(%n: int32) -> int32 {
  if (%n == 0) { 0 } else { %n + @sum_to(%n - 1) }
}

def @main(%n: int32) -> int32 {
  @sum_to(%n)
}
"""

# A tail-recursive loop of n iterations in one frame: returns n.
COUNT = HEADER + """
def @count(%i: int64, %n: int64) -> int64 {
  if (%i >= %n) { %i } else { @count(%i + 1i64, %n) }
}

def @main(%n: int64) -> int64 {
  @count(0i64, %n)
}
"""

# Never returns for a start >= 0 (until int64 overflows, centuries from now).
SPIN = HEADER + """
def @spin(%i: int64) -> int64 {
  if (%i < 0i64) { %i } else { @spin(%i + 1i64) }
}

def @main(%start: int64) -> int64 {
  @spin(%start)
}
"""


def identity(n):
    """The identity on a float32 vector of n elements."""
    return HEADER + f"""
def @main(%x: Tensor[({n}), float32]) -> Tensor[({n}), float32] {{
  %x
}}
"""


# Integer division; divide by zero is a kernel error at run time.
DIVIDE = HEADER + """
def @main(%a: int32, %b: int32) -> int32 {
  divide(%a, %b)
}
"""

# Type-checks, but `log` has no int32 kernel: compiling it fails.
LOG_INT = HEADER + """
def @main(%x: Tensor[(4), int32]) -> Tensor[(4), int32] {
  log(%x)
}
"""

# Does not parse.
BAD_SYNTAX = HEADER + """
def @main(%x: Tensor[(2), float32] {
  %x
}
"""

# Parses, but adds tensors of shapes (2) and (3).
ILL_TYPED = HEADER + """
def @main(%x: Tensor[(2), float32], %y: Tensor[(3), float32]) {
  add(%x, %y)
}
"""

# Type-checks with a warning: the `match` misses `Nil`.
NON_EXHAUSTIVE = HEADER + """
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @head(%xs: List[int32]) -> int32 {
  match (%xs) {
    Cons(%x, _) => %x,
  }
}

def @main() -> int32 {
  @head(Cons(4, Nil))
}
"""
