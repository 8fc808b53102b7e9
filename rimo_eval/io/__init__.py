"""Bytes in and out, with no RIMO in them: atomic writes, hashes, JSON and JSONL readers, the
Parquet writer, git, the workspace a run shares, what text a file can hold."""
