"""The one credential redactor: every string that leaves the target passes through ``redact_json``.

``result.emit`` applies it to the whole result before writing it (probe and suite alike), so a field added
tomorrow cannot bypass it; envcheck applies the same functions (``envcheck.core.redact`` re-exports them) to
what it reads back from a target (the result file, the stderr tail) and to the lines it prints.

What counts as a secret (docs/guarantees.md):
- a value whose *name* looks like a credential (``*_TOKEN``, ``*_KEY``, ``*PASSWORD*``, ``*SECRET*`` ...),
  under any prefix: ``TORCH_ACCESS_KEY`` and ``CUDA_LICENSE_KEY`` are as secret as ``AWS_SECRET_ACCESS_KEY``;
- in any text: URL user-info (``https://user:PASS@host``, ``git+https://oauth2:TOKEN@host``, a password
  holding ``@``), user-info without a scheme (``PIP_PROXY=user:PASS@proxy:3128``), secret query parameters
  (``?token=``, ``X-Amz-Credential``, ``X-Amz-Signature``, ``sig=``), ``name=value`` pairs whose name is a
  credential, ``Authorization:`` / ``Bearer`` values, a conda channel token (``/t/TOKEN/``), PEM private
  keys, and the shapes of well-known tokens (``ghp_``, ``github_pat_``, ``hf_``, ``AKIA``, ``sk-`` ...).

Not secret, and kept: paths such as ``/usr/lib/libtokenizers.so``, package names (``tokenizers``,
``sk-learn``), ``MKL_*`` and other allowlisted settings, ``git@host:org/repo`` (a user name, no password).

Runs in the target: standard library only, Python 3.8.
"""

import re

REDACTED = "<redacted>"

# Names that hold a credential under any prefix. `TOKEN(?!IZ)`: `tokenizer` names a library, not a token;
# `AUTH(?!OR)`: `author` is metadata. `KEY` counts only as a whole word (`TORCH_ACCESS_KEY`, `key`), so
# `PIP_KEYRING_PROVIDER` or `monkey` stay.
_SECRET_NAME = re.compile(
    r"TOKEN(?!IZ)|SECRET|PASSW|PASSPHRASE|CREDENTIAL|PRIVATE|AUTH(?!OR)|SESSION|COOKIE|SIGNATURE|"
    r"API_?KEY|(?:^|[_.-])KEYS?(?:$|[_.-])",
    re.I,
)

# RFC 3986 authority: user-info ends at the *last* `@` before the path, so a password holding `@` goes
# whole (`https://user:p@ss@host` -> `https://<redacted>@host`).
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s\"'<>]*@")
# user:password@host without a scheme (pip's `--proxy`, `PIP_PROXY`): only where a token starts, and only
# with a password, so `git@github.com:org/repo` (a user name) stays.
_BARE_USERINFO = re.compile(
    r"(?:^|(?<=[\s=,;'\"(<\[]))[^\s/@:=,;'\"<>()\[\]]+:[^\s/'\"<>]*@(?=[A-Za-z0-9\[])"
)
_QUERY_SECRET = re.compile(
    r"(?P<key>[?&;][^=&;#\s]*?(?:token|secret|passw|key|sig|auth|cred|session)[^=&;#\s]*)=[^&;#\s\"'<>]+",
    re.I,
)
# `password=x`, `HF_TOKEN: x`, `aws_secret_access_key = x` in free text (exception messages, stderr).
# The name must *end* with the credential word: `max_tokens=512` and `tokenizers: 0.15` stay; a name
# inside a path (`/etc/passwd: line 1`, a JSON error about that file) is a file name, not a key.
_NAMED_VALUE = re.compile(
    r"(?P<key>(?<![\w./\\-])[\w.-]*(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|"
    r"private[_-]?key|credentials?)\b)(?P<sep>\s*[=:]\s*)(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;&\"'<>]+)",
    re.I,
)
_AUTH_HEADER = re.compile(
    r"(?P<key>\bauthorization\s*[:=]\s*)(?:(?:Bearer|Basic|Token|Digest)\s+)?[^\s,;\"'<>]+|"
    r"(?P<bearer>\bBearer\s+)[A-Za-z0-9._~+/-]{8,}=*",
    re.I,
)
# anaconda.org channel tokens: https://conda.anaconda.org/t/<TOKEN>/channel (conda's own `/t/` convention).
_CONDA_TOKEN = re.compile(r"/t/(?=[A-Za-z0-9-]*[0-9])[A-Za-z0-9-]{8,}(?=/|$)")
_PRIVATE_KEY = re.compile(r"-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE KEY-----|$)")
# Documented token formats (GitHub, Hugging Face, Slack, AWS, OpenAI-style, GitLab, PyPI, npm, Google, JWT).
_TOKEN_SHAPES = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{20,}|"
    r"xox[abposr]-[A-Za-z0-9-]{10,}|(?:AKIA|ASIA)[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{20,}|"
    r"glpat-[A-Za-z0-9_-]{20,}|pypi-[A-Za-z0-9_-]{40,}|npm_[A-Za-z0-9]{30,}|AIza[0-9A-Za-z_-]{35}|"
    r"ya29\.[0-9A-Za-z_-]{20,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"
)

