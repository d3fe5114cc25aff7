"""The backup ledger: the verified backups taken in this session, per host."""

from __future__ import annotations

import threading

from tools.base import BackupRecord


class BackupLedger:
    """Verified backups taken in this session, per host. The gate reads it; tools' results fill it."""

    def __init__(self) -> None:
        self._by_host: dict[str, list[BackupRecord]] = {}
        self._lock = threading.Lock()

    def register(self, record: BackupRecord) -> None:
        with self._lock:
            self._by_host.setdefault(record.host, []).append(record)

    def latest_verified(self, host: str) -> BackupRecord | None:
        with self._lock:
            verified = [r for r in self._by_host.get(host, []) if r.verified]
        return verified[-1] if verified else None

    def find(self, backup_id: str) -> BackupRecord | None:
        """The verified backup of this session with that id, if there is one."""
        with self._lock:
            return next((r for records in self._by_host.values() for r in records
                         if r.backup_id == backup_id and r.verified), None)

    def all(self) -> list[BackupRecord]:
        with self._lock:
            return [r for records in self._by_host.values() for r in records]


class BaselineLedger:
    """What a benchmark baseline depends on, per host: the labels run_bench measured there in this session,
    and whether a change has run there. The loop fills it from the results, as it fills the backups; a
    resumed session starts from the earlier part's (`facts`, `restore`)."""

    def __init__(self) -> None:
        self._labels: dict[str, set[str]] = {}
        self._changed: set[str] = set()
        self._lock = threading.Lock()

    def measured(self, host: str, label: str) -> None:
        with self._lock:
            self._labels.setdefault(host, set()).add(label)

    def changed(self, host: str) -> None:
        with self._lock:
            self._changed.add(host)

    def has(self, host: str, label: str) -> bool:
        with self._lock:
            return label in self._labels.get(host, set())

    def is_changed(self, host: str) -> bool:
        with self._lock:
            return host in self._changed

    def facts(self) -> dict:
        """The form a `resumed` event keeps: {"labels": {host: [label, ...]}, "changed": [host, ...]}."""
        with self._lock:
            return {"labels": {h: sorted(ls) for h, ls in sorted(self._labels.items())},
                    "changed": sorted(self._changed)}

    def restore(self, facts: dict) -> None:
        for host, labels in (facts.get("labels") or {}).items():
            for label in labels:
                self.measured(host, label)
        for host in facts.get("changed") or []:
            self.changed(host)
