"""The risk report of a horizon plan (DESIGN §6.4): a parquet table and a Markdown page with plots.

- :mod:`pipelines.report.risks`: :class:`ReportInputs` and the risk maths (coverage risks, idle
  windows, jobs at risk, queue ETA and outlook) as one long table (:data:`REPORT_COLUMNS`);
- :mod:`pipelines.report.grid`: :func:`display_grid`, the per-step GPU owner grid of a plan;
- :mod:`pipelines.report.plots`: every plot of the pipelines, drawn under :data:`PLOT_LOCK`;
- :mod:`pipelines.report.page`: the Markdown page and :func:`write_risk_report`.
"""

from pipelines.report.grid import display_grid
from pipelines.report.page import explain_rt_status, md_table, render_page, status_text, write_risk_report
from pipelines.report.plots import (
    KIND_COLORS,
    PLOT_LOCK,
    plot_bands,
    plot_demand,
    plot_gantt,
    plot_outlook,
    plot_pred_vs_actual,
    plot_profile,
    pyplot,
)
from pipelines.report.risks import (
    REPORT_COLUMNS,
    Z90,
    ReportInputs,
    build_report_table,
    coverage_risks,
    exceed_probability,
    idle_windows,
    jobs_outlook,
    plural,
    queue_outlook,
    size_text,
    usage,
    wait_reason,
)

__all__ = [
    "KIND_COLORS", "PLOT_LOCK", "REPORT_COLUMNS", "Z90", "ReportInputs", "build_report_table", "coverage_risks",
    "display_grid", "exceed_probability", "explain_rt_status", "idle_windows", "jobs_outlook", "md_table",
    "plot_bands", "plot_demand", "plot_gantt", "plot_outlook", "plot_pred_vs_actual", "plot_profile", "plural",
    "pyplot", "queue_outlook", "render_page", "size_text", "status_text", "usage", "wait_reason",
    "write_risk_report",
]
