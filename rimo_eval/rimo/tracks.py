"""The benchmark's two tracks."""

TRACK_N = "RIMO-N"
TRACK_P = "RIMO-P"
TRACKS = (TRACK_N, TRACK_P)

# The benchmark's primary metrics per track (exact match, as the paper defines them).
HEADLINE = {TRACK_N: ("accuracy",), TRACK_P: ("strict", "sub_problem_accuracy", "prefix_score")}

# Each metric key in words, as every screen names it (one name per metric; issue 43: the view
# showed "RIMO-N accuracy" beside a raw "sub_problem_accuracy").
METRIC_WORDS = {"accuracy": "accuracy", "strict": "strict", "prefix_score": "prefix score",
                "sub_problem_accuracy": "sub-problem accuracy", "pass_at_k": "pass@k",
                "maj_at_k": "maj@k", "lenient_accuracy": "lenient accuracy"}


def metric_words(key: str) -> str:
    """``sub_problem_accuracy`` -> "sub-problem accuracy"; ``mean_at_k.strict`` -> "mean@k
    strict"; an unknown key with its underscores as spaces."""
    prefix, _, last = key.rpartition(".")
    words = METRIC_WORDS.get(last, last.replace("_", " "))
    return f"{prefix.replace('_at_', '@')} {words}" if prefix else words
