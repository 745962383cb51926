"""The hidden checks' verdicts as people read them: a line for grades.csv (``summary_detail``) and, at the top of
each feedback page, the block "Checked by the grader": the checks' table, and each state trace drawn (an inline
SVG, no script) with the batch where the student's state diverged from the reference's (``summary_html``), put
there by a feedback preprocessor of nbgrader's generate_feedback (``steps/checks_block.py``).
"""
from __future__ import annotations

import html

from .languages import FEEDBACK, said
from .results import CheckResult


def summary_detail(verdicts: list[CheckResult]) -> str:
    """For grades.csv: which parts the grader's checks did not confirm, and why."""
    failed = [o for o in verdicts if not o.passed]
    if not failed:
        return ""
    return "not confirmed by the grader's checks: " + "; ".join(f"{o.name} ({o.detail})" for o in failed)


def _trace_figure(trace: dict) -> str:
    """An inline SVG: state rows per batch, yours (blue) and the reference's (grey), the first difference in red."""
    rows = [r for r in trace["rows"] if r["batch"] is not None]
    if not rows:
        return ""
    width, height, pad = 420, 140, 28
    top = max([1] + [r["yours"] or 0 for r in rows] + [r["reference"] or 0 for r in rows])
    first, last = rows[0]["batch"], rows[-1]["batch"]

    def x(batch):
        return pad + (batch - first) * (width - 2 * pad) / max(1, last - first)

    def y(count):
        return height - pad - count * (height - 2 * pad) / top

    def line(column, colour, dash=""):
        points = " ".join(f"{x(r['batch']):.1f},{y(r[column]):.1f}" for r in rows if r[column] is not None)
        return (f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
                if points else "")

    reference, yours = line("reference", "#999999", ' stroke-dasharray="5,3"'), line("yours", "#2e6da4")
    marks = ""
    if trace["diverged_at"] is not None:
        at = x(trace["diverged_at"])
        marks = (f'<line x1="{at:.1f}" y1="{pad - 8}" x2="{at:.1f}" y2="{height - pad}" stroke="#c0392b"/>'
                 f'<text x="{at + 3:.1f}" y="{pad - 10}" font-size="11" fill="#c0392b">'
                 f'batch {trace["diverged_at"]}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
            'aria-label="state rows per batch, yours and the reference">'
            f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#999"/>'
            f'<text x="{pad}" y="{height - 8}" font-size="11">batch {first}</text>'
            f'<text x="{width - pad}" y="{height - 8}" font-size="11" text-anchor="end">batch {last}</text>'
            f'<text x="2" y="{pad - 10}" font-size="11">{top} rows</text>'
            f'<text x="{width // 2}" y="{height - 8}" font-size="11" text-anchor="middle">'
            '<tspan fill="#2e6da4">— yours</tspan>  <tspan fill="#777777">- - the reference</tspan></text>'
            f'{reference}{yours}{marks}</svg>')


def trace_html(trace: dict, language: str = "en") -> str:
    """One state trace: a sentence on where it diverged, the figure, and the table of batches."""
    words = FEEDBACK[language]
    title = html.escape(trace["title"])
    if trace["diverged_at"] is None:
        verdict = words["matched"]
    else:
        first = next((r for r in trace["rows"] if r["batch"] == trace["diverged_at"]), None)
        why = f" ({html.escape(first['example'])})" if first and first["example"] else ""
        verdict = f"<strong>{words['diverged'].format(batch=trace['diverged_at'])}</strong>{why}."
    body = "".join(
        f"<tr><td>{r['batch']}</td><td>{'' if r['yours'] is None else r['yours']}</td><td>{r['reference']}</td>"
        f"<td>{'' if r['differ'] is None else r['differ']}</td><td>{html.escape(r['example'])}</td></tr>"
        for r in trace["rows"])
    header = "".join(f"<th>{column}</th>" for column in words["trace_columns"])
    return (f'<div class="streamlab-state-trace"><h3>{words["trace_title"].format(title=title)}</h3><p>{verdict} '
            f'{words["trace_why"]}</p>{_trace_figure(trace)}<table><tr>{header}</tr>{body}</table></div>')


def summary_html(verdicts: list[CheckResult], language: str = "en") -> str:
    """The block "Checked by the grader", in the notebook's ``language``: each check's verdict, and its traces."""
    words = FEEDBACK[language]
    rows = "".join(
        f"<tr><td>{html.escape(o.name)}</td><td>{html.escape(', '.join(o.cells))}</td>"
        f"<td>{said(o.outcome, language)}{'' if o.passed else ': ' + html.escape(o.detail)}</td></tr>"
        for o in verdicts)
    traces = "".join(trace_html(t, language) for o in verdicts for t in o.traces)
    header = "".join(f"<th>{column}</th>" for column in words["columns"])
    return ('<div id="streamlab-hidden-checks" style="font-family:sans-serif;margin:1em 2em;padding:.5em 1em;'
            f'border:1px solid #999"><h2>{words["checked"]}</h2><p>{words["checked_why"]}</p><table><tr>{header}</tr>'
            f'{rows}</table>{traces}</div>')
