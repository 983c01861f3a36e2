"""PowerShell's parser for the subset of commands envcheck writes, from its documented rules
(about_Quoting_Rules, about_Parsing), for the tests: no PowerShell runs on this machine."""

from __future__ import annotations

import re
from dataclasses import dataclass

# about_Quoting_Rules: a single-quoted string is verbatim; a quote inside is written twice. PowerShell's
# tokenizer counts the typographic single quotes as single quotes too (CharExtensions.IsSingleQuote), and
# the typographic double quotes as double quotes.
PS_SINGLE = "'\u2018\u2019\u201a\u201b"
PS_DOUBLE = '"\u201c\u201d\u201e'
# about_Parsing (argument mode): what starts an expression, a variable, an escape, a sub-expression, a
# redirection, a comment, or ends a statement or a word.
PS_SPECIAL = frozenset("`$@(){}[],;|&<>#" + PS_SINGLE + PS_DOUBLE)
PS_SPACE = " \t"
_PS_VARIABLE = re.compile(r"\$(?:env:)?[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Token:
    """One PowerShell token: ``kind`` is ``string`` (a single-quoted literal, ``text`` its value), ``bare``
    (a bare word), ``variable``, ``call`` (the call operator ``&``), ``assign``, ``comma`` or ``end``
    (``;``)."""

    kind: str
    text: str


def powershell_tokens(line: str) -> list[Token]:
    """``line`` tokenized by PowerShell's rules for single-quoted strings, bare words, variables, ``&``,
    ``=``, ``,`` and ``;``. Anything else (an open quote, a double quote, a ``$`` or backtick in a bare
    word, two tokens without a space between them) raises ``ValueError``: envcheck writes none of it."""
    out: list[Token] = []
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c in PS_SPACE:
            i += 1
            continue
        if c in ",;":
            out.append(Token("comma" if c == "," else "end", c))
            i += 1
            continue
        if c in PS_SINGLE:
            # Tokenizer.ScanStringLiteral: a quote followed by a quote is one quote (the second) of the
            # value; a lone quote ends the string.
            value, j = [], i + 1
            while True:
                if j >= n:
                    raise ValueError(f"unterminated string in {line!r}")
                if line[j] in PS_SINGLE:
                    if j + 1 < n and line[j + 1] in PS_SINGLE:
                        value.append(line[j + 1])
                        j += 2
                        continue
                    j += 1
                    break
                value.append(line[j])
                j += 1
            out.append(Token("string", "".join(value)))
        else:
            j = i
            while j < n and line[j] not in PS_SPACE and line[j] not in ",;":
                j += 1
            word = line[i:j]
            if word == "&":
                out.append(Token("call", word))
            elif word == "=":
                out.append(Token("assign", word))
            elif _PS_VARIABLE.fullmatch(word):
                out.append(Token("variable", word))
            elif word == "--%" or any(ch in PS_SPECIAL for ch in word):
                raise ValueError(f"{word!r} in {line!r} is not a literal bare word")
            else:
                out.append(Token("bare", word))
        i = j
        if i < n and line[i] not in PS_SPACE and line[i] not in ",;":
            raise ValueError(f"two tokens run together at {i} in {line!r}")
    return out


def powershell_statements(line: str) -> list[list[Token]]:
    """``line``'s statements (split at ``;``), each a list of tokens."""
    statements: list[list[Token]] = [[]]
    for token in powershell_tokens(line):
        if token.kind == "end":
            statements.append([])
        else:
            statements[-1].append(token)
    return [s for s in statements if s]


def powershell_command(statement: list[Token]) -> list[str]:
    """The program and arguments a command statement runs: a first word that is a quoted path or a
    variable needs the call operator (else PowerShell reads an expression); each later word is a literal
    or one of envcheck's bare words."""
    if statement[0].kind == "call":
        assert statement[1].kind in ("string", "variable"), statement
        statement = statement[1:]
    else:
        assert statement[0].kind == "bare", statement
    assert all(t.kind in ("string", "bare", "variable") for t in statement), statement
    return [t.text for t in statement]
