"""Redaction: the one set of rules for everything a person or a file sees.

The transcript (and so the report built from it), the artifacts beside it and the terminal all
pass text through a `Redactor`. It removes the values of secret-named environment variables
(and any secret it is given), and whatever is shaped like a credential:

- private-key blocks of every common format (PEM: RSA, EC, DSA, PKCS#8, encrypted, OpenSSH,
  PGP; PuTTY .ppk), whole, also cut off without their END line, also inside JSON-escaped text
  where a line break is a literal backslash-n;
- cloud keys: AWS access key ids (AKIA..., ASIA...) and the secret after aws_secret_access_key,
  GCP service-account `private_key` and API keys (AIza...), Azure `AccountKey=` and SAS signatures;
- tokens: GitHub, GitLab, Slack, OpenAI, Hugging Face, `Bearer ...`, JWTs;
- `NAME=value` / `"name": "value"` where the name says secret, and passwords in URLs.

Figures are not secrets: "Total input tokens: 204800", `max_tokens=512` and `tokenizer=None`
pass unchanged (tests/data/bench holds real benchmark output that must come through whole).

Live output arrives in pieces split anywhere; `StreamRedactor` releases it a line at a time,
with the state a key block needs across lines.
"""

from __future__ import annotations

import base64
import json
import os
import re
from typing import Any, Callable

REDACTED = "[REDACTED]"

# An environment variable whose value is a secret.
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.I)
_MIN_SECRET = 6  # a shorter value would be found everywhere

# --------------------------------------------------------------------------- private-key blocks

# A line break as it appears in text: real, or JSON-escaped once or more (\n, \\n, \r\n).
_BREAK = r"(?:\r?\n|(?:\\+r)?\\+n)"
# The BEGIN and END lines of a PEM block (PKCS#1, PKCS#8, SEC1, OpenSSH, PGP armour, SSH2, OpenVPN's
# static key), and the first line of a PuTTY key.
_KIND = r"(?:(?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?|OpenVPN Static key V\d)"
_KEY_MARK = re.compile(rf"-{{4,5}} ?(BEGIN|END) {_KIND} ?-{{4,5}}|PuTTY-User-Key-File-\d+:")
_PEM_END = re.compile(rf"-{{4,5}} ?END {_KIND} ?-{{4,5}}")
_MAX_BLOCK = 64_000  # characters from BEGIN to END: a PGP key with subkeys fits; beyond it, cut off
# A line of a key's body: base64 that ends where the line does (so a path such as /etc/ssl/a.pem
# after a BEGIN line is not taken for one), or a header such as Proc-Type: or Comment:.
_B64_LINE = r"[A-Za-z0-9+/=]++(?![^\s\\\"'])"
_HEADER_LINE = r"[A-Za-z][A-Za-z0-9-]{0,30}: ?[^\r\n\\]*+"
# What follows a BEGIN line whose END is not in the text: its headers, then base64 lines and blank lines.
_PEM_REST = re.compile(rf"(?:[ \t]*{_BREAK}[ \t]*{_HEADER_LINE})*+(?:(?:[ \t]*{_BREAK})++[ \t]*{_B64_LINE})*+")
# A PuTTY key after its first line: headers and base64 up to and with its Private-MAC (or Private-Hash).
_PUTTY_REST = re.compile(rf"[^\r\n\\]*+"
                         rf"(?:[ \t]*{_BREAK}[ \t]*(?!Private-(?:MAC|Hash):)(?:{_HEADER_LINE}|{_B64_LINE}))*+"
                         rf"(?:[ \t]*{_BREAK}[ \t]*Private-(?:MAC|Hash):[^\r\n\\]*+)?")
# A base64 line just before an END line whose BEGIN is not in the text (the tail of a cut output).
_B64_BEFORE = re.compile(rf"[A-Za-z0-9+/=]{{1,200}}[ \t]*{_BREAK}[ \t]*\Z")


