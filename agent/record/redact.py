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
"""

from __future__ import annotations

import base64
import json
import os
import re
from typing import Any, Callable

REDACTED = "[REDACTED]"

# An environment variable whose value is a secret.
# SSHPASS and REDISCLI_AUTH are the passwords of sshpass -e and redis-cli; MYSQL_PWD is MySQL's.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|^SSHPASS$|^REDISCLI_AUTH$|_PWD$",
                          re.I)
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
_JWT_PATTERN = r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*"
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
    rf"|{_JWT_PATTERN}"  # JWTs (header and claims are JSON)
)
# Shapes whose first characters would slow the tokens' regex down at every k, $ or { of a text (an
# alternation is tried wherever one of its first characters is), each a regex of its own that starts
# with a literal: Mailgun's keys, and password hashes as /etc/shadow and .htpasswd hold them (bcrypt,
# SHA-crypt, MD5-crypt, yescrypt, argon2; {SHA} and {SSHA}).
_MAILGUN = re.compile(r"key-[0-9a-f]{32}(?![0-9A-Za-z])")
_CRYPT_HASH = re.compile(
    r"\$(?:2[abxy]\$\d\d\$[./A-Za-z0-9]{53}|[156]\$(?:rounds=\d+\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{22,86}"
    r"|apr1\$[./A-Za-z0-9]{1,8}\$[./A-Za-z0-9]{22}|y\$[./A-Za-z0-9]+\$[./A-Za-z0-9]{1,86}\$[./A-Za-z0-9]{43}"
    r"|argon2(?:id|i|d)\$v=\d+\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+)")
_SHA_HASH = re.compile(r"\{S(?:SHA|HA)\}[A-Za-z0-9+/]{27,}={0,2}")
_JWT = re.compile(_JWT_PATTERN)


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
_ASSIGNMENT = (r"([A-Z0-9_]{0,40}(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?|(?<=_)PWD"
               r"|SSHPASS|REDISCLI_AUTH)"
               r"(?:_[A-Z0-9]{1,20}){0,4})([ \t]*[=:](?!=)[ \t]*)([\"']?)([^\s\"']{4,})")
_ASSIGNMENT_AT = re.compile("(?i)" + _ASSIGNMENT)  # matched where a name starts (see _assignments)
_ASSIGNMENT_ANYWHERE = re.compile(r"(?i)\b" + _ASSIGNMENT)
# In lowered text: a secret word with what must follow it in an assignment.
# REDISCLI_AUTH is found by its _auth (a word starting with r would be tried at every r of the text).
_SECRET_WORD = re.compile(r"(?:key|token|secret|passw(?:or)?d|passphrase|credentials?|_pwd|sshpass"
                          r"|_auth(?<=rediscli_auth))(?:_[a-z0-9]{1,20}){0,4}[ \t]*[=:](?!=)")
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
# 'name': 'value' (a Python dict's repr), and 'name' => 'value' (PHP, Ruby, Perl). The value may hold
# escapes (\u0021) but not its own quote.
_JSON_SECRET = re.compile(r'(?i)((\\*")' + _JSON_NAME + r'\2\s*(?::|=>)\s*(\\*"))((?:[^"\\]|\\[^"\\]){4,})(\3)')
_REPR_SECRET = re.compile(r"(?i)((\\*')" + _JSON_NAME + r"\2\s*(?::|=>)\s*(\\*'))((?:[^'\\]|\\[^'\\]){4,})(\3)")
_JSON_ENV_PAIR = re.compile(r'(?i)("name"\s*:\s*"[a-z0-9_]{0,40}(?:key|token|secret|password|passwd)[a-z0-9_]{0,40}"'
                            r'\s*,\s*"value"\s*:\s*")([^"]*)(")')
_AUTHORIZATION = re.compile(r"(?i)\b(authorization\s*[:=]\s*)(?:(?:bearer|basic|token)\s*)?([^\s\"',]+)")
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}")
_SECRET_FLAG = re.compile(r"(?i)(--(?:password|passwd|passphrase|token|auth-?token|api-key|secret|client-secret"
                          r"|secret-key|access-key)[= ])"
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


def _mailgun_keys(s: str) -> str:
    return _MAILGUN.sub(_token, s)


def _password_hashes(s: str) -> str:
    if "$" in s:
        s = _CRYPT_HASH.sub(_token, s)
    return _SHA_HASH.sub(_token, s) if "{S" in s else s


def _secret_flags(s: str) -> str:
    return _SECRET_FLAG.sub(_secret_flag, s) if "--" in s else s


def _url_passwords(s: str) -> str:
    return _URL_PASSWORD.sub(_keep_around, s)


def _aws_secrets(s: str) -> str:
    return _AWS_SECRET.sub(_keep_name, s)


def _signatures(s: str) -> str:
    return _SIGNATURE.sub(_keep_name, s)


# --------------------------------------------------------------------------- command lines

# One argument of a command line: quoted (a quote still open takes the rest of the line: a line still
# arriving, or one cut), or a word.
_ARG = r"""(?:'[^'\n]*'?|"[^"\n]*"?|[^\s'"]\S*)"""
_FLAG_VALUE = rf"(?!-){_ARG}"  # an argument that is not the next option
# Where one command of a line ends and the next begins (`a | b`, `a && b`, `a; b`), outside quotes.
_COMMAND_JOIN = re.compile(r"""'[^'\n]*'|"[^"\n]*"|([ \t](?:\|\|?|&&)[ \t]|;[ \t])""")


