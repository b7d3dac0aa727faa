"""Where a record goes when the latency store cannot take it, until a later run replays it; and
the quarantine beside it, where an entry that can be neither read nor stored waits for a person.

- :class:`SqsSpool` in AWS: an encrypted queue (10 days' retention) per stack; its quarantine is a
  second queue (the spool queue's dead-letter queue too), each message with its reason.
- :class:`DirectorySpool` for local runs: one JSON file per record, mode 0600; its quarantine is
  ``<spool>/_quarantine/<route>/``, each entry with a ``.reason`` file beside it.

Replay writes with the same conditional put as RecordResult and the same key, so a record that
reached both the store and the spool is still stored once. An entry replay cannot read, or that
the store refuses as malformed, is quarantined (:meth:`quarantine`) and replay goes on past it:
one bad entry never strands the records behind it (`replmon spool` lists, retries and drops them).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replmon.core.files import write_atomic
from replmon.core.names import contained
from replmon.core.record import ProbeRecord

#: The quarantine folder of a directory spool: a name no route can have (core/names.py NAME_RE).
QUARANTINE = "_quarantine"
REASON_SUFFIX = ".reason"
#: What replmon before the quarantine did with a file that was not a record: renamed it so, in its
#: route folder, and said nothing. Replay takes such files up again (a record is stored, the rest quarantined).
SET_ASIDE_SUFFIX = ".json.unreadable"


def _encode(record: ProbeRecord) -> str:
    return json.dumps({**record.to_item(), "retention_days": record.retention_days}, default=str, allow_nan=False)


def _decode(body: str) -> ProbeRecord:
    """A spooled record, or ValueError/KeyError/TypeError naming why it is not one."""
    item = json.loads(body)
    if not isinstance(item, dict):
        raise ValueError(f"a JSON {type(item).__name__}, not a record object")
    rec = ProbeRecord.from_item(item)
    rec.retention_days = int(item.get("retention_days", rec.retention_days))
    return rec


def unreadable(exc: BaseException) -> str:
    """Why an entry is not a record, in one line: 'not JSON (...)', 'missing field route', ..."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.start})"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
    if isinstance(exc, KeyError):
        return f"not a record: missing field {exc.args[0]}"
    if isinstance(exc, OSError):
        return f"not readable: {exc.strerror or exc}"
    return f"not a record: {' '.join(str(exc).split())[:200] or type(exc).__name__}"


