"""ES-style mappings: parse and flatten them, coerce document values, and map unmapped fields dynamically."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any

import attrs
import orjson

from xerj_core.errors import MapperParsingError

INT_TYPES = {"long": (-(2**63), 2**63 - 1), "integer": (-(2**31), 2**31 - 1),
             "short": (-(2**15), 2**15 - 1), "byte": (-128, 127)}
FLOAT_TYPES = {"float", "half_float", "double", "scaled_float"}
SCALAR_TYPES = {"keyword", "text", "date", "boolean", *INT_TYPES, *FLOAT_TYPES}
ALL_TYPES = SCALAR_TYPES | {"dense_vector", "object"}

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$")


@attrs.frozen
class FieldSpec:
    """One mapped leaf field, addressed by its dotted path."""

    path: str
    type: str
    dims: int | None = None
    # Keyword fields that name the same dictionary share ordinals (an edge index's src and dst).
    dictionary: str | None = None
    # Extra ES parameters we keep for round-tripping (format, ignore_above, similarity, ...).
    params: dict[str, Any] = attrs.field(factory=dict, eq=False)
    # Multi-field parent: "title.keyword" is fed from "title".
    source_path: str | None = None

    @property
    def dictionary_name(self) -> str:
        return self.dictionary or self.path

    def to_es(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.type, **self.params}
        if self.dims is not None:
            body["dims"] = self.dims
        if self.dictionary is not None:
            body["dictionary"] = self.dictionary
        return body


@attrs.define
class Mapping:
    """An index's mapping as a flat table of dotted paths, plus the object paths and the dynamic policy."""

    fields: dict[str, FieldSpec] = attrs.field(factory=dict)
    objects: set[str] = attrs.field(factory=set)
    dynamic: str = "true"  # "true", "false" (keep unmapped in _source only) or "strict"
    _subfields: dict[str, tuple[FieldSpec, ...]] | None = attrs.field(default=None, init=False, eq=False, repr=False)
    _subfields_size: int = attrs.field(default=-1, init=False, eq=False, repr=False)

    @classmethod
    def from_es(cls, body: Any) -> "Mapping":
        """Parse an ES mapping body (``{"properties": …}``, nested or dotted) or raise MapperParsingError."""
        mapping = cls()
        if body is None:
            return mapping
        if not isinstance(body, dict):
            raise MapperParsingError("mapping must be an object")
        if "mappings" in body and isinstance(body["mappings"], dict):
            body = body["mappings"]
        unknown = set(body) - {"properties", "dynamic", "_source", "_meta", "dynamic_templates", "_routing"}
        if "_doc" in unknown:
            # Elasticsearch 8 has no mapping types; a type level is refused, not unwrapped.
            raise MapperParsingError(f"Root mapping definition has unsupported parameters:  [_doc : "
                                     f"{_java_map(body['_doc'])}]")
        if unknown:
            raise MapperParsingError(f"Root mapping definition has unsupported parameters: {sorted(unknown)}")
        dynamic = body.get("dynamic", True)
        mapping.dynamic = str(dynamic).lower()
        if mapping.dynamic not in {"true", "false", "strict", "runtime"}:
            raise MapperParsingError(f"unknown dynamic value [{dynamic}]")
        mapping.merge_properties(body.get("properties") or {}, prefix="")
        return mapping

    @classmethod
    def stored(cls, blob: bytes) -> "Mapping":
        """The mapping a store holds as ``blob`` (its JSON), parsed once per process for the same bytes: each call
        gets its own copy, which a write may grow. A write transaction reads its index's mapping every time (a
        bulk of a thousand small documents spent about 1% of its time parsing the same one again)."""
        blob = bytes(blob)  # a memoryview (a database store's buffer) is no key
        found = _STORED.get(blob)
        if found is None:
            if len(_STORED) >= _STORED_MAX:
                _STORED.clear()
            found = _STORED[blob] = cls.from_es(orjson.loads(blob))
        return found.copy()

    def copy(self) -> "Mapping":
        """A mapping that grows apart from this one (field specs are frozen and shared)."""
        return Mapping(dict(self.fields), set(self.objects), self.dynamic)

    def merge_properties(self, properties: Any, prefix: str) -> None:
        if not isinstance(properties, dict):
            raise MapperParsingError(f"properties of [{prefix or '_doc'}] must be an object")
        for name, spec in properties.items():
            path = f"{prefix}{name}"
            if not name or not name.strip("."):
                raise MapperParsingError("Failed to parse mapping: field name cannot be an empty string")
            if not isinstance(spec, dict):
                raise MapperParsingError(f"Expected map for property [{path}] but got a {type(spec).__name__}")
            ftype = spec.get("type", "object" if "properties" in spec else None)
            if ftype is None:
                raise MapperParsingError(f"No type specified for field [{path}]")
            if ftype not in ALL_TYPES:
                raise MapperParsingError(f"No handler for type [{ftype}] declared on field [{path}]")
            self._add_parents(path)
            if ftype == "object":
                self.objects.add(path)
                self.merge_properties(spec.get("properties") or {}, prefix=f"{path}.")
                continue
            self.add_field(self._spec_from(path, ftype, spec))
            for sub, subspec in (spec.get("fields") or {}).items():
                subtype = subspec.get("type") if isinstance(subspec, dict) else None
                if subtype not in SCALAR_TYPES:
                    raise MapperParsingError(f"No handler for type [{subtype}] declared on field [{path}.{sub}]")
                self.add_field(attrs.evolve(self._spec_from(f"{path}.{sub}", subtype, subspec), source_path=path))

    def _add_parents(self, path: str) -> None:
        parts = path.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            if parent in self.fields:
                raise MapperParsingError(f"Field [{parent}] is a [{self.fields[parent].type}] and cannot hold [{path}]")
            self.objects.add(parent)

    @staticmethod
    def _spec_from(path: str, ftype: str, spec: dict[str, Any]) -> FieldSpec:
        params = {k: v for k, v in spec.items() if k not in {"type", "dims", "fields", "properties", "dictionary"}}
        dims = None
        if ftype == "dense_vector":
            dims = spec.get("dims")
            if not isinstance(dims, int) or isinstance(dims, bool) or not 1 <= dims <= 4096:
                raise MapperParsingError(f"The number of dimensions for field [{path}] should be in the range [1, 4096]")
        dictionary = spec.get("dictionary")
        if dictionary is not None and (ftype != "keyword" or not isinstance(dictionary, str)):
            raise MapperParsingError(f"[dictionary] on field [{path}] must name a shared keyword dictionary")
        return FieldSpec(path=path, type=ftype, dims=dims, dictionary=dictionary, params=params)

    def add_field(self, spec: FieldSpec) -> None:
        existing = self.fields.get(spec.path)
        if existing is not None and (existing.type, existing.dims, existing.dictionary) != (spec.type, spec.dims, spec.dictionary):
            raise MapperParsingError(
                f"mapper [{spec.path}] cannot be changed from type [{existing.type}] to [{spec.type}]"
            )
        if spec.path in self.objects:
            raise MapperParsingError(f"can't merge a non object mapping [{spec.path}] with an object mapping")
        if existing is None:
            self.fields[spec.path] = spec

    def add_dynamic(self, specs: list[FieldSpec]) -> None:
        """Add fields a document introduced, all or none: a path cannot be both a value and an object."""
        new_paths = {spec.path: spec for spec in specs if spec.source_path is None}
        for path in new_paths:
            parts = path.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                holder = self.fields.get(parent) or new_paths.get(parent)
                if holder is not None:
                    raise MapperParsingError(
                        f"Could not dynamically add mapping for field [{path}]. Existing mapping for "
                        f"[{parent}] must be of type object but found [{holder.type}]")
            if path in self.objects:
                raise MapperParsingError(f"can't merge a non object mapping [{path}] with an object mapping")
        for spec in specs:
            self.add_field(spec)
            if spec.source_path is None:
                parts = spec.path.split(".")
                self.objects.update(".".join(parts[:i]) for i in range(1, len(parts)))

    def to_es(self) -> dict[str, Any]:
        """Render back to ES's nested ``properties`` form (multi-fields under ``fields``)."""
        root: dict[str, Any] = {}

        def node_for(path: str) -> dict[str, Any]:
            props = root
            parts = path.split(".")
            for part in parts[:-1]:
                props = props.setdefault(part, {"properties": {}})["properties"]
            return props

        for path in sorted(self.objects):
            node_for(path).setdefault(path.split(".")[-1], {"properties": {}})
        for spec in sorted(self.fields.values(), key=lambda s: s.path):
            if spec.source_path is not None:
                continue
            node_for(spec.path)[spec.path.split(".")[-1]] = spec.to_es()
        for spec in self.fields.values():
            if spec.source_path is not None:
                parent = node_for(spec.source_path)[spec.source_path.split(".")[-1]]
                parent.setdefault("fields", {})[spec.path.rsplit(".", 1)[1]] = spec.to_es()
        body: dict[str, Any] = {"properties": root}
        if self.dynamic != "true":
            body["dynamic"] = self.dynamic if self.dynamic != "false" else False
        return body

    def has_multi_fields(self) -> bool:
        self.subfields_of("")
        return bool(self._subfields)

    def subfields_of(self, path: str) -> tuple[FieldSpec, ...]:
        """Multi-fields fed from ``path`` (``title.keyword`` for ``title``); cached until the mapping grows."""
        if self._subfields is None or self._subfields_size != len(self.fields):
            table: dict[str, list[FieldSpec]] = {}
            for spec in self.fields.values():
                if spec.source_path is not None:
                    table.setdefault(spec.source_path, []).append(spec)
            self._subfields = {k: tuple(v) for k, v in table.items()}
            self._subfields_size = len(self.fields)
        return self._subfields.get(path, ())


