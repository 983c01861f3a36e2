#!/bin/sh
# envcheck deployment gate for a CI job or a target machine (POSIX sh).
#
#   ci/gate.sh MANIFEST [--python PY] [--junit FILE] [--envcheck SPEC] [-- extra gate args]
#
# Installs envcheck into a virtual environment of its own (the application's environment is only
# inspected, never changed), runs `envcheck gate MANIFEST --python PY --junit FILE [extra args]` and exits
# with the gate's code: 0 clean, 1 drift or a failed check, 2 usage or input error (also when envcheck
# cannot be installed). The report goes to stdout; this script's own lines go to stderr.
#
#   --python PY       the interpreter of the environment to gate (default: python3 on PATH)
#   --junit FILE      where the JUnit report goes (default: envcheck-junit.xml)
#   --envcheck SPEC   what pip installs (default: envcheck; a version pin, a wheel, a source folder)
#
# Environment:
#   ENVCHECK_GATE_VENV         keep envcheck's environment in this folder and reuse it while SPEC is
#                              unchanged (default: a temporary folder, removed on exit)
#   ENVCHECK_GATE_TOOL_PYTHON  the Python (3.10+) that envcheck itself runs on (default: python3)
#   ENVCHECK_GATE_PIP_ARGS     extra arguments for `pip install` (split on blanks), e.g. --no-index
#   ENVCHECK_GATE_INSTALL_TIMEOUT  seconds for creating the environment and installing (default 900;
#                              applied where coreutils' `timeout` exists)
# pip takes its indexes, find-links and constraints from its own configuration (pip.conf, PIP_*).
# ci/gate.ps1 is the same script for PowerShell, line for line.
set -eu

PROG=gate.sh
USAGE="usage: ci/gate.sh MANIFEST [--python PY] [--junit FILE] [--envcheck SPEC] [-- extra gate args]"

# One line, safe for a CI log: control characters out, a password in a URL hidden, length capped.
clean() {
    printf '%s' "$1" | LC_ALL=C tr '\000-\037\177' '??' | sed -e 's#\(://\)[^/@ ]*@#\1***@#g' | cut -c1-400
}

die() {
    printf '%s: error: %s\n' "$PROG" "$(clean "$1")" >&2
    exit 2
}

say() {
    printf '%s: %s\n' "$PROG" "$(clean "$1")" >&2
}

manifest=""
target_python=""
junit="envcheck-junit.xml"
spec="envcheck"
while [ $# -gt 0 ]; do
    case $1 in
        --python) [ $# -ge 2 ] || die "--python needs a value ($USAGE)"; target_python=$2; shift 2 ;;
        --python=*) target_python=${1#*=}; shift ;;
        --junit) [ $# -ge 2 ] || die "--junit needs a value ($USAGE)"; junit=$2; shift 2 ;;
        --junit=*) junit=${1#*=}; shift ;;
        --envcheck) [ $# -ge 2 ] || die "--envcheck needs a value ($USAGE)"; spec=$2; shift 2 ;;
        --envcheck=*) spec=${1#*=}; shift ;;
        -h | --help) printf '%s\n' "$USAGE"; exit 0 ;;
        --) shift; break ;;
        -*) die "unknown option $1 ($USAGE)" ;;
        *) [ -z "$manifest" ] || die "one MANIFEST only, got $manifest and $1"; manifest=$1; shift ;;
    esac
done
# What is left in "$@" goes to `envcheck gate` as it is.

[ -n "$manifest" ] || die "no MANIFEST given ($USAGE)"
[ -e "$manifest" ] || die "manifest not found: $manifest"
[ -f "$manifest" ] || die "manifest is not a regular file: $manifest"
[ -n "$spec" ] || die "--envcheck needs a value ($USAGE)"
if [ -z "$target_python" ]; then
    target_python=$(command -v python3) || die "no python3 on PATH: name the interpreter to gate with --python"
else
    target_python=$(command -v "$target_python") || die "target interpreter not found: $target_python"
fi
tool_python=${ENVCHECK_GATE_TOOL_PYTHON:-python3}
command -v "$tool_python" >/dev/null 2>&1 || die "no $tool_python to run envcheck on: set ENVCHECK_GATE_TOOL_PYTHON"
limit=${ENVCHECK_GATE_INSTALL_TIMEOUT:-900}
case $limit in '' | *[!0-9]*) die "ENVCHECK_GATE_INSTALL_TIMEOUT must be whole seconds, got $limit" ;; esac

# A command under the install deadline where coreutils' `timeout` exists.
bounded() {
    if command -v timeout >/dev/null 2>&1; then timeout "$limit" "$@"; else "$@"; fi
}

if [ -n "${ENVCHECK_GATE_VENV:-}" ]; then
    venv=$ENVCHECK_GATE_VENV
    # Never build into (or later remove) a folder that is neither empty nor a virtual environment.
    if [ -d "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ] && [ -n "$(ls -A "$venv")" ]; then
        die "ENVCHECK_GATE_VENV=$venv is a folder that is not a virtual environment"
    fi
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/envcheck-gate.XXXXXX") || die "cannot create a temporary folder"
    trap 'rm -rf "$work"' EXIT
    trap 'exit 129' HUP
    trap 'exit 130' INT
    trap 'exit 143' TERM
    venv=$work/venv
fi
bin=$venv/bin
stamp=$venv/envcheck-gate.spec
log=$venv/envcheck-gate-install.log

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$spec" ] && "$bin/envcheck" --version >/dev/null 2>&1; then
    say "reusing $("$bin/envcheck" --version) in $venv"
else
    # Another SPEC was installed here before: start from an empty environment, not an upgrade of it.
    if [ -f "$stamp" ]; then rm -rf "$venv"; fi
    mkdir -p "$venv" || die "cannot create $venv"
    if ! bounded "$tool_python" -m venv "$venv" >"$log" 2>&1; then
        die "could not create a virtual environment with $tool_python: $(tail -n 1 "$log")"
    fi
    # shellcheck disable=SC2086 # ENVCHECK_GATE_PIP_ARGS is a list of arguments, split on blanks
    if ! bounded "$bin/python" -m pip install --disable-pip-version-check --quiet ${ENVCHECK_GATE_PIP_ARGS:-} "$spec" >>"$log" 2>&1; then
        why=$(grep '^ERROR' "$log" | tail -n 1 || true)
        [ -n "$why" ] || why=$(tail -n 1 "$log")
        die "could not install envcheck from '$spec': $why"
    fi
    "$bin/envcheck" --version >/dev/null 2>&1 || die "'$spec' installed no working envcheck command"
    printf '%s' "$spec" >"$stamp"
    say "installed $("$bin/envcheck" --version) in $venv"
fi

set +e
"$bin/envcheck" gate "$manifest" --python "$target_python" --junit "$junit" "$@"
code=$?
set -e
case $code in
    0 | 1 | 2) ;;
    *) say "error: envcheck gate ended with exit code $code"; code=2 ;;
esac
if [ -f "$junit" ]; then
    case $junit in /*) shown=$junit ;; *) shown=$PWD/$junit ;; esac
    say "JUnit report: $shown"
fi
exit "$code"
