"""The Markdown and the chart of ``memory-core eval truth`` (from its JSON report)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_core.tools.evaluation.truth_data import CATEGORIES, LANGUAGES
from memory_core.tools.evaluation.truth_metrics import ENTITY_METRICS, FACTS_ALONE, METRICS, TEMPORAL_METRICS
from memory_core.tools.reporting import grouped_bars, markdown_table, pyplot, save_chart

__all__ = ["cell_text", "draw_chart", "render_markdown"]


def cell_text(cell: Mapping[str, Any] | None) -> str:
    """``0.500 (9/18)``, or ``-`` when nothing was measured."""
    if not cell or not cell.get("of"):
        return "-"
    return f"{cell['rate']:.3f} ({cell['n']}/{cell['of']})"


def _label(metric: str) -> str:
    higher = {**METRICS, **TEMPORAL_METRICS, **ENTITY_METRICS}[metric]
    return f"{metric} {'↑' if higher else '↓'}"


def _groups(blocks: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The table's rows: (label, block key, name) for overall, each category and each language seen."""
    seen_categories: set[str] = set()
    seen_langs: set[str] = set()
    for block in blocks.values():
        seen_categories.update(block["by_category"])
        seen_langs.update(block["by_lang"])
    rows = [("**overall**", "overall", "")]
    rows += [(c, "by_category", c) for c in CATEGORIES if c in seen_categories]
    rows += [(f"lang: {lang}", "by_lang", lang) for lang in LANGUAGES if lang in seen_langs]
    return rows


def _cell(block: Mapping[str, Any], key: str, name: str) -> Mapping[str, Any] | None:
    if key == "overall":
        found: Mapping[str, Any] | None = block.get("overall")
        return found
    found = block.get(key, {}).get(name)
    return found


def _metrics_table(groups: Mapping[str, Any], blocks: Mapping[str, Any], names: Sequence[str]) -> str:
    rows = [
        [label, *(cell_text(_cell(blocks[m], key, name)) for m in names)]
        for label, key, name in _groups(groups)
    ]
    return markdown_table(["", *(_label(m) for m in names)], rows)


def _measured(blocks: Mapping[str, Any]) -> bool:
    """Whether any metric of ``blocks`` counted a case."""
    return any(block["overall"]["of"] for block in blocks.values())


def _failure_lines(failures: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for f in failures:
        details = {k: v for k, v in f.items() if k not in ("metric", "scenario", "lang", "category")}
        lines.append(f"- `{f['metric']}` {f['scenario']} ({f['category']}, {f['lang']})")
        lines.extend(f"  - {key}: {json.dumps(value, ensure_ascii=False)}" for key, value in details.items())
    return "\n".join(lines) + "\n"


def render_markdown(report: Mapping[str, Any]) -> str:
    """The metrics by category and language, facts alone, where forgotten strings were found, failures."""
    metrics = report["metrics"]
    text = (
        f"{report['scenarios']} scenarios, {report['probes']} probes, {report['turns']} turns; "
        f"embedder {report['embedder']}, extraction {report['extraction']}; {report['seconds']} s "
        "(↑ higher is better, ↓ lower is better)\n\n"
    )
    if _measured(metrics) or not _measured(report.get("temporal") or {}):
        text += _metrics_table(metrics, metrics, list(METRICS))
        text += (
            "\nfacts alone (the same probes searched with `kind=fact`; values kept by an active fact):\n\n"
        )
        text += _metrics_table(metrics, report["facts_alone"], list(FACTS_ALONE))
    temporal = report.get("temporal") or {}
    if _measured(temporal):
        text += (
            "\ntemporal probes (when, as of, last/next period, passed plans; `temporal_pass`: every check "
            "of the probe holds):\n\n"
        )
        text += _metrics_table(temporal, temporal, list(TEMPORAL_METRICS))
    entities = report.get("entities") or {}
    if _measured(entities):
        text += (
            "\nentity probes (aliases, relations, look-alike names, two-step questions, forget by person; "
            "`entity_pass`: every check of the probe holds):\n\n"
        )
        text += _metrics_table(entities, entities, list(ENTITY_METRICS))
    where = report.get("forgotten_found_where") or {}
    if where:
        text += "\nscenarios whose forbidden strings were found, per place:\n\n"
        text += markdown_table(["place", "scenarios"], [[place, count] for place, count in where.items()])
    failures = report.get("failures") or []
    if failures:
        text += f"\nfirst {len(failures)} of {report['failures_total']} failing cases:\n\n"
        text += _failure_lines(failures)
    return text


def draw_chart(report: dict[str, Any], directory: str | Path) -> list[str]:
    """``truth.png``: every metric's rate by category, and ``temporal_pass`` for the temporal ones
    (grouped bars; a missing figure draws nothing)."""
    plt = pyplot()
    if plt is None:
        return []
    blocks = dict(report["metrics"])
    temporal = report.get("temporal") or {}
    if _measured(temporal):
        blocks["temporal_pass"] = temporal["temporal_pass"]
    entities = report.get("entities") or {}
    if _measured(entities):
        blocks["entity_pass"] = entities["entity_pass"]
    categories = [c for c in CATEGORIES if any(c in block["by_category"] for block in blocks.values())]
    series: list[tuple[str, Sequence[float] | None]] = []
    for metric, block in blocks.items():
        values = []
        for category in categories:
            cell = block["by_category"].get(category)
            values.append(float("nan") if not cell or cell["rate"] is None else float(cell["rate"]))
        series.append((_label(metric), values))
    fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(categories)), 4.2))
    grouped_bars(ax, series, len(categories))
    ax.set_xticks(range(len(categories)), [c.replace("_", "\n") for c in categories], fontsize=7)
    ax.set_ylim(0, 1)
    ax.set_ylabel("rate")
    ax.set_title(
        f"what the memory believes now ({report['scenarios']} scenarios, {report['extraction']})", fontsize=9
    )
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    return [save_chart(plt, fig, directory, "truth.png")]
