"""The network: sockets, interfaces and routes (ss, ip, ethtool), and downloads (curl, wget)."""

from __future__ import annotations

import re

from agent.safety.classifier.command import DESTRUCTIVE, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.options import Effect, Parsed, Spec, _getopt
from agent.safety.classifier.registry import _HANDLERS, _handles, files_read_ok, specified

# --------------------------------------------------------------------------- ss

# iproute2 ss (getopt_long) only reads socket tables, except -K, which closes the sockets it
# matches, and -D, which writes a dump file; -F reads its filter from a file.
SS = Spec(
    "ss",
    "-h|--help -V|-v|--version -n|--numeric -r|--resolve -a|--all -l|--listening -o|--options -e|--extended "
    "-m|--memory -p|--processes -T|--threads -i|--info --tipcinfo -s|--summary --tos --cgroup -b|--bpf "
    "-E|--events -Z|--context -z|--contexts -N|--net= -4|--ipv4 -6|--ipv6 -0|--packet -t|--tcp -M|--mptcp "
    "-S|--sctp -u|--udp -d|--dccp -w|--raw -x|--unix --tipc --vsock --xdp -f|--family= -K|--kill!kill "
    "-H|--no-header -O|--oneline --inet-sockopt -A|--query|--socket= -D|--diag=!diag -F|--filter= "
    "-B|--bound-inactive",
    effects={"kill": Effect(DESTRUCTIVE, "forcibly closes the sockets it matches, cutting their connections"),
             "diag": Effect(MUTATING, "writes a raw dump of the sockets to a file")},
)


def _ss_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    """The operands are a filter expression (`state listening`, `sport = :30000`): nothing to open."""
    return files_read_ok(an, "ss", parsed.values("--filter"), "ss -F")


# --------------------------------------------------------------------------- ip

# iproute2 ip reads its options itself: each `-word` (or `--word`) is matched as a prefix of the
# names below, in this order, so `-b` is -batch and `-br` is -brief; a name with a value takes the
# next word. -batch runs commands from a file and -force keeps going after errors in one.
_IP_OPTIONS = (("-loops", True), ("-family", True), ("-4", None), ("-6", None), ("-0", None), ("-M", None),
               ("-B", None), ("-human", False), ("-human-readable", False), ("-iec", False), ("-stats", False),
               ("-statistics", False), ("-details", False), ("-resolve", False), ("-oneline", False),
               ("-timestamp", False), ("-tshort", False), ("-Version", False), ("-force", False),
               ("-batch", True), ("-brief", False), ("-json", False), ("-pretty", False), ("-rcvbuf", True),
               ("-color", False), ("-help", False), ("-netns", True), ("-Numeric", False), ("-all", False),
               ("-echo", None))
_IP_NOT_READ_ONLY = {"-force": "keeps running a batch of changes after one fails",
                     "-batch": "runs the ip commands listed in a file (or stdin)"}
# Objects, in the order ip matches a prefix against them (`ip a` is address, `ip n` neighbor).
_IP_OBJECTS = ("address", "addrlabel", "maddress", "route", "rule", "neighbor", "neighbour", "ntable", "ntbl",
               "link", "l2tp", "fou", "ila", "macsec", "tunnel", "tunl", "tuntap", "tap", "token", "tcpmetrics",
               "tcp_metrics", "monitor", "xfrm", "mroute", "mrule", "netns", "netconf", "vrf", "sr", "nexthop",
               "mptcp", "ioam", "help", "stats")
# Objects whose listing forms are read-only, and those forms: spelled in full (each object
# abbreviates its commands differently: `ip link s` is `set`, `ip addr s` is `show`).
_IP_LISTINGS = {"address": {"show", "list", "lst"}, "link": {"show", "list", "lst"},
                "route": {"show", "list", "lst", "get"}, "rule": {"show", "list", "lst"},
                "neighbor": {"show", "list", "lst"}, "neighbour": {"show", "list", "lst"},
                "maddress": {"show", "list", "lst"}, "netconf": {"show", "list", "lst"},
                "nexthop": {"show", "list", "lst"}, "netns": {"list", "show", "lst"},
                "ntable": {"show", "list", "lst"}, "ntbl": {"show", "list", "lst"}}