def _command_end(s: str, start: int, line_end: int) -> int:
    for m in _COMMAND_JOIN.finditer(s, start, line_end):
        if m.group(1) is not None:
            return m.start()
    return line_end


def _flags(flags: str, part: str = "") -> tuple[re.Pattern, str]:
    """Options of a program whose value is a secret; `flags` holds each with what joins it to its value.
    `part` says which part of the value: "" all of it, ":" or "%" what follows that character (curl's
    USER:PASSWORD, smbclient's USER%PASSWORD), ";" the values of NAME=VALUE; ... cookies."""
    return re.compile(rf"(?<=[ \t])(?:{flags})({_FLAG_VALUE})"), part


_SPACED = r"(?:[ \t]+|=)"  # -p VALUE, -p=VALUE
_MYSQL = _flags(r"-p(?=\S)")  # only -pVALUE: in `mysql -p metrics` the word after -p is the database
# Each program, by its name, with the options of its command line that carry a password.
_PROGRAM_FLAGS: dict[str, list[tuple[re.Pattern, str]]] = {
    **dict.fromkeys(("mysql", "mysqldump", "mysqladmin", "mysqlcheck", "mysqlimport", "mysqlshow", "mysqlpump",
                     "mysqlslap", "mysqlbinlog", "mariadb", "mariadb-dump", "mariadb-admin", "mariadb-check",
                     "mariadb-import"), [_MYSQL]),
    "sshpass": [_flags(r"-p[ \t]*")],
    "redis-cli": [_flags(rf"-a[ \t]+|--pass{_SPACED}")],
    "ipmitool": [_flags(r"-P[ \t]*")],
    "racadm": [_flags(r"-p[ \t]+")],
    **dict.fromkeys(("sqlcmd", "bcp", "osql"), [_flags(r"-P[ \t]*")]),
    **dict.fromkeys(("mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport", "mongostat",
                     "mongotop", "mongofiles"), [_flags(rf"-p{_SPACED}")]),
    **dict.fromkeys(("ldapsearch", "ldapmodify", "ldapadd", "ldapdelete", "ldapwhoami", "ldapcompare",
                     "ldapmodrdn", "ldappasswd", "ldapexop", "ldapurl"), [_flags(r"-w[ \t]*")]),
    "twine": [_flags(rf"-p{_SPACED}")],
    # -u USER:PASSWORD; -b/--cookie NAME=VALUE; ... (a file name holds no =)
    "curl": [_flags(r"-[uU][ \t]*|--(?:proxy-)?user[ \t]+", part=":"), _flags(r"-b[ \t]+|--cookie[ \t]+", part=";")],
    **dict.fromkeys(("smbclient", "rpcclient", "smbcacls", "smbget", "smbtree"),
                    [_flags(r"-U[ \t]*|--user(?:name)?[= ]", part="%")]),
    "keytool": [_flags(r"-(?:src|dest)?(?:store|key)pass[ \t]+|-new[ \t]+")],
    "nmcli": [_flags(r"(?:password|wifi-sec\.psk|802-11-wireless-security\.psk|wifi-sec\.wep-key0)[ \t]+")],
    "openssl": [_flags(r"-pass(?:in|out)?[ \t]+pass:")],
}
# Programs whose -p is a password only in their login command (`docker run -p 8000:8000` is a port).
_NEEDS_LOGIN = frozenset(("docker", "podman", "nerdctl", "buildah", "skopeo", "oras", "helm", "az"))
_PROGRAM_FLAGS.update(dict.fromkeys(_NEEDS_LOGIN, [_flags(rf"-p{_SPACED}")]))
_LOGIN = re.compile(r"[ \t]login(?![\w-])")

