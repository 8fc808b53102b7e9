"""Typed params: the sections of params.yaml, their keys, what each key does to the results,
and the one YAML reader for files a person writes."""