# Stored mappings parsed (see Mapping.stored), by their bytes; cleared when full (a process sees few).
_STORED: dict[bytes, Mapping] = {}
_STORED_MAX = 64

_SCALARS = (str, int, float, bool)
# The largest float32: a vector column holds float32s, and a larger finite number would become an infinity there.
FLOAT32_MAX = 3.4028234663852886e38


def flatten(doc: dict[str, Any], mapping: Mapping) -> list[tuple[str, Any]]:
    """``(dotted_path, value)`` for each leaf value; arrays give one pair per element.

    A ``dense_vector`` field's list is one value; an object array flattens like
    ES does. This runs once per written document, so scalars take a short path.
    """
    out: list[tuple[str, Any]] = []
    fields = mapping.fields
    stack: list[tuple[str, dict[str, Any]]] = [("", doc)]
    while stack:
        prefix, obj = stack.pop()
        for key, value in obj.items():
            if not key or not isinstance(key, str):
                raise MapperParsingError("field name cannot be an empty string")
            path = prefix + key if prefix else key
            if type(value) in _SCALARS:
                out.append((path, value))
                continue
            if value is None:
                continue
            spec = fields.get(path)
            if spec is not None and spec.type == "dense_vector":
                out.append((path, value))
                continue
            for item in (value if isinstance(value, list) else (value,)):
                if isinstance(item, dict):
                    if spec is not None:
                        raise MapperParsingError(
                            f"failed to parse field [{path}] of type [{spec.type}]: found an object"
                        )
                    stack.append((path + ".", item))
                elif isinstance(item, list):
                    raise MapperParsingError(f"failed to parse field [{path}]: nested arrays are not supported")
                elif item is not None:
                    out.append((path, item))
    return out


