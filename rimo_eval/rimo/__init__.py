"""RIMO's own rules: its tracks, grading, ``\\boxed{}`` answers, competition years, its prompt
templates and the data-quality checks of its text."""
