"""The probe's entry module: ``python -c BOOT FOLDER envcheck_target.probe OUT STAGES``.

Collects the environment's facts into one result dict and writes it to OUT through ``result.emit``
(redacted, atomic) after every step, so a crash or a hang part-way leaves everything learnt before it,
plus ``stage`` naming the step that never finished. Exits 0 when done, 3 when a step raised (the exception
and a traceback tail are in the result).

Stages (comma-separated STAGES, default both):
- ``facts``: interpreter, platform, distributions, torch's version file, environment variables. Imports
  nothing outside the standard library (except ``packaging.tags`` when the target has it).
- ``runtime``: GPU driver (NVML / libcuda / nvidia-smi, without torch), then ``import torch``, one small op,
  torch's build and numerics facts, the libraries mapped into the process, and the thread pools.
"""

import gc
import os
import sys
import time

from .result import emit


class Probe(object):
    """The result so far and where it goes."""

    def __init__(self, out):
        self.out = out
        self.result = {"stage": None, "done": False, "python_version": list(sys.version_info[:3])}

    def stage(self, name, keep=True):
        """Record that step ``name`` starts. ``keep``: write everything learnt so far with it (a crash in
        the step leaves it on disk); otherwise only the step's name: the facts stage's partial facts are
        of no use to anyone (a facts probe that does not finish fails the snapshot), and writing the
        growing result after every step, redacted, cost a fifth of the static snapshot."""
        self.result["stage"] = name
        if keep:
            emit(self.out, self.result)
        else:
            emit(self.out, {"stage": name, "done": False, "python_version": self.result["python_version"]})

    def facts(self):
        from .config_checks import config_checks
        from .distributions import distributions
        from .environment import collect_env
        from .host import platform_facts
        from .install_facts import install_facts
        from .interpreter import libpython_facts, python_facts
        from .startup import startup_facts
        from .torch_static import torch_static
        from .venv_facts import venv_facts

        self.stage("python", keep=False)
        self.result["python"] = python_facts()
        self.stage("platform", keep=False)
        self.result["platform"] = platform_facts()
        self.stage("distributions", keep=False)
        self.result["packages"], self.result["packages_error"] = distributions()
        self.stage("interpreter library", keep=False)
        self.result["python"].update(libpython_facts())
        self.stage("interpreter fit", keep=False)
        self.result["python"].update(venv_facts(self.result["packages"]))
        self.stage("torch version file", keep=False)
        self.result["torch"] = torch_static()
        self.result["env"] = collect_env()
        self.stage("start-up files", keep=False)
        self.result["python"]["startup"] = startup_facts()
        self.stage("installation records", keep=False)
        self.result["install"] = install_facts(self.result["packages"])
        self.stage("configuration", keep=False)
        self.result["config_checks"] = config_checks(self.result["env"])
        if os.name == "nt":
            from .windows_facts import env_dll_names, windows_facts

            self.stage("windows facts", keep=False)
            self.result["windows"] = windows_facts(env_dll_names())

    def runtime(self, after_import=None):
        import importlib.util

        from .gpu_driver import gpu_driver
        from .interpreter import start_stdlib_check, stdlib_errors

        # Importing the stdlib's extension modules loads code: it belongs here, not in the static facts,
        # and its child runs while torch imports (docs/budgets.md: work hides behind the import).
        stdlib_check = start_stdlib_check()
        self.stage("gpu driver")
        self.result["gpu"] = gpu_driver()
        if importlib.util.find_spec("torch") is None:
            self.result["torch_missing"] = True  # an environment without torch: nothing more to learn here
            self.result["stdlib_errors"] = stdlib_errors(stdlib_check)
            return
        from .fp_control import fp_control, note_start

        note_start()  # before torch: tells a state set at start-up from one set by the import
        self.stage("import torch")
        started = time.perf_counter()
        try:
            import torch
        except BaseException as e:
            if os.name == "nt":
                self.windows_load_failure(e)
            raise

        self.result["import_seconds"] = time.perf_counter() - started
        if after_import is not None:
            after_import(torch)
        from .loaded_libraries import loaded_libraries
        from .thread_pools import thread_pools
        from .torch_runtime import small_op, torch_runtime

        self.stage("small op")
        ok = small_op(torch)
        self.stage("torch facts")
        runtime = torch_runtime(torch)
        runtime["small_op_ok"] = ok
        self.result["torch_runtime"] = runtime
        self.stage("loaded libraries")
        self.result["loaded"] = loaded_libraries()
        self.stage("floating-point mode")
        runtime["fp_control"] = fp_control(self.result["loaded"])
        self.stage("thread pools")
        self.result["threadpools"] = thread_pools()
        self.stage("stdlib extension modules")
        self.result["stdlib_errors"] = stdlib_errors(stdlib_check)

    def windows_load_failure(self, error):
        """After ``import torch`` failed on Windows: the DLLs it got to, then where the loader stops
        (``windows_facts.load_failure``), written before the failure is re-raised."""
        from .windows_facts import load_failure, loaded_modules

        self.result["windows_load"] = {"loaded": loaded_modules()}
        self.stage("import torch: asking the loader")
        try:
            import importlib.util

            spec = importlib.util.find_spec("torch")
            folder = os.path.dirname(spec.origin) if spec is not None and spec.origin else None
            self.result["windows_load"]["failure"] = load_failure("%s" % (error,), folder)
        except Exception as e:  # the import's error is what the probe reports; this is a detail of it
            self.result["windows_load"]["failure_error"] = "%s: %s" % (type(e).__name__, e)
        self.stage("import torch")


