"""rimo-eval compare: two revisions side by side, with paired tests."""