def _ip_prefix(word: str, names) -> str | None:
    return next((name for name in names if name.startswith(word)), None)


@_handles("ip")
def _ip(an: Analysis, cmd: _Cmd) -> None:
    args = cmd.args
    index = 0
    while index < len(args):
        text = args[index].text
        if text is None:
            an.add(MUTATING, "ip:unknown-option", "`ip` with a word known only when the command runs")
            return
        if text == "--":
            index += 1
            break
        if not text.startswith("-"):
            break
        word = text[1:] if text.startswith("--") else text
        if word.startswith("-c") and "=" in word and "-color".startswith(word.split("=", 1)[0]):
            index += 1
            continue
        exact = next((name for name, value in _IP_OPTIONS if value is None and name == word), None)
        name = exact or next((n for n, value in _IP_OPTIONS if value is not None and len(word) > 1
                              and n.startswith(word)), None)
        if name is None:
            an.add(MUTATING, "ip:unknown-option", f"`ip {text}`: an option the classifier does not know")
            return
        if name in _IP_NOT_READ_ONLY:
            an.add(MUTATING, f"ip:{name}", f"`ip {text}` ({name}) {_IP_NOT_READ_ONLY[name]}")
            return
        if name in ("-Version", "-help"):
            an.allow(cmd, "ip")
            return
        index += 2 if dict(_IP_OPTIONS).get(name) else 1
    words = [a.text for a in args[index:]]
    if not words:
        an.add(MUTATING, "mutating:ip", "`ip` without an object reads commands it is not given here")
        return
    if words[0] is None:
        an.add(MUTATING, "mutating:ip", "`ip` with an object known only when the command runs")
        return
    obj = _ip_prefix(words[0], _IP_OBJECTS)
    command = words[1] if len(words) > 1 else None
    if obj == "netns" and command is not None and "exec".startswith(command):
        an.add(MUTATING, "ip:netns-exec", "`ip netns exec` runs a command in a network namespace")
        inner = args[index + 2:]
        if inner and not any(a.text == "-all" or a.text == "-a" for a in args[:index]):
            inner = inner[1:]  # the namespace's name
        an.inner_words(inner, "ip netns exec")
        return
    if obj in _IP_LISTINGS and (command is None or command in _IP_LISTINGS[obj]) and (obj != "netns" or len(words) <= 2):
        an.allow(cmd, f"ip {obj}")
        return
    an.add(MUTATING, "mutating:ip", f"`ip {' '.join(w or '...' for w in words[:2])}` can change network "
                                    f"configuration")


# --------------------------------------------------------------------------- ethtool

# ethtool matches its mode option by full name; the show forms print a device's settings, the
# others change the NIC (offloads, rings, speed, EEPROM, firmware) or test it (cutting the link).
_ETHTOOL_SHOW = frozenset({
    "-i", "--driver", "-k", "--show-features", "--show-offload", "-g", "--show-ring", "-l", "--show-channels",
    "-c", "--show-coalesce", "-a", "--show-pause", "-S", "--statistics", "-T", "--show-time-stamping",
    "-P", "--show-permaddr", "--show-eee", "--show-fec", "--show-priv-flags", "-x", "--show-rxfh-indir",
    "--show-rxfh", "--show-tunnels", "--show-module", "-n", "-u", "--show-nfc", "--show-ntuple", "-d",
    "--register-dump", "-e", "--eeprom-dump", "-m", "--dump-module-eeprom", "--module-info", "--show-mm",
    "--show-pse", "--get-plca-cfg", "--get-plca-status",
})
_ETHTOOL_DESTRUCTIVE = frozenset({"-f", "--flash", "-E", "--change-eeprom", "--reset"})