def infer_spec(path: str, value: Any) -> FieldSpec:
    """The dynamic mapping of an unmapped field, from its first value (ES's rules, date detection included)."""
    if isinstance(value, bool):
        return FieldSpec(path, "boolean")
    if isinstance(value, int):
        return FieldSpec(path, "long")
    if isinstance(value, float):
        return FieldSpec(path, "float")
    if isinstance(value, str) and _DATE_RE.match(value):
        try:
            parse_date(value, path)
            return FieldSpec(path, "date")
        except MapperParsingError:
            pass
    return FieldSpec(path, "text")


def dynamic_specs(path: str, value: Any) -> list[FieldSpec]:
    spec = infer_spec(path, value)
    if spec.type == "text":
        return [spec, FieldSpec(f"{path}.keyword", "keyword", params={"ignore_above": 256}, source_path=path)]
    return [spec]


def parse_date(value: Any, path: str) -> int:
    """Epoch milliseconds from an epoch-ms number (or numeric string) or an RFC3339 / ISO-8601 string."""
    if isinstance(value, bool):
        raise MapperParsingError(f"failed to parse date field [{value}] of [{path}]")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise MapperParsingError(f"failed to parse date field [{value}] of [{path}]")
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        try:
            moment = datetime.fromisoformat(text.replace("z", "Z"))
        except ValueError:
            raise MapperParsingError(
                f"failed to parse date field [{value}] of [{path}]: expected epoch_millis or RFC3339"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        delta = moment - _EPOCH
        return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000
    raise MapperParsingError(f"failed to parse date field [{value}] of [{path}]")


def coerce(spec: FieldSpec, value: Any) -> Any:
    """The column value for ``value`` under ``spec``, or MapperParsingError naming the field."""
    ftype = spec.type
    if type(value) is str and (ftype == "keyword" or ftype == "text"):
        return value
    try:
        if ftype == "keyword":
            if isinstance(value, bool):
                return "true" if value else "false"
            if isinstance(value, (str, int, float)):
                return value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
        elif ftype == "text":
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                return value if isinstance(value, str) else str(value)
        elif ftype in INT_TYPES:
            if isinstance(value, bool):
                raise ValueError
            number = int(float(value)) if isinstance(value, (str, float)) else int(value)
            low, high = INT_TYPES[ftype]
            if not low <= number <= high:
                raise MapperParsingError(f"Value [{value}] is out of range for field [{spec.path}] of type [{ftype}]")
            return number
        elif ftype in FLOAT_TYPES:
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
            if not math.isfinite(number):
                raise MapperParsingError(f"[{ftype}] supports only finite values, but got [{value}] for [{spec.path}]")
            return number
        elif ftype == "date":
            return parse_date(value, spec.path)
        elif ftype == "boolean":
            if isinstance(value, bool):
                return value
            if value in ("true", "false"):
                return value == "true"
        elif ftype == "dense_vector":
            if isinstance(value, list) and len(value) == spec.dims:
                # Plain floats whose sum is finite are all finite (an infinity or a NaN makes the sum one), so
                # the common vector skips the per-element pass below, which cost a memory store 0.2-0.3 ms.
                if (set(map(type, value)) == {float} and math.isfinite(sum(value))
                        and max(map(abs, value)) <= FLOAT32_MAX):
                    return list(value)
                floats = [float(x) for x in value if not isinstance(x, bool)]
                if len(floats) == spec.dims and all(math.isfinite(x) for x in floats):
                    largest = max(map(abs, floats), default=0.0)
                    if largest > FLOAT32_MAX:
                        raise MapperParsingError(f"The [dense_vector] field [{spec.path}] holds [{largest}], beyond "
                                                 f"the float32 range of its column")
                    return floats
            got = len(value) if isinstance(value, list) else type(value).__name__
            raise MapperParsingError(
                f"The [dense_vector] field [{spec.path}] expects {spec.dims} finite numbers, but got [{got}]"
            )
    except MapperParsingError:
        raise
    except (TypeError, ValueError, OverflowError):
        pass
    raise MapperParsingError(f"failed to parse field [{spec.path}] of type [{ftype}]: unexpected value [{value!r:.80}]")


def _java_map(value: Any) -> str:
    """``value`` the way Elasticsearch prints a parsed mapping in its error reasons (``{k=v, ...}``)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_java_map(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_java_map(v) for v in value) + "]"
    return str(value)
