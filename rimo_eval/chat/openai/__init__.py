"""The OpenAI-compatible chat-completions transport (aiohttp, tenacity retries)."""
