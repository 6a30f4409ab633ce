#!/usr/bin/env bash
# Builds the `relayc` Python package into a virtual environment and runs its pytest suite
# (crates/relay-python/tests/). `.ci/run` calls it after `cargo test`.
#
#   crates/relay-python/run-tests.sh [VENV_DIR] [PYTEST_ARGS...]
#
# VENV_DIR (default: $CARGO_TARGET_DIR/python-venv, or target/python-venv) is created with
# `python3 -m venv` unless it already holds a working one; pip installs maturin, pytest and
# numpy into it from PyPI. The package is built with `maturin develop --profile dev`, so it
# shares the debug build of `cargo test` (the same CARGO_TARGET_DIR). RELAYC_BIN is set to the
# debug `relayc` (built first), which the tests compare against. Fails when pytest fails or
# when it ran no test (pytest's exit code 5).
set -euo pipefail

crate="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$crate/../.." && pwd)"
cd "$repo"

target_dir="${CARGO_TARGET_DIR:-$repo/target}"
case "$target_dir" in
  /*) ;;
  *) target_dir="$repo/$target_dir" ;;
esac
export CARGO_TARGET_DIR="$target_dir"

venv="$target_dir/python-venv"
if [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then
  venv="$1"
  shift
fi
case "$venv" in
  /*) ;;
  *) venv="$PWD/$venv" ;;
esac

if ! command -v python3 >/dev/null 2>&1; then
  echo "error: python3 is not on PATH" >&2
  exit 1
fi

echo "== python virtual environment: $venv"
if ! "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  if ! python3 -m venv "$venv"; then
    # Some distributions ship python3 without ensurepip (Debian's python3-venv): make the
    # environment without pip, and let the system's pip (>= 22.3) install pip into it.
    echo "python3 -m venv failed; making it --without-pip and installing pip into it" >&2
    rm -rf "$venv"
    python3 -m venv --without-pip "$venv"
    python3 -m pip --python "$venv/bin/python" install --disable-pip-version-check --quiet pip
  fi
fi
py="$venv/bin/python"
"$py" --version
"$py" -m pip install --disable-pip-version-check --quiet 'maturin>=1.7,<2' pytest 'numpy>=1.23'

echo "== cargo build -p relayc (RELAYC_BIN)"
cargo build -p relayc
export RELAYC_BIN="$target_dir/debug/relayc"
if [ ! -x "$RELAYC_BIN" ]; then
  echo "error: $RELAYC_BIN was not built" >&2
  exit 1
fi

echo "== maturin develop --profile dev"
(
  cd "$crate"
  VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" "$venv/bin/maturin" develop --profile dev
)
"$py" -c 'import relayc, sys; print("relayc", relayc.__version__, "from", relayc.__file__)'

echo "== pytest"
status=0
PYTHONDONTWRITEBYTECODE=1 "$py" -m pytest "$crate/tests" -p no:cacheprovider -ra "$@" || status=$?
case "$status" in
  0) ;;
  5)
    echo "error: pytest collected no test" >&2
    exit 1
    ;;
  *)
    echo "error: pytest failed (exit $status)" >&2
    exit "$status"
    ;;
esac
