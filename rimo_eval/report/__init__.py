"""The report stage: tables, charts, the papermill runner."""
