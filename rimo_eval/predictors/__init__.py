"""Predictors: the pluggable model step. See ``base`` for the interface, ``registry`` for lookup."""

from rimo_eval.predictors.base import Prediction, Predictor
from rimo_eval.predictors.registry import available_backends, create_predictor

__all__ = ["Prediction", "Predictor", "available_backends", "create_predictor"]
