#!/usr/bin/env bash
# Prepare a GPU machine for the GPU tests, then run them (or the command given).
#
#   bash tests/gpu/run.sh                      # python3 -m pytest -m gpu tests/gpu -v
#   bash tests/gpu/run.sh COMMAND [ARGS...]    # COMMAND in the same prepared environment
#
# From the repository's root, with the interpreter that holds torch as `python3`. For a machine
# that cannot reach a package index or has no OpenSSH server, bring them along (docs/gpu.md):
#   .whl/   wheels of the project's dependencies for that machine's Python; installed into a
#           folder of their own and put on PYTHONPATH, so the torch environment is left as it is
#   .debs/  OpenSSH's server and client packages and the libraries they link to; unpacked into a
#           folder of their own, and only the libraries the machine lacks are put beside sshd
set -u
cd "$(dirname "$0")/../.." || exit 2

site=/tmp/upgrade-agent-gpu-site
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl \
        || { echo "run.sh: installing .whl/*.whl failed" >&2; exit 2; }
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi

if [ -z "${UPGRADE_AGENT_SSHD:-}" ] && [ ! -x /usr/sbin/sshd ] && compgen -G ".debs/*.deb" >/dev/null; then
    ossh=/tmp/upgrade-agent-openssh
    rm -rf "$ossh" && mkdir -p "$ossh/root" "$ossh/lib" "$ossh/bin"
    for deb in .debs/*.deb; do dpkg -x "$deb" "$ossh/root" || exit 2; done
    # Only what the machine lacks: its own libc, libcrypto and friends stay in use.
    for _ in 1 2 3 4; do
        missing=$(LD_LIBRARY_PATH="$ossh/lib" ldd "$ossh/root/usr/sbin/sshd" "$ossh/root/usr/bin/ssh-keygen" \
                  | awk '/not found/ {print $1}' | sort -u)
        [ -z "$missing" ] && break
        for so in $missing; do
            found=$(find "$ossh/root" -name "$so" | head -n 1)
            [ -n "$found" ] && cp -L "$found" "$ossh/lib/"
        done
    done
    for prog in usr/sbin/sshd usr/bin/ssh-keygen; do
        # sshd re-executes itself by the absolute path it was started with, keeping the environment.
        printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$ossh/lib" "$ossh/root/$prog" >"$ossh/bin/${prog##*/}"
        chmod +x "$ossh/bin/${prog##*/}"
    done
    export UPGRADE_AGENT_SSHD="$ossh/bin/sshd"
    command -v ssh-keygen >/dev/null || export PATH="$PATH:$ossh/bin"
    # sshd started as root separates privileges into the user `sshd`, which a machine without an
    # OpenSSH server may not have.
    if [ "$(id -u)" = 0 ] && ! getent passwd sshd >/dev/null; then
        useradd --system --no-create-home --home-dir /run/sshd --shell /usr/sbin/nologin sshd \
            || { echo "run.sh: cannot create the user sshd that sshd needs" >&2; exit 2; }
    fi
    echo "run.sh: OpenSSH unpacked into $ossh; libraries brought: $(ls "$ossh/lib" | tr '\n' ' ')" >&2
fi

if [ $# -eq 0 ]; then
    set -- python3 -m pytest -m gpu tests/gpu -v -rA
fi
exec "$@"
