"""Predictors: the pluggable model step. See ``base`` for the interface, ``registry`` for lookup."""

from stages.predictors.base import Prediction, Predictor
from stages.predictors.registry import available_backends, create_predictor

__all__ = ["Prediction", "Predictor", "available_backends", "create_predictor"]
