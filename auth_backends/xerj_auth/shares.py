"""Share links in the data directory: mint, list, revoke, trade a passcode for a guest token, verify a token.

A share grants one guest ``read`` on a fixed list of indices (a brain's dataset
indices and its edges index). The guest proves the link with a passcode, of
which only an argon2id hash is kept, and gets a short-lived bearer token back.

Everything lives in the data directory's security LMDB environment beside the
API keys, so every process serving the directory sees the same shares, the
same tokens and the same count of failed passcode attempts: the rate limit
holds across gunicorn workers because its counter is in LMDB, not in a
worker's memory. A revocation bumps a generation counter; a process drops its
token cache when it reads a counter it has not seen (as the API keys do), so a
revoked share's tokens are refused by every worker from its next request.
Expiry is checked on every request, cached or not.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from pathlib import Path
from typing import Any

import attrs
import cattrs
import orjson
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from xerj_auth.keys import CachedStore, InvalidCredential, now_ms, parse_expiration
from xerj_auth.principal import RESERVED_PREFIX, IndexGrant, Principal
from xerj_core.errors import IllegalArgument, XerjError
from xerj_core.graph.brain import edges_index

_GENERATION = b"share-generation"
DEFAULT_EXPIRES = "7d"
# A guest token lives this long at most (and never past its share's expiry); the passcode mints another.
TOKEN_TTL_MS = 3_600_000
# Failed passcode attempts per share within the window before the share refuses every attempt
# (the right passcode too) until the window has passed.
MAX_FAILURES = 5
FAILURE_WINDOW_MS = 15 * 60_000
_MAX_TOKEN_CHARS = 256
# Passcodes are read aloud and typed: no 0/o, 1/l/i. 20 characters of 31 is about 99 bits.
_PASSCODE_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
EXCHANGE_ROUTE = ("POST", "/_xerj/share/_exchange")

# (method, route template) a guest may call: the brain's two read routes and the read verbs of the
# shared indices. Everything else (link, unlink, /_memory/*, _security, _bulk, any write) is refused
# before the privilege check; which indices and which brain the reads may name is the grants' business.
GUEST_ROUTES = frozenset({
    ("GET", "/_graph/{brain}/ego"), ("GET", "/_graph/{brain}/overview"),
    ("GET", "/{index}/_search"), ("POST", "/{index}/_search"),
    ("GET", "/{index}/_count"), ("POST", "/{index}/_count"),
    ("GET", "/{index}/_doc/{id}"), ("HEAD", "/{index}/_doc/{id}"),
})


class ShareRefused(XerjError):
    """A passcode exchange or a share operation refused: the status says which (401, 403, 404, 429)."""

    error_type = "security_exception"

    def __init__(self, status: int, reason: str, **extra: Any) -> None:
        super().__init__(reason, **extra)
        self.status = status


@attrs.frozen
class Exchanged:
    """A guest token minted for a share: the bearer credential and when it stops working (epoch ms)."""

    token: str
    expires_at: int
    share: str


def guest_principal(share_id: str, indices: list[str]) -> Principal:
    """The principal a share's token stands for: ``read`` on exactly ``indices``, nothing else."""
    return Principal(name=f"guest:{share_id}", superuser=False, mode="guest",
                     grants=(IndexGrant(tuple(indices), frozenset({"read"})),), routes=GUEST_ROUTES)


def new_passcode() -> str:
    raw = "".join(secrets.choice(_PASSCODE_ALPHABET) for _ in range(20))
    return "-".join(raw[i:i + 5] for i in range(0, 20, 5))


def _digest(salt: str, secret: str) -> str:
    return hashlib.sha256(bytes.fromhex(salt) + secret.encode()).hexdigest()


@attrs.frozen
class ShareRecord:
    """One share link as stored: what it grants, until when, and the argon2id hash of its passcode."""

    id: str
    brain: str
    folder: str | None
    indices: tuple[str, ...]
    created: int
    expires_at: int
    passcode_hash: str = attrs.field(repr=False)
    revoked: bool = False
    revoked_at: int | None = None

    def state(self, now: int) -> str:
        return "revoked" if self.revoked else ("expired" if self.expires_at <= now else "active")

    def public(self, now: int | None = None) -> dict[str, Any]:
        """The share as ``xerj share --list`` shows it: never the passcode hash."""
        out = _converter.unstructure(self)
        del out["passcode_hash"]
        if out["revoked_at"] is None:
            del out["revoked_at"]
        out["indices"] = list(self.indices)
        out["state"] = self.state(now_ms() if now is None else now)
        return out


