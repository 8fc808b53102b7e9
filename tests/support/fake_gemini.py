"""A fake Gemini API on 127.0.0.1 that the official ``google-genai`` SDK talks to.

``POST /v1beta/models/{model}:generateContent`` (and ``/v1/...``, the SDK's default)
(https://ai.google.dev/api/generate-content#method:-models.generatecontent); the key is read
from ``x-goog-api-key`` (or a ``key`` query parameter). Errors are ``google.rpc.Status``
bodies, ``{"error": {"code", "message", "status", "details"}}``
(https://ai.google.dev/gemini-api/docs/troubleshooting): 400 ``INVALID_ARGUMENT``, 429
``RESOURCE_EXHAUSTED`` (with a ``RetryInfo`` detail and ``Retry-After``), 500 ``INTERNAL``,
503 ``UNAVAILABLE``. A wrong key is a 400 with an ``ErrorInfo`` of reason
``API_KEY_INVALID``, as the API answers. Directives, on top of those of ``fake_provider``:

``[[gold:X]]``          the answer text ends in ``\\boxed{X}``
``[[thought:X]]``       the model thinks (``thoughtsTokenCount``); with
                        ``thinkingConfig.includeThoughts`` a part ``{"thought": true}``
                        holding ``\\boxed{X}`` comes before the answer
                        (https://ai.google.dev/gemini-api/docs/generate-content/thinking)
``[[decoy:X]]``         the answer part opens with ``<think>…\\boxed{X}…</think>``
``[[truncate]]``        ``finishReason: MAX_TOKENS`` and a reply with no box;
                        ``[[truncate:thinking]]``: thinking used up ``maxOutputTokens``, so
                        the candidate has no parts at all (what 2.5 models send)
``[[blocked:prompt]]``  no candidates; ``promptFeedback.blockReason: SAFETY``
``[[blocked:candidate]]`` one candidate, ``finishReason: SAFETY``, no content
``[[empty:K]]``         the first K attempts: ``"candidates": []`` and no feedback
``[[continuation]]``    the answer stops at the per-request limit: ``finishReason: CONTINUATION``
                        with a ``continuationToken``; a request carrying it gets the rest
``[[cached:N]]``        ``cachedContentTokenCount: N``
``[[by_seed:A,...]]``   the gold is entry ``seed % len`` (``generationConfig.seed``)
``[[reject:FIELD]]``    HTTP 400 ``INVALID_ARGUMENT`` naming ``FIELD`` (a ``BadRequest``
                        ``fieldViolations`` detail and the API's "Unknown name" message)

As the API does, ``thinkingBudget`` and ``thinkingLevel`` together are a 400 naming
``generation_config.thinking_config`` (the thinking guide above; the 400 is reported in
Tom-Ryder/AgentRunKit#7).
Token counts are word counts; ``usageMetadata`` carries ``promptTokenCount``,
``candidatesTokenCount`` (the answer, thoughts excluded), ``thoughtsTokenCount``,
``cachedContentTokenCount`` and ``totalTokenCount``
(https://ai.google.dev/api/generate-content#UsageMetadata).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.support.fake_provider import FakeProvider, Record, Reply, serve_main
from tests.support.loopback import first_k

STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
          404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE",
          504: "DEADLINE_EXCEEDED"}
_TYPE = "type.googleapis.com/google.rpc."


def field_of(obj: Any, snake: str) -> Any:
    """A field by its proto name or its JSON (camelCase) name: the API accepts both."""
    if not isinstance(obj, dict):
        return None
    head, *rest = snake.split("_")
    camel = head + "".join(w.title() for w in rest)
    return obj.get(camel, obj.get(snake))


def _words(content: Any) -> int:
    parts = field_of(content, "parts") or []
    return sum(len(str(p.get("text", "")).split()) for p in parts if isinstance(p, dict))


@dataclass
class FakeGemini(FakeProvider):
    def routes(self, path: str) -> bool:
        # google-genai 3.6.1 posts to /v1 unless told api_version="v1beta"; both exist.
        return (path.startswith(("/v1beta/models/", "/v1/models/"))
                and path.endswith(":generateContent"))

    def prompt_of(self, body: dict[str, Any]) -> str:
        users = [c for c in body.get("contents") or []
                 if isinstance(c, dict) and c.get("role", "user") == "user"]
        parts = field_of(users[-1], "parts") if users else []
        return " ".join(str(p.get("text", "")) for p in parts or [] if isinstance(p, dict))

    def api_key_of(self, headers: dict[str, str], query: dict[str, list[str]]) -> str | None:
        return headers.get("x-goog-api-key") or (query.get("key") or [None])[0]

    def error(self, status: int, message: str, **extra: Any) -> Reply:
        details: list[dict[str, Any]] = list(extra.get("details") or [])
        headers: dict[str, str] = {}
        if status == 429:
            details.append({"@type": _TYPE + "RetryInfo", "retryDelay": f"{self.retry_after}s"})
            headers["Retry-After"] = self.retry_after
        error = {"code": status, "message": message, "status": STATUS.get(status, "UNKNOWN")}
        if details:
            error["details"] = details
        return Reply(status, {"error": error}, headers)

    def auth_error(self, record: Record) -> Reply:
        if record.api_key is None:
            return self.error(403, "Method doesn't allow unregistered callers (callers without "
                              "established identity). Please use API Key or other form of API "
                              "consumer identity to call this API.")
        return self.error(400, "API key not valid. Please pass a valid API key.", details=[
            {"@type": _TYPE + "ErrorInfo", "reason": "API_KEY_INVALID",
             "domain": "googleapis.com"}])

    def _rejection(self, record: Record) -> Reply | None:
        d, config = record.directives, field_of(record.body, "generation_config") or {}
        if "reject" in d:
            name = d["reject"]
            return self.error(400, f'Invalid JSON payload received. Unknown name "{name}" at '
                              "'generation_config': Cannot find field.", details=[
                                  {"@type": _TYPE + "BadRequest", "fieldViolations": [
                                      {"field": f"generation_config.{name}",
                                       "description": f'Invalid JSON payload received. '
                                       f'Unknown name "{name}" at \'generation_config\': '
                                       "Cannot find field."}]}])
        thinking = field_of(config, "thinking_config") or {}
        if (field_of(thinking, "thinking_budget") is not None
                and field_of(thinking, "thinking_level") is not None):
            return self.error(400, "thinking_budget and thinking_level are not supported "
                              "together.", details=[
                                  {"@type": _TYPE + "BadRequest", "fieldViolations": [
                                      {"field": "generation_config.thinking_config",
                                       "description": "thinking_budget and thinking_level "
                                       "are not supported together."}]}])
        return None

    def answer(self, record: Record, text: str) -> Reply:
        rejection = self._rejection(record)
        if rejection is not None:
            return rejection
        body, d = record.body, record.directives
        config = field_of(body, "generation_config") or {}
        thinking = field_of(config, "thinking_config") or {}
        if "by_seed" in d:
            golds = d["by_seed"].split(",")
            gold = golds[int(field_of(config, "seed") or 0) % len(golds)]
            text = f"Working through it carefully, the answer is \\boxed{{{gold}}}."
        finish, parts, thought = "STOP", [], ""
        if "thought" in d:
            thought = f"Perhaps \\boxed{{{d['thought']}}}. No: recount the cases."
            if field_of(thinking, "include_thoughts"):
                parts.append({"text": thought, "thought": True})
        if "decoy" in d:
            text = (f"<think>\nMaybe \\boxed{{{d['decoy']}}}? Check again.\n</think>\n\n"
                    f"{text}")
        if "truncate" in d:
            text, finish = "Let me start by considering the case n = 1, then", "MAX_TOKENS"
        resumed = field_of(body, "continuation_token") is not None  # top-level in the body
        if "continuation" in d and not resumed:
            text, finish = "Half of the argument, to be continued", "CONTINUATION"
        if d.get("truncate") == "thinking":
            text, parts = "", []
        else:
            parts.append({"text": text})
        prompt = sum(_words(c) for c in body.get("contents") or [])
        prompt += _words(field_of(body, "system_instruction"))
        usage: dict[str, Any] = {"promptTokenCount": prompt,
                                 "candidatesTokenCount": len(text.split())}
        if thought:
            usage["thoughtsTokenCount"] = len(thought.split())
        if "cached" in d:
            usage["cachedContentTokenCount"] = int(d["cached"])
        usage["totalTokenCount"] = (prompt + usage["candidatesTokenCount"]
                                    + usage.get("thoughtsTokenCount", 0))
        model = record.path.split("/models/", 1)[1].removesuffix(":generateContent")
        out: dict[str, Any] = {"usageMetadata": usage, "modelVersion": model,
                               "responseId": record.key[:16]}
        outcome = "ok"
        if "empty" in d and first_k(d["empty"], record.attempt):
            out["candidates"], outcome = [], "empty"
            out["usageMetadata"] = {"promptTokenCount": prompt, "totalTokenCount": prompt}
        elif d.get("blocked") == "prompt":
            out["promptFeedback"] = {"blockReason": "SAFETY", "safetyRatings": [
                {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}]}
            out["usageMetadata"] = {"promptTokenCount": prompt, "totalTokenCount": prompt}
            outcome = "blocked"
        elif d.get("blocked") == "candidate":
            out["candidates"] = [{"finishReason": "SAFETY", "index": 0, "safetyRatings": [
                {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH",
                 "blocked": True}]}]
            outcome = "blocked"
        else:
            content = {"role": "model", "parts": parts} if parts else {"role": "model"}
            out["candidates"] = [{"content": content, "finishReason": finish, "index": 0}]
            if finish == "CONTINUATION":
                out["candidates"][0]["continuationToken"] = "Y29udGludWU="  # b"continue"
        return Reply(200, out, outcome=outcome, text=text)


if __name__ == "__main__":
    serve_main(FakeGemini)
