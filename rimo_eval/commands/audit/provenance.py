"""reports/provenance.json against the files and params it describes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rimo_eval.artifacts.provenance import package_versions, params_fingerprint
from rimo_eval.commands.audit.ledger import Ledger, shown
from rimo_eval.commands.audit.lock import first_difference
from rimo_eval.io.git import has_commit
from rimo_eval.io.hashing import sha256_file


def _listed_files(ledger: Ledger, root: Path, prov: Mapping[str, Any], where: str,
                  expected: Mapping[str, Iterable[str]]) -> None:
    for section, paths in expected.items():
        recorded = prov.get(section) or {}
        for path in paths:
            want = recorded.get(path)
            if want is None:
                ledger.broke("provenance.sha256", where, f"{where}: provenance {section} do "
                             f"not list {path}")
                continue
            got = sha256_file(root / path) if (root / path).is_file() else None
            ledger.verdict(got == want, "provenance.sha256", path,
                           f"{path}: sha256 matches {where} provenance",
                           f"{path}: sha256 {got} differs from the one {where} was computed "
                           f"from ({want})")


def _same(ledger: Ledger, check: str, where: str, what: str, recorded: Any, now: Any,
          source: str) -> None:
    diff = None if recorded == now else first_difference(recorded, now, what) or \
        (what, recorded, now)
    ledger.verdict(diff is None, check, where, f"{where}: provenance {what} is {source}'s",
                   "" if diff is None else f"{where}: provenance {diff[0]} is "
                   f"{shown(diff[1])}, {source} now says {shown(diff[2])}")


def check_provenance(ledger: Ledger, root: Path, prov: Any, where: str, *,
                     expected_inputs: Iterable[str], expected_outputs: Iterable[str],
                     identities: Mapping[str, Mapping[str, Any]],
                     pin: Mapping[str, Any] | None, score_params: Mapping[str, Any]) -> None:
    """Each part of the block is its own check: one ok or one break per part."""
    if not isinstance(prov, dict):
        ledger.broke("provenance.block", where, f"{where}: not found (written by the score "
                     f"stage: rerun `dvc repro -f -s score`)")
        return
    ledger.ok("provenance.block", where, f"{where}: has a provenance block")
    _listed_files(ledger, root, prov, where, {"inputs": expected_inputs,
                                              "outputs": expected_outputs})
    for track, ident in identities.items():
        rec = (prov.get("predictions") or {}).get(track)
        ledger.verdict(rec == dict(ident), "provenance.predictions", where,
                       f"{where}: provenance names the {track} predictions' identity",
                       f"{where}: provenance says {track} predictions came from {rec}, the "
                       f"predictions file says {dict(ident)}")
    _same(ledger, "provenance.upstream", where, "upstream", prov.get("upstream"), pin,
          "params.yaml fetch")
    _same(ledger, "provenance.params", where, "params", prov.get("params"),
          {"score": dict(score_params)}, "params.yaml")
    fp = params_fingerprint(prov.get("upstream"), prov.get("predictions") or {},
                            (prov.get("params") or {}).get("score") or {})
    ledger.verdict(prov.get("params_fingerprint") == fp, "provenance.params_fingerprint", where,
                   f"{where}: params_fingerprint matches the params it lists",
                   f"{where}: params_fingerprint {prov.get('params_fingerprint')} does not "
                   f"match the params it lists ({fp})")
    # Context, not links of the chain: a foreign commit or other versions are warnings.
    commit = (prov.get("git") or {}).get("commit")
    if commit and has_commit(root, commit) is False:
        ledger.warn("provenance.block", where, f"{where}: made at commit {commit}, which this "
                    f"repository does not have (a copied metrics file?)")
    now_versions = package_versions()
    for pkg, version in (prov.get("packages") or {}).items():
        if now_versions.get(pkg, version) != version:
            ledger.warn("provenance.block", where, f"{where}: made with {pkg} {version}, this "
                        f"environment has {now_versions.get(pkg)} (the metrics still "
                        f"recompute: see above)")


__all__ = ["check_provenance"]