# Secrets a command takes as a plain argument, matched where the program's name starts.
_OPTIONS = r"(?:[ \t]+-[\w-]+(?:=\S+)?)*"  # each option read one way only: no backtracking over them
_POSITIONAL: dict[str, list[tuple[re.Pattern, str]]] = {
    # wandb login [--relogin] [--host URL] KEY
    "wandb": [(re.compile(r"wandb[ \t]+login(?:[ \t]+--(?:host|base-url)[ \t]+\S+|[ \t]+-[\w-]+(?:=\S+)?)*"
                          r"[ \t]+([A-Za-z0-9_-]{32,})(?![^\s'\"`;|&)])"), "")],
    "ngrok": [(re.compile(rf"ngrok(?:[ \t]+config)?[ \t]+(?:add-)?authtoken[ \t]+({_FLAG_VALUE})"), "")],
    "cloudflared": [(re.compile(rf"cloudflared{_OPTIONS}(?:[ \t]+tunnel{_OPTIONS})?[ \t]+service[ \t]+install"
                                rf"[ \t]+({_FLAG_VALUE})"), "")],
    # poetry config http-basic.REPO USER PASSWORD, poetry config pypi-token.REPO TOKEN
    "poetry": [(re.compile(rf"poetry[ \t]+config{_OPTIONS}[ \t]+(?:http-basic\.\S+[ \t]+\S+|pypi-token\.\S+)"
                           rf"[ \t]+({_FLAG_VALUE})"), "")],
    # openssl passwd -6 -salt S PASSWORD (inside a $(...) its ) ends the word)
    "openssl": [(re.compile(r"openssl[ \t]+passwd(?:[ \t]+-(?:salt|in)[ \t]+\S+|[ \t]+-\w+)*"
                            r"[ \t]+(?!-)('[^'\n]*'|\"[^\"\n]*\"|[^\s'\"()`]+)"), "")],
    # echo PASSWORD | sudo -S ..., echo USER:PASSWORD | chpasswd, echo PASSWORD | docker login --password-stdin
    "echo": [(re.compile(rf"echo(?:[ \t]+-[neE]+)?[ \t]+({_FLAG_VALUE})[ \t]*\|[ \t]*"
                         r"(?:sudo(?:[ \t]+-\S+)*[ \t]+-[A-Za-z]*S[A-Za-z]*(?![\w-])"
                         r"|passwd[ \t]+--stdin|(?:docker|podman|nerdctl|oras|helm[ \t]+registry)[ \t]+login"
                         r"[^\n|;&]*?[ \t]--password-stdin(?![\w-]))"), ""),
             (re.compile(rf"echo(?:[ \t]+-[neE]+)?[ \t]+({_FLAG_VALUE})[ \t]*\|[ \t]*(?:sudo[ \t]+)?chpasswd"
                         r"(?![\w-])"), ":")],
}
# htpasswd -b[c|n|B|...] [FILE] USER PASSWORD: with -b the password is an argument, the last of them.
_HTPASSWD = re.compile(rf"htpasswd((?:[ \t]+-[A-Za-z]+(?:[ \t]+\d+)?)+)[ \t]+(\S+)[ \t]+({_FLAG_VALUE})"
                       rf"(?:[ \t]+({_FLAG_VALUE}))?")


def _by_first_letter(words: set[str]) -> str:
    """An alternation of `words` that branches on their first letter: the regex engine tries one branch
    where a flat list of some 60 names would try them all, at every place a name may start."""
    groups: dict[str, list[str]] = {}
    for word in sorted(words, key=len, reverse=True):  # longest first: mysqldump before mysql
        groups.setdefault(word[0], []).append(re.escape(word[1:]))
    return "|".join(f"{first}(?:{'|'.join(rests)})" for first, rests in sorted(groups.items()))


