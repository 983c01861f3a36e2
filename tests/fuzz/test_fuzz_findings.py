"""What the fuzz suite found, kept as named cases: numbers a manifest cannot hold, and the CLI printing
hostile manifests (lone surrogates, escape sequences) through a real stdout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile import assert_bounded, envcheck_argv, run_bounded
from hostile_manifests import SMALL, assert_printable, manifest_text

from envcheck.core.errors import ManifestError
from envcheck.core.escape import json_text
from envcheck.manifest.codec import decode, parse_json_int
from envcheck.manifest.io import loads
from envcheck.manifest.model import Manifest

TWIN = next(p for p in SMALL if p.name == "twin-a.json")
OSC = "\x1b]0;pwned\x07"


def _with(where: tuple[str | int, ...], token: str) -> str:
    """twin-a.json with the raw JSON ``token`` at ``where``."""
    return manifest_text(TWIN, [(where, "@@TOKEN@@")]).replace('"@@TOKEN@@"', token)


@pytest.mark.parametrize(
    ("where", "token", "location"),
    [
        (("meta", "probe", "timeout_s"), "1e400", "meta.probe.timeout_s"),
        (("meta", "probe", "timeout_s"), "NaN", "meta.probe.timeout_s"),
        (("meta", "probe", "timeout_s"), "-Infinity", "meta.probe.timeout_s"),
        # float(10**400) raised OverflowError out of the loader.
        (("meta", "probe", "timeout_s"), "1" + "0" * 400, "meta.probe.timeout_s"),
    ],
)
def test_a_float_that_overflows_is_a_located_manifest_error(
    where: tuple[str, ...], token: str, location: str
) -> None:
    with pytest.raises(ManifestError, match=rf"{location}: .* not a finite number"):
        loads(_with(where, token))


@pytest.mark.parametrize(
    ("where", "token", "location"),
    [
        (("platform", "shm_bytes"), "9" * 5000, "platform.shm_bytes"),
        # Untyped JSON (direct_url.json) is searched too, and the location names the number inside it.
        (("packages", 0, "direct_url"), '{"n": [1, -' + "9" * 5000 + "]}", "packages[0].direct_url.n[1]"),
    ],
)
def test_an_integer_past_the_conversion_limit_is_located_by_the_codec(
    where: tuple[str | int, ...], token: str, location: str
) -> None:
    data = json.loads(_with(where, token), parse_int=parse_json_int)
    with pytest.raises(ManifestError, match=r"a number of 5000 digits") as raised:
        decode(Manifest, data)
    assert any(p.startswith(f"{location}: ") for p in raised.value.problems), raised.value.problems


def test_an_integer_past_the_conversion_limit_is_a_manifest_error_from_the_loader() -> None:
    with pytest.raises(ManifestError, match=r"platform\.shm_bytes: .*5000 digits"):
        loads(_with(("platform", "shm_bytes"), "9" * 5000))


def test_a_key_in_a_location_is_shown_escaped() -> None:
    text = manifest_text(TWIN, [(("env",), {OSC: 1})])
    with pytest.raises(ManifestError) as raised:
        loads(text)
    assert_printable(str(raised.value))
    assert "env['\\x1b]0;pwned\\x07']" in str(raised.value)


def _hostile_manifest(tmp_path: Path, name: str) -> Path:
    """twin-a.json whose label, Python version and a package version hold a lone surrogate (as an
    undecodable file name gives under PEP 383), an OSC title change and HTML."""
    hostile = f"{OSC}\udcff<script>x</script>[bold]"
    text = manifest_text(
        TWIN,
        [
            (("meta", "label"), f"lbl{hostile}"),
            (("python", "executable"), f"/opt/{hostile}/python"),
            (("packages", 0, "version"), f"1.0{hostile}"),
        ],
    )
    path = tmp_path / name
    path.write_text(
        json_text(text), encoding="utf-8"
    )  # the surrogate as a JSON escape, as the probe writes it
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["show", "{hostile}"],
        ["diff", "{plain}", "{hostile}", "--format", "text"],
        ["diff", "{plain}", "{hostile}", "--format", "markdown"],
        ["diff", "{hostile}", "{plain}", "{hostile}", "--format", "json"],
        ["doctor", "{hostile}", "--format", "junit"],
    ],
    ids=lambda c: "-".join(a for a in c if not a.startswith("{")),
)
def test_the_cli_prints_hostile_manifests_inertly(tmp_path: Path, command: list[str]) -> None:
    paths = {"hostile": str(_hostile_manifest(tmp_path, "h.json")), "plain": str(TWIN)}
    result = run_bounded(envcheck_argv(*(a.format(**paths) for a in command)), timeout=60)
    assert_bounded(result, timeout=60)
    assert result.returncode in (0, 1), result.stderr
    assert_printable(result.stdout)
    assert_printable(result.stderr)
    if command[0] != "doctor":  # doctor's rules report nothing about these fields
        assert "pwned" in result.stdout, "the hostile data did not reach the output: nothing was tested"