class SqsSpool:
    """The stack's spool queue; ``client`` is an SQS client from adapters/clients.py. Without a
    ``quarantine_url`` a bad message stays (the queue's redrive policy moves it after its receives)."""

    def __init__(self, queue_url: str, client: Any, quarantine_url: str | None = None) -> None:
        self.client, self.queue_url, self.quarantine_url = client, queue_url, quarantine_url
        self._bodies: dict[str, str] = {}
        self._ids: dict[str, str] = {}  # receipt handle -> message id (the name `replmon spool list` shows)
        self.quarantined: list[str] = []  # "<message id>: <reason>", this process's

    def spool(self, record: ProbeRecord) -> None:
        self.client.send_message(QueueUrl=self.queue_url, MessageBody=_encode(record))

    def drain(self, limit: int) -> Iterator[tuple[str, ProbeRecord]]:
        taken = 0
        while taken < limit:
            # One message first: every message received counts toward the queue's maxReceiveCount, and
            # while the store is down replay stops at the first, so an outage adds a receive to one
            # message per run, not to a batch of ten (template.yaml RecordSpoolQueue).
            r = self.client.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=min(10 if taken else 1, limit - taken),
                                            WaitTimeSeconds=0, VisibilityTimeout=120)
            messages = r.get("Messages", [])
            if not messages:
                return
            for m in messages:
                taken += 1
                handle, body = m["ReceiptHandle"], m.get("Body", "")
                self._bodies[handle], self._ids[handle] = body, str(m.get("MessageId", handle[:16]))
                try:
                    record = _decode(body)
                except (ValueError, KeyError, TypeError) as exc:
                    self.quarantine(handle, unreadable(exc))
                    continue
                yield handle, record

    def ack(self, handle: str) -> None:
        self.client.delete_message(QueueUrl=self.queue_url, ReceiptHandle=handle)
        self._bodies.pop(handle, None)
        self._ids.pop(handle, None)

    def quarantine(self, handle: str, reason: str) -> None:
        """Move the message to the quarantine queue with its reason (a message attribute)."""
        entry = self._ids.get(handle, handle[:16])
        if not self.quarantine_url:
            self.quarantined.append(f"{entry}: {reason}; left in the spool queue (no quarantine queue: "
                                    "its redrive policy moves it after maxReceiveCount receives)")
            return
        from replmon.adapters.explain import explain

        spooled = entry
        try:
            sent = self.client.send_message(QueueUrl=self.quarantine_url, MessageBody=self._bodies.get(handle, "") or "(empty)",
                                            MessageAttributes={"reason": {"DataType": "String", "StringValue": reason[:1000]},
                                                               SPOOL_ID: {"DataType": "String", "StringValue": spooled}})
            entry = str((sent or {}).get("MessageId") or entry)  # its id in the quarantine queue, as `spool list` names it
        except Exception as exc:  # the quarantine queue refused it: the message comes back after its visibility
            # timeout, and the redrive policy moves it in the end
            self.quarantined.append(f"{entry}: {reason}; NOT moved to the quarantine queue ({explain(exc)[:200]})")
            return
        try:
            self.ack(handle)
        except Exception as exc:  # in quarantine already; the spool's message comes back, and the next run copies it
            # again under the same spool id (``spool list`` shows one entry per spool id, `retry`/`drop` handle every copy)
            reason = (f"{reason}; in the quarantine queue, but NOT removed from the spool queue ({explain(exc)[:200]}): "
                      f"the next run quarantines it again as the same entry (spool message {spooled})")
        self.quarantined.append(f"{entry}: {reason}")


#: The quarantine copy's message attribute naming the spool queue's message it was copied from: a
#: message copied twice (its delete from the spool failed once) is one entry for a person.
SPOOL_ID = "spool_message_id"


@dataclass(frozen=True)
class QueuedEntry:
    """A message of a deployed stack's quarantine queue: its id, why it is there, what it holds."""

    message_id: str
    reason: str
    body: str
    sent_at: float | None
    spool_id: str | None = None  # the spool queue's message it was copied from (None: moved by the redrive policy)

    def to_json(self) -> dict[str, Any]:
        return {"entry": self.message_id, "reason": self.reason, "sent_at": self.sent_at, "body": self.body[:2000]}


#: How long retry/drop hide the messages they read: long enough for a thousand entries' calls, so no
#: receipt goes stale mid-run (a stale one's DeleteMessage can succeed and delete nothing); every
#: message not handled is shown again at once.
HANDLE_HIDE_S = 300


