"""The one redactor (``envcheck.inside.redact``) over a corpus of canaries, and what it must leave alone.

Each canary is a credential in the shape it reaches envcheck in (an environment variable, a requirement,
a ``direct_url.json``, an exception message, a path on ``sys.path``); the secret part must vanish and the
rest of the string survive. The non-secrets are real facts that look close to one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envcheck.core.redact import REDACTED, is_secret_name, redact_json, redact_text
from envcheck.inside.result import emit

GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

# (kind, text, the secret that must vanish, a part that must survive)
TEXT_CANARIES = [
    ("url-userinfo", "https://user:PASSWORD1@mirror.example/simple/", "PASSWORD1", "mirror.example/simple/"),
    (
        "import-error-url",
        "ImportError: cannot fetch https://user:PASSWORD2@mirror.corp/torch.whl: 403",
        "PASSWORD2",
        "ImportError: cannot fetch https://",
    ),
    ("requires-dist-url", "x @ https://user:PASSWORD3@host.example/x.whl", "PASSWORD3", "x @ https://"),
    (
        "git-oauth2",
        "git+https://oauth2:TOKENVALUE4@gitlab.example/org/repo.git",
        "TOKENVALUE4",
        "gitlab.example",
    ),
    ("query-token", "https://h.example/simple/?token=QUERYTOKEN5&x=1", "QUERYTOKEN5", "&x=1"),
    ("proxy-no-scheme", "user:PASSWORD6@proxy.example:3128", "PASSWORD6", "@proxy.example:3128"),
    ("password-with-at", "https://user:p@ssWORD7@host.example/simple", "ssWORD7", "@host.example/simple"),
    ("password-with-at-no-scheme", "user:p@ssWORD8@proxy:3128", "ssWORD8", "proxy:3128"),
    (
        "x-amz-credential",
        "https://b.s3.amazonaws.com/t.whl?X-Amz-Credential=AMZCRED9%2F20260101%2Fus-east-1&X-Amz-Date=1",
        "AMZCRED9",
        "X-Amz-Date=1",
    ),
    (
        "x-amz-signature",
        "https://b.s3.amazonaws.com/t.whl?X-Amz-Expires=60&X-Amz-Signature=deadbeefSIG10",
        "deadbeefSIG10",
        "X-Amz-Expires=60",
    ),
    (
        "conda-token",
        "https://conda.anaconda.org/t/ab-12345678-CONDA11/pytorch/linux-64",
        "CONDA11",
        "/pytorch/linux-64",
    ),
    ("ghp-folder", f"/home/ann/{GHP}/site-packages", GHP, "/site-packages"),
    ("hf-token", "hf_" + "Zz9" * 10, "hf_" + "Zz9" * 10, ""),
    ("aws-key-id", "AKIA" + "ABCDEFGHIJ234567", "AKIA" + "ABCDEFGHIJ234567", ""),
    ("named-value", "connect failed: password=HUNTER12 host=db", "HUNTER12", "host=db"),
    ("named-value-env", "HF_TOKEN=hfvalue13 python train.py", "hfvalue13", "python train.py"),
    ("bearer", "Authorization: Bearer abcdef.BEARER14.xyz", "BEARER14", "Authorization:"),
    ("sas-sig", "https://acct.blob.core.windows.net/w/x.whl?sv=2022&sig=AZSIG15%3D", "AZSIG15", "sv=2022"),
    (
        "private-key",
        "key: -----BEGIN RSA PRIVATE KEY-----\nMIIEPRIVATE16\n-----END RSA PRIVATE KEY----- tail",
        "MIIEPRIVATE16",
        " tail",
    ),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJKV1QxNyJ9.c2lnbmF0dXJlSldUMTc", "eyJzdWIiOiJKV1QxNyJ9", ""),
]

# Environment variables collected under an allowlisted prefix whose *name* says credential.
SECRET_NAMES = [
    "TORCH_ACCESS_KEY",
    "CUDA_LICENSE_KEY",
    "PIP_PASSWORD",
    "CONDA_TOKEN",
    "TORCH_HUB_SECRET",
    "NVIDIA_API_KEY",
    "PIP_CLIENT_CREDENTIALS",
    "TRITON_PRIVATE_KEY",
    "UV_AUTH_HEADER",
    "HIP_SESSION_ID",
]

# Facts that must survive untouched: they look close to a credential and are not.
NOT_SECRETS = [
    "/usr/lib/x86_64-linux-gnu/libtokenizers.so",
    "/opt/venv/lib/python3.11/site-packages/tokenizers/tokenizers.abi3.so",
    "sk-learn",
    "scikit-learn",
    "tokenizers (>=0.13)",
    "tokenizers: 0.15.0",
    "max_tokens=512",
    "keyring>=23",
    "git@github.com:org/repo.git",
    "git+ssh://github.com/org/repo.git@v1.0#egg=repo",
    "torch (==2.5.1+cu121) ; extra == 'gpu'",
    "/usr/local/bin:/usr/bin:/opt/me@corp/bin",
    "https://wheels.example.invalid/whl/cu121",
    "/etc/passwd: line 1 column 1 (char 0)",  # a JSON error about a file named passwd
    "C:\\Windows\\secrets\\token: not a credential, a path",
    "file:///home/ann/wheels/torch-2.5.1-cp311-cp311-linux_x86_64.whl",
    "/tmp/t/data/model.pt",
    "libMLIRDialectPlugin.so.23.0git",
    "Intel(R) Math Kernel Library Version 2024.0.0",
    "python_version >= '3.8' and platform_machine == 'x86_64'",
    "Author: Ann Example <ann@example.com>",
]
SAFE_NAMES = [
    "MKL_NUM_THREADS",
    "MKL_ENABLE_INSTRUCTIONS",
    "KMP_AFFINITY",
    "PIP_KEYRING_PROVIDER",
    "CUDA_VISIBLE_DEVICES",
    "TORCH_CUDA_ARCH_LIST",
    "PYTORCH_CUDA_ALLOC_CONF",
    "TOKENIZERS_PARALLELISM",
    "author",
]


def test_the_corpus_has_every_kind_the_issue_names() -> None:
    kinds = {kind for kind, *_ in TEXT_CANARIES}
    assert len(kinds) == len(TEXT_CANARIES) >= 19


@pytest.mark.parametrize(("kind", "text", "secret", "kept"), TEXT_CANARIES, ids=[c[0] for c in TEXT_CANARIES])
def test_text_canary_is_redacted_and_the_rest_kept(kind: str, text: str, secret: str, kept: str) -> None:
    out = redact_text(text)
    assert secret not in out
    assert REDACTED in out
    assert kept in out
    assert redact_text(out) == out  # idempotent: envcheck redacts again what the target redacted


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_a_credential_name_is_secret_under_any_prefix(name: str) -> None:
    assert is_secret_name(name)
    assert redact_json({name: "plain-value-123"}) == {name: REDACTED}


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_facts_that_look_close_to_a_secret_survive(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize("name", SAFE_NAMES)
def test_setting_names_are_not_credentials(name: str) -> None:
    assert not is_secret_name(name)
    assert redact_json({name: "4"}) == {name: "4"}


def test_redact_json_reaches_every_string_keys_included() -> None:
    nested: dict[str, Any] = {
        "packages": [
            {
                "requires": ["x @ https://u:NESTED1@h/x.whl"],
                "direct_url": {"url": "https://h/?token=NESTED2"},
            }
        ],
        "python": {"sys_path": [f"/srv/{GHP}"]},
        "https://u:NESTEDKEY3@h": 1,
        "tuple": ("https://u:NESTED4@h/",),
        "error": ValueError("https://u:NESTED5@h/"),  # not JSON: redacted through str()
        "info": {"api_token": ["NESTED6"], "count": 3, "ok": True, "none": None},
    }
    out = json.dumps(redact_json(nested))
    for canary in ("NESTED1", "NESTED2", GHP, "NESTEDKEY3", "NESTED4", "NESTED5", "NESTED6"):
        assert canary not in out
    assert json.loads(out)["info"]["count"] == 3


def test_a_structured_value_under_a_credential_like_name_keeps_its_shape() -> None:
    """A check may name an output ``tokens``: its summary stays a dict (still redacted inside)."""
    summary = {"dtype": "float32", "shape": [2], "values": [1.0, 2.0]}
    assert redact_json({"tokens": summary}) == {"tokens": summary}


def test_redact_json_survives_nesting_deeper_than_its_limit() -> None:
    deep: Any = "https://u:DEEP@h/"
    for _ in range(sys.getrecursionlimit() // 4):
        deep = [deep]
    assert "DEEP" not in json.dumps(redact_json(deep))


def test_emit_writes_the_whole_result_redacted_and_atomically(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    out.write_text("{}", encoding="utf-8")
    result: dict[str, Any] = {
        "stage": "distributions",
        "env": {"TORCH_ACCESS_KEY": "EMIT1", "PIP_PROXY": "u:EMIT2@proxy:3128"},
        "exception": "ImportError: https://u:EMIT3@mirror/x",
        "results": [
            {"name": "custom/x", "error": "RuntimeError: token=EMIT4", "traceback": f"/x/{GHP}/c.py"}
        ],
    }
    emit(str(out), result)
    text = out.read_text(encoding="utf-8")
    for canary in ("EMIT1", "EMIT2", "EMIT3", "EMIT4", GHP):
        assert canary not in text
    assert json.loads(text)["stage"] == "distributions"
    assert not (tmp_path / "result.json.part").exists()
    assert "EMIT1" in result["env"]["TORCH_ACCESS_KEY"]  # the caller's dict is not changed


def test_the_real_environment_is_not_over_redacted() -> None:
    """Every distribution, path and requirement of the test environment passes unchanged (no false
    positive on real metadata: package names, native file paths, markers, direct URLs)."""
    from envcheck.inside.distributions import distributions
    from envcheck.inside.interpreter import python_facts

    packages, error = distributions()
    assert error is None and packages
    raw = {"packages": packages, "python": python_facts()}
    assert redact_json(raw) == raw


@given(st.text())
def test_redaction_is_idempotent_and_total(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@given(st.text(max_size=40), st.sampled_from(TEXT_CANARIES))
def test_a_canary_inside_any_text_is_redacted(prefix: str, canary: tuple[str, str, str, str]) -> None:
    _, text, secret, _ = canary
    assert secret not in redact_text(prefix + " " + text + " ")
