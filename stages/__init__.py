"""rimo-eval: a reproducible DVC pipeline for the RIMO benchmark."""

__version__ = "0.1.0"

TRACK_N = "RIMO-N"
TRACK_P = "RIMO-P"
TRACKS = (TRACK_N, TRACK_P)
