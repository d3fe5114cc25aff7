"""Redaction: the one set of rules for everything a person or a file sees.

The transcript (and so the report built from it), the artifacts beside it and the terminal all
pass text through a `Redactor`. It removes the values of secret-named environment variables
(and any secret it is given), and whatever is shaped like a credential:

- private-key blocks of every common format (PEM: RSA, EC, DSA, PKCS#8, encrypted, OpenSSH,
  PGP; PuTTY .ppk), whole, also cut off without their END line, also inside JSON-escaped text
  where a line break is a literal backslash-n;
- cloud keys: AWS access key ids (AKIA..., ASIA...) and the secret after aws_secret_access_key,
  GCP service-account `private_key` and API keys (AIza...), Azure `AccountKey=` and SAS signatures;
- tokens: GitHub, GitLab, Slack, OpenAI, Hugging Face, Mailgun, `Bearer ...`, JWTs, also when a
  terminal wrapped one at the end of a line; base64 of JSON that holds a secret (a registry's
  .dockerconfigjson, what `aws ecr get-login-password` prints); password hashes ($6$..., bcrypt);
- `NAME=value` / `"name": "value"` / `'name' => 'value'` where the name says secret, and passwords
  in URLs;
- passwords on command lines, each by its program and option: `mysql -pX`, `sshpass -p`, `curl -u
  user:X` and `-b` cookies, `redis-cli -a`, `ipmitool -P`, `docker`/`podman`/`az login -p`, `twine
  -p`, `ldapsearch -w`, `sqlcmd -P`, `mongosh -p`, `smbclient -U user%X`, `keytool -storepass`,
  `nmcli ... password`, `openssl -passin pass:X` and `openssl passwd X`, `htpasswd -b`, `wandb login
  KEY`, `ngrok config add-authtoken`, `cloudflared service install`, `poetry config http-basic`,
  `echo X | sudo -S` (or chpasswd, --password-stdin); and long options such as --password, --token;
- files by their key words: .netrc's `password`, .pgpass lines, .my.cnf's `password==x`, `pass:`,
  .npmrc's `_auth`, Cookie and Set-Cookie headers, a URL's `auth=`.

A value with no name, key word or shape (an account key alone on its line) is hidden only when it
is known: an environment variable's, or one given.

Figures are not secrets: "Total input tokens: 204800", `max_tokens=512` and `tokenizer=None`
pass unchanged (tests/data/bench holds real benchmark output that must come through whole).

Live output arrives in pieces split anywhere; `StreamRedactor` releases it a line at a time,
with the state a key block or a wrapped token needs across lines.

Where things are: the patterns are data in redact_patterns.py; what each kind of match keeps is in
redact_rules.py and redact_wrapped.py; this module holds the rules' order, the choice of the rules a
text needs, and `Redactor`; redact_stream.py holds `StreamRedactor`, imported from here.
"""

from __future__ import annotations

import base64
import json
import os
import re
from typing import Any, Callable

from agent.record.redact_patterns import (
    REDACTED, _BASE64_JSON, _COMMAND_FRAGMENTS, _MIN_SECRET, _SECRET_KEY, _SECRET_NAME, _SECRET_WORDS,
)
from agent.record.redact_rules import (
    _assignments, _authorizations, _aws_secrets, _base64_pem, _bearers, _command_lines, _cookies, _ini_passwords,
    _is_word_char, _json_env_pairs, _json_forms, _mailgun_keys, _netrc, _not_a_secret, _npmrc_auth, _password_hashes,
    _pgpass, _private_keys, _secret_flags, _signatures, _tokens, _url_auth, _url_passwords,
)
# StreamRedactor lives beside this module; it is imported from here, with the Redactor it takes.
from agent.record.redact_stream import StreamRedactor  # noqa: F401
from agent.record.redact_wrapped import _wrapped_tokens

__all__ = ["REDACTED", "Redactor", "StreamRedactor"]


# --------------------------------------------------------------------------- base64 of JSON


def _base64_json(s: str) -> str:
    return _BASE64_JSON.sub(_secret_base64_json, s)


def _secret_base64_json(m: re.Match) -> str:
    blob = m.group(0)
    at = m.start()
    if at and (_is_word_char(m.string[at - 1]) or m.string[at - 1] in "+/"):
        return blob  # the middle of some other base64
    data = blob.rstrip("=")
    data = data[: len(data) - (len(data) % 4 == 1)]  # a cut-off blob: its odd last character decodes to nothing
    try:
        text = base64.b64decode(data + "=" * (-len(data) % 4), altchars=b"-_" if "-" in data or "_" in data
                                else None).decode("utf-8", "ignore")
    except ValueError:
        return blob
    return REDACTED if _shapes(text) != text else blob


# --------------------------------------------------------------------------- the rules in order

# The rules in order, each with the fragments of the lowered text one of which it needs: most text
# holds none, and a fragment is found much faster than a case-blind regex scans.
_RULES: list[tuple[tuple[str, ...], Callable[[str], str]]] = [
    ((), _wrapped_tokens),  # first: the rules below would hide the first line's piece alone
    (("ls0tls1crudjti",), _base64_pem),
    (_SECRET_WORDS, _assignments),
    ((*_SECRET_WORDS, "auth"), _json_forms),
    (('"name"',), _json_env_pairs),
    (("authorization",), _authorizations),
    (("bearer",), _bearers),
    ((), _tokens),  # literal prefixes: fast enough on any text
    (("key",), _mailgun_keys),
    (("$", "sha}"), _password_hashes),
    (("eyj",), _base64_json),
    (_SECRET_WORDS, _secret_flags),
    (_COMMAND_FRAGMENTS, _command_lines),
    (("cookie",), _cookies),
    (("passw",), _netrc),
    ((), _pgpass),  # its hint (:5432:) is a literal: fast enough on any text
    (("passw", "pass:", "pass="), _ini_passwords),
    (("_auth",), _npmrc_auth),
    (("auth",), _url_auth),
    (("://",), _url_passwords),
    (("secret_access", "secretaccess"), _aws_secrets),
    (("sig=", "signature="), _signatures),
]

