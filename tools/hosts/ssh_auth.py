"""SSH authentication: public keys only, the ssh-agent's first, then key files.

Never a password, never a passphrase prompt: a key that needs a passphrase is skipped, and
the failure message says how to load it into an agent instead.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import paramiko
from paramiko.auth_strategy import AuthStrategy, InMemoryPrivateKey, OnDiskPrivateKey

from tools.hosts.ssh_config import Endpoint


class _KeyAuth(AuthStrategy):
    """Public keys only: the agent's first, then key files. Never a password or a passphrase prompt."""

    def __init__(self, endpoint: Endpoint, use_agent: bool):
        super().__init__(ssh_config=None)
        self.endpoint = endpoint
        self.use_agent = use_agent and bool(os.environ.get("SSH_AUTH_SOCK"))
        self.agent: paramiko.Agent | None = None
        self.agent_keys = 0
        self.encrypted: list[str] = []  # key files that need a passphrase we will not ask for
        self.unreadable: list[str] = []
        self.tried_files: list[str] = []

    def _key_files(self) -> list[tuple[str, str]]:
        if self.endpoint.identity_files:
            return [(p, "ssh-config") for p in self.endpoint.identity_files]
        home = os.path.expanduser("~/.ssh")
        return [(os.path.join(home, n), "implicit-home") for n in ("id_ed25519", "id_ecdsa", "id_rsa")]

    def get_sources(self):
        user = self.endpoint.user
        offered: set[str] = set()
        if self.use_agent:
            try:
                self.agent = paramiko.Agent()
            except paramiko.SSHException:
                self.agent = None  # a stale SSH_AUTH_SOCK: go on with key files, as ssh does
                self.use_agent = False
        if self.agent is not None:
            wanted = self._configured_public_fingerprints() if self.endpoint.identities_only else None
            for key in self.agent.get_keys():
                if wanted is not None and key.fingerprint not in wanted:
                    continue
                self.agent_keys += 1
                offered.add(key.fingerprint)
                yield InMemoryPrivateKey(user, key)
        for path, source in self._key_files():
            if not os.path.isfile(path):
                continue
            try:
                pkey = paramiko.PKey.from_path(path)
            except paramiko.PasswordRequiredException:
                self.encrypted.append(path)
                continue
            except TypeError as e:
                # PKey.from_path lets cryptography's "Key is password-protected" TypeError through.
                (self.encrypted if "password" in str(e).lower() else self.unreadable).append(path)
                continue
            except (paramiko.SSHException, ValueError, OSError):
                self.unreadable.append(path)
                continue
            if pkey.fingerprint in offered:
                continue
            self.tried_files.append(path)
            yield OnDiskPrivateKey(user, source, Path(path), pkey)

    def _configured_public_fingerprints(self) -> set[str]:
        out = set()
        for path, _ in self._key_files():
            try:
                blob = paramiko.PublicBlob.from_file(path + ".pub")
            except (OSError, ValueError):
                continue  # no readable .pub: that key cannot be picked out of the agent's
            out.add("SHA256:" + base64.b64encode(hashlib.sha256(blob.key_blob).digest()).decode().rstrip("="))
        return out

    def close(self) -> None:
        if self.agent is not None:
            self.agent.close()

    def failure_message(self, label: str) -> str:
        ep = self.endpoint
        if self.encrypted and not self.agent_keys:
            files = ", ".join(self.encrypted)
            agent = "no ssh-agent is running (SSH_AUTH_SOCK is not set)" if not self.use_agent else \
                "the ssh-agent offers no key for it"
            return (f"{label}: cannot log in: key {files} is protected by a passphrase and {agent}. "
                    f"upgrade-agent never asks for passphrases: load the key into an agent first "
                    f"(eval $(ssh-agent); ssh-add {self.encrypted[0]}) and run again.")
        tried = []
        if self.agent_keys:
            tried.append(f"{self.agent_keys} agent key(s)")
        tried += self.tried_files
        tried += [f"{p} (passphrase-protected, skipped)" for p in self.encrypted]
        tried += [f"{p} (not a readable private key)" for p in self.unreadable]
        what = ", ".join(tried) if tried else "no keys at all (no agent, no IdentityFile, no ~/.ssh/id_*)"
        return (f"{label}: authentication as {ep.user!r} failed; tried {what}. Check that the public key is "
                f"in ~{ep.user}/.ssh/authorized_keys on the host, and User/IdentityFile in the ssh config.")
