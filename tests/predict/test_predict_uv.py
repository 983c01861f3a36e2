"""``predict --resolver uv|pip|auto``: uv resolves what pip resolves, for the same inputs and targets.

The unit tests need no network: the platform names uv is given, the wheel chosen among those uv lists,
and the reading of uv's messages (quoted from real runs). The equivalence test resolves the example
manifests against the real registry with both resolvers; it skips, saying why, without the registry or
without uv.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envcheck.cli import app
from envcheck.manifest.io import load
from envcheck.manifest.query import canon
from envcheck.predict import IndexOptions, parse_target, predict
from envcheck.predict import resolve as resolve_module
from envcheck.predict.resolve import _as_pip_log, _failing_name, _last_error, resolve
from envcheck.predict.uv import best_wheel, pip_configuration, uv_argv, uv_binary, uv_platform

from .conftest import CPU, CUDA


@pytest.mark.parametrize(
    ("tag", "platform", "env"),
    [
        ("win_amd64", "x86_64-pc-windows-msvc", {}),
        ("macosx_14_0_arm64", "aarch64-apple-darwin", {"MACOSX_DEPLOYMENT_TARGET": "14.0"}),
        ("macosx_11_0_x86_64", "x86_64-apple-darwin", {"MACOSX_DEPLOYMENT_TARGET": "11.0"}),
        ("manylinux_2_28_aarch64", "aarch64-manylinux_2_28", {}),
        ("manylinux2014_x86_64", "x86_64-manylinux2014", {}),
        ("musllinux_1_2_x86_64", "x86_64-unknown-linux-musl", {}),
    ],
)
def test_each_target_gets_the_platform_uv_names_it_by(tag: str, platform: str, env: dict[str, str]) -> None:
    assert uv_platform(parse_target(tag, "3.11")) == (platform, env)


@pytest.mark.parametrize("tag", ["manylinux_2_26_x86_64", "macosx_11_0_universal2", "linux_x86_64"])
def test_a_target_uv_cannot_name_is_none(tag: str) -> None:
    assert uv_platform(parse_target(tag, "3.11")) is None
    assert uv_platform(parse_target("win_amd64", "3.11", "pp")) is None


def _wheels(*names: str) -> list[dict[str, object]]:
    return [{"url": f"https://example.invalid/packages/{n}", "hashes": {"sha256": "0" * 64}} for n in names]


def test_the_wheel_pip_would_install_is_chosen_among_those_uv_lists() -> None:
    numpy = _wheels(
        "numpy-2.4.6-cp311-cp311-macosx_11_0_arm64.whl", "numpy-2.4.6-cp311-cp311-macosx_14_0_arm64.whl"
    )
    best = best_wheel(numpy, parse_target("macosx_14_0_arm64", "3.11"))
    assert best is not None and str(best["url"]).endswith("macosx_14_0_arm64.whl")
    best = best_wheel(numpy, parse_target("macosx_13_0_arm64", "3.11"))
    assert best is not None and str(best["url"]).endswith("macosx_11_0_arm64.whl")
    # The interpreter's own ABI before abi3, abi3 before a pure wheel.
    mixed = _wheels(
        "x-1-py3-none-any.whl",
        "x-1-cp39-abi3-manylinux_2_17_x86_64.whl",
        "x-1-cp311-cp311-manylinux_2_17_x86_64.whl",
    )
    best = best_wheel(mixed, parse_target("manylinux_2_28_x86_64", "3.11"))
    assert best is not None and "cp311-cp311" in str(best["url"])
    # The newest glibc level the machine has, never a newer one.
    linux = _wheels("y-1-cp311-cp311-manylinux_2_17_x86_64.whl", "y-1-cp311-cp311-manylinux_2_28_x86_64.whl")
    best = best_wheel(linux, parse_target("manylinux_2_28_x86_64", "3.11"))
    assert best is not None and "2_28" in str(best["url"])
    best = best_wheel(linux, parse_target("manylinux_2_27_x86_64", "3.11"))
    assert best is not None and "2_17" in str(best["url"])


# uv 0.13's messages, as it printed them for these inputs.
_NO_WHEEL = (
    "error: No solution found when resolving dependencies\n"
    "  cause: Because triton==3.0.0 has no wheels with a matching platform tag (e.g., `win_amd64`) and you "
    "require triton==3.0.0, we can conclude that your requirements are unsatisfiable.\n\n"
    "hint: Wheels are available for `triton` (v3.0.0) on the following platforms: `manylinux_2_17_x86_64`"
)
_CONSTRAINT = (
    "error: No solution found when resolving dependencies\n"
    "  cause: Because filelock==3.0.0 has no usable wheels and torch==2.13.0 depends on filelock==3.0.0, we "
    "can conclude that torch==2.13.0 cannot be used.\n"
    "         And because you require torch==2.13.0, we can conclude that your requirements are "
    "unsatisfiable."
)
_NO_VERSION = (
    "error: No solution found when resolving dependencies\n"
    "  cause: Because there is no version of numpy==1.0.0 and you require numpy==1.0.0, we can conclude that "
    "your requirements are unsatisfiable."
)


@pytest.mark.parametrize(
    ("text", "failing"), [(_NO_WHEEL, "triton"), (_CONSTRAINT, "filelock"), (_NO_VERSION, "numpy")]
)
def test_uvs_explanation_names_the_failing_pin_as_pips_would(text: str, failing: str) -> None:
    log = _as_pip_log(text)
    pinned = {n: (n, "1") for n in ("torch", "triton", "numpy")}
    constrained = {"filelock": ("filelock", "3.0.0")}
    assert _failing_name(log, pinned, constrained) == failing
    assert "Because" in _last_error(log)


def test_uv_is_given_the_indexes_and_wheel_folders_pip_is_configured_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # uv reads no pip configuration (envcheck runs it with --no-config), so envcheck passes pip's on, read
    # with the running pip's own reader. pip 26 changed that reader's items(); the prediction then lost a
    # configured --find-links folder and resolved another build of torch than pip does. Each value here is
    # in two places, to check pip's precedence too: a variable over the files, [install] over [global].
    for name in [n for n in os.environ if n.startswith("PIP_")]:
        monkeypatch.delenv(name)
    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS"):  # no file of this machine's is read
        monkeypatch.setenv(name, str(tmp_path))
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nfind-links = /wheels/global\nextra-index-url = file:///x file:///y\n"
        "index-url = file:///files\n[install]\nfind-links = /wheels/install\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.setenv("PIP_INDEX_URL", "file:///variable")
    assert pip_configuration() == {
        "index-url": ["file:///variable"],
        "extra-index-url": ["file:///x", "file:///y"],
        "find-links": ["/wheels/install"],
    }
    argv = uv_argv(
        "uv",
        parse_target("win_amd64", "3.11"),
        "x86_64-pc-windows-msvc",
        index_url=None,
        extra_index_urls=(),
        find_links=("/wheels/given",),
        pins=tmp_path / "pins.txt",
        constraints=tmp_path / "constraints.txt",
        lock=tmp_path / "pylock.toml",
    )
    assert "--default-index=file:///variable" in argv
    assert {"--index=file:///x", "--index=file:///y"} <= set(argv)
    assert [a for a in argv if a.startswith("--find-links")] == [
        "--find-links=/wheels/install",
        "--find-links=/wheels/given",
    ]


def test_resolver_must_be_pip_uv_or_auto() -> None:
    result = CliRunner().invoke(app, ["predict", str(CPU), "--platform", "win_amd64", "--resolver", "conda"])
    assert result.exit_code == 2 and "--resolver" in result.stderr and "Traceback" not in result.output


def test_resolver_uv_without_uv_is_one_line_and_auto_falls_back_to_pip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("envcheck.predict.uv.uv_binary", lambda: None)
    target = parse_target("win_amd64", "3.11")
    assert resolve_module.resolver_for(target, IndexOptions(resolver="auto")) == "pip"
    result = CliRunner().invoke(
        app, ["predict", str(CPU), "--platform", "win_amd64", "--python-version", "3.11", "--resolver", "uv"]
    )
    assert result.exit_code == 2, result.output
    assert "uv is not installed" in result.stderr and "Traceback" not in result.output


def test_auto_takes_pip_for_a_target_uv_cannot_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("envcheck.predict.uv.uv_binary", lambda: "/usr/bin/true")
    assert (
        resolve_module.resolver_for(parse_target("linux_x86_64", "3.11"), IndexOptions(resolver="auto"))
        == "pip"
    )
    assert (
        resolve_module.resolver_for(parse_target("win_amd64", "3.11"), IndexOptions(resolver="auto")) == "uv"
    )


def _resolved(manifest: Path, tag: str, resolver: str) -> tuple[set[tuple[str, str, str]], set[str]]:
    with tempfile.TemporaryDirectory(prefix="envcheck-test-resolve-") as tmp:
        res = resolve(
            load(manifest), parse_target(tag, "3.11"), IndexOptions(resolver=resolver), workdir=Path(tmp)
        )
    return {(canon(w.name), w.version, w.filename) for w in res.wheels}, {u.name for u in res.unavailable}


@pytest.mark.slow
@pytest.mark.usefixtures("registry")
@pytest.mark.parametrize("manifest", [CPU, CUDA], ids=["cpu", "cu130"])
@pytest.mark.parametrize("tag", ["win_amd64", "macosx_14_0_arm64", "manylinux_2_28_aarch64"])
def test_uv_and_pip_resolve_the_same_set(manifest: Path, tag: str) -> None:
    if uv_binary() is None:
        pytest.skip("uv is not installed (pip install 'envcheck[uv]')")
    by_pip, pip_unavailable = _resolved(manifest, tag, "pip")
    by_uv, uv_unavailable = _resolved(manifest, tag, "uv")
    assert by_pip, "pip resolved nothing"
    assert by_uv == by_pip, (sorted(by_uv - by_pip), sorted(by_pip - by_uv))
    assert uv_unavailable == pip_unavailable


@pytest.mark.slow
@pytest.mark.usefixtures("registry")
def test_uvs_prediction_carries_the_requirements_pip_reports(tmp_path: Path) -> None:
    if uv_binary() is None:
        pytest.skip("uv is not installed (pip install 'envcheck[uv]')")
    target = parse_target("win_amd64", "3.11")
    source = load(CPU)
    [by_pip] = predict(source, [target], IndexOptions(resolver="pip"))
    [by_uv] = predict(source, [target], IndexOptions(resolver="uv"))

    def packages(m: object) -> dict[str, tuple[str, list[str], list[str]]]:
        return {canon(d.name): (d.version, sorted(d.requires), d.wheel_tags) for d in m.packages}  # type: ignore[attr-defined]

    assert packages(by_uv.manifest) == packages(by_pip.manifest)
    assert by_uv.manifest.native == by_pip.manifest.native
