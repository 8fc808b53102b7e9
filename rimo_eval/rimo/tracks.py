"""The benchmark's two tracks."""

TRACK_N = "RIMO-N"
TRACK_P = "RIMO-P"
TRACKS = (TRACK_N, TRACK_P)

# The benchmark's primary metrics per track (exact match, as the paper defines them).
HEADLINE = {TRACK_N: ("accuracy",), TRACK_P: ("strict", "sub_problem_accuracy", "prefix_score")}