class SqsQuarantine:
    """A deployed stack's spool and quarantine queues, for a person (`replmon spool --stack-name`):
    counts, the quarantined messages with their reasons, retry (back to the spool) and drop."""

    def __init__(self, client: Any, spool_url: str, quarantine_url: str) -> None:
        self.client, self.spool_url, self.quarantine_url = client, spool_url, quarantine_url

    def waiting(self) -> int:
        """Messages in the spool queue (visible and being replayed): records the next run replays."""
        a = self.client.get_queue_attributes(QueueUrl=self.spool_url, AttributeNames=["ApproximateNumberOfMessages",
                                                                                        "ApproximateNumberOfMessagesNotVisible"])
        return sum(int(v) for v in a.get("Attributes", {}).values())

    def _read(self, limit: int = 1000, visibility: int = 30) -> list[tuple[QueuedEntry, str]]:
        """Every quarantined message with a receipt handle (each hidden for ``visibility`` s while it is handled)."""
        out: list[tuple[QueuedEntry, str]] = []
        while len(out) < limit:
            # long polling (>= 1 s) asks every SQS server: a short poll samples some and can answer empty
            # while messages wait (ReceiveMessage, "short and long polling")
            r = self.client.receive_message(QueueUrl=self.quarantine_url, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=visibility,
                                            MessageAttributeNames=["All"], AttributeNames=["SentTimestamp"])
            messages = r.get("Messages", [])
            if not messages:
                break
            for m in messages:
                reason = (m.get("MessageAttributes", {}).get("reason") or {}).get("StringValue") or \
                    "(no reason: moved here by the spool queue's redrive policy after its maxReceiveCount failed receives)"
                sent = m.get("Attributes", {}).get("SentTimestamp")
                origin = (m.get("MessageAttributes", {}).get(SPOOL_ID) or {}).get("StringValue")
                out.append((QueuedEntry(m["MessageId"], reason, m.get("Body", ""), int(sent) / 1000 if sent else None, origin),
                            m["ReceiptHandle"]))
        return out

    @staticmethod
    def _copies(read: list[tuple[QueuedEntry, str]]) -> dict[str, list[tuple[QueuedEntry, str]]]:
        """The messages by entry: copies of one spool message (same spool id) under the first copy's id."""
        first: dict[str, str] = {}
        out: dict[str, list[tuple[QueuedEntry, str]]] = {}
        for entry, receipt in read:
            name = first.setdefault(entry.spool_id, entry.message_id) if entry.spool_id else entry.message_id
            out.setdefault(name, []).append((entry, receipt))
        return out

    def entries(self) -> list[QueuedEntry]:
        """The quarantined entries, one per spool message (read, then made visible again at once)."""
        read = self._read()
        for _, handle in read:
            self.client.change_message_visibility(QueueUrl=self.quarantine_url, ReceiptHandle=handle, VisibilityTimeout=0)
        return [copies[0][0] for copies in self._copies(read).values()]

    def handle(self, ids: set[str] | None, retry: bool) -> tuple[list[QueuedEntry], list[tuple[QueuedEntry, str]]]:
        """Retry (send back to the spool, once) or drop the entries with these ids (None: every one),
        every copy of each: (the entries handled, the entries whose SQS call failed with what
        failed). One entry's failure is named and the others are still handled; a failed entry
        stays in the quarantine queue, visible again at once (or when its hide ends, if SQS refuses
        that too)."""
        from botocore.exceptions import ClientError

        from replmon.adapters.explain import explain

        done: list[QueuedEntry] = []
        failed: list[tuple[QueuedEntry, str]] = []
        for name, copies in self._copies(self._read(visibility=HANDLE_HIDE_S)).items():
            entry = copies[0][0]
            if ids is not None and name not in ids:
                self._show(copies)
                continue
            try:
                if retry:
                    self.client.send_message(QueueUrl=self.spool_url, MessageBody=entry.body)
            except Exception as exc:  # it stays in quarantine, untouched
                # SQS answered no; a timeout or a lost answer may come after SQS took the message
                sent = "not sent" if isinstance(exc, ClientError) else "maybe not sent"
                failed.append((entry, f"{sent} back to the spool queue: {explain(exc)}; run the command again for it"))
                self._show(copies)
                continue
            try:
                for _, receipt in copies:
                    self.client.delete_message(QueueUrl=self.quarantine_url, ReceiptHandle=receipt)
            except Exception as exc:
                failed.append((entry, (f"sent back to the spool queue, but NOT removed from the quarantine queue: {explain(exc)}; "
                                       f"drop it (replmon spool drop {entry.message_id} --stack-name ...), a retry would send it twice")
                               if retry else f"NOT removed from the quarantine queue: {explain(exc)}; run the command again for it"))
                self._show(copies)
                continue
            done.append(entry)
        return done, failed

    def _show(self, copies: list[tuple[QueuedEntry, str]]) -> None:
        """Visible again at once; a refusal only leaves them hidden until their hide ends."""
        for _, receipt in copies:
            with contextlib.suppress(Exception):  # a copy already deleted, or SQS refusing: nothing lost
                self.client.change_message_visibility(QueueUrl=self.quarantine_url, ReceiptHandle=receipt, VisibilityTimeout=0)


