"""``predict.backend: gemini``: Gemini through the official ``google-genai`` SDK (issue 22)."""