# Redaction runs over every string of every result written, several times per probe: the strings repeat
# from one write to the next (paths, requirements), so a bounded memo makes the later writes cheap.
_MEMO = {}  # type: dict
_MEMO_MAX = 1 << 16
_MEMO_LONGEST = 4096
_MAX_DEPTH = 100


def is_secret_name(name):
    # type: (str) -> bool
    """Whether a variable or key named ``name`` holds a credential, whatever its prefix."""
    return _SECRET_NAME.search(name) is not None


def _redact_named_value(match):
    # type: (object) -> str
    return match.group("key") + match.group("sep") + REDACTED  # type: ignore[attr-defined]


def _redact_auth(match):
    # type: (object) -> str
    prefix = match.group("key") or match.group("bearer")  # type: ignore[attr-defined]
    return prefix + REDACTED


def _redact_uncached(value):
    # type: (str) -> str
    if "@" in value:
        if "://" in value:
            value = _URL_USERINFO.sub(lambda m: m.group("scheme") + REDACTED + "@", value)
        if ":" in value:
            value = _BARE_USERINFO.sub(REDACTED + "@", value)
    if "=" in value:
        value = _QUERY_SECRET.sub(lambda m: m.group("key") + "=" + REDACTED, value)
    if "=" in value or ":" in value:
        value = _NAMED_VALUE.sub(_redact_named_value, value)
    lowered = value.lower()
    if "bearer" in lowered or "authorization" in lowered:
        value = _AUTH_HEADER.sub(_redact_auth, value)
    if "/t/" in value:
        value = _CONDA_TOKEN.sub("/t/" + REDACTED, value)
    if "PRIVATE KEY-----" in value:
        value = _PRIVATE_KEY.sub(REDACTED, value)
    return _TOKEN_SHAPES.sub(REDACTED, value)


def redact_text(value):
    # type: (str) -> str
    """``value`` with every credential it holds replaced by ``REDACTED``; the rest unchanged."""
    cached = _MEMO.get(value)
    if cached is not None:
        return cached
    out = _redact_uncached(value)
    if len(value) <= _MEMO_LONGEST:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        _MEMO[value] = out
    return out


def _secret_value(value, depth):
    # type: (object, int) -> object
    """The value kept under a credential's name: numbers and flags say nothing; text is replaced whole."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_secret_value(v, depth + 1) for v in value] if depth < _MAX_DEPTH else REDACTED
    if isinstance(value, dict):
        return redact_json(value, depth + 1)
    return REDACTED


def redact_json(value, _depth=0):
    # type: (object, int) -> object
    """A JSON-ready copy of ``value`` with every credential removed.

    Every string is passed through ``redact_text``, keys included; the value of a key that names a
    credential (``is_secret_name``) is replaced whole. Anything that is not JSON (an exception, a dtype a
    check recorded) becomes its redacted ``str()`` here, so ``json.dump`` never stringifies an unredacted
    object. Nesting deeper than ``_MAX_DEPTH`` is cut to ``REDACTED``. Never raises for JSON-like input.
    """
    if isinstance(value, str):
        return redact_text(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if _depth >= _MAX_DEPTH:
        return REDACTED
    if isinstance(value, (list, tuple)):
        return [redact_json(v, _depth + 1) for v in value]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            name = key if isinstance(key, str) else str(key)
            if is_secret_name(name):
                out[redact_text(name)] = _secret_value(item, _depth + 1)
            else:
                out[redact_text(name)] = redact_json(item, _depth + 1)
        return out
    try:
        text = str(value)
    except Exception:  # a user's object whose __str__ raises: its type is all that is safe to say
        text = "<%s>" % type(value).__name__
    return redact_text(text)