def _private_keys(s: str) -> str:
    """Every private-key block of `s` as one REDACTED."""
    marks = list(_KEY_MARK.finditer(s))
    if not marks:
        return s
    pieces: list[str] = []
    pos = 0
    for i, m in enumerate(marks):
        if m.start() < pos:  # inside a block already taken
            continue
        kind = m.group(1)
        if kind == "BEGIN":
            after = marks[i + 1] if i + 1 < len(marks) else None
            start = m.start()
            if after is not None and after.group(1) == "END" and after.start() - m.end() <= _MAX_BLOCK:
                stop = after.end()
            else:  # cut off (no END, or another block begins first): its body lines go with it
                stop = _PEM_REST.match(s, m.end()).end()
                if stop == m.end():  # a BEGIN line alone ("it should begin with -----BEGIN ..."): no secret
                    continue
        elif kind == "END":  # its BEGIN was cut off: the base64 lines before it go too
            start, stop = _base64_before(s, m.start(), pos), m.end()
            if start == m.start():
                continue
        else:
            start, stop = m.start(), _PUTTY_REST.match(s, m.end()).end()
        pieces += (s[pos:start], REDACTED)
        pos = stop
    pieces.append(s[pos:])
    return "".join(pieces)


# A PEM block in base64 ("-----BEGIN" encodes to LS0tLS1CRUdJTi): a kubeconfig's client-key-data,
# a Helm value. Only one that holds a private key goes.
_PEM_IN_BASE64 = re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2}")


def _base64_pem(s: str) -> str:
    return _PEM_IN_BASE64.sub(_private_base64_pem, s)


