# envcheck deployment gate for a Windows machine or CI job (PowerShell 5.1 or 7).
#
#   ci\gate.ps1 MANIFEST [--python PY] [--junit FILE] [--envcheck SPEC] [-- extra gate args]
#
# Installs envcheck into a virtual environment of its own (the application's environment is only
# inspected, never changed), runs `envcheck gate MANIFEST --python PY --junit FILE [extra args]` and exits
# with the gate's code: 0 clean, 1 drift or a failed check, 2 usage or input error (also when envcheck
# cannot be installed). The report goes to stdout; this script's own lines go to stderr.
#
#   --python PY       the interpreter of the environment to gate (default: python on PATH)
#   --junit FILE      where the JUnit report goes (default: envcheck-junit.xml)
#   --envcheck SPEC   what pip installs (default: envcheck; a version pin, a wheel, a source folder)
#
# Environment:
#   ENVCHECK_GATE_VENV         keep envcheck's environment in this folder and reuse it while SPEC is
#                              unchanged (default: a temporary folder, removed on exit)
#   ENVCHECK_GATE_TOOL_PYTHON  the Python (3.10+) that envcheck itself runs on (default: python)
#   ENVCHECK_GATE_PIP_ARGS     extra arguments for `pip install` (split on blanks), e.g. --no-index
#   ENVCHECK_GATE_INSTALL_TIMEOUT  seconds for creating the environment and installing (default 900)
# pip takes its indexes, find-links and constraints from its own configuration (pip.ini, PIP_*).
# This is ci/gate.sh for PowerShell, line for line; the options are parsed by hand (not param()) so that
# both scripts take the same GNU-style options.
$ErrorActionPreference = 'Stop'
Set-StrictMode -Version 3.0

$PROG = 'gate.ps1'
$USAGE = 'usage: ci\gate.ps1 MANIFEST [--python PY] [--junit FILE] [--envcheck SPEC] [-- extra gate args]'

# One line, safe for a CI log: control characters out, a password in a URL hidden, length capped.
function Clean([string]$text) {
    $line = ($text -replace '[\x00-\x1f\x7f]', '?') -replace '(://)[^/@ ]*@', '$1***@'
    if ($line.Length -gt 400) { $line = $line.Substring(0, 400) }
    return $line
}

function Die([string]$message) {
    [Console]::Error.WriteLine("${PROG}: error: $(Clean $message)")
    exit 2
}

function Say([string]$message) {
    [Console]::Error.WriteLine("${PROG}: $(Clean $message)")
}

$manifest = ''
$targetPython = ''
$junit = 'envcheck-junit.xml'
$spec = 'envcheck'
$extra = @()
$i = 0
while ($i -lt $args.Count) {
    $a = [string]$args[$i]
    switch -Regex ($a) {
        '^--python$' { if ($i + 1 -ge $args.Count) { Die "--python needs a value ($USAGE)" }; $targetPython = [string]$args[$i + 1]; $i += 2; continue }
        '^--python=' { $targetPython = $a.Substring(9); $i += 1; continue }
        '^--junit$' { if ($i + 1 -ge $args.Count) { Die "--junit needs a value ($USAGE)" }; $junit = [string]$args[$i + 1]; $i += 2; continue }
        '^--junit=' { $junit = $a.Substring(8); $i += 1; continue }
        '^--envcheck$' { if ($i + 1 -ge $args.Count) { Die "--envcheck needs a value ($USAGE)" }; $spec = [string]$args[$i + 1]; $i += 2; continue }
        '^--envcheck=' { $spec = $a.Substring(11); $i += 1; continue }
        '^(-h|--help)$' { [Console]::Out.WriteLine($USAGE); exit 0 }
        '^--$' { $extra = @($args | Select-Object -Skip ($i + 1)); $i = $args.Count; continue }
        '^-' { Die "unknown option $a ($USAGE)" }
        default { if ($manifest) { Die "one MANIFEST only, got $manifest and $a" }; $manifest = $a; $i += 1; continue }
    }
}
# What is left in $extra goes to `envcheck gate` as it is.

if (-not $manifest) { Die "no MANIFEST given ($USAGE)" }
if (-not (Test-Path -LiteralPath $manifest)) { Die "manifest not found: $manifest" }
if (-not (Test-Path -LiteralPath $manifest -PathType Leaf)) { Die "manifest is not a regular file: $manifest" }
if (-not $spec) { Die "--envcheck needs a value ($USAGE)" }
if (-not $targetPython) {
    $found = Get-Command python -CommandType Application -ErrorAction SilentlyContinue | Select-Object -First 1
    if (-not $found) { Die 'no python on PATH: name the interpreter to gate with --python' }
    $targetPython = $found.Source
} else {
    $found = Get-Command $targetPython -CommandType Application -ErrorAction SilentlyContinue | Select-Object -First 1
    if (-not $found) { Die "target interpreter not found: $targetPython" }
    $targetPython = $found.Source
}
$toolPython = if ($env:ENVCHECK_GATE_TOOL_PYTHON) { $env:ENVCHECK_GATE_TOOL_PYTHON } else { 'python' }
if (-not (Get-Command $toolPython -ErrorAction SilentlyContinue)) { Die "no $toolPython to run envcheck on: set ENVCHECK_GATE_TOOL_PYTHON" }
$limit = if ($env:ENVCHECK_GATE_INSTALL_TIMEOUT) { $env:ENVCHECK_GATE_INSTALL_TIMEOUT } else { '900' }
if ($limit -notmatch '^[0-9]+$') { Die "ENVCHECK_GATE_INSTALL_TIMEOUT must be whole seconds, got $limit" }

