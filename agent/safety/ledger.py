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
