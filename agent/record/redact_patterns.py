"""The redactor's patterns, as data: the secret formats, the key names, the programs whose
options carry a password, and the fragments each rule needs. The rules that apply them are in
redact_rules.py (what a match keeps), redact_wrapped.py (tokens a terminal wrapped) and redact.py
(their order, and the Redactor); nothing here runs at redaction time but the compiled patterns."""

from __future__ import annotations

import re

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


# A PEM block in base64 ("-----BEGIN" encodes to LS0tLS1CRUdJTi): a kubeconfig's client-key-data,
# a Helm value. Only one that holds a private key goes.
_PEM_IN_BASE64 = re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2}")


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


_ANSI_BEFORE = re.compile(r"\x1b\[[0-9;]*m\Z")  # a colour code ends just before: `grep --color`, `env` in colour


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
    r"|(?:[0-9A-Fa-f]{2}:){7,}[0-9A-Fa-f]{2}|(?:MD5:)?(?:[0-9a-f]{2}:){15}[0-9a-f]{2}|SHA256:[A-Za-z0-9+/]{43}=?"
    r"|[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z0-9_.]*[(\[].*)[`'\".,;:)\]]*",
    re.S)
_PUBLIC_BEFORE = re.compile(r"(?i)(?:public|pub|sig)[ _-]?\Z")


# --------------------------------------------------------------------------- command lines

# One argument of a command line: quoted (a quote still open takes the rest of the line: a line still
# arriving, or one cut), or a word.
_ARG = r"""(?:'[^'\n]*'?|"[^"\n]*"?|[^\s'"]\S*)"""
_FLAG_VALUE = rf"(?!-){_ARG}"  # an argument that is not the next option
# Where one command of a line ends and the next begins (`a | b`, `a && b`, `a; b`), outside quotes.
_COMMAND_JOIN = re.compile(r"""'[^'\n]*'|"[^"\n]*"|([ \t](?:\|\|?|&&)[ \t]|;[ \t])""")


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


# --------------------------------------------------------------------------- cookies

# A Cookie or Set-Cookie header (also quoted: -H 'Cookie: a=b', "Cookie": "a=b"): every cookie's value,
# but not the attributes after a Set-Cookie's one (Path=/; HttpOnly). Spelt out case by case, as a
# case-blind regex would be tried at every place of the text.
_COOKIE_HEADER = re.compile(r"[Cc][Oo][Oo][Kk][Ii][Ee][\"']?[ \t]*:[ \t]*[\"']?")
_SET_BEFORE = re.compile(r"(?i)set-\Z")
_COOKIE_PAIR = re.compile(r"[!#$%&*+.^_`|~0-9A-Za-z-]+=(\"?)([^;\s\"',]*)\1")
_COOKIE_NEXT = re.compile(r";[ \t]*")


# --------------------------------------------------------------------------- files by their key words

# .netrc: `machine HOST login USER password PASSWORD` on one line or several, and `default ...`.
_NETRC_PASSWORD = re.compile(r"password[ \t]+(\S+)")
_NETRC_LINE = re.compile(r"[ \t]*(?:machine[ \t]+\S+|default)[ \t]")
_NETRC_ALONE = re.compile(r"[ \t]*(?:login[ \t]+\S+[ \t]+)?\Z")  # what may precede `password X` on its own line
_LINE_REST_BLANK = re.compile(r"[ \t]*\r?(?:\n|\Z)")


# .pgpass: HOST:PORT:DATABASE:USER:PASSWORD, a line of its own. The database and user hold a letter (or
# are *), so /etc/shadow's `daemon:*:19800:0:99999:7:::` and MAC or IPv6 addresses are not taken for one.
_PGPASS_HINT = re.compile(r":(?:\d{3,5}|\*):")
_PGPASS_LINE = re.compile(r"([ \t]*[\w.*-]+:(?:\d{3,5}|\*):[^:\s]*[A-Za-z_*][^:\s]*:[^:\s]*[A-Za-z_*][^:\s]*:)"
                          r"(\S+?)[ \t]*\r?")


# An ini or YAML line `password = VALUE` where the value starts with = (which the KEY=value rule leaves,
# as == is a version pin there: .my.cnf's password==x), or that names it `pass` (with a letter in it:
# `pass: 120/120` is a count). Lower case, alone on its line: a config file's key, not prose.
_INI_PASSWORD = re.compile(r"(pass(?:word|wd)?)([ \t]*[=:][ \t]*)(\S+)(?=[ \t]*\r?(?:\n|\Z))")


# .npmrc's _auth (base64 of user:password); `always-auth=true` is no secret.
_NPMRC_AUTH = re.compile(r"(_auth[ \t]*=[ \t]*)([^\s\"']{4,})")
# A URL's auth= parameter (Grafana's render links, some webhooks), after its ? or & (checked once found).
_URL_AUTH = re.compile(r"(auth=)([^\s&#\"']{8,})")


# --------------------------------------------------------------------------- base64 of JSON

# A JSON object in base64 (`{"` encodes to eyJ): a registry's .dockerconfigjson, the token `aws ecr
# get-login-password` prints. It goes when what it decodes to holds a secret these rules find.
_BASE64_JSON = re.compile(r"eyJ[A-Za-z0-9+/_-]{40,}={0,2}")


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


# --------------------------------------------------------------------------- key words and key names

# Not "pass" alone: it is in every line a test run marks PASSED.
_SECRET_WORDS = ("key", "token", "secret", "passw", "passphrase", "sshpass", "credential", "_pwd", "_auth")
# A mapping key that names a secret: it ends with the secret word (api_key, access_token, password);
# "tokenizer", "total_input_tokens" or "keyboard" do not.
_SECRET_KEY = re.compile(r"(?i)(?:^|[_-])(?:api[_-]?)?(?:key|token|secret|password|passwd|credentials?|auth)$"
                         r"|^(?:authorization|apikey|passphrase|private_key_id|accountkey)$")


# --------------------------------------------------------------------------- streams

# A line that goes on a key block opened on an earlier line: base64, a header, or blank.
_BLOCK_LINE = re.compile(rf"[ \t]*(?:{_HEADER_LINE}|[A-Za-z0-9+/=]*+)[ \t]*")
_PUTTY_LAST = re.compile(r"[ \t]*Private-(?:MAC|Hash):")


# A key's body line (base64 as PEM and OpenSSH wrap it: 64 or 70 characters), and any base64 line
# after one; a line of a key block that ends in base64 (behind a log line's time stamp).
_KEY_BODY_LINE = re.compile(r"[A-Za-z0-9+/]{40,}={0,2}")
_B64_ONLY = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_ENDS_IN_BASE64 = re.compile(r"(?:^|[\s:])[A-Za-z0-9+/]{16,}={0,2}[ \t]*\Z")
_LAST_WORD = re.compile(r"\S+\Z")
_ECHO_ARGUMENT = re.compile(r"(?<![\w.-])echo(?:[ \t]+-[neE]+)?[ \t]+(?=\S)")
