"""Robustness faults of the real-time forecast (DESIGN §4.4): outage hour at the end, masked weekday, range guard.

(Shift up and down: tests/realtime/test_level_shift.py.) Constructed instances with seeded noise; each test
has a negative control showing what the fault did without the rule.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasters.realtime import ProfileSettings, fit_profile, forecast


# --- fault 2: the only week of history lacks the forecast weekday --------------------------------------------
def _eight_days_sunday_masked():
    idx = pd.date_range("2025-06-02T00:00Z", periods=24 * 8, freq="h")  # Monday .. the next Monday
    hod, dow = idx.hour.to_numpy(), idx.day_of_week.to_numpy()
    y = (100 + 50 * np.sin(2 * np.pi * (hod - 6) / 24)) * np.where(dow >= 5, 0.7, 1.0)
    y = y * np.exp(np.random.default_rng(3).normal(0, 0.05, len(idx)))
    s = pd.Series(y, index=idx)
    return s, list(idx[dow == 6]), y[dow != 6]


def test_masked_weekday_drops_the_weekly_terms_instead_of_extrapolating_them():
    s, sunday, usable = _eight_days_sunday_masked()
    prof = fit_profile(s, "UTC", exclude=sunday)
    assert prof.status == "degraded" and "weekly_168h" not in prof.components
    assert ("weekly component NOT estimated: local Sunday has fewer than 12 usable hours in the fitted window "
            "(masked or missing); daily profile only") in prof.messages
    fc = forecast(prof, 168)
    sun = fc[fc["ts"].dt.day_of_week == 6]
    assert len(sun) == 24 and sun["p50"].max() < usable.max()  # 123.7 < 168.5
    # negative control: with the rule off the weekly harmonics extrapolate the unseen Sunday to 189.0,
    # above every usable hour (the true Sunday peaks near 105)
    off = fit_profile(s, "UTC", exclude=sunday, settings=ProfileSettings(min_weekday_h=0))
    assert "weekly_168h" in off.components
    off_sun = forecast(off, 168).pipe(lambda f: f[f["ts"].dt.day_of_week == 6])
    assert off_sun["p50"].max() > usable.max()