_PROGRAM_NAME = _by_first_letter({*_PROGRAM_FLAGS, *_POSITIONAL, "htpasswd"})
# What a command line these rules find holds: an option ( -p, or after a tab), or a word of the forms
# without one: `passw` (nmcli's password, openssl passwd, chpasswd, --password-stdin), ngrok's authtoken,
# nmcli's psk, and the names of wandb, poetry and cloudflared. A benchmark's table holds none of them.
_COMMAND_FRAGMENTS = (" -", "\t-", "passw", "authtoken", "psk", "wandb", "poetry", "cloudflared")
# A program's name where a command starts: after a space, a path's /, a quote, $( or `, a pipe or a ;.
_PROGRAM_AFTER = re.compile(rf"[ \t\n/'\"(`;|&]({_PROGRAM_NAME})(?![\w.-])")
_PROGRAM_FIRST = re.compile(rf"({_PROGRAM_NAME})(?![\w.-])")


def _redacted_argument(arg: str, part: str = "") -> str:
    """A command-line argument with its secret (all of it, or what follows `part`) redacted, quotes kept."""
    quote = arg[0] if arg[0] in "'\"" else ""
    closing = quote if len(arg) >= 2 and arg[-1] == quote else ""
    inner = arg[len(quote):len(arg) - len(closing)]
    if part == ";":
        return f"{quote}{_cookie_pairs(inner, first_only=False)}{closing}"
    kept = ""
    if part:
        cut = inner.find(part)
        if cut < 0:  # a user name alone: the program asks for the password
            return arg
        kept, inner = inner[:cut + 1], inner[cut + 1:]
    if len(inner) < 4 or inner.startswith((REDACTED, "$(", "`")) or _not_a_secret(inner):
        return arg  # a reference to a secret kept elsewhere ($DB_PASSWORD, "$(cat /run/secrets/db)")
    return f"{quote}{kept}{REDACTED}{closing}"


_LONGEST_COMMAND = 4096  # characters of a command line looked at: a line of a MB is no command


def _command_lines(s: str) -> str:
    """Passwords and tokens on the command lines of the programs that take them as arguments."""
    spans: list[tuple[int, int, str]] = []
    first = _PROGRAM_FIRST.match(s)
    hits = ([first] if first else []) + list(_PROGRAM_AFTER.finditer(s))
    for hit, after in zip(hits, [*hits[1:], None]):
        start, name = hit.start(1), hit.group(1)
        end = s.find("\n", start, start + _LONGEST_COMMAND)
        end = min(len(s), start + _LONGEST_COMMAND) if end < 0 else end
        # Its options end where the next command starts, or the next program's name (`... | sudo -S`).
        command_end = _command_end(s, hit.end(), end if after is None else min(end, after.start(1)))
        if name not in _NEEDS_LOGIN or _LOGIN.search(s, hit.end(), command_end):
            for pattern, part in _PROGRAM_FLAGS.get(name, ()):
                spans += ((m.start(1), m.end(1), part) for m in pattern.finditer(s, hit.end(), command_end))
        for pattern, part in _POSITIONAL.get(name, ()):
            m = pattern.match(s, start, end)
            if m is not None:
                spans.append((m.start(1), m.end(1), part))
        if name == "htpasswd" and (m := _HTPASSWD.match(s, start, command_end)) is not None and "b" in m.group(1):
            # -n shows the entry instead of writing a file: its arguments are USER PASSWORD
            group = 3 if "n" in m.group(1) else 4
            if m.group(group) is not None:
                spans.append((m.start(group), m.end(group), ""))
    if not spans:
        return s
    pieces: list[str] = []
    pos = 0
    for start, end, part in sorted(spans):
        if start < pos:
            continue
        pieces += (s[pos:start], _redacted_argument(s[start:end], part))
        pos = end
    pieces.append(s[pos:])
    return "".join(pieces)


# --------------------------------------------------------------------------- cookies

# A Cookie or Set-Cookie header (also quoted: -H 'Cookie: a=b', "Cookie": "a=b"): every cookie's value,
# but not the attributes after a Set-Cookie's one (Path=/; HttpOnly). Spelt out case by case, as a
# case-blind regex would be tried at every place of the text.
_COOKIE_HEADER = re.compile(r"[Cc][Oo][Oo][Kk][Ii][Ee][\"']?[ \t]*:[ \t]*[\"']?")
_SET_BEFORE = re.compile(r"(?i)set-\Z")
_COOKIE_PAIR = re.compile(r"[!#$%&*+.^_`|~0-9A-Za-z-]+=(\"?)([^;\s\"',]*)\1")
_COOKIE_NEXT = re.compile(r";[ \t]*")