def runtime_beside(out, after_import=None):
    """The runtime stage for another entry module that goes on in the same process (the smoke suite: one
    ``import torch`` for both), written to ``out`` as ``main`` writes it: ``done`` when it finished, else
    the exception and its traceback. ``after_import(torch)`` runs right after ``import torch``, before any
    of torch's operators (the suite forks its children there). Returns the result."""
    probe = Probe(out)
    try:
        probe.runtime(after_import)
    except BaseException as e:  # recorded as main records it; the host goes on (or ends) as it would
        if isinstance(e, (KeyboardInterrupt, SystemExit)):  # SystemExit: a child ``after_import`` forked
            raise
        import traceback

        probe.result["exception"] = "%s: %s" % (type(e).__name__, e)
        probe.result["traceback_tail"] = "".join(traceback.format_exc())[-4000:]
        emit(probe.out, probe.result)
        return probe.result
    probe.result["done"] = True
    emit(probe.out, probe.result)
    return probe.result


def forget_own_folder():
    """Take the folder this package was copied to off ``sys.path``: it is envcheck's, not the target's, and
    must not appear in ``sys_path`` nor shadow anything the probe looks up. The package's own modules still
    import (a package finds its submodules through ``__path__``, not ``sys.path``)."""
    package_dir = os.path.dirname(os.path.abspath(__file__))
    own = os.path.dirname(package_dir)
    sys.path[:] = [p for p in sys.path if not p or os.path.abspath(p) != own]


def main(argv):
    # A short-lived process that leaves through os._exit: the cyclic collector's passes over what import
    # torch creates cost 0.12 s of it (torch 2.13) to free some 7,000 objects of 300,000 (as in the smoke
    # suite's process).
    gc.disable()
    forget_own_folder()
    probe = Probe(argv[1] if len(argv) > 1 else None)
    stages = argv[2].split(",") if len(argv) > 2 else ["facts", "runtime"]
    try:
        if "facts" in stages:
            probe.facts()
        if "runtime" in stages:
            probe.runtime()
    except BaseException as e:  # recorded; the parent turns it into the probe outcome
        import traceback

        probe.result["exception"] = "%s: %s" % (type(e).__name__, e)
        probe.result["traceback_tail"] = "".join(traceback.format_exc())[-4000:]
        emit(probe.out, probe.result)
        sys.exit(3)
    probe.result["done"] = True
    emit(probe.out, probe.result)
    # The result is on disk: skip interpreter teardown, which costs torch ~0.3 s of destructors and
    # thread joins and can itself crash on a broken build.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
