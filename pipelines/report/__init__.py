"""The risk report of a horizon plan (DESIGN §6.4): a parquet table, a Markdown page, a self-contained HTML page.

- :mod:`pipelines.report.basics`: :class:`ReportInputs`, the table's schema, times and GPU use per step;
- :mod:`pipelines.report.calibration`: real-time coverage risk from measured calibration (coverage per
  service and hour band, P(demand > plan) per step);
- :mod:`pipelines.report.waits`: why a queued job waits, at its own earliest feasible step;
- :mod:`pipelines.report.risks`: the long table (:data:`REPORT_COLUMNS`): durations at the planned size,
  real deadlines, jobs at risk, idle windows, long holders, queue ETA and outlook;
- :mod:`pipelines.report.numbers`: :func:`headline` (the numbers an operator looks for first, also in
  ``summary.json``) and :func:`planned_metrics`;
- :mod:`pipelines.report.grid`: :func:`display_grid`, the per-step GPU owner grid of a plan;
- :mod:`pipelines.report.risks` also holds the one jobs-at-risk rule (:func:`~pipelines.report.risks.deadline_miss`,
  used by the what-if too);
- :mod:`pipelines.report.plots`: the report's plots and the conventions and :data:`PLOT_LOCK` every plot
  shares; :mod:`pipelines.report.forecast_plots` and :mod:`pipelines.report.backtest_plot`: the forecasters';
- :mod:`pipelines.report.page` / :mod:`pipelines.report.html`: the Markdown page, the HTML page and
  :func:`write_risk_report`; :mod:`pipelines.report.status`: the page's words for the statuses;
- :mod:`pipelines.report.whatif`: the what-if document as text (terminal, Markdown, JSON).
"""

from pipelines.report.basics import REPORT_COLUMNS, ReportInputs, plural, usage
from pipelines.report.calibration import COVERAGE_TARGET, Z90, ServiceCalibration, calibrate, exceed_probability
from pipelines.report.forecast_plots import plot_pred_vs_actual, plot_profile
from pipelines.report.grid import display_grid
from pipelines.report.html import render_html
from pipelines.report.numbers import PLANNED_METRICS, headline, planned_metrics
from pipelines.report.page import md_table, render_page, write_risk_report
from pipelines.report.plots import (
    KIND_COLORS,
    PLOT_LOCK,
    plot_bands,
    plot_demand,
    plot_gantt,
    plot_outlook,
    pyplot,
    service_colors,
)
from pipelines.report.risks import (
    IDLE_MIN_H,
    build_report_table,
    coverage_risks,
    deadline_instant,
    idle_windows,
    jobs_outlook,
    long_holders,
    planned_durations_h,
    queue_outlook,
)
from pipelines.report.status import explain_rt_status, status_text
from pipelines.report.waits import LONG_HOLD_H, plan_view, size_text, wait_reason

__all__ = [
    "COVERAGE_TARGET", "IDLE_MIN_H", "KIND_COLORS", "LONG_HOLD_H", "PLANNED_METRICS", "PLOT_LOCK", "REPORT_COLUMNS",
    "Z90", "ReportInputs", "ServiceCalibration", "build_report_table", "calibrate", "coverage_risks",
    "deadline_instant", "display_grid", "exceed_probability", "explain_rt_status", "headline", "idle_windows",
    "jobs_outlook", "long_holders", "md_table", "plan_view", "planned_durations_h", "planned_metrics", "plot_bands",
    "plot_demand", "plot_gantt", "plot_outlook", "plot_pred_vs_actual", "plot_profile", "plural", "pyplot",
    "queue_outlook", "render_html", "render_page", "service_colors", "size_text", "status_text", "usage",
    "wait_reason", "write_risk_report",
]