_FRAGMENTS = frozenset(f for needs, _ in _RULES for f in needs)
_FRAGMENT_BITS = [(f, 1 << i) for i, f in enumerate(sorted(_FRAGMENTS))]
# Fragments that hold a shorter one are looked for only in text that holds it: most text holds neither.
_WITHIN = {"pass": ("passw", "passphrase", "sshpass", "pass:", "pass="),
           "auth": ("authorization", "authtoken", "_auth"), "secret": ("secret_access", "secretaccess")}
_BIT = dict(_FRAGMENT_BITS)
_FRAGMENT_TESTS = [(f, _BIT.get(f, 0), [(inner, _BIT[inner]) for inner in _WITHIN.get(f, ())])
                   for f in sorted({*_FRAGMENTS, *_WITHIN} - {inner for inners in _WITHIN.values() for inner in inners})]
# The rules to run for each set of fragments found (as bits): a line is redacted in a few microseconds,
# and choosing among the rules one by one would be half of them.
_PLANS: dict[int, list[Callable[[str], str]]] = {}


def _plan(found: int) -> list[Callable[[str], str]]:
    plan = _PLANS.get(found)
    if plan is None:
        present = {f for f, bit in _FRAGMENT_BITS if found & bit}
        plan = [rule for needs, rule in _RULES if not needs or not present.isdisjoint(needs)]
        if len(_PLANS) < 4096:
            _PLANS[found] = plan
    return plan


def _rules(s: str) -> str:
    # A rule's fragments are looked for in the text as it came: what a rule puts in (REDACTED)
    # holds none of them, so no rule can need one that only an earlier rule made.
    low = s.lower()
    found = 0
    for fragment, bit, inner in _FRAGMENT_TESTS:
        if fragment in low:
            found |= bit
            for longer, longer_bit in inner:
                if longer in low:
                    found |= longer_bit
    for rule in _plan(found):
        s = rule(s)
    return s


def _has_key_block(s: str) -> bool:
    return "PRIVATE KEY" in s or "PuTTY-User-Key-File-" in s or "Static key" in s


def _shapes(s: str) -> str:
    """Whatever in `s` is shaped like a credential, redacted (no known values: text decoded from base64)."""
    return _rules(_private_keys(s) if _has_key_block(s) else s)


class Redactor:
    """Removes secrets from text: known secret values, and anything shaped like a credential."""

    def __init__(self, secrets: list[str] | None = None, environ: dict[str, str] | None = None):
        env = os.environ if environ is None else environ
        self._values: list[str] = []
        self._learned: list[str] = []  # values the rules found in this session's texts (see _learn)
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
        values = list(self._values)  # a new list, swapped in whole: other threads redact while one adds
        for form in forms:
            if form not in values:
                values.append(form)
        values.sort(key=len, reverse=True)  # longest first: a secret holding another goes whole
        self._values = values

    def text(self, s: str) -> str:
        if len(s) < _MIN_SECRET:  # too short to hold a credential
            return s
        # Key blocks first: a known value can be one line of a key, and the same line (an OpenSSH
        # key's first) starts other keys too; replaced alone, it would hide their blocks from the rule.
        if _has_key_block(s):
            s = _private_keys(s)
        for v in self._values:
            if v in s:
                s = s.replace(v, REDACTED)
        out = _rules(s)
        if out != s:
            self._learn(s, out)
        # What the rules found before is hidden after them: replaced first, a piece of a secret (half a token a
        # terminal wrapped) would leave the rest of a whole one in a shape no rule knows.
        for v in self._learned:
            if v in out:
                out = out.replace(v, REDACTED)
        return out

    def _learn(self, before: str, after: str) -> None:
        """A secret a rule found (a token in a command's output, a password in a URL) is known from now on by
        its value: the model may repeat it where no rule would see it (its own words, a command, a web
        search), and there it is hidden too. The parts of `after` between the REDACTED marks are `before`'s
        own text, in order: what lies between them in `before` is what was hidden."""
        parts = after.split(REDACTED)
        at = 0
        for part, following in zip(parts, parts[1:]):
            if not before.startswith(part, at):
                return  # the marks do not line up with the text (a rule that rewrote more): learn nothing
            at += len(part)
            end = before.find(following, at) if following else len(before)
            if end < 0:
                return
            secret = before[at:end]
            if len(secret) >= _MIN_SECRET and secret not in self._learned and REDACTED not in secret:
                self._learned = sorted([*self._learned, secret], key=len, reverse=True)  # swapped in whole
            at = end

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


def _secret_key(key: Any) -> bool:
    """Whether a mapping key names a secret (cached: sessions use few distinct keys)."""
    hit = _secret_keys.get(key)
    if hit is None:
        hit = _secret_keys[key] = isinstance(key, str) and _SECRET_KEY.search(key) is not None
    return hit
