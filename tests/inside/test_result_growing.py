"""The suite's result is written after every step; ``result.Growing`` encodes each appended item once. The
file must be what ``emit`` without it writes, the one choke point of redaction (docs/guarantees.md): the
same JSON, every credential gone, whatever the items hold and however the result grew."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from envcheck.inside.redact import redact_json
from envcheck.inside.result import Growing, emit

SECRET = "https://user:hunter2hunter2@index.example/simple/?token=QUERYTOKEN5"
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
items = st.dictionaries(
    st.sampled_from(["name", "status", "error", "password", "outputs", SECRET]),
    json_values | st.just(SECRET),
    max_size=4,
)


def _written(path: Path, result: dict[str, Any], growing: Growing | None) -> Any:
    emit(str(path), result, growing)
    return json.loads(path.read_text(encoding="utf-8"))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(steps=st.lists(st.tuples(items, st.text(max_size=10) | st.just(SECRET)), min_size=1, max_size=6))
def test_each_write_is_the_whole_result_redacted(tmp_path_factory: Any, steps: list[tuple[Any, str]]) -> None:
    folder = tmp_path_factory.mktemp("growing")
    growing = Growing(("results",))
    result: dict[str, Any] = {"stage": "start", "current": None, "results": []}
    for item, current in steps:
        result["results"].append(item)
        result["current"] = current
        got = _written(folder / "out.json", result, growing)
        assert got == redact_json(result) == _written(folder / "plain.json", result, None)
    assert "hunter2hunter2" not in (folder / "out.json").read_text(encoding="utf-8")
    assert "QUERYTOKEN5" not in (folder / "out.json").read_text(encoding="utf-8")


def test_a_result_without_the_list_or_with_only_the_list_is_written_as_it_is(tmp_path: Path) -> None:
    for result in ({"stage": "start"}, {"results": [{"error": SECRET}]}, {}):
        assert _written(tmp_path / "out.json", result, Growing(("results",))) == redact_json(result)


def test_a_replaced_list_is_encoded_again(tmp_path: Path) -> None:
    growing = Growing(("results",))
    result: dict[str, Any] = {"results": [{"name": "a"}, {"name": "b"}]}
    _written(tmp_path / "out.json", result, growing)
    result["results"] = [{"name": "c"}]
    assert _written(tmp_path / "out.json", result, growing) == {"results": [{"name": "c"}]}