def _cookies(s: str) -> str:
    pieces: list[str] = []
    pos = 0
    for m in _COOKIE_HEADER.finditer(s):
        if m.start() < pos or (m.start() and _is_word_char(s[m.start() - 1])):
            continue
        first_only = _SET_BEFORE.search(s, max(0, m.start() - 4), m.start()) is not None
        end = _cookie_pairs_end(s, m.end())
        pieces += (s[pos:m.end()], _cookie_pairs(s[m.end():end], first_only))
        pos = end
    if not pieces:
        return s
    pieces.append(s[pos:])
    return "".join(pieces)


def _cookie_pairs_end(s: str, pos: int) -> int:
    while (pair := _COOKIE_PAIR.match(s, pos)) is not None:
        pos = pair.end()
        sep = _COOKIE_NEXT.match(s, pos)
        if sep is None:
            break
        pos = sep.end()
    return pos


def _cookie_pairs(text: str, first_only: bool) -> str:
    """`NAME=VALUE; NAME=VALUE` with the values redacted (with `first_only`, the first one's)."""
    pieces: list[str] = []
    kept_to = at = 0
    while (pair := _COOKIE_PAIR.match(text, at)) is not None:
        value = pair.group(2)
        if len(value) >= 4 and not value.startswith(REDACTED) and not _not_a_secret(value):
            pieces += (text[kept_to:pair.start(2)], REDACTED)
            kept_to = pair.end(2)
        sep = _COOKIE_NEXT.match(text, pair.end())
        if first_only or sep is None:
            break
        at = sep.end()
    pieces.append(text[kept_to:])
    return "".join(pieces)


# --------------------------------------------------------------------------- files by their key words

# .netrc: `machine HOST login USER password PASSWORD` on one line or several, and `default ...`.
_NETRC_PASSWORD = re.compile(r"password[ \t]+(\S+)")
_NETRC_LINE = re.compile(r"[ \t]*(?:machine[ \t]+\S+|default)[ \t]")
_NETRC_ALONE = re.compile(r"[ \t]*(?:login[ \t]+\S+[ \t]+)?\Z")  # what may precede `password X` on its own line
_LINE_REST_BLANK = re.compile(r"[ \t]*\r?(?:\n|\Z)")


class _LineStarts:
    """Where the lines of a text start, asked for at positions that only grow (as a regex's matches
    come): each part of the text is looked at once, however many matches a long line holds."""

    def __init__(self, s: str):
        self.s, self.pos, self.start = s, 0, 0

    def at(self, pos: int) -> int:
        brk = self.s.rfind("\n", self.pos, pos)
        if brk >= 0:
            self.start = brk + 1
        self.pos = pos
        return self.start


def _netrc(s: str) -> str:
    lines = _LineStarts(s)

    def hide(m: re.Match) -> str:
        value = m.group(1)
        line_start = lines.at(m.start())
        if value.startswith(REDACTED) or _not_a_secret(value) or (m.start() and s[m.start() - 1] not in " \t\n"):
            return m.group(0)
        if _NETRC_LINE.match(s, line_start) is None and (m.start() - line_start > 200 or _NETRC_ALONE.match(
                s[line_start:m.start()]) is None or _LINE_REST_BLANK.match(s, m.end()) is None):
            return m.group(0)  # prose: "passwd: password updated successfully"
        return m.group(0)[:m.start(1) - m.start()] + REDACTED

    return _NETRC_PASSWORD.sub(hide, s)


# .pgpass: HOST:PORT:DATABASE:USER:PASSWORD, a line of its own. The database and user hold a letter (or
# are *), so /etc/shadow's `daemon:*:19800:0:99999:7:::` and MAC or IPv6 addresses are not taken for one.
_PGPASS_HINT = re.compile(r":(?:\d{3,5}|\*):")
_PGPASS_LINE = re.compile(r"([ \t]*[\w.*-]+:(?:\d{3,5}|\*):[^:\s]*[A-Za-z_*][^:\s]*:[^:\s]*[A-Za-z_*][^:\s]*:)"
                          r"(\S+?)[ \t]*\r?")


def _pgpass(s: str) -> str:
    if _PGPASS_HINT.search(s) is None:
        return s
    pieces: list[str] = []
    pos = line_end = 0
    lines = _LineStarts(s)
    for hint in _PGPASS_HINT.finditer(s):
        if hint.start() < line_end:
            continue  # its line was tried
        line_start = lines.at(hint.start())
        line_end = s.find("\n", hint.end())
        line_end = len(s) if line_end < 0 else line_end
        if line_end - line_start > 1000:  # no .pgpass line is this long
            continue
        m = _PGPASS_LINE.fullmatch(s, line_start, line_end)
        if m is None or m.group(2).startswith(REDACTED) or _not_a_secret(m.group(2)):
            continue
        pieces += (s[pos:m.start(2)], REDACTED)
        pos = m.end(2)
    if not pieces:
        return s
    pieces.append(s[pos:])
    return "".join(pieces)


