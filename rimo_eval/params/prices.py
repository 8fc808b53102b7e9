"""The price a run's tokens are costed at: ``predict.<backend>.price_per_mtok``, times the
Batch API's discount where the backend sends through it. The one place the discount is applied,
for ``predict --estimate`` and for metrics.json's cost alike."""

from __future__ import annotations

from rimo_eval.params.chat import MessageBatchParams, PricePerMtok


def applied_price(price: PricePerMtok | None, batch: MessageBatchParams | None
                  ) -> dict[str, float] | None:
    """``{input, output}`` USD per million tokens, with ``batch_discount`` (the factor that
    applies) when the backend's batch path is on; None for an unpriced backend."""
    if price is None:
        return None
    priced = {"input": float(price.input), "output": float(price.output)}
    if batch is not None and batch.enabled:
        priced["batch_discount"] = float(batch.discount)
    return priced


__all__ = ["applied_price"]
