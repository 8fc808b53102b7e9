"""The item audit's outputs: a Markdown table (the flagged items first), an HTML page (the same
table, autoescaped: answers are model text), a figure of difficulty against solve rate, and the
suggested errata as YAML."""

from __future__ import annotations

import io
from typing import Any

import yaml
from jinja2 import Environment

FLAG_ORDER = ("suspect_gold", "misfit", "never_solved", "always_solved")
ERRATA_HEADER = """\
# SUGGESTED errata from `rimo-eval items`: golds the runs' answers call into question.
# For a person to check against the problem; rimo-eval never applies this file. The covers
# rule gold.suspect is no finding of validate: an entry moved into data/errata.yaml needs the
# id and covers of a real correction (and a version bump there).
"""
_HTML = Environment(autoescape=True).from_string("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rimo-eval items</title>
<style>body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;overflow-wrap:anywhere;
max-width:24em}th{background:#eee}</style></head><body>
<h1>Item audit over {{ runs|length }} runs</h1>
<p>{{ summary }}</p>
<table><thead><tr><th>track</th><th>item</th><th>gold</th><th>solve rate</th>
<th>commonest wrong answer (runs)</th><th>difficulty [95%]</th>
<th>discrimination [95%]</th><th>flags</th></tr></thead><tbody>
{% for r in rows %}<tr><td>{{ r.track }}</td><td>{{ r.problem_id }}</td><td>{{ r.gold }}</td>
<td>{{ r.solve }}</td><td>{{ r.wrong }}</td><td>{{ r.difficulty }}</td>
<td>{{ r.discrimination }}</td><td>{{ r.flags }}</td></tr>
{% endfor %}</tbody></table></body></html>
""")


def _ordered(result: dict[str, Any]) -> list[dict[str, Any]]:
    def key(row: dict[str, Any]) -> tuple[int, str, str]:
        ranks = [FLAG_ORDER.index(f) for f in row["flags"]] or [len(FLAG_ORDER)]
        return min(ranks), row["track"], row["problem_id"]
    return sorted(result["items"], key=key)


def _cells(row: dict[str, Any]) -> dict[str, str]:
    irt = row.get("irt")
    wrong = row["common_wrong"]

    def est(name: str) -> str:
        if irt is None or irt[name] is None:
            return "—"
        low, high = irt[f"{name}_ci"]
        return f"{irt[name]:.2f} [{low:.2f}, {high:.2f}]" if low is not None else "—"
    return {"track": row["track"], "problem_id": row["problem_id"],
            "gold": "" if row["gold"] is None else str(row["gold"]),
            "solve": f"{row['solve_rate']:.0%} ({row['solved_by']})",
            "wrong": f"{wrong['answer']} ({wrong['runs']})" if wrong else "",
            "difficulty": est("difficulty"), "discrimination": est("discrimination"),
            "flags": ", ".join(row["flags"])}


def summary(result: dict[str, Any]) -> str:
    counts = {f: sum(f in r["flags"] for r in result["items"]) for f in FLAG_ORDER}
    irt = result["irt"]
    fit = (f"2PL fit converged in {irt['iterations']} iterations" if irt["converged"] else
           f"the 2PL fit did NOT converge ({irt['iterations']} iterations): no IRT numbers")
    return (f"{len(result['items'])} items, {len(result['runs'])} runs; "
            + ", ".join(f"{n} {f}" for f, n in counts.items()) + f"; {fit}. suspect_gold is "
            f"a question for a person (false discovery rate "
            f"{result['suspect_gold']['false_discovery_rate']:.0%}), never an answer.")


def _md_cell(text: str) -> str:
    # Answers are model text: nothing in them may end the cell or the row.
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown(result: dict[str, Any], limit: int | None = 50) -> str:
    rows = [r for r in _ordered(result) if r["flags"]]
    shown = rows if limit is None else rows[:limit]
    head = ("| track | item | gold | solve rate | commonest wrong (runs) | difficulty [95%] | "
            "discrimination [95%] | flags |\n|---|---|---|---|---|---|---|---|\n")
    body = "".join("| " + " | ".join(_md_cell(v) for v in _cells(r).values()) + " |\n"
                   for r in shown)
    more = f"\n{len(rows) - len(shown)} more flagged items in items.json\n" \
        if len(shown) < len(rows) else ""
    return f"{summary(result)}\n\n{head}{body}{more}"


def html(result: dict[str, Any]) -> str:
    return _HTML.render(runs=result["runs"], summary=summary(result),
                        rows=[_cells(r) for r in _ordered(result)])


def figure(result: dict[str, Any]) -> bytes:
    """PNG: each item's IRT difficulty against its solve rate, flagged items marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    styles = {"suspect_gold": ("tab:red", "X"), "misfit": ("tab:orange", "^"),
              "never_solved": ("tab:gray", "v"), "always_solved": ("tab:green", "s"),
              "": ("tab:blue", "o")}
    for flag, (colour, marker) in styles.items():
        pts = [(r["irt"]["difficulty"], r["solve_rate"]) for r in result["items"]
               if r.get("irt") and r["irt"]["difficulty"] is not None
               and (flag in r["flags"] if flag else not r["flags"])]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.scatter(xs, ys, s=12 if flag == "" else 30, c=colour, marker=marker,
                       label=flag or "no flag", alpha=0.6 if flag == "" else 0.9)
    ax.set_xlabel("2PL difficulty (logits)")
    ax.set_ylabel("solve rate across runs")
    ax.set_title(f"Item audit over {len(result['runs'])} runs")
    ax.legend(loc="upper right", fontsize=8)
    buf = io.BytesIO()
    fig.tight_layout()
    # No timestamps in the file: the same audit gives the same bytes.
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def errata_yaml(errata: dict[str, Any]) -> str:
    return ERRATA_HEADER + yaml.safe_dump(errata, sort_keys=False, allow_unicode=True,
                                          width=100)


__all__ = ["errata_yaml", "figure", "html", "markdown", "summary"]
