r"""``--redact-paths`` on Windows paths, without Wine: a home with a drive letter becomes ``%USERPROFILE%``
and is matched the way Windows compares paths (any case, either separator), never inside a longer name.
The run under Wine is in ``test_guarantees.py``."""

from __future__ import annotations

from envcheck.core.files import same_path
from envcheck.core.redact import PathRedactor


def test_a_windows_home_becomes_userprofile_in_any_case_and_with_either_separator() -> None:
    redactor = PathRedactor("C:\\Users\\Ann", "Ann")
    assert redactor.text("C:\\Users\\Ann\\venv\\python.exe") == "%USERPROFILE%\\venv\\python.exe"
    assert redactor.text("c:\\users\\ann\\AppData") == "%USERPROFILE%\\AppData"
    assert redactor.text("C:/Users/Ann/x.whl") == "%USERPROFILE%/x.whl"
    assert redactor.text("error loading 'C:\\USERS\\ANN\\a.dll'") == "error loading '%USERPROFILE%\\a.dll'"


def test_a_windows_home_is_not_matched_inside_a_longer_name() -> None:
    redactor = PathRedactor("C:\\Users\\Ann", None)
    assert redactor.text("C:\\Users\\Anna\\x") == "C:\\Users\\Anna\\x"


def test_a_windows_user_name_is_a_path_component_in_any_case() -> None:
    redactor = PathRedactor("C:\\Users\\Ann", "Ann")
    assert redactor.text("D:\\work\\ANN\\env") == "D:\\work\\<user>\\env"
    assert redactor.text("D:\\annotated\\env") == "D:\\annotated\\env"


def test_a_posix_home_is_still_tilde_and_case_sensitive() -> None:
    redactor = PathRedactor("/home/ann", "ann")
    assert redactor.text("/home/ann/venv") == "~/venv"
    assert redactor.text("/HOME/ANN/venv") == "/HOME/ANN/venv"


def test_windows_paths_compare_in_any_case_and_with_either_separator() -> None:
    assert same_path("C:\\Env\\python.exe", "c:/env/PYTHON.EXE")
    assert same_path("Z:\\tmp\\x\\..\\python.exe", "z:\\TMP\\python.exe")
    assert not same_path("C:\\Env\\python.exe", "C:\\Env2\\python.exe")


def test_posix_paths_compare_exactly() -> None:
    assert same_path("/opt/env/bin/python", "/opt/env/bin/python")
    assert not same_path("/opt/env/bin/python", "/OPT/env/bin/python")
    assert not same_path("/opt/env/bin/python", "C:\\opt\\env\\bin\\python")