# A command under the install deadline; its output goes to $log. Returns the exit code (124: timed out).
function Bounded([string]$log, [string]$exe, [string[]]$arguments) {
    $quoted = @($arguments | ForEach-Object { '"' + ($_ -replace '"', '\"') + '"' })
    $p = Start-Process -FilePath $exe -ArgumentList $quoted -NoNewWindow -PassThru `
        -RedirectStandardOutput "$log.out" -RedirectStandardError "$log.err"
    $null = $p.Handle  # without a handle taken before the wait, ExitCode reads empty afterwards
    if (-not $p.WaitForExit([int]$limit * 1000)) { $p.Kill(); Add-Content -LiteralPath $log "timed out after $limit s"; return 124 }
    Get-Content -LiteralPath "$log.out", "$log.err" -ErrorAction SilentlyContinue | Add-Content -LiteralPath $log
    return $p.ExitCode
}

$work = $null
if ($env:ENVCHECK_GATE_VENV) {
    $venv = $env:ENVCHECK_GATE_VENV
    # Never build into (or later remove) a folder that is neither empty nor a virtual environment.
    if ((Test-Path -LiteralPath $venv -PathType Container) -and -not (Test-Path -LiteralPath (Join-Path $venv 'pyvenv.cfg')) -and (Get-ChildItem -LiteralPath $venv -Force | Select-Object -First 1)) {
        Die "ENVCHECK_GATE_VENV=$venv is a folder that is not a virtual environment"
    }
} else {
    $work = Join-Path ([IO.Path]::GetTempPath()) ('envcheck-gate.' + [IO.Path]::GetRandomFileName())
    try { New-Item -ItemType Directory -Path $work | Out-Null } catch { Die 'cannot create a temporary folder' }
    # The folder is removed in the `finally` below (PowerShell's counterpart of `trap ... EXIT`).
    $venv = Join-Path $work 'venv'
}
try {
    $bin = Join-Path $venv 'Scripts'
    $stamp = Join-Path $venv 'envcheck-gate.spec'
    $log = Join-Path $venv 'envcheck-gate-install.log'
    $envcheck = Join-Path $bin 'envcheck.exe'

    $reuse = $false
    if ((Test-Path -LiteralPath $stamp) -and ((Get-Content -LiteralPath $stamp -Raw) -eq $spec) -and (Test-Path -LiteralPath $envcheck)) {
        & $envcheck --version *> $null
        $reuse = ($LASTEXITCODE -eq 0)
    }
    if ($reuse) {
        Say "reusing $(& $envcheck --version) in $venv"
    } else {
        # Another SPEC was installed here before: start from an empty environment, not an upgrade of it.
        if (Test-Path -LiteralPath $stamp) { Remove-Item -LiteralPath $venv -Recurse -Force }
        try { New-Item -ItemType Directory -Path $venv -Force | Out-Null } catch { Die "cannot create $venv" }
        if ((Bounded $log $toolPython @('-m', 'venv', $venv)) -ne 0) {
            Die "could not create a virtual environment with ${toolPython}: $(Get-Content -LiteralPath $log -Tail 1)"
        }
        $pipArgs = @(if ($env:ENVCHECK_GATE_PIP_ARGS) { $env:ENVCHECK_GATE_PIP_ARGS -split '\s+' | Where-Object { $_ } })
        if ((Bounded $log (Join-Path $bin 'python.exe') (@('-m', 'pip', 'install', '--disable-pip-version-check', '--quiet') + $pipArgs + @($spec))) -ne 0) {
            $why = Get-Content -LiteralPath $log | Where-Object { $_ -match '^ERROR' } | Select-Object -Last 1
            if (-not $why) { $why = Get-Content -LiteralPath $log -Tail 1 }
            Die "could not install envcheck from '$spec': $why"
        }
        & $envcheck --version *> $null
        if ($LASTEXITCODE -ne 0) { Die "'$spec' installed no working envcheck command" }
        Set-Content -LiteralPath $stamp -Value $spec -NoNewline
        Say "installed $(& $envcheck --version) in $venv"
    }

    & $envcheck gate $manifest --python $targetPython --junit $junit @extra
    $code = $LASTEXITCODE
    if ($code -notin 0, 1, 2) { Say "error: envcheck gate ended with exit code $code"; $code = 2 }
    if (Test-Path -LiteralPath $junit -PathType Leaf) {
        Say "JUnit report: $((Resolve-Path -LiteralPath $junit).Path)"
    }
    exit $code
} finally {
    if ($work) { Remove-Item -LiteralPath $work -Recurse -Force -ErrorAction SilentlyContinue }
}
