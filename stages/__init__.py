"""rimo-eval: a reproducible DVC pipeline for the RIMO benchmark."""

__version__ = "0.1.0"