@_handles("ethtool")
def _ethtool(an: Analysis, cmd: _Cmd) -> None:
    texts = cmd.texts
    index = 0
    while index < len(texts) and texts[index] in ("--json", "-I", "--include-statistics", "--debug", "-j"):
        index += 2 if texts[index] == "--debug" else 1
    rest = texts[index:]
    if rest in (["-h"], ["--help"], ["--version"]):
        an.allow(cmd)
        return
    if rest and rest[0] is not None and not rest[0].startswith("-") and len(rest) == 1:
        an.allow(cmd)  # `ethtool DEV` shows its link settings
        return
    if len(rest) == 2 and rest[0] in _ETHTOOL_SHOW and rest[1] is not None and not rest[1].startswith("-"):
        an.allow(cmd)
        return
    mode = rest[0] if rest else None
    if mode in _ETHTOOL_DESTRUCTIVE:
        an.add(DESTRUCTIVE, f"ethtool:{mode}", f"`ethtool {mode}` rewrites the NIC's firmware, EEPROM or state")
    else:
        an.add(MUTATING, f"ethtool:{mode or 'unknown'}", f"`ethtool {mode or '...'}` changes or tests the NIC "
                                                         f"(only the show forms with a device are read-only)")


# --------------------------------------------------------------------------- curl and wget

# What they do, for the options that are not read-only (the curl and wget handlers below allow only
# a loopback GET printed to stdout; everything else keeps the download rules).
_WRITES = Effect(MUTATING, "writes a file")
_CONFIG = Effect(MUTATING, "reads options from a file, which can set any of them (an output file included)")
_SENDS = Effect(MUTATING, "sends data or a file to the server, or uses a method other than GET")
_ELSEWHERE = Effect(MUTATING, "connects to another host, proxy or socket than the URL names")
_RUNS = Effect(MUTATING, "runs a program")