# An ini or YAML line `password = VALUE` where the value starts with = (which the KEY=value rule leaves,
# as == is a version pin there: .my.cnf's password==x), or that names it `pass` (with a letter in it:
# `pass: 120/120` is a count). Lower case, alone on its line: a config file's key, not prose.
_INI_PASSWORD = re.compile(r"(pass(?:word|wd)?)([ \t]*[=:][ \t]*)(\S+)(?=[ \t]*\r?(?:\n|\Z))")


def _ini_passwords(s: str) -> str:
    lines = _LineStarts(s)

    def hide(m: re.Match) -> str:
        name, value = m.group(1), m.group(3)
        line_start = lines.at(m.start())
        if m.start() - line_start > 200 or s[line_start:m.start()].strip(" \t") or (name.startswith("passw") and not value.startswith("=")):
            return m.group(0)
        if value.startswith(REDACTED) or _not_a_secret(value.lstrip("=")):
            return m.group(0)
        if name == "pass" and not any(c.isalpha() for c in value):
            return m.group(0)
        return f"{name}{m.group(2)}{REDACTED}"

    return _INI_PASSWORD.sub(hide, s)


# .npmrc's _auth (base64 of user:password); `always-auth=true` is no secret.
_NPMRC_AUTH = re.compile(r"(_auth[ \t]*=[ \t]*)([^\s\"']{4,})")
# A URL's auth= parameter (Grafana's render links, some webhooks), after its ? or & (checked once found).
_URL_AUTH = re.compile(r"(auth=)([^\s&#\"']{8,})")


def _npmrc_auth(s: str) -> str:
    def hide(m: re.Match) -> str:
        if (m.start() and (_is_word_char(s[m.start() - 1]) or s[m.start() - 1] == "-")) or _not_a_secret(m.group(2)):
            return m.group(0)
        return f"{m.group(1)}{REDACTED}"

    return _NPMRC_AUTH.sub(hide, s)


def _url_auth(s: str) -> str:
    def hide(m: re.Match) -> str:
        return f"{m.group(1)}{REDACTED}" if m.start() and s[m.start() - 1] in "?&;" else m.group(0)

    return _URL_AUTH.sub(hide, s)


# --------------------------------------------------------------------------- base64 of JSON

# A JSON object in base64 (`{"` encodes to eyJ): a registry's .dockerconfigjson, the token `aws ecr
# get-login-password` prints. It goes when what it decodes to holds a secret these rules find.
_BASE64_JSON = re.compile(r"eyJ[A-Za-z0-9+/_-]{40,}={0,2}")


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


# --------------------------------------------------------------------------- tokens a terminal wrapped

