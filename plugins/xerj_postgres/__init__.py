"""xerj's PostgreSQL storage backend: ``postgresql://`` as ``--store`` (installed with the ``postgres`` extra).

The store engine of ``xerj_core.store`` runs unchanged over PostgreSQL tables
(:mod:`xerj_postgres.kv`), so every answer is the LMDB backend's; documents,
the id map and the edges of every brain are also plain tables a SQL client
can read (:mod:`xerj_postgres.schema`).
"""
