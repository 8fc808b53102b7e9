"""``rimo-eval export [RUN] --format eee|hf --out DIR``: a run in the formats other tools read
(eee.py: Every Eval Ever 0.3.0; hf.py: a Hugging Face model repo's Eval Results file), written
into a fresh folder swapped in whole (io/outputs.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rimo_eval.io.outputs import claim_folder, output_folder
from rimo_eval.params.config import Params

TOOL = "export"


def export(root: Path, name: str, fmt: str, out: Path, model: str | None = None,
           organization: str = "unknown", dataset_id: str = "ziye2chen/RIMO",
           url: str | None = None) -> str:
    """Write the export of run ``name``; a line saying what was written."""
    from rimo_eval.commands.export.eee import model_id, write_eee
    from rimo_eval.commands.export.hf import write_hf
    from rimo_eval.commands.export.source import load_export_run

    where = "export --out"
    claim_folder(out, TOOL, where)  # refused before any reading
    run = load_export_run(root, name)
    try:
        with output_folder(out, TOOL, where) as tmp:
            if fmt == "eee":
                path, rows = write_eee(run, tmp, model_id(run, model), organization)
                what = f"{out / path} and its {rows} instance rows beside it"
            else:
                what = str(out / write_hf(run, tmp, dataset_id, url))
    finally:
        run.close()
    return f"rimo-eval export: {run.label}: wrote {what}"

def main(args: argparse.Namespace, params: Params | None) -> int:
    print(export(Path.cwd(), args.run, args.format, args.out, args.model_id,
                 args.organization, args.dataset_id, args.source_url))
    return 0


__all__ = ["TOOL", "export", "main"]
