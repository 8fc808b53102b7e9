"""Batch APIs as chat transports: what they share (``rounds``: rounds, follow-ups, resume; the
durable ``records``), the OpenAI Batch API (``transport``), Anthropic's Message Batches
(``anthropic``), and ``--batch-status`` / ``--batch-cancel`` (``admin``)."""