@dataclass(frozen=True)
class Quarantined:
    """One entry of a directory spool's quarantine: ``<route>/<name>`` and why it is there."""

    entry: str
    path: Path
    reason: str
    quarantined_at: float | None

    def to_json(self) -> dict[str, Any]:
        return {"entry": self.entry, "path": str(self.path), "reason": self.reason, "quarantined_at": self.quarantined_at}


class DirectorySpool:
    """``<dir>/<route>/<record key>.json``, mode 0600 in 0700 folders; written atomically (a
    temporary file in the same folder, fsynced, then renamed: a full disk leaves no partial or
    empty record, and the temporary file is removed). A route name that would leave the spool
    (checked at the edge already) is refused here too (:class:`PathEscape`).

    >>> import tempfile
    >>> spool = DirectorySpool(Path(tempfile.mkdtemp()))
    >>> (spool.root / "r" / "x.json").mkdir(parents=True)  # not a record file
    >>> list(spool.drain(10)), [q.reason for q in spool.quarantine_entries()]
    ([], ['not a record: a folder, not a record file'])
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.quarantined: list[str] = []  # "<route>/<name>: <reason>", what this process quarantined

    @property
    def quarantine_dir(self) -> Path:
        return self.root / QUARANTINE

    def _path(self, record: ProbeRecord) -> Path:
        name = re.sub(r"[^A-Za-z0-9._-]", "_", record.sort_key)
        return contained(self.root, record.route, f"{name}.json")

    def spool(self, record: ProbeRecord) -> None:
        path = self._path(record)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.parent.mkdir(exist_ok=True, mode=0o700)
        write_atomic(path, _encode(record).encode())

    def entries(self) -> list[Path]:
        """What waits to be replayed, oldest key first: every ``*.json`` in a route folder, whatever
        it is (a folder named ``x.json`` too: replay quarantines it rather than stop at it), and every
        ``*.json.unreadable`` an earlier replmon set aside without a word."""
        if not self.root.is_dir():
            return []
        out: list[Path] = []
        for folder in sorted(self.root.iterdir()):
            if folder.name == QUARANTINE or not folder.is_dir() or folder.is_symlink():
                continue
            try:
                out += [p for p in folder.iterdir() if p.name.endswith((".json", SET_ASIDE_SUFFIX)) and not p.name.startswith(".")]
            except OSError as exc:  # a route folder that cannot be listed: said, and the others still replayed
                from replmon.core.files import describe_os_error

                line = f"{folder.name}/: cannot be listed ({describe_os_error(exc)}); its records wait there"
                if line not in self.quarantined:
                    self.quarantined.append(line)
        return sorted(out)

    def drain(self, limit: int) -> Iterator[tuple[str, ProbeRecord]]:
        """Up to ``limit`` entries handled: each stored and removed, or moved to quarantine. One that
        stays where it is (it could not be moved to quarantine, was stored but not removed, or was kept
        for a later replay) does not count: such entries sort first and, counted, would fill every
        run's limit and jam the replay of the records behind them."""
        handled = 0
        for path in self.entries():
            if handled >= limit:
                return
            record = self.read(path)
            if isinstance(record, str):
                self.quarantine(str(path), record)
            else:
                yield str(path), record  # the caller acks or quarantines it before asking for the next
            handled += not os.path.lexists(path)

    @staticmethod
    def read(path: Path) -> ProbeRecord | str:
        """The record an entry holds, or why it is not one (what replay quarantines it with)."""
        try:
            if path.is_symlink() or not path.is_file():
                raise ValueError("a " + ("symbolic link" if path.is_symlink() else "folder" if path.is_dir() else "special file")
                                 + ", not a record file")
            return _decode(path.read_bytes().decode("utf-8"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            older = " (set aside as *.unreadable by an earlier replmon)" if path.name.endswith(SET_ASIDE_SUFFIX) else ""
            return unreadable(exc) + older

    def ack(self, handle: str) -> None:
        """Remove a stored record's file. One that cannot be removed (a read-only folder) is named, not
        raised: the next run finds it stored already (a duplicate), and the records behind it still replay."""
        try:
            Path(handle).unlink(missing_ok=True)
        except OSError as exc:
            from replmon.core.files import describe_os_error

            path = Path(handle)
            self.quarantined.append(f"{path.parent.name}/{path.name}: stored, but NOT removed from the spool "
                                    f"({describe_os_error(exc)}); remove it by hand")

    def quarantine(self, handle: str, reason: str) -> None:
        """Move the entry to ``_quarantine/<route>/`` with a ``.reason`` file beside it. An entry that
        cannot be moved (a full disk, a read-only folder) stays where it is and the reason says so;
        replay goes on past it either way."""
        path = Path(handle)
        entry = f"{path.parent.name}/{path.name}"
        try:
            folder = self.quarantine_dir / path.parent.name
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            dest = folder / path.name
            n = 1
            while dest.exists() or dest.is_symlink():
                dest, n = folder / f"{path.stem}.{n}{path.suffix}", n + 1
            path.replace(dest)
            write_atomic(dest.with_name(dest.name + REASON_SUFFIX),
                         json.dumps({"reason": reason, "quarantined_at": time.time(), "from": str(path)}).encode())
        except OSError as exc:
            from replmon.core.files import describe_os_error

            reason = f"{reason}; NOT moved to quarantine ({describe_os_error(exc)})"
        self.quarantined.append(f"{entry}: {reason}")

    def quarantine_entries(self) -> list[Quarantined]:
        """What the quarantine holds, each with its reason (a missing or unreadable ``.reason``: said so)."""
        q = self.quarantine_dir
        if not q.is_dir():
            return []
        out = []
        for folder in sorted(p for p in q.iterdir() if p.is_dir()):
            for path in sorted(p for p in folder.iterdir() if not p.name.endswith(REASON_SUFFIX) and not p.name.startswith(".")):
                reason, at = "(no reason file)", None
                try:
                    raw = json.loads(path.with_name(path.name + REASON_SUFFIX).read_text())
                    reason, at = str(raw.get("reason", reason)), raw.get("quarantined_at")
                except (OSError, ValueError, AttributeError):
                    pass
                out.append(Quarantined(f"{folder.name}/{path.name}", path, reason, at if isinstance(at, (int, float)) else None))
        return out

    def retry(self, q: Quarantined) -> Path:
        """Put a quarantined entry back in the spool: the next run replays it (or quarantines it again)."""
        route = q.path.parent.name
        name = q.path.name if q.path.name.endswith(".json") else q.path.name + ".json"
        dest = contained(self.root, route, name)
        dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if dest.exists():
            raise FileExistsError(f"{dest} is already in the spool")
        q.path.replace(dest)
        q.path.with_name(q.path.name + REASON_SUFFIX).unlink(missing_ok=True)
        return dest

    def drop(self, q: Quarantined) -> None:
        """Delete a quarantined entry (a folder entry too) and its reason."""
        import shutil

        if q.path.is_dir() and not q.path.is_symlink():
            shutil.rmtree(q.path)
        else:
            q.path.unlink(missing_ok=True)
        q.path.with_name(q.path.name + REASON_SUFFIX).unlink(missing_ok=True)

    def pending(self) -> int:
        return len(self.entries())
