"""The OpenAI Batch API transport (``transport``) and its durable records (``records``)."""
