"""The embedded storage engine: LMDB documents, doc-values columns, postings; see store.Store."""

from xerj_core.store.columns import ABSENT_INT, Column
from xerj_core.store.names import RESERVED_PREFIX, is_reserved, validate_index_name
from xerj_core.store.read import IndexReader, Segment
from xerj_core.store.store import BulkItem, BulkOp, IndexInfo, IndexStats, Store
from xerj_core.store.write import MAX_ID_BYTES, WriteResult, WriteTxn, check_doc_id

__all__ = ["ABSENT_INT", "MAX_ID_BYTES", "BulkItem", "BulkOp", "Column", "IndexInfo", "IndexReader", "IndexStats",
           "RESERVED_PREFIX", "Segment", "Store", "WriteResult", "WriteTxn", "check_doc_id", "is_reserved",
           "validate_index_name"]