_converter = cattrs.Converter(forbid_extra_keys=True)


def _load(raw: bytes) -> ShareRecord:
    return _converter.structure(orjson.loads(raw), ShareRecord)


def _dump(record: ShareRecord) -> bytes:
    return orjson.dumps(_converter.unstructure(record))


class ShareStore(CachedStore):
    """The share links of one data directory."""

    generation_key = _GENERATION

    def __init__(self, data_dir: str | Path, hasher: PasswordHasher | None = None) -> None:
        super().__init__(data_dir)
        self.shares_db = self.env.open_db(b"shares")
        self.tokens_db = self.env.open_db(b"share-tokens")
        self.failures_db = self.env.open_db(b"share-failures")
        self.hasher = hasher or PasswordHasher()

    def record(self, share_id: str) -> ShareRecord | None:
        if not _ID.fullmatch(share_id):
            return None
        with self.env.begin(db=self.shares_db) as txn:
            raw = txn.get(share_id.encode())
        return None if raw is None else _load(raw)

    def records(self) -> list[ShareRecord]:
        with self.env.begin(db=self.shares_db) as txn:
            found = [_load(value) for _key, value in txn.cursor()]
        return sorted(found, key=lambda r: (r.created, r.id))

    # -- the owner's side ----------------------------------------------------------------------

    def mint(self, *, brain: str, nodes_indices: list[str], folder: str | None = None,
             expires: str | None = None) -> dict[str, Any]:
        """A new share of ``brain``: ``read`` on ``nodes_indices`` and its edges index; answers the record
        with ``passcode`` (the only time it is shown)."""
        reserved = [name for name in nodes_indices if name.startswith(RESERVED_PREFIX)]
        if reserved:
            # A share reaches a brain's dataset indices and its edges, never a memory namespace.
            raise IllegalArgument(f"a share cannot grant the reserved index [{reserved[0]}]")
        indices = [*nodes_indices, edges_index(brain)]
        created = now_ms()
        share_id = secrets.token_urlsafe(12)
        passcode = new_passcode()
        record = ShareRecord(id=share_id, brain=brain, folder=folder, indices=tuple(dict.fromkeys(indices)),
                             created=created, expires_at=created + parse_expiration(expires or DEFAULT_EXPIRES),
                             passcode_hash=self.hasher.hash(passcode))
        with self.env.begin(write=True) as txn:
            txn.put(share_id.encode(), _dump(record), db=self.shares_db)
            self._bump(txn)
        return {**record.public(created), "passcode": passcode}

    def revoke(self, share_id: str) -> dict[str, Any]:
        """Revoke a share; its tokens are refused by every process from its next request."""
        with self.env.begin(write=True) as txn:
            raw = txn.get(share_id.encode(), db=self.shares_db) if _ID.fullmatch(share_id) else None
            if raw is None:
                raise ShareRefused(404, f"no share [{share_id}] on this node", share=share_id)
            record = _load(raw)
            if not record.revoked:
                record = attrs.evolve(record, revoked=True, revoked_at=now_ms())
                txn.put(share_id.encode(), _dump(record), db=self.shares_db)
            self._bump(txn)
        return record.public()

    # -- the guest's side ----------------------------------------------------------------------

    @staticmethod
    def _live(record: ShareRecord, now: int) -> None:
        if record.revoked:
            raise ShareRefused(403, f"share [{record.id}] was revoked", share=record.id)
        if record.expires_at <= now:
            raise ShareRefused(403, f"share [{record.id}] has expired", share=record.id)

    def _failures(self, txn: Any, share_id: str, now: int) -> list[int]:
        raw = txn.get(share_id.encode(), db=self.failures_db)
        return [at for at in (orjson.loads(raw) if raw else []) if at > now - FAILURE_WINDOW_MS]

    def exchange(self, share_id: Any, passcode: Any) -> Exchanged:
        """A guest token for the right passcode of a live share.

        The attempt is counted before the passcode is checked (in one LMDB write
        transaction, which every process serialises on), so concurrent guesses
        across workers cannot slip past the limit; the right passcode clears the count.
        """
        if not isinstance(share_id, str) or not share_id or not isinstance(passcode, str) or not passcode:
            raise IllegalArgument("[share] and [passcode] are required strings")
        unknown = ShareRefused(401, "unknown share or wrong passcode")
        now = now_ms()
        with self.env.begin(write=True) as txn:
            raw = txn.get(share_id.encode(), db=self.shares_db) if _ID.fullmatch(share_id) else None
            if raw is None:
                raise unknown
            record = _load(raw)
            self._live(record, now)
            failures = self._failures(txn, share_id, now)
            if len(failures) >= MAX_FAILURES:
                wait = (min(failures) + FAILURE_WINDOW_MS - now + 999) // 1000
                raise ShareRefused(429, f"too many wrong passcodes for share [{share_id}]; try again in {wait}s",
                                   share=share_id)
            txn.put(share_id.encode(), orjson.dumps([*failures, now]), db=self.failures_db)
        try:
            self.hasher.verify(record.passcode_hash, passcode[:1024])
        except (VerificationError, InvalidHashError):
            raise unknown from None
        token_id, secret = secrets.token_urlsafe(12), secrets.token_urlsafe(32)
        salt = secrets.token_hex(16)
        expires_at = min(now + TOKEN_TTL_MS, record.expires_at)
        with self.env.begin(write=True) as txn:
            txn.delete(share_id.encode(), db=self.failures_db)
            self._prune(txn, now)
            txn.put(token_id.encode(), orjson.dumps({"id": token_id, "share": share_id, "created": now,
                                                     "expires_at": expires_at, "salt": salt,
                                                     "hash": _digest(salt, secret)}), db=self.tokens_db)
        return Exchanged(token=f"{token_id}.{secret}", expires_at=expires_at, share=share_id)

    def _prune(self, txn: Any, now: int) -> None:
        """Drop the tokens that can no longer verify, so the store does not grow with every exchange."""
        dead = [key for key, raw in txn.cursor(db=self.tokens_db) if orjson.loads(raw)["expires_at"] <= now]
        for key in dead:
            txn.delete(key, db=self.tokens_db)

    def verify(self, token: str) -> Principal:
        """The guest principal of a bearer token; anything that does not verify is an :class:`InvalidCredential`."""
        refused = InvalidCredential("invalid guest token")
        if not token or len(token) > _MAX_TOKEN_CHARS:
            raise refused
        token_id, dot, secret = token.partition(".")
        if not dot or not _ID.fullmatch(token_id) or not secret:
            raise refused
        now = now_ms()
        cached, generation = self._cached(token)
        if cached is not None:
            principal, expires_at = cached
            if expires_at > now:
                return principal
            raise refused
        with self.env.begin() as txn:
            raw = txn.get(token_id.encode(), db=self.tokens_db)
            found = None if raw is None else orjson.loads(raw)
            share_raw = None if found is None else txn.get(found["share"].encode(), db=self.shares_db)
        if found is None or share_raw is None or not hmac.compare_digest(found["hash"],
                                                                       _digest(found["salt"], secret)):
            raise refused
        principal, expires_at, _share = self._standing(found, share_raw, now)
        self._remember(token, principal, expires_at, generation)
        return principal

    @staticmethod
    def _standing(found: dict[str, Any], share_raw: bytes, now: int) -> tuple[Principal, int, ShareRecord]:
        share = _load(share_raw)
        expires_at = min(found["expires_at"], share.expires_at)
        if share.revoked or expires_at <= now:
            raise InvalidCredential("invalid guest token")
        return guest_principal(share.id, list(share.indices)), expires_at, share

    def token_standing(self, token_id: str) -> tuple[Principal, int, ShareRecord]:
        """``(principal, expires_at, share)`` of a live token named by its id alone.

        For a caller that has already proved the token some other way: the
        console's signed session cookie names the token id it was issued for and
        carries no secret. A token that is gone, expired or of a revoked or
        expired share raises :class:`~xerj_auth.keys.InvalidCredential`.
        """
        if not _ID.fullmatch(token_id):
            raise InvalidCredential("invalid guest token")
        with self.env.begin() as txn:
            raw = txn.get(token_id.encode(), db=self.tokens_db)
            found = None if raw is None else orjson.loads(raw)
            share_raw = None if found is None else txn.get(found["share"].encode(), db=self.shares_db)
        if found is None or share_raw is None:
            raise InvalidCredential("invalid guest token")
        return self._standing(found, share_raw, now_ms())


__all__ = ["DEFAULT_EXPIRES", "EXCHANGE_ROUTE", "Exchanged", "GUEST_ROUTES", "MAX_FAILURES", "ShareRecord",
           "ShareRefused", "ShareStore", "guest_principal", "new_passcode"]