CURL = Spec(
    "curl",
    "--abstract-unix-socket=!elsewhere --alt-svc=!write --anyauth -a|--append --aws-sigv4= --basic --cacert= "
    "--capath= -E|--cert= --cert-status --cert-type= --ciphers= --compressed --compressed-ssh "
    "-K|--config=!config --connect-timeout= --connect-to=!elsewhere -C|--continue-at= -b|--cookie= "
    "-c|--cookie-jar=!write --create-dirs!write --create-file-mode= --crlf --crlfile= --curves= -d|--data=!send "
    "--data-ascii=!send --data-binary=!send --data-raw=!send --data-urlencode=!send --delegation= --digest "
    "-q|--disable --disable-eprt --disable-epsv --disallow-username-in-url --dns-interface= --dns-ipv4-addr= "
    "--dns-ipv6-addr= --dns-servers=!elsewhere --doh-cert-status --doh-insecure --doh-url=!elsewhere "
    "-D|--dump-header=!write --egd-file= --engine= --etag-compare= --etag-save=!write --expect100-timeout= "
    "-f|--fail --fail-early --fail-with-body --false-start -F|--form=!send --form-escape --form-string=!send "
    "--ftp-account= --ftp-alternative-to-user= --ftp-create-dirs --ftp-method= --ftp-pasv -P|--ftp-port= "
    "--ftp-pret --ftp-skip-pasv-ip --ftp-ssl-ccc --ftp-ssl-ccc-mode= --ftp-ssl-control -G|--get -g|--globoff "
    "--happy-eyeballs-timeout-ms= --haproxy-protocol --haproxy-clientip= -I|--head -H|--header= -h|--help "
    "--hostpubmd5= --hostpubsha256= --hsts=!write -0|--http1.0 --http1.1 --http2 --http2-prior-knowledge "
    "--http3 --http3-only --ignore-content-length -i|--include -k|--insecure --interface= -4|--ipv4 -6|--ipv6 "
    "--json=!send -j|--junk-session-cookies --keepalive-time= --key= --key-type= --krb= --libcurl=!write "
    "--limit-rate= -l|--list-only --local-port= -L|--location!elsewhere --location-trusted!elsewhere "
    "--login-options= --mail-auth=!send --mail-from=!send --mail-rcpt=!send --mail-rcpt-allowfails "
    "-M|--manual --max-filesize= --max-redirs= -m|--max-time= --metalink -n|--netrc --netrc-file= "
    "--netrc-optional -:|--next --no-alpn -N|--no-buffer --no-clobber --no-keepalive --no-npn "
    "--no-progress-meter --no-sessionid --noproxy= --ntlm --ntlm-wb!run --oauth2-bearer= -o|--output=!write "
    "--output-dir=!write -Z|--parallel --parallel-immediate --parallel-max= --pass= --path-as-is "
    "--pinnedpubkey= --post301 --post302 --post303 --preproxy=!elsewhere -#|--progress-bar --proto= "
    "--proto-default= --proto-redir= -x|--proxy=!elsewhere --proxy-anyauth --proxy-basic --proxy-cacert= "
    "--proxy-capath= --proxy-cert= --proxy-cert-type= --proxy-ciphers= --proxy-crlfile= --proxy-digest "
    "--proxy-header= --proxy-insecure --proxy-key= --proxy-key-type= --proxy-negotiate --proxy-ntlm "
    "--proxy-pass= --proxy-pinnedpubkey= --proxy-service-name= --proxy-ssl-allow-beast "
    "--proxy-ssl-auto-client-cert --proxy-tls13-ciphers= --proxy-tlsauthtype= --proxy-tlspassword= "
    "--proxy-tlsuser= --proxy-tlsv1 -U|--proxy-user= --proxy1.0=!elsewhere -p|--proxytunnel --pubkey= "
    "-Q|--quote=!send --random-file= -r|--range= --rate= --raw -e|--referer= -J|--remote-header-name!write "
    "-O|--remote-name!write --remote-name-all!write -R|--remote-time --remove-on-error -X|--request=!send "
    "--request-target= --resolve=!elsewhere --retry= --retry-all-errors --retry-connrefused --retry-delay= "
    "--retry-max-time= --sasl-authzid= --sasl-ir --service-name= -S|--show-error -s|--silent "
    "--socks4=!elsewhere --socks4a=!elsewhere --socks5=!elsewhere --socks5-basic --socks5-gssapi "
    "--socks5-gssapi-nec --socks5-gssapi-service= --socks5-hostname=!elsewhere -Y|--speed-limit= "
    "-y|--speed-time= --ssl --ssl-allow-beast --ssl-auto-client-cert --ssl-no-revoke --ssl-reqd "
    "--ssl-revoke-best-effort -2|--sslv2 -3|--sslv3 --stderr=!write --styled-output --suppress-connect-headers "
    "--tcp-fastopen --tcp-nodelay -t|--telnet-option= --tftp-blksize= --tftp-no-options -z|--time-cond= "
    "--tls-max= --tls13-ciphers= --tlsauthtype= --tlspassword= --tlsuser= -1|--tlsv1 --tlsv1.0 --tlsv1.1 "
    "--tlsv1.2 --tlsv1.3 --tr-encoding --trace=!write --trace-ascii=!write --trace-time "
    "--unix-socket=!elsewhere -T|--upload-file=!send --url= --url-query= -B|--use-ascii -u|--user= "
    "-A|--user-agent= -v|--verbose -V|--version -w|--write-out= --xattr!write --ca-native --proxy-ca-native "
    "--ipfs-gateway=!elsewhere --variable=!config --expand-url= --expand-data=!send --trace-ids "
    "--trace-config= --skip-existing --mptcp --dump-ca-embed --proxy-http2 --ip-tos= --vlan-priority= "
    "--keepalive-cnt= --out-null --follow!elsewhere --sigalgs= --knownhosts= --ech= --tls-earlydata "
    "--upload-flags= --proto-default=",
    effects={"write": _WRITES, "config": _CONFIG, "send": _SENDS, "elsewhere": _ELSEWHERE, "run": _RUNS},
    not_options="--http1 --tlsv1",
)