def _private_base64_pem(m: re.Match) -> str:
    head = m.group(0)[:120]
    try:
        text = base64.b64decode(head[: len(head) // 4 * 4]).decode("ascii", "replace")
    except ValueError:
        return m.group(0)
    return REDACTED if "PRIVATE KEY" in text or "OpenVPN Static key" in text else m.group(0)


def _base64_before(s: str, end_at: int, floor: int) -> int:
    start = end_at
    while start > floor:
        window = s[max(floor, start - 240):start]
        m = _B64_BEFORE.search(window)
        if m is None:
            break
        # The n of an escaped line break (backslash, n) belongs to the break, not to the line after it.
        begin = m.start() + (m.start() > 0 and window[m.start() - 1] == "\\")
        start -= len(window) - begin
    return start


# --------------------------------------------------------------------------- the other shapes

# Tokens by their prefix. Each alternative starts with a literal, which the regex engine finds
# quickly; that the token starts a word is checked when one is found (`_token`), since a `\b` in
# front would make the engine try every position.
_TOKENS = re.compile(
    r"sk-[A-Za-z0-9_-]{16,}"  # OpenAI (sk-proj-..., sk-svcacct-...)
    r"|gh[pousr]_[A-Za-z0-9_]{16,}|github_pat_[A-Za-z0-9_]{16,}"  # GitHub
    r"|gl(?:pat|dt|rt|ptt|cbt|soat|oas|ft|imt)-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|xox[abposre]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,}"  # Slack
    r"|hf_[A-Za-z0-9]{20,}"  # Hugging Face
    r"|(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"  # AWS access key ids
    r"|AIza[A-Za-z0-9_-]{35}|ya29\.[A-Za-z0-9_-]{20,}"  # Google API keys, OAuth access tokens
    r"|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{36}"  # PyPI, npm
    r"|dckr_pat_[A-Za-z0-9_-]{20,}|GR1348941[A-Za-z0-9_-]{20}|AGE-SECRET-KEY-1[0-9A-Z]{50,}"  # Docker, GitLab runner, age
    r"|xoxe\.xox[a-z]-[A-Za-z0-9-]{10,}"  # Slack refresh tokens
    r"|hooks\.slack\.com/services/[A-Za-z0-9/]{20,}|discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]{20,}"
    r"|api\.telegram\.org/bot[0-9]+:[A-Za-z0-9_-]{30,}"  # webhook URLs: the path is the secret
    r"|eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*"  # JWTs (header and claims are JSON)
)


def _token(m: re.Match) -> str:
    at = m.start()
    if at and _is_word_char(m.string[at - 1]) and _ANSI_BEFORE.search(m.string, max(0, at - 16), at) is None:
        return m.group(0)
    return REDACTED


_ANSI_BEFORE = re.compile(r"\x1b\[[0-9;]*m\Z")  # a colour code ends just before: `grep --color`, `env` in colour


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


# KEY=value / TOKEN: value forms in commands, env dumps and config files.
# `==` is a version pin (`tiktoken==0.14.0`), not an assignment.
# Name parts are bounded so a long run like "keykeykey..." costs linear time, not quadratic.
# The name ends with the secret word or a _SUFFIX after it (API_KEY_ID), so a tokenizer=, a
# "Total input tokens:" or a max_total_num_tokens= is not taken for a secret.
# The separator stays on its line: "Enter password:" and the line after it are not a pair.
_ASSIGNMENT = (r"([A-Z0-9_]{0,40}(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|(?<=_)PWD)"
               r"(?:_[A-Z0-9]{1,20}){0,4})([ \t]*[=:](?!=)[ \t]*)([\"']?)([^\s\"']{4,})")
_ASSIGNMENT_AT = re.compile("(?i)" + _ASSIGNMENT)  # matched where a name starts (see _assignments)
_ASSIGNMENT_ANYWHERE = re.compile(r"(?i)\b" + _ASSIGNMENT)
# In lowered text: a secret word with what must follow it in an assignment.
_SECRET_WORD = re.compile(r"(?:key|token|secret|passw(?:or)?d|credentials?|_pwd)(?:_[a-z0-9]{1,20}){0,4}"
                          r"[ \t]*[=:](?!=)")
_NAME_CHAR_SET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_NAME_CHARS = re.compile(r"[A-Za-z0-9_]*")


def _assignments(s: str) -> str:
    """The KEY=value forms of `s`. The regex alone would try every word; here it is tried only
    where a name holding a secret word and followed by `=` or `:` starts."""
    low = s.lower()
    if len(low) != len(s):  # lowering moved the positions (rare letters): the slow way
        return _ASSIGNMENT_ANYWHERE.sub(_assignment, s)
    pieces: list[str] = []
    pos, tried, skip_to = 0, -1, 0
    for hit in _SECRET_WORD.finditer(low):
        word = hit.start()
        if word < max(pos, skip_to):
            continue
        start, floor = word, max(pos, word - 41)
        while start > floor and s[start - 1] in _NAME_CHAR_SET:
            start -= 1
        if word - start > 40:  # the bounded regex matches no name this long, nor any later part of it
            skip_to = _NAME_CHARS.match(s, word).end()
            continue
        if start == tried or (start and _is_word_char(s[start - 1])):
            continue  # tried already, or not where a word starts
        tried = start
        m = _ASSIGNMENT_AT.match(s, start)
        if m is not None:
            pieces += (s[pos:start], _assignment(m))
            pos = m.end()
    if not pieces:
        return s
    pieces.append(s[pos:])
    return "".join(pieces)


_JSON_NAME = r"(?:[a-z0-9_-]{0,40}(?:key|token|secret|password|passwd|auth|credentials?)|private_key_id)"
# "name": "value", also with its quotes escaped (JSON inside a JSON string: \"name\": \"value\"), and
# 'name': 'value' (a Python dict's repr). The value may hold escapes (\u0021) but not its own quote.
_JSON_SECRET = re.compile(r'(?i)((\\*")' + _JSON_NAME + r'\2\s*:\s*(\\*"))((?:[^"\\]|\\[^"\\]){4,})(\3)')
_REPR_SECRET = re.compile(r"(?i)((\\*')" + _JSON_NAME + r"\2\s*:\s*(\\*'))((?:[^'\\]|\\[^'\\]){4,})(\3)")
_JSON_ENV_PAIR = re.compile(r'(?i)("name"\s*:\s*"[a-z0-9_]{0,40}(?:key|token|secret|password|passwd)[a-z0-9_]{0,40}"'
                            r'\s*,\s*"value"\s*:\s*")([^"]*)(")')
_AUTHORIZATION = re.compile(r"(?i)\b(authorization\s*[:=]\s*)(?:(?:bearer|basic|token)\s*)?([^\s\"',]+)")
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}")
_SECRET_FLAG = re.compile(r"(?i)(--(?:password|passwd|token|api-key|secret|client-secret|secret-key|access-key)[= ])"
                          r"(\S+)")
_URL_PASSWORD = re.compile(r"(://[^/\s:@]*:)([^@\s/]+)(@)")
# The AWS secret after its name, also with only spaces between (`aws configure list`-like tables, ini files).
_AWS_SECRET = re.compile(r"(?i)\b((?:aws_?)?secret_?access_?key[\"']?[ \t]*[=:,]?[ \t]*[\"']?)([A-Za-z0-9/+]{40})"
                         r"(?![A-Za-z0-9/+=])")
# Signatures of a request or a signed URL: Azure SAS (sig=, SharedAccessSignature=), AWS SigV4 and
# presigned URLs (Signature=, X-Amz-Signature=), GCS (X-Goog-Signature=), CloudFront (Signature=).
# AccountKey= of an Azure connection string is an assignment above.
_SIGNATURE = re.compile(r"(?i)(\bSharedAccessSignature=|[?&;]sig=|\b(?:X-Amz-|X-Goog-)?Signature=)([^\s&;,\"']{8,})")


def _keep_around(m: re.Match) -> str:
    return f"{m.group(1)}{REDACTED}{m.group(3)}"


def _keep_name(m: re.Match) -> str:
    return f"{m.group(1)}{REDACTED}"


# A count of tokens is a figure, not a credential: max_token=512, TOKEN_LIMIT: 8192.
_FIGURE = re.compile(r"[0-9][0-9.,]*[,;)]*")
# Values that stand for no secret, whatever the name: a setting left unset (api_key=None), a reference
# to one kept elsewhere ($HF_TOKEN, ${{ secrets.X }}, an environment variable's name), a placeholder
# (<your-token>, YOUR_KEY, EMPTY, (hidden)), something masked already (****, hf_****), a path of a
# file that holds it (KEY_FILE=/etc/ssl/private/server.key), a fingerprint, a call in source code.
_NOT_A_SECRET = re.compile(
    r"(?:(?:None|True|False|null|true|false|nil|EMPTY)"
    r"|\$\{\{.*|\$\{?[A-Za-z_][A-Za-z0-9_.]*\}?|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:KEY|TOKEN|SECRET|PASSWORD)"
    r"|<[^<>]*>?|YOUR_[A-Z0-9_]+|\((?:hidden|none|not set|redacted)\)|(?i:password|passwd|token|secret|key)"
    r"|[A-Za-z]{0,4}_?\*{3,}"
    r"|~?/(?:root|home|etc|var|usr|opt|tmp|data|mnt|srv|run|proc|sys|models|workspace|scratch|lib|snap|media)"
    r"(?:/[\w.@%+-]+)*/?"
    r"|(?:[0-9A-Fa-f]{2}:){7,}[0-9A-Fa-f]{2}"
    r"|[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z0-9_.]*[(\[].*)[`'\".,;:)\]]*",
    re.S)
_PUBLIC_BEFORE = re.compile(r"(?i)(?:public|pub|sig)[ _-]?\Z")


def _assignment(m: re.Match) -> str:
    name, value = m.group(1), m.group(4)
    low = name.lower()
    if "token" in low and "key" not in low and _FIGURE.fullmatch(value):
        return m.group(0)
    if value.startswith(REDACTED) or _not_a_secret(value) or low.endswith("_name"):
        return m.group(0)
    if _PUBLIC_BEFORE.search(m.string, max(0, m.start() - 8), m.start()) or low.startswith(("public", "pub_")):
        return m.group(0)  # a public key, a module's signing key: published, not secret
    return f"{name}{m.group(2)}{m.group(3)}{REDACTED}"


def _not_a_secret(value: str) -> bool:
    return _NOT_A_SECRET.fullmatch(value) is not None


def _json_secret(m: re.Match) -> str:
    if _not_a_secret(m.group(4)):
        return m.group(0)
    return f"{m.group(1)}{REDACTED}{m.group(5)}"


def _secret_flag(m: re.Match) -> str:
    value = m.group(2).strip("\"'")
    if len(value) < 4 or _not_a_secret(value):  # "--password via the CLI is insecure"
        return m.group(0)
    return f"{m.group(1)}{REDACTED}"


def _authorization(m: re.Match) -> str:
    if _not_a_secret(m.group(2)):  # "Authorization: Bearer <redacted>"
        return m.group(0)
    return f"{m.group(1)}{REDACTED}"


def _json_forms(s: str) -> str:
    if '"' in s:
        s = _JSON_SECRET.sub(_json_secret, s)
    if "'" in s:
        s = _REPR_SECRET.sub(_json_secret, s)
    return s


def _json_env_pairs(s: str) -> str:
    return _JSON_ENV_PAIR.sub(_keep_around, s)


def _authorizations(s: str) -> str:
    return _AUTHORIZATION.sub(_authorization, s)


def _bearers(s: str) -> str:
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", s)


def _tokens(s: str) -> str:
    return _TOKENS.sub(_token, s)


def _secret_flags(s: str) -> str:
    return _SECRET_FLAG.sub(_secret_flag, s) if "--" in s else s


def _url_passwords(s: str) -> str:
    return _URL_PASSWORD.sub(_keep_around, s)


def _aws_secrets(s: str) -> str:
    return _AWS_SECRET.sub(_keep_name, s)


def _signatures(s: str) -> str:
    return _SIGNATURE.sub(_keep_name, s)


_SECRET_WORDS = ("key", "token", "secret", "passw", "credential", "_pwd")
# The rules in order, each with the fragments of the lowered text one of which it needs: most text
# holds none, and a fragment is found much faster than a case-blind regex scans.
_RULES: list[tuple[tuple[str, ...], Callable[[str], str]]] = [
    (("ls0tls1crudjti",), _base64_pem),
    (_SECRET_WORDS, _assignments),
    ((*_SECRET_WORDS, "auth"), _json_forms),
    (('"name"',), _json_env_pairs),
    (("authorization",), _authorizations),
    (("bearer",), _bearers),
    ((), _tokens),  # literal prefixes: fast enough on any text
    (_SECRET_WORDS, _secret_flags),
    (("://",), _url_passwords),
    (("secret_access", "secretaccess"), _aws_secrets),
    (("sig=", "signature="), _signatures),
]

_FRAGMENTS = frozenset(f for needs, _ in _RULES for f in needs)


class Redactor:
    """Removes secrets from text: known secret values, and anything shaped like a credential."""

    def __init__(self, secrets: list[str] | None = None, environ: dict[str, str] | None = None):
        env = os.environ if environ is None else environ
        self._values: list[str] = []
        for value in [v for k, v in env.items() if _SECRET_NAME.search(k)] + list(secrets or []):
            self.add(value)

    def add(self, secret: str) -> None:
        if not secret or len(secret) < _MIN_SECRET:
            return
        # As it is, as it reads inside JSON text (a tool's result rendered as JSON for the model), and
        # line by line when it has several (live output is redacted a line at a time). Not the lines
        # any key of its type shares (-----BEGIN ..., Comment: ...): they would blind the block rules
        # to the body of another key.
        forms = [secret, json.dumps(secret, ensure_ascii=False)[1:-1]]
        if "\n" in secret:
            forms += [line.strip() for line in secret.splitlines()
                      if len(line.strip()) >= _MIN_SECRET and "-----" not in line and ": " not in line]
        for form in forms:
            if form not in self._values:
                self._values.append(form)
        self._values.sort(key=len, reverse=True)  # longest first: a secret holding another goes whole

    def text(self, s: str) -> str:
        if len(s) < _MIN_SECRET:  # too short to hold a credential
            return s
        # Key blocks first: a known value can be one line of a key, and the same line (an OpenSSH
        # key's first) starts other keys too; replaced alone, it would hide their blocks from the rule.
        if "PRIVATE KEY" in s or "PuTTY-User-Key-File-" in s or "Static key" in s:
            s = _private_keys(s)
        for v in self._values:
            if v in s:
                s = s.replace(v, REDACTED)
        # A rule's fragments are looked for in the text as it came: what a rule puts in (REDACTED)
        # holds none of them, so no rule can need one that only an earlier rule made.
        low = s.lower()
        present = {f for f in _FRAGMENTS if f in low}
        for needs, rule in _RULES:
            if not needs or not present.isdisjoint(needs):
                s = rule(s)
        return s

    def value(self, obj: Any) -> Any:
        """Redact every string inside a JSON-like value; keys named like secrets lose their value."""
        t = type(obj)
        if t is str:
            return self.text(obj)
        if t is dict:
            out = {}
            for k, v in obj.items():
                tv = type(v)
                if tv is str:
                    out[k] = REDACTED if v and _secret_key(k) and not _not_a_secret(v) else self.text(v)
                elif tv in _SCALARS:
                    out[k] = v
                else:
                    out[k] = self.value(v)
            return out
        if t is list or t is tuple:
            return [self.value(v) for v in obj]
        return obj

_SCALARS = (int, float, bool, type(None))
_secret_keys: dict[Any, bool] = {}


# A mapping key that names a secret: it ends with the secret word (api_key, access_token, password);
# "tokenizer", "total_input_tokens" or "keyboard" do not.
_SECRET_KEY = re.compile(r"(?i)(?:^|[_-])(?:api[_-]?)?(?:key|token|secret|password|passwd|credentials?|auth)$"
                         r"|^(?:authorization|apikey|passphrase|private_key_id|accountkey)$")


def _secret_key(key: Any) -> bool:
    """Whether a mapping key names a secret (cached: sessions use few distinct keys)."""
    hit = _secret_keys.get(key)
    if hit is None:
        hit = _secret_keys[key] = isinstance(key, str) and _SECRET_KEY.search(key) is not None
    return hit


# --------------------------------------------------------------------------- streams

# A line that goes on a key block opened on an earlier line: base64, a header, or blank.
_BLOCK_LINE = re.compile(rf"[ \t]*(?:{_HEADER_LINE}|[A-Za-z0-9+/=]*+)[ \t]*")
_PUTTY_LAST = re.compile(r"[ \t]*Private-(?:MAC|Hash):")


class StreamRedactor:
    """Redacts text that arrives in pieces split anywhere: a command's live output, a model's stream.

    `feed` gives back the whole lines it completed, redacted; a line is what a terminal leaves of
    it, the part after its last carriage return. A key block spans lines: the lines that go on one
    opened earlier are dropped, and lines of base64 are held back until a line that is not base64
    releases them or an END line shows they were the tail of a key whose BEGIN line was never seen.
    `preview` is the line still arriving, as far as it is safe to show: redacted, and without its
    last word while that may be a secret still coming in.
    """

    MAX_LINE = 16_384  # a line without a newline is broken here (at a space if it has one)
    MAX_HELD = 400  # base64 lines held back at most (a PGP key with subkeys is ~200): more are not a key
    HOLD = 6  # a last word this long may be the start of a secret: shown once it has ended

    def __init__(self, redactor: Redactor):
        self.redactor = redactor
        self.partial = ""
        self._block: str | None = None  # "pem" or "putty" while inside a key block
        self._held: list[str] = []  # base64 lines that may be the tail of a key

    def feed(self, text: str) -> list[str]:
        pieces = (self.partial + text).split("\n")
        self.partial = _overwritten_dropped(pieces.pop())
        if len(self.partial) > self.MAX_LINE:
            cut = self.partial.rfind(" ", 0, self.MAX_LINE) + 1 or self.MAX_LINE
            pieces.append(self.partial[:cut])
            self.partial = self.partial[cut:]
        out: list[str] = []
        for line in pieces:
            self._line(_shown(line), out)
        return out

    def preview(self) -> str:
        if self._block is not None or not self.partial:
            return ""
        line = _shown(self.partial)
        opening = _block_opening(line, ends_line=False)  # what follows it is still arriving
        if opening is not None:
            return self.redactor.text(line[:opening.start()]) + REDACTED
        shown = self.redactor.text(line)
        last = _LAST_WORD.search(shown)
        if last is not None and len(last.group()) >= self.HOLD:
            return shown[:last.start()]
        return shown

    def finish(self) -> list[str]:
        """The end of the stream: the line still open, whole, and any lines held back."""
        rest, self.partial = _shown(self.partial), ""
        out: list[str] = []
        if rest:
            self._line(rest, out)
        self._release(out)
        self._block = None
        return out

    def _line(self, line: str, out: list[str]) -> None:
        if self._block is not None:
            if self._block == "pem" and (end := _PEM_END.search(line)) is not None:
                self._block = None
                rest = self.redactor.text(line[end.end():])
                if rest.strip():
                    out.append(REDACTED + rest)
                return
            if _BLOCK_LINE.fullmatch(line) or _ENDS_IN_BASE64.search(line):
                if self._block == "putty" and _PUTTY_LAST.match(line):
                    self._block = None
                return
            self._block = None  # a block cut off: this line is ordinary output again
        if self._held or _KEY_BODY_LINE.fullmatch(line):
            if _B64_ONLY.fullmatch(line) and len(self._held) < self.MAX_HELD:
                self._held.append(line)
                return
            end = _PEM_END.search(line)
            if end is not None:  # the held lines were a key's: they go with its END
                self._held.clear()
                out.append(self.redactor.text(line[:end.start()]) + REDACTED + self.redactor.text(line[end.end():]))
                return
            self._release(out)
        opening = _block_opening(line)
        if opening is None:
            out.append(self.redactor.text(line))
            return
        self._block = "pem" if opening.group(1) == "BEGIN" else "putty"
        out.append(self.redactor.text(line[:opening.start()]) + REDACTED)

    def _release(self, out: list[str]) -> None:
        out.extend(self.redactor.text(line) for line in self._held)
        self._held.clear()


# A key's body line (base64 as PEM and OpenSSH wrap it: 64 or 70 characters), and any base64 line
# after one; a line of a key block that ends in base64 (behind a log line's time stamp).
_KEY_BODY_LINE = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")
_B64_ONLY = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_ENDS_IN_BASE64 = re.compile(r"(?:^|[\s:])[A-Za-z0-9+/]{16,}={0,2}[ \t]*\Z")
_LAST_WORD = re.compile(r"\S+\Z")


def _shown(line: str) -> str:
    """What a terminal leaves of a line: the part after its last carriage return (\\r\\n ends it whole)."""
    line = line.removesuffix("\r")
    return line.rsplit("\r", 1)[-1] if "\r" in line else line


def _overwritten_dropped(partial: str) -> str:
    """A line still arriving, less what a carriage return has since sent the cursor back over."""
    cut = partial.rfind("\r", 0, len(partial) - 1)
    return partial if cut < 0 else partial[cut + 1:]


def _block_opening(line: str, ends_line: bool = True) -> re.Match | None:
    """The first line of a key block that goes on below this line, if one begins on it: a BEGIN line
    that ends the line (one with more after it is prose, or a whole block on one line), or PuTTY's."""
    if "PRIVATE KEY" not in line and "PuTTY-User-Key-File-" not in line and "Static key" not in line:
        return None
    last = None
    for last in _KEY_MARK.finditer(line):
        pass
    if last is None or last.group(1) == "END":
        return None
    if ends_line and last.group(1) == "BEGIN" and line[last.end():].strip(" \t\"'"):
        return None
    return last
