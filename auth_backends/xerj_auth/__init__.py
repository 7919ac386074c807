"""xerj's built-in authentication backends (API keys, the admin key among them) and the reach rules they share."""

from xerj_auth.principal import OPEN_MODE_PRINCIPAL, RESERVED_PREFIX, IndexGrant, Principal

__all__ = ["OPEN_MODE_PRINCIPAL", "RESERVED_PREFIX", "IndexGrant", "Principal"]