# Endpoints of a local model server that only report: health, metrics, the models served, versions.
# (health_generate: SGLang's health check, which has the server generate one token and says whether it could)
_READ_ENDPOINTS = ("health", "healthz", "metrics", "models", "v1/models", "version", "server_info",
                   "get_server_info", "get_model_info", "pods", "health_generate")  # pods: the kubelet's
_LOOPBACK_HOST = re.compile(r"(?:https?://)?(?:127\.0\.0\.1|localhost|\[::1\])(?::[0-9]{1,5})?(/.*)?")
_LOOPBACK_URL = re.compile(
    r"(?:https?://)?(?:127\.0\.0\.1|localhost|\[::1\])(?::[0-9]{1,5})?/(?:" +
    "|".join(re.escape(e) for e in _READ_ENDPOINTS) + r")/?"
)
# curl options that keep a loopback GET read-only: they shape the request or what is printed.
_CURL_READ = frozenset({
    "--silent", "--show-error", "--fail", "--fail-with-body", "--fail-early", "--max-time", "--connect-timeout",
    "--include", "--verbose", "--header", "--ipv4", "--ipv6", "--insecure", "--compressed", "--globoff",
    "--no-progress-meter", "--write-out", "--request", "--user-agent", "--no-buffer", "--http1.0", "--http1.1",
    "--http2", "--retry", "--retry-delay", "--retry-max-time", "--retry-connrefused", "--retry-all-errors",
    "--disable", "--noproxy", "--url", "--get", "--raw", "--tcp-nodelay", "--progress-bar", "--max-filesize",
    "--trace-time", "--styled-output", "--no-keepalive", "--keepalive-time", "--speed-limit", "--speed-time",
    "--limit-rate", "--output", "--head",
})


def _loopback_read(urls: list[Arg]) -> bool:
    return bool(urls) and all(u.text is not None and _LOOPBACK_URL.fullmatch(u.text)
                              and (not u.pattern or _only_ipv6_loopback_brackets(u.text)) for u in urls)


def _only_ipv6_loopback_brackets(url: str) -> bool:
    """`http://[::1]:8000/health` unquoted is a bash pattern too: it could match only a directory `http:` of the
    working directory holding `1:8000/health` or `::8000/health`, and then name host 0.0.0.1 or none, so it
    reaches no host either way; any other glob character keeps the word a pattern."""
    rest = url.replace("[::1]", "", 1)
    return "[::1]" in url and not any(c in rest for c in "*?[]")


def _curl_reads(parsed: Parsed) -> bool:
    """A GET of a loopback server's read-only endpoint, printed to stdout, nothing else."""
    if parsed.unknown:
        return False
    for used in parsed.used:
        name = used.option.names[-1]
        value = used.value.text if used.value is not None else ""
        if name not in _CURL_READ or value is None:
            return False
        if name == "--request" and value != "GET":
            return False
        if name == "--output" and value not in ("-", "/dev/null"):
            return False  # stdout, or discarded (`-o /dev/null -w '%{http_code}'`): no file is written
        if name in ("--header", "--write-out") and (value.startswith("@") or "%output" in value):
            return False  # @FILE reads a file; %output{FILE} writes one
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            return False  # a CR/LF in a header ends it and can start a second request (a POST) to the server
    return _loopback_read(parsed.operands + parsed.values("--url"))


