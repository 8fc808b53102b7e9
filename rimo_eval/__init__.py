"""rimo-eval: a reproducible DVC pipeline for the RIMO benchmark."""

__version__ = "1.0.0"
