"""``rimo-eval export``: a run in formats other tools read (Every Eval Ever 0.3.0, a Hugging Face
model repo's ``.eval_results`` file). Plain functions over a run's data (``source.ExportRun``);
``source.load_export_run`` is the one place a run is read."""