# GNU Wget. It saves to a file unless -O - (or --spider, which saves nothing), and -e runs any wgetrc
# command; so `-O -` or --spider to a loopback endpoint is read-only. It follows a redirect by itself: a
# loopback server could send it on to another host with a GET, which the read sandbox's network refuses.
WGET = Spec(
    "wget",
    "-V|--version -h|--help -b|--background!write -e|--execute=!config -o|--output-file=!write "
    "-a|--append-output=!write -d|--debug -q|--quiet -v|--verbose -n= --no-verbose --report-speed= "
    "-i|--input-file=!config -F|--force-html -B|--base= --config=!config --no-config --rejected-log=!write "
    "-t|--tries= --retry-connrefused --retry-on-http-error= -O|--output-document= --no-netrc -c|--continue "
    "--start-pos= --progress= --show-progress -N|--timestamping --no-if-modified-since "
    "--no-use-server-timestamps -S|--server-response --spider -T|--timeout= --dns-timeout= --connect-timeout= "
    "--read-timeout= -w|--wait= --waitretry= --random-wait --no-proxy -Q|--quota= --bind-address= "
    "--limit-rate= --no-dns-cache --restrict-file-names= --ignore-case -4|--inet4-only -6|--inet6-only "
    "--prefer-family= --user= --password= --ask-password --use-askpass=!run --no-iri --local-encoding= "
    "--remote-encoding= --unlink --xattr -x|--force-directories --protocol-directories "
    "-P|--directory-prefix=!write --cut-dirs= --http-user= --http-password= --no-cache --default-page= "
    "-E|--adjust-extension --ignore-length --header= --compression= --max-redirect= --proxy-user= "
    "--proxy-password= --referer= --save-headers -U|--user-agent= --no-http-keep-alive --no-cookies "
    "--load-cookies= --save-cookies=!write --keep-session-cookies --post-data=!send --post-file=!send "
    "--method=!send --body-data=!send --body-file=!send --content-disposition --content-on-error "
    "--auth-no-challenge --secure-protocol= --https-only --no-check-certificate --certificate= "
    "--certificate-type= --private-key= --private-key-type= --ca-certificate= --ca-directory= --crl-file= "
    "--pinnedpubkey= --ciphers= --no-hsts --hsts-file=!write --ftp-user= --ftp-password= --no-remove-listing "
    "--no-glob --no-passive-ftp --preserve-permissions --retr-symlinks --ftps-implicit --ftps-resume-ssl "
    "--ftps-clear-data-connection --ftps-fallback-to-ftp --warc-file=!write --warc-header= --warc-max-size= "
    "--warc-cdx --warc-dedup= --no-warc-compression --no-warc-digests --no-warc-keep-log --warc-tempdir= "
    "-r|--recursive -l|--level= --delete-after -k|--convert-links --convert-file-only --backups= "
    "-K|--backup-converted -m|--mirror -p|--page-requisites --strict-comments -A|--accept= -R|--reject= "
    "--accept-regex= --reject-regex= --regex-type= -D|--domains= --exclude-domains= --follow-ftp "
    "--follow-tags= --ignore-tags= -H|--span-hosts -L|--relative -I|--include-directories= "
    "--trust-server-names -X|--exclude-directories= --no-clobber --no-directories --no-host-directories "
    "--no-parent --input-metalink= --metalink-over-http --metalink-index= --preferred-location= "
    "--keep-badhash --no-proxy --hsts-file=!write --egd-file= --no-iri",
    effects={"write": _WRITES, "config": _CONFIG, "send": _SENDS, "run": _RUNS},
)
_WGET_READ = frozenset({"--quiet", "--output-document", "--no-verbose", "-n", "--timeout", "--connect-timeout",
                        "--read-timeout", "--dns-timeout", "--tries", "--server-response", "--header",
                        "--user-agent", "--no-check-certificate", "--inet4-only", "--inet6-only", "--no-proxy",
                        "--max-redirect", "--no-config", "--no-cache", "--no-cookies", "--no-hsts", "--verbose",
                        "--debug", "--spider"})