# A token that a terminal wrapped (or a narrow pane cut) at the end of a line, its rest beginning the
# next: one of a fixed length cut short, or a JWT going on over lines as wide as its first.
_WRAPPED_FIXED = {  # prefix: how many characters follow it, and which
    **dict.fromkeys(("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "npm_"), (36, "A-Za-z0-9")),
    "hf_": (34, "A-Za-z0-9"), "github_pat_": (82, "A-Za-z0-9_"), "glpat-": (20, "A-Za-z0-9_-"),
}
_JWT_START = r"eyJ[A-Za-z0-9_-]{10,}(?:\.[A-Za-z0-9_-]*)?"  # its header, perhaps its claims: not its signature
# A run of token characters up to a line break, from eyJ, glpat- or an underscore (which every other prefix
# ends with: the prefix is then looked for before it). Each starts with a literal: such a regex is found
# fast, where one alternation of all prefixes would be tried at every letter.
_WRAP_AT_BREAK = [re.compile(rf"{start}(?=\r?\n)") for start in (
    _JWT_START, "glpat-[A-Za-z0-9_-]*", "github_pat_[A-Za-z0-9_]*")]
_UNDERSCORE_AT_BREAK = re.compile(r"_(?=[A-Za-z0-9]*\r?\n)")  # the last underscore of a line's last word
_UNDERSCORE_PREFIXES = ("hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "npm_")  # whose rest has no underscore
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]*")
_WRAP_AT_END = re.compile(rf"(?:{_JWT_START}|(?:{'|'.join(map(re.escape, _WRAPPED_FIXED))})[A-Za-z0-9_-]*)\Z")
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_TOKEN_PIECE = re.compile(r"[A-Za-z0-9_.-]+")  # what of a line may go on with a token


# How a JWT's header starts: {"alg", {"typ", {"kid", {"cty", {"x5t", {"enc", {"zip" in base64. Other JSON in
# base64 (a registry's auth, a cloudflared token) is no JWT.
_JWT_HEADERS = ("eyJhbGci", "eyJ0eXAi", "eyJraWQi", "eyJjdHki", "eyJ4NXQi", "eyJlbmMi", "eyJ6aXAi")
_LONGEST_JWT = 16_384  # characters: a wrapped one is looked for over no more lines than this fills


def _wrap_kind(run: str) -> str | None:
    """What token `run` is, if it is one cut before its end: "jwt", or its prefix in _WRAPPED_FIXED.
    None if it may be whole (a JWT with its signature begun, a token of its full length)."""
    if run.startswith("eyJ"):
        return "jwt" if run.startswith(_JWT_HEADERS) and run.count(".") <= 1 else None
    for prefix, (length, chars) in _WRAPPED_FIXED.items():
        if run.startswith(prefix):
            body = run[len(prefix):]
            return prefix if 4 <= len(body) < length and re.fullmatch(f"[{chars}]*", body) else None
    return None


def _wrapped_tokens(s: str) -> str:
    if "\n" not in s:
        return s
    pieces: list[str] = []
    pos = 0
    runs = [m.span() for regex in _WRAP_AT_BREAK for m in regex.finditer(s)]
    has_prefix = any(prefix in s for prefix in _UNDERSCORE_PREFIXES)  # found faster than underscores are
    for m in _UNDERSCORE_AT_BREAK.finditer(s) if has_prefix else ():  # hf_, ghp_, npm_...: one ends here
        prefix = next((p for p in _UNDERSCORE_PREFIXES if s.startswith(p, m.end() - len(p))), None)
        if prefix is not None:
            runs.append((m.end() - len(prefix), _ALNUM_RUN.match(s, m.end()).end()))
    looked = 0  # how far the lines of a token tried already went: a line among them starts none
    for start, end in sorted(runs):
        if start < max(pos, looked) or (start and _is_word_char(s[start - 1])):
            continue
        spans, looked = _wrapped_spans(s, start, end)
        for piece_start, piece_end in spans:
            pieces += (s[pos:piece_start], REDACTED)
            pos = piece_end
    if not pieces:
        return s
    pieces.append(s[pos:])
    return "".join(pieces)


def _wrapped_spans(s: str, start: int, end: int) -> tuple[list[tuple[int, int]], int]:
    """The pieces of a token that begins at `start`, ends its line at `end` and goes on in the next
    lines (none if it does not), and how far the lines looked at went."""
    run = s[start:end]
    kind = _wrap_kind(run)
    if kind is None:
        return [], end
    next_line = s.index("\n", end) + 1
    if kind != "jwt":
        length, chars = _WRAPPED_FIXED[kind]
        rest = re.compile(f"[{chars}]{{{length - len(run) + len(kind)}}}(?![{chars}])").match(s, next_line)
        return ([(start, end), rest.span()] if rest else []), next_line
    width = end - (s.rfind("\n", 0, start) + 1)
    spans, joined, at = [(start, end)], run, next_line
    while at <= len(s) and len(joined) < _LONGEST_JWT:
        line_end = s.find("\n", at)
        line_end = len(s) if line_end < 0 else line_end
        line = s[at:line_end].removesuffix("\r")
        more = _TOKEN_PIECE.match(line) if _may_continue_token(line) else None
        if more is None:
            break
        spans.append((at, at + more.end()))
        joined += more.group()
        if more.end() != len(line) or len(line) != width:
            break
        at = line_end + 1
    looked = spans[-1][1]
    jwt = _JWT.match(joined)
    if jwt is None or jwt.end() <= len(run):
        return [], looked
    out, used = [], 0
    for start, end in spans:
        take = min(end - start, jwt.end() - used)
        if take <= 0:
            break
        out.append((start, start + take))
        used += take
    return out, looked


def _may_continue_token(line: str) -> bool:
    # A key's BEGIN line starts with dashes too: it never goes on with a token.
    return _TOKEN_PIECE.match(line) is not None and not line.startswith("-----")


class _Wrap:
    """A token a line ended in the middle of, as a stream meets it: which lines go on with it."""

    def __init__(self, kind: str, width: int):
        self.kind, self.width = kind, width

    @classmethod
    def at_end_of(cls, line: str) -> _Wrap | None:
        if "_" not in line and "eyJ" not in line and "glpat-" not in line:  # every prefix has one of them
            return None
        word = len(line)  # the token is in the line's last word: only that is searched
        while word and line[word - 1] in _TOKEN_CHARS:
            word -= 1
        while (m := _WRAP_AT_END.search(line, word)) is not None:
            if not (m.start() and _is_word_char(line[m.start() - 1])) and (kind := _wrap_kind(m.group())):
                return cls(kind, len(line))
            word = m.start() + 1
        return None

    def continued_by(self, line: str) -> bool:
        return _may_continue_token(line)

    def goes_on_after(self, line: str) -> bool:
        return self.kind == "jwt" and len(line) == self.width and _TOKEN_PIECE.fullmatch(line) is not None


# Not "pass" alone: it is in every line a test run marks PASSED.
_SECRET_WORDS = ("key", "token", "secret", "passw", "passphrase", "sshpass", "credential", "_pwd", "_auth")
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
        if _has_key_block(s):
            s = _private_keys(s)
        for v in self._values:
            if v in s:
                s = s.replace(v, REDACTED)
        return _rules(s)

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
    A line that ends inside a token (a terminal wrapped it) is held back with the lines that go on
    with it. Lines held back are redacted together, as the same text whole would be.
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
        self._held: list[str] = []  # base64 lines that may be the tail of a key, lines of a wrapped token
        self._wrap: _Wrap | None = None  # the last held line ends inside this token

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
        if self._block is not None or self._wrap is not None or not self.partial:
            return ""  # inside a key block, or the line may be the rest of a token the last one began
        line = _shown(self.partial)
        opening = _block_opening(line, ends_line=False)  # what follows it is still arriving
        if opening is not None:
            return self.redactor.text(line[:opening.start()]) + REDACTED
        shown = self.redactor.text(line)
        echo = _ECHO_ARGUMENT.search(shown)
        if echo is not None:  # what it echoes is a password if a `| sudo -S` is still to come
            shown = shown[:echo.end()]
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
        self._wrap = None
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
        if self._wrap is not None:
            wrap, self._wrap = self._wrap, None
            if wrap.continued_by(line):
                self._held.append(line)
                if wrap.goes_on_after(line) and len(self._held) < self.MAX_HELD:
                    self._wrap = wrap
                else:
                    self._release(out)
                return
            self._release(out)  # the token ended with its line after all
        if self._held or _KEY_BODY_LINE.fullmatch(line):
            if _B64_ONLY.fullmatch(line) and len(self._held) < self.MAX_HELD:
                self._held.append(line)
                self._wrap = _Wrap.at_end_of(line)  # a JWT's first line can be base64 too
                return
            end = _PEM_END.search(line)
            if end is not None:  # the held lines were a key's: they go with its END
                self._held.clear()
                out.append(self.redactor.text(line[:end.start()]) + REDACTED + self.redactor.text(line[end.end():]))
                return
            self._release(out)
        self._wrap = _Wrap.at_end_of(line)
        if self._wrap is not None:
            self._held.append(line)
            return
        opening = _block_opening(line)
        if opening is None:
            out.append(self.redactor.text(line))
            return
        self._block = "pem" if opening.group(1) == "BEGIN" else "putty"
        out.append(self.redactor.text(line[:opening.start()]) + REDACTED)

    def _release(self, out: list[str]) -> None:
        if self._held:
            out.extend(self.redactor.text("\n".join(self._held)).split("\n"))
            self._held.clear()


# A key's body line (base64 as PEM and OpenSSH wrap it: 64 or 70 characters), and any base64 line
# after one; a line of a key block that ends in base64 (behind a log line's time stamp).
_KEY_BODY_LINE = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")
_B64_ONLY = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_ENDS_IN_BASE64 = re.compile(r"(?:^|[\s:])[A-Za-z0-9+/]{16,}={0,2}[ \t]*\Z")
_LAST_WORD = re.compile(r"\S+\Z")
_ECHO_ARGUMENT = re.compile(r"(?<![\w.-])echo(?:[ \t]+-[neE]+)?[ \t]+(?=\S)")


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
