"""API keys in the data directory: mint, verify, list, invalidate; only a salted hash of each secret is kept.

The keys live in their own LMDB environment, ``<data_dir>/security``, so every
process that serves the data directory (each gunicorn worker, the CLI) sees a
key the moment it is minted or invalidated. A process caches the keys it has
verified; every mint and every invalidation bumps a generation counter stored
beside the keys, and a process drops its cache when it reads a counter it has
not seen, which costs one read transaction per request instead of one hash.

Secrets are 256 random bits, so a salted SHA-256 is enough: a slow password
hash protects guessable secrets and these are not guessable.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import secrets
import threading
import time
from pathlib import Path
from typing import Any, Mapping

import lmdb
import orjson

from xerj_auth.principal import PRIVILEGES, Principal, grants_of, name_pattern
from xerj_core.errors import IllegalArgument, XerjError

SECURITY_DIR = "security"
ADMIN_KEY_FILE = "admin.key"
ADMIN_KEY_NAME = "xerj-admin"
_GENERATION = b"generation"
# The longest credential looked at; anything longer is refused before it is decoded.
MAX_CREDENTIAL_CHARS = 1024
_CACHE_LIMIT = 4096
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_MAX_EXPIRATION_MS = 100 * 366 * 86_400_000
_CREATE_FIELDS = {"name", "expiration", "role_descriptors", "metadata"}
_ROLE_FIELDS = {"indices", "cluster", "metadata"}
_INDEX_FIELDS = {"names", "privileges", "allow_restricted_indices"}


class InvalidCredential(XerjError):
    """A credential of the API-key kind that does not verify (unknown, invalidated, expired or malformed)."""

    status = 401
    error_type = "security_exception"


def now_ms() -> int:
    return int(time.time() * 1000)


def parse_expiration(value: Any) -> int:
    """An ES time value (``7d``, ``12h``, ``30m``, ``90s``, ``500ms``) as a positive number of milliseconds."""
    if not isinstance(value, str):
        raise IllegalArgument(f"[expiration] must be a time value such as [7d], got [{value}]")
    found = re.fullmatch(r"(\d{1,12})(ms|s|m|h|d)", value.strip())
    if found is None:
        raise IllegalArgument(f"failed to parse [expiration] with value [{value}] as a time value: "
                              f"a positive whole number followed by one of ms, s, m, h, d is expected")
    ms = int(found.group(1)) * _UNITS_MS[found.group(2)]
    if ms <= 0 or ms > _MAX_EXPIRATION_MS:
        raise IllegalArgument(f"[expiration] must be more than 0 and at most 100 years, got [{value}]")
    return ms


def _object(value: Any, where: str, fields: set[str]) -> dict[str, Any]:
    """``value`` as an object with no field outside ``fields``, else a 400 naming ``where``."""
    if not isinstance(value, dict):
        raise IllegalArgument(f"[{where}] must be an object")
    unknown = sorted(set(value) - fields)
    if unknown:
        raise IllegalArgument(f"[{where}] has an unknown or unsupported field [{unknown[0]}]")
    return value


def validate_role_descriptors(value: Any) -> dict[str, Any]:
    """``{role: {indices: [{names: [..], privileges: [..]}]}}`` checked field by field; returns it normalised."""
    if not isinstance(value, dict):
        raise IllegalArgument("[role_descriptors] must be an object of role name to role descriptor")
    out: dict[str, Any] = {}
    for role, descriptor in value.items():
        where = f"role_descriptors.{role}"
        descriptor = _object(descriptor, where, _ROLE_FIELDS)
        indices = descriptor.get("indices", [])
        if not isinstance(indices, list):
            raise IllegalArgument(f"[{where}.indices] must be an array")
        cluster = descriptor.get("cluster", [])
        if not isinstance(cluster, list) or not all(isinstance(c, str) for c in cluster):
            raise IllegalArgument(f"[{where}.cluster] must be an array of strings")
        entries = []
        for n, entry in enumerate(indices):
            at = f"{where}.indices[{n}]"
            entry = _object(entry, at, _INDEX_FIELDS)
            names, privileges = entry.get("names"), entry.get("privileges")
            if not isinstance(names, list) or not names or not all(isinstance(x, str) and x for x in names):
                raise IllegalArgument(f"[{at}.names] must be a non-empty array of index names or patterns")
            if not isinstance(privileges, list) or not privileges \
                    or not all(isinstance(x, str) for x in privileges):
                raise IllegalArgument(f"[{at}.privileges] must be a non-empty array of privileges")
            bad = [p for p in privileges if p not in PRIVILEGES]
            if bad:
                raise IllegalArgument(f"unknown index privilege [{bad[0]}] in [{at}.privileges]; "
                                      f"known privileges are {list(PRIVILEGES)}")
            entries.append({"names": list(names), "privileges": list(dict.fromkeys(privileges))})
        out[role] = {"indices": entries, "cluster": list(cluster)}
    return out


def encode_credential(key_id: str, secret: str) -> str:
    return base64.b64encode(f"{key_id}:{secret}".encode()).decode()


def decode_credential(encoded: str) -> tuple[str, str]:
    """``(id, secret)`` of the base64 ``id:secret`` an ``ApiKey`` header carries; malformed is an error."""
    if not encoded or len(encoded) > MAX_CREDENTIAL_CHARS:
        raise InvalidCredential("malformed API key")
    try:
        raw = base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise InvalidCredential("malformed API key") from None
    key_id, colon, secret = raw.partition(":")
    if not colon or not key_id or not secret:
        raise InvalidCredential("malformed API key")
    return key_id, secret


def _digest(salt: str, secret: str) -> str:
    return hashlib.sha256(bytes.fromhex(salt) + secret.encode()).hexdigest()


def _public(record: Mapping[str, Any]) -> dict[str, Any]:
    """A key as ``GET /_security/api_key`` shows it: never the hash or the salt."""
    out = {"id": record["id"], "name": record["name"], "creation": record["creation"],
           "invalidated": record["invalidated"], "username": ADMIN_KEY_NAME, "realm": "xerj",
           "metadata": record.get("metadata") or {}}
    if record.get("expiration") is not None:
        out["expiration"] = record["expiration"]
    if record.get("invalidation") is not None:
        out["invalidation"] = record["invalidation"]
    if record.get("superuser"):
        out["role_descriptors"] = {"superuser": {"cluster": ["all"], "indices": [
            {"names": ["*"], "privileges": ["all"]}]}}
    else:
        out["role_descriptors"] = record.get("role_descriptors") or {}
    return out


# LMDB refuses a second open of one environment in a process, and several apps may serve one data
# directory in a process (tests, the CLI beside a server): one handle per path and process, counted.
_OPEN: dict[tuple[str, int], list[Any]] = {}
_OPEN_LOCK = threading.Lock()


def _acquire(path: Path) -> lmdb.Environment:
    key = (str(path.resolve()), os.getpid())
    with _OPEN_LOCK:
        held = _OPEN.get(key)
        if held is None:
            path.mkdir(parents=True, exist_ok=True)
            env = lmdb.open(str(path), map_size=256 << 20, max_dbs=8, subdir=True)
            held = _OPEN[key] = [env, 0]
        held[1] += 1
        return held[0]


def _release(path: Path) -> None:
    key = (str(path.resolve()), os.getpid())
    with _OPEN_LOCK:
        held = _OPEN.get(key)
        if held is None:
            return
        held[1] -= 1
        if held[1] <= 0:
            del _OPEN[key]
            held[0].close()


class CachedStore:
    """A store in ``<data_dir>/security`` whose processes cache verified credentials.

    Every change that must reach the other processes bumps the counter named
    ``generation_key``; a process drops its cache when it reads a counter it has
    not seen, which costs one read transaction per request instead of one hash.
    """

    generation_key = _GENERATION

    def __init__(self, data_dir: str | Path) -> None:
        self.path = Path(data_dir) / SECURITY_DIR
        self.env = _acquire(self.path)
        self.meta_db = self.env.open_db(b"meta")
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[Principal, int | None]] = {}
        self._cache_generation = -1
        self._closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            _release(self.path)

    def _bump(self, txn: lmdb.Transaction) -> None:
        current = txn.get(self.generation_key, db=self.meta_db)
        txn.put(self.generation_key, str(int(current or b"0") + 1).encode(), db=self.meta_db)

    def generation(self) -> int:
        with self.env.begin(db=self.meta_db) as txn:
            return int(txn.get(self.generation_key) or b"0")

    def _cached(self, credential: str) -> tuple[tuple[Principal, int | None] | None, int]:
        """``(cached (principal, expires) or None, generation)``; the cache is dropped when the generation moved."""
        generation = self.generation()
        with self._lock:
            if generation != self._cache_generation:
                self._cache.clear()
                self._cache_generation = generation
            return self._cache.get(credential), generation

    def _remember(self, credential: str, principal: Principal, expires: int | None, generation: int) -> None:
        with self._lock:
            if generation == self._cache_generation:
                if len(self._cache) >= _CACHE_LIMIT:
                    self._cache.clear()
                self._cache[credential] = (principal, expires)


class KeyStore(CachedStore):
    """The API keys of one data directory."""

    def __init__(self, data_dir: str | Path) -> None:
        super().__init__(data_dir)
        self.keys_db = self.env.open_db(b"keys")

    # -- records -------------------------------------------------------------------------------

    def record(self, key_id: str) -> dict[str, Any] | None:
        with self.env.begin(db=self.keys_db) as txn:
            raw = txn.get(key_id.encode())
        return None if raw is None else orjson.loads(raw)

    def records(self) -> list[dict[str, Any]]:
        with self.env.begin(db=self.keys_db) as txn:
            return [orjson.loads(value) for _key, value in txn.cursor()]

    def mint(self, name: str, *, expiration: str | None = None, role_descriptors: Any = None,
             metadata: Any = None, superuser: bool = False, key_id: str | None = None,
             secret: str | None = None) -> dict[str, Any]:
        """A new key; answers ``{id, name, api_key, encoded, expiration?}`` (the only time the secret is shown)."""
        key_id = key_id or secrets.token_urlsafe(15)
        secret = secret or secrets.token_urlsafe(32)
        created = now_ms()
        salt = secrets.token_hex(16)
        record = {"id": key_id, "name": name, "creation": created,
                  "expiration": None if expiration is None else created + parse_expiration(expiration),
                  "invalidated": False, "invalidation": None, "superuser": superuser,
                  "role_descriptors": role_descriptors or None, "metadata": metadata or {},
                  "salt": salt, "hash": _digest(salt, secret)}
        with self.env.begin(write=True) as txn:
            txn.put(key_id.encode(), orjson.dumps(record), db=self.keys_db)
            self._bump(txn)
        answer = {"id": key_id, "name": name, "api_key": secret, "encoded": encode_credential(key_id, secret)}
        if record["expiration"] is not None:
            answer["expiration"] = record["expiration"]
        return answer

    def create(self, body: Any) -> dict[str, Any]:
        """``POST /_security/api_key``'s body validated, then minted; nothing is written for a refused body."""
        if not isinstance(body, dict):
            raise IllegalArgument("the request body must be an object")
        unknown = sorted(set(body) - _CREATE_FIELDS)
        if unknown:
            raise IllegalArgument(f"unknown field [{unknown[0]}] in a create API key request; "
                                  f"expected {sorted(_CREATE_FIELDS)}")
        name = body.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > 1024:
            raise IllegalArgument("[name] is required: a non-empty string of at most 1024 characters")
        expiration = body.get("expiration")
        if expiration is not None:
            parse_expiration(expiration)
        descriptors = body.get("role_descriptors")
        if descriptors is not None:
            descriptors = validate_role_descriptors(descriptors)
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise IllegalArgument("[metadata] must be an object")
        return self.mint(name, expiration=expiration, role_descriptors=descriptors, metadata=metadata)

    def find(self, *, key_id: str | None = None, name: str | None = None,
             active_only: bool = False) -> list[dict[str, Any]]:
        """Keys by id and/or name (``*`` wildcards in the name), as shown to a caller."""
        matcher = name_pattern(name) if name else None
        now = now_ms()
        found = []
        for record in self.records():
            if key_id is not None and record["id"] != key_id:
                continue
            if matcher is not None and not matcher.fullmatch(record["name"]):
                continue
            if active_only and not self._active(record, now):
                continue
            found.append(_public(record))
        return sorted(found, key=lambda r: (r["creation"], r["id"]))

    @staticmethod
    def _active(record: Mapping[str, Any], now: int) -> bool:
        return not record["invalidated"] and (record.get("expiration") is None or record["expiration"] > now)

    def invalidate(self, *, ids: list[str] | None = None, name: str | None = None) -> tuple[list[str], list[str]]:
        """``(invalidated, previously_invalidated)`` ids; every process refuses them from its next request."""
        matcher = name_pattern(name) if name else None
        wanted = set(ids or ())
        done: list[str] = []
        before: list[str] = []
        with self.env.begin(write=True, db=self.keys_db) as txn:
            for raw_id, raw in list(txn.cursor()):
                record = orjson.loads(raw)
                if not (record["id"] in wanted or (matcher is not None and matcher.fullmatch(record["name"]))):
                    continue
                if record["invalidated"]:
                    before.append(record["id"])
                    continue
                record["invalidated"] = True
                record["invalidation"] = now_ms()
                txn.put(raw_id, orjson.dumps(record))
                done.append(record["id"])
            if done:
                self._bump(txn)
        return done, before

    # -- verification --------------------------------------------------------------------------

    def principal_of(self, record: Mapping[str, Any]) -> Principal:
        grants = None if record.get("superuser") else grants_of(record.get("role_descriptors"))
        return Principal(name=record["name"], superuser=bool(record.get("superuser")), mode="api_key",
                         grants=grants, key_id=record["id"])

    def verify(self, encoded: str) -> Principal:
        """The principal of an encoded ``id:secret``; :class:`InvalidCredential` when it does not verify."""
        hit, generation = self._cached(encoded)
        now = now_ms()
        if hit is not None:
            principal, expires = hit
            if expires is None or expires > now:
                return principal
            raise InvalidCredential("API key expired")
        key_id, secret = decode_credential(encoded)
        record = self.record(key_id)
        if record is None:
            raise InvalidCredential("unknown API key")
        if not hmac.compare_digest(record["hash"], _digest(record["salt"], secret)):
            raise InvalidCredential("unknown API key")
        if record["invalidated"]:
            raise InvalidCredential("API key invalidated")
        if record.get("expiration") is not None and record["expiration"] <= now:
            raise InvalidCredential("API key expired")
        principal = self.principal_of(record)
        self._remember(encoded, principal, record.get("expiration"), generation)
        return principal

    # -- the admin key -------------------------------------------------------------------------

    def ensure_admin_key(self, data_dir: str | Path) -> Path:
        """``<data_dir>/admin.key`` holding a working superuser credential (mode 0600), minted when needed.

        A file whose key verifies is kept as it is. A file whose key this store
        does not hold (the security directory was removed) is registered again,
        since the file is what the operator has; one whose key was invalidated is
        replaced by a new key.
        """
        path = Path(data_dir) / ADMIN_KEY_FILE
        if path.exists():
            encoded = path.read_text().strip()
            try:
                key_id, secret = decode_credential(encoded)
            except InvalidCredential:
                key_id = secret = None
            if key_id is not None:
                record = self.record(key_id)
                if record is None:
                    self.mint(ADMIN_KEY_NAME, superuser=True, key_id=key_id, secret=secret)
                    os.chmod(path, 0o600)
                    return path
                if record.get("superuser") and not record["invalidated"] and hmac.compare_digest(
                        record["hash"], _digest(record["salt"], secret)):
                    os.chmod(path, 0o600)
                    return path
        minted = self.mint(ADMIN_KEY_NAME, superuser=True)
        temp = path.with_name(f".{ADMIN_KEY_FILE}.{os.getpid()}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, (minted["encoded"] + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
        return path
