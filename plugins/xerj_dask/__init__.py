"""Autoindex on a Dask cluster: ``xerj autoindex --executor dask[://scheduler:port]`` (the ``dask`` extra)."""