def _wget_reads(parsed: Parsed) -> bool:
    if parsed.unknown or not (parsed.has("--output-document") or parsed.has("--spider")):
        return False
    for used in parsed.used:
        name = used.option.names[-1]
        value = used.value.text if used.value is not None else ""
        if name not in _WGET_READ or value is None:
            return False
        if (name == "--output-document" and value != "-") or (name == "--max-redirect" and value != "0") \
                or (name == "-n" and value != "v"):
            return False
    return _loopback_read(parsed.operands)


@_handles("wget", "curl")
def _download(an: Analysis, cmd: _Cmd) -> None:
    if cmd.prog == "curl" and _curl_reads(CURL.parse(cmd.args)) or \
            cmd.prog == "wget" and _wget_reads(WGET.parse(cmd.args)):
        an.allow(cmd)
        return
    if cmd.prog == "wget":
        opts = _getopt(cmd.args, short_value="OoaPeUtTwQlABDIXRY", long_value={"--output-document", "--output-file"},
                       permute=True)
        targets = [v for v in opts.values("-O", "--output-document") if v.text != "-"]
    else:
        opts = _getopt(cmd.args, short_value="oXdHuFTAeEKrwmxyYzCbcD", long_value={"--output", "--data", "--header",
                                                                                    "--user", "--request"}, permute=True)
        targets = opts.values("-o", "--output")
    for target in targets:
        an.write(target, f"`{cmd.prog}`", cmd.prog)
    urls = [a.text for a in opts.operands if a.text and "://" in a.text or (a.text or "").startswith("localhost")]
    if urls and all(_LOOPBACK_HOST.fullmatch(u) for u in urls) and not targets:
        paths = ", ".join(f"/{e}" for e in _READ_ENDPOINTS)
        an.add(MUTATING, f"download:{cmd.prog}-endpoint",
               f"`{cmd.prog}` of a loopback server is a read only for a GET of an endpoint that only reports ({paths}) "
               f"with options that shape the request or what is printed; {', '.join(urls)} is not one of them, or "
               f"an option is not (a POST, an output file, a config file, a proxy)")
        return
    an.add(MUTATING, f"download:{cmd.prog}", f"`{cmd.prog}` fetches from the network and can save files")


_HANDLERS["ss"] = specified(SS, _ss_operands)

# netstat (net-tools) only lists. Without -n it looks every address up in the DNS, which asks other
# hosts; the interface and statistics tables name no addresses.
NETSTAT = Spec(
    "netstat",
    "-r|--route -i|--interfaces -g|--groups -s|--statistics -M|--masquerade -v|--verbose -W|--wide -n|--numeric "
    "--numeric-hosts --numeric-ports --numeric-users -N|--symbolic -e|--extend -p|--programs -o|--timers "
    "-c|--continuous -l|--listening -a|--all -F|--fib -C|--cache -Z|--context -t|--tcp -u|--udp -U|--udplite "
    "-S|--sctp -w|--raw -x|--unix --ax25 --ipx --netrom --ddp --inet --inet6 --unix -4 -6 -A= -V|--version "
    "-h|--help",
    not_options="--af --protocol",
)


def _netstat_operands(an: Analysis, cmd: _Cmd, parsed: Parsed) -> bool:
    if parsed.operands:
        an.add(MUTATING, "netstat:operand", f"`netstat` takes no operand `{parsed.operands[0].text}`")
        return False
    if not parsed.has("-n", "--numeric-hosts", "-i", "-s", "-V", "-h"):
        an.add(MUTATING, "netstat:dns", "`netstat` without -n looks every address up in the DNS, asking other hosts")
        return False
    return True


_HANDLERS["netstat"] = specified(NETSTAT, _netstat_operands)

SPECS = [SS, NETSTAT, CURL, WGET]
