"""Ingest: zones, DST (C01, C08.1), gaps (C04), off-grid and duplicate stamps (C05)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from forecasters.errors import InputError
from forecasters.realtime import IngestSettings, daily_totals, fit_profile, forecast, ingest
from forecasters.realtime.ingest import _outliers
from forecasters.realtime.shift import ShiftSettings

from .conftest import utc_frame


# --- C01 DST spring-forward -------------------------------------------------------------------------------
def test_c01_berlin_spring_forward_gap_is_not_missing(make_naive_local):
    df = make_naive_local("2025-03-17 00:00", "2025-03-31 23:00", "Europe/Berlin")
    assert len(df) == 359 and "2025-03-30 02:00:00" not in set(df["ts"])
    s, d = ingest(df, "Europe/Berlin")
    assert len(s) == 359
    assert s.index[0] == pd.Timestamp("2025-03-16T23:00Z")
    assert s.index[-1] == pd.Timestamp("2025-03-31T21:00Z")
    assert d["missing_hours"] == 0 and d["nonexistent_hours"] == 0 and d["ambiguous_hours"] == 0


def test_c01_nonexistent_local_hour_is_rejected_by_name(make_naive_local):
    df = make_naive_local("2025-03-17 00:00", "2025-03-31 23:00", "Europe/Berlin")
    bad = pd.concat([df, pd.DataFrame({"ts": ["2025-03-30 02:00:00"], "value": [10.0]})], ignore_index=True)
    with pytest.raises(InputError, match=r"2025-03-30 02:00 does not exist in Europe/Berlin"):
        ingest(bad, "Europe/Berlin")


def test_c01_forecast_from_history_ending_before_the_jump(make_naive_local):
    df = make_naive_local("2025-03-17 00:00", "2025-03-30 01:00", "Europe/Berlin",
                          value_fn=lambda t: 50 + 20 * np.sin(2 * np.pi * t.hour / 24))
    s, _ = ingest(df, "Europe/Berlin")
    assert s.index[-1] == pd.Timestamp("2025-03-30T00:00Z")
    fc = forecast(fit_profile(s, "Europe/Berlin"), 24)
    assert fc["ts"].iloc[0] == pd.Timestamp("2025-03-30T01:00Z")
    assert fc["ts"].is_unique and len(fc) == 24
    assert (fc["ts"].diff().iloc[1:] == pd.Timedelta(hours=1)).all()
    assert fc[["p50", "p90"]].notna().all().all()


def test_c01_sao_paulo_2018_midnight_jump_daily_totals(make_naive_local):
    df = make_naive_local("2018-10-22 00:00", "2018-11-11 23:00", "America/Sao_Paulo")
    assert len(df) == 503 and "2018-11-04 00:00:00" not in set(df["ts"])
    s, d = ingest(df, "America/Sao_Paulo")
    assert len(s) == 503 and d["missing_hours"] == 0
    days = daily_totals(s, "America/Sao_Paulo")
    assert len(days) == 21
    hours = dict(zip(days["date"].astype(str), days["hours"], strict=True))
    assert hours["2018-11-04"] == 23
    assert sorted(set(hours.values())) == [23, 24]
    assert days["total"].sum() == pytest.approx(503 * 10.0)


def test_c01_negative_control_no_invented_transition(make_naive_local):
    df = make_naive_local("2025-03-02 00:00", "2025-03-16 23:00", "America/Sao_Paulo")
    s, d = ingest(df, "America/Sao_Paulo")
    assert len(s) == 360
    assert d["ambiguous_hours"] == 0 and d["nonexistent_hours"] == 0 and d["missing_hours"] == 0
    assert s.index[0] == pd.Timestamp("2025-03-02T03:00Z")
    assert s.index[-1] == pd.Timestamp("2025-03-17T02:00Z")
    offsets = {t.utcoffset() for t in s.index.tz_convert("America/Sao_Paulo")}
    assert offsets == {pd.Timedelta(hours=-3)}


def test_fall_back_repeated_local_hour_is_two_utc_hours_and_counted(make_naive_local):
    df = make_naive_local("2025-10-20 00:00", "2025-10-31 23:00", "Europe/London")
    assert (df["ts"] == "2025-10-26 01:00:00").sum() == 2
    s, d = ingest(df, "Europe/London")
    assert d["ambiguous_hours"] == 2
    assert d["duplicates_dropped"] == 0 and d["missing_hours"] == 0
    assert pd.Timestamp("2025-10-26T00:00Z") in s.index and pd.Timestamp("2025-10-26T01:00Z") in s.index
    assert len(s) == len(df)


# --- C08.1 naive stamps need a zone -----------------------------------------------------------------------
def test_c08_naive_without_zone_asks_for_it(make_naive_local):
    df = make_naive_local("2025-03-03 00:00", "2025-03-10 23:00", "Europe/London")
    with pytest.raises(InputError, match="declare the source time zone"):
        ingest(df, None)


def test_c08_naive_mixed_with_aware_is_refused(make_utc):
    aware = make_utc("2025-03-03T00:00", 48, np.ones(48))
    mixed = aware.copy()
    mixed.loc[5, "ts"] = "2025-03-03 05:00:00"
    with pytest.raises(InputError, match="row 5.*no zone"):
        ingest(mixed, None)


def test_aware_stamps_with_offsets_convert_to_utc():
    df = pd.DataFrame({"ts": ["2025-03-29T23:00:00+01:00", "2025-03-30T00:00:00+01:00",
                              "2025-03-30T01:00:00+01:00", "2025-03-30T03:00:00+02:00"],
                       "value": [1.0, 2.0, 3.0, 4.0]})
    s, d = ingest(df, None)
    assert list(s.index) == list(pd.date_range("2025-03-29T22:00Z", periods=4, freq="h"))
    assert d["missing_hours"] == 0 and list(s) == [1.0, 2.0, 3.0, 4.0]


# --- C04 gaps ---------------------------------------------------------------------------------------------
def _c04_frame(make_utc):
    idx = pd.date_range("2025-05-05T00:00Z", "2025-05-25T23:00Z", freq="h")
    vals = 50 + 20 * np.sin(2 * np.pi * idx.hour.to_numpy() / 24)
    df = make_utc("2025-05-05T00:00", len(idx), vals)
    nan_hours = (idx >= "2025-05-14T08:00Z") & (idx <= "2025-05-14T13:00Z")
    df.loc[nan_hours, "value"] = np.nan
    df = df[~((idx >= "2025-05-20T00:00Z") & (idx < "2025-05-21T00:00Z"))]
    return df


def test_c04_gaps_counted_imputed_and_no_nan(make_utc):
    df = _c04_frame(make_utc)
    assert len(df) == 480
    s, d = ingest(df, None)
    assert len(s) == 504 and d["hours"] == 504
    assert d["missing_hours"] == 30 and d["longest_gap_h"] == 24
    assert d["missing_share"] == pytest.approx(30 / 504) and round(100 * d["missing_share"], 2) == 5.95
    assert len(d["imputed"]) == 30 and not s.isna().any()
    # the day-long gap is imputed from the same hours of the neighbouring days (exact for this pattern)
    day = s["2025-05-20T00:00Z":"2025-05-20T23:00Z"].to_numpy()
    expected = 50 + 20 * np.sin(2 * np.pi * np.arange(24) / 24)
    np.testing.assert_allclose(day, expected, atol=1e-9)
    prof = fit_profile(s, "UTC", exclude=d["imputed"])
    fc = forecast(prof, 48)
    assert np.isfinite(fc[["p50", "p90"]].to_numpy()).all()


def test_c04_missing_share_above_limit_fails_with_share_and_gap(make_utc):
    df = _c04_frame(make_utc)
    with pytest.raises(InputError, match=r"30 of 504 hours missing \(5\.95%\).*limit 5%.*longest gap 24 h"):
        ingest(df, None, settings=IngestSettings(max_missing_share=0.05))


# --- C05 off-grid and duplicates --------------------------------------------------------------------------
def _c05_frame(conflict: bool) -> pd.DataFrame:
    stamps = pd.date_range("2025-02-03T00:05Z", "2025-02-17T23:05Z", freq="h")
    assert len(stamps) == 360
    vals = np.full(360, 20.0)
    vals[stamps == pd.Timestamp("2025-02-10T12:05Z")] = 30.0
    vals[stamps == pd.Timestamp("2025-02-14T14:05Z")] = 120.0
    df = pd.DataFrame({"ts": stamps.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": vals})
    extra = [pd.DataFrame({"ts": ["2025-02-10T12:35:00Z"], "value": [34.0]}),
             df[df["ts"].between("2025-02-12T00:05:00Z", "2025-02-12T05:05:00Z")]]
    if conflict:
        extra.append(pd.DataFrame({"ts": ["2025-02-14T14:05:00Z"], "value": [180.0]}))
    return pd.concat([df, *extra], ignore_index=True)


def test_c05_conflicting_duplicate_names_hour_and_values():
    with pytest.raises(InputError, match=r"2025-02-14T14:00Z.*120, 180"):
        ingest(_c05_frame(conflict=True), None)


def test_c05_off_grid_bucketed_by_max_and_exact_duplicates_dropped():
    df = _c05_frame(conflict=False)
    assert len(df) == 367
    s, d = ingest(df, None)  # default rule
    assert len(s) == 360 and not s.isna().any() and d["missing_hours"] == 0
    assert d["duplicates_dropped"] == 6
    assert d["off_grid_stamps"] == 361
    assert d["offgrid_rule"] == "max"
    assert s[pd.Timestamp("2025-02-10T12:00Z")] == 34.0
    assert s.index[0] == pd.Timestamp("2025-02-03T00:00Z")


def test_c05_other_rules_are_settings():
    df = _c05_frame(conflict=False)
    assert ingest(df, None, offgrid_rule="mean")[0][pd.Timestamp("2025-02-10T12:00Z")] == 32.0
    assert ingest(df, None, offgrid_rule="last")[0][pd.Timestamp("2025-02-10T12:00Z")] == 34.0
    with pytest.raises(InputError, match="offgrid_rule"):
        ingest(df, None, offgrid_rule="median")


# --- other bad input and outliers -------------------------------------------------------------------------
def test_bad_values_and_columns_are_named(make_utc):
    df = make_utc("2025-01-01T00:00", 48, np.ones(48))
    with pytest.raises(InputError, match="missing column 'value'"):
        ingest(df.drop(columns="value"), None)
    neg = df.copy()
    neg.loc[3, "value"] = -1.0
    with pytest.raises(InputError, match="row 3.*negative"):
        ingest(neg, None)
    txt = df.astype({"value": "str"})
    txt.loc[7, "value"] = "lots"
    with pytest.raises(InputError, match="row 7.*'lots' is not a number"):
        ingest(txt, None)
    two = df.assign(service=["a"] * 24 + ["b"] * 24)
    with pytest.raises(InputError, match="2 services"):
        ingest(two, None)


def test_outlier_detected_listed_and_kept(make_utc):
    n = 24 * 14
    hours = np.arange(n) % 24
    vals = 100 + 30 * np.sin(2 * np.pi * hours / 24) + np.random.default_rng(0).normal(0, 1, n)
    vals[200] = 400.0
    s, d = ingest(make_utc("2025-01-06T00:00", n, vals), None)
    assert d["outliers"] == [pd.Timestamp("2025-01-06T00:00Z").replace(hour=0).__add__(pd.Timedelta(hours=200))
                             .strftime("%Y-%m-%dT%H:%M:%SZ")]
    assert s.iloc[200] == 400.0


# --- Time-zone rules with DISTINCT values: an order or shift bug changes the answer -----------------------
def _frame(rows):
    return pd.DataFrame({"ts": [r[0] for r in rows], "value": [float(r[1]) for r in rows]})


def _pairs(s):
    return [(t.strftime("%Y-%m-%dT%H:%MZ"), v) for t, v in s.items()]


def test_fall_back_london_first_repeated_hour_is_the_earlier_instant():
    # issue 18 mutant 3: 01:00 is given twice, as 11 then 12; 11 is 01:00 BST = 00:00Z, 12 is 01:00 GMT = 01:00Z
    df = _frame([("2025-10-25 23:00:00", 9), ("2025-10-26 00:00:00", 10), ("2025-10-26 01:00:00", 11),
                 ("2025-10-26 01:00:00", 12), ("2025-10-26 02:00:00", 13)])
    s, d = ingest(df, "Europe/London")
    assert _pairs(s) == [("2025-10-25T22:00Z", 9.0), ("2025-10-25T23:00Z", 10.0), ("2025-10-26T00:00Z", 11.0),
                         ("2025-10-26T01:00Z", 12.0), ("2025-10-26T02:00Z", 13.0)]
    assert d["ambiguous_hours"] == 2 and d["missing_hours"] == 0 and d["duplicates_dropped"] == 0


def test_fall_back_order_is_file_order_of_the_repeated_stamp_even_when_rows_are_shuffled():
    # the two 01:00 rows are not adjacent and other rows come between/before them
    df = _frame([("2025-10-26 02:00:00", 13), ("2025-10-26 01:00:00", 11), ("2025-10-26 00:00:00", 10),
                 ("2025-10-26 01:00:00", 12)])
    s, d = ingest(df, "Europe/London")
    assert _pairs(s) == [("2025-10-25T23:00Z", 10.0), ("2025-10-26T00:00Z", 11.0), ("2025-10-26T01:00Z", 12.0),
                         ("2025-10-26T02:00Z", 13.0)]
    assert d["ambiguous_hours"] == 2


def test_fall_back_other_zones_new_york_and_sydney():
    # New York 2025-11-02: 01:00 EDT (-4) = 05:00Z, then 01:00 EST (-5) = 06:00Z
    s, _ = ingest(_frame([("2025-11-02 00:00:00", 1), ("2025-11-02 01:00:00", 2), ("2025-11-02 01:00:00", 3),
                          ("2025-11-02 02:00:00", 4)]), "America/New_York")
    assert _pairs(s) == [("2025-11-02T04:00Z", 1.0), ("2025-11-02T05:00Z", 2.0), ("2025-11-02T06:00Z", 3.0),
                         ("2025-11-02T07:00Z", 4.0)]
    # Sydney 2025-04-06 (southern autumn): 02:00 AEDT (+11) = 15:00Z on the 5th, then 02:00 AEST (+10) = 16:00Z
    s, d = ingest(_frame([("2025-04-06 01:00:00", 5), ("2025-04-06 02:00:00", 6), ("2025-04-06 02:00:00", 7),
                          ("2025-04-06 03:00:00", 8)]), "Australia/Sydney")
    assert _pairs(s) == [("2025-04-05T14:00Z", 5.0), ("2025-04-05T15:00Z", 6.0), ("2025-04-05T16:00Z", 7.0),
                         ("2025-04-05T17:00Z", 8.0)]
    assert d["ambiguous_hours"] == 2


def test_fall_back_from_naive_datetime64_and_from_tz_aware_column():
    naive = pd.DataFrame({"ts": pd.to_datetime(["2025-10-26 00:00", "2025-10-26 01:00", "2025-10-26 01:00",
                                                "2025-10-26 02:00"]), "value": [10.0, 11.0, 12.0, 13.0]})
    s, d = ingest(naive, "Europe/London")
    assert _pairs(s) == [("2025-10-25T23:00Z", 10.0), ("2025-10-26T00:00Z", 11.0), ("2025-10-26T01:00Z", 12.0),
                         ("2025-10-26T02:00Z", 13.0)]
    assert d["ambiguous_hours"] == 2
    # an already zone-aware column (London) is converted, not re-localised; no zone argument needed
    aware = pd.DataFrame({"ts": pd.date_range("2025-10-26 00:00", periods=4, freq="h", tz="Europe/London"),
                          "value": [10.0, 11.0, 12.0, 13.0]})
    s, d = ingest(aware, None)
    assert _pairs(s) == [("2025-10-25T23:00Z", 10.0), ("2025-10-26T00:00Z", 11.0), ("2025-10-26T01:00Z", 12.0),
                         ("2025-10-26T02:00Z", 13.0)]
    assert d["ambiguous_hours"] == 0


def test_spring_forward_berlin_values_keep_their_hours():
    # 02:00 does not exist on 2025-03-30: 01:00 CET = 00:00Z and 03:00 CEST = 01:00Z are adjacent UTC hours
    s, d = ingest(_frame([("2025-03-30 00:00:00", 1), ("2025-03-30 01:00:00", 2), ("2025-03-30 03:00:00", 3),
                          ("2025-03-30 04:00:00", 4)]), "Europe/Berlin")
    assert _pairs(s) == [("2025-03-29T23:00Z", 1.0), ("2025-03-30T00:00Z", 2.0), ("2025-03-30T01:00Z", 3.0),
                         ("2025-03-30T02:00Z", 4.0)]
    assert d["missing_hours"] == 0 and d["ambiguous_hours"] == 0 and d["imputed"] == []
    # a row at the skipped hour is refused and named by its row number (not shifted onto 03:00)
    bad = _frame([("2025-03-30 01:00:00", 2), ("2025-03-30 03:00:00", 3), ("2025-03-30 02:00:00", 9)])
    with pytest.raises(InputError, match=r"traffic row 2: local time 2025-03-30 02:00 does not exist"):
        ingest(bad, "Europe/Berlin")


def test_aware_stamps_with_mixed_non_utc_offsets_and_shuffled_rows():
    df = _frame([("2025-06-01T0400+0100", 4),            # 03:00Z, offset without a colon
                 ("2025-06-01T05:30:00+05:30", 1),       # 00:00Z
                 ("2025-06-01T02:00:00Z", 3),            # 02:00Z
                 ("2025-05-31T22:00:00-03:00", 2)])      # 01:00Z, previous local day
    s, d = ingest(df, None)
    assert _pairs(s) == [("2025-06-01T00:00Z", 1.0), ("2025-06-01T01:00Z", 2.0), ("2025-06-01T02:00Z", 3.0),
                         ("2025-06-01T03:00Z", 4.0)]
    assert d["off_grid_stamps"] == 0


def test_naive_stamps_in_fixed_non_utc_zones():
    # Kolkata is +05:30 all year: local :30 stamps land on whole UTC hours
    s, d = ingest(_frame([("2025-06-01 05:30:00", 1), ("2025-06-01 06:30:00", 2), ("2025-06-01 07:30:00", 3)]),
                  "Asia/Kolkata")
    assert _pairs(s) == [("2025-06-01T00:00Z", 1.0), ("2025-06-01T01:00Z", 2.0), ("2025-06-01T02:00Z", 3.0)]
    assert d["off_grid_stamps"] == 0
    # Tokyo +09:00: local 08:00 on the 1st is 23:00Z on the 31st
    s, _ = ingest(_frame([("2025-06-01 08:00:00", 7), ("2025-06-01 09:00:00", 8)]), "Asia/Tokyo")
    assert _pairs(s) == [("2025-05-31T23:00Z", 7.0), ("2025-06-01T00:00Z", 8.0)]
    # New York in summer is -04:00
    s, _ = ingest(_frame([("2025-07-01 20:00:00", 5), ("2025-07-01 21:00:00", 6)]), "America/New_York")
    assert _pairs(s) == [("2025-07-02T00:00Z", 5.0), ("2025-07-02T01:00Z", 6.0)]


def test_daily_totals_group_by_local_day_on_the_25_hour_day():
    # UTC hours 2025-10-25T22:00Z .. 2025-10-27T00:00Z with values 1..27. In London 22:00Z on the 25th is
    # 23:00 BST (25th); 23:00Z is 00:00 BST on the 26th; the 26th ends at 23:00 GMT = 23:00Z (25 hours);
    # 00:00Z on the 27th is 00:00 GMT on the 27th.
    idx = pd.date_range("2025-10-25T22:00Z", "2025-10-27T00:00Z", freq="h")
    s = pd.Series(np.arange(1.0, len(idx) + 1), index=idx)
    days = daily_totals(s, "Europe/London")
    assert [str(x) for x in days["date"]] == ["2025-10-25", "2025-10-26", "2025-10-27"]
    assert list(days["hours"]) == [1, 25, 1]
    assert list(days["total"]) == [1.0, float(sum(range(2, 27))), 27.0]  # 350 on the 26th


def test_fall_back_two_interleaved_repeated_stamps_are_paired_per_stamp():
    # 01:00 and 01:30 each occur twice, interleaved as on the clock: each stamp's own first row is BST
    df = _frame([("2025-10-26 01:00:00", 11), ("2025-10-26 01:30:00", 21), ("2025-10-26 01:00:00", 12),
                 ("2025-10-26 01:30:00", 22)])
    s, d = ingest(df, "Europe/London", offgrid_rule="last")
    assert _pairs(s) == [("2025-10-26T00:00Z", 21.0), ("2025-10-26T01:00Z", 22.0)]
    assert d["ambiguous_hours"] == 4 and d["off_grid_stamps"] == 2
    s, _ = ingest(df, "Europe/London", offgrid_rule="mean")
    assert _pairs(s) == [("2025-10-26T00:00Z", 16.0), ("2025-10-26T01:00Z", 17.0)]


def test_impute_hours_replaces_listed_hours_by_the_ingest_method():
    from forecasters.realtime.ingest import impute_hours

    idx = pd.date_range("2025-01-01", periods=72, freq="h", tz="UTC")
    s = pd.Series(np.arange(72.0) + 100, index=idx)
    # one hour inside: linear between its neighbours; the last hour: the last value before it
    out = impute_hours(s, [idx[10].strftime("%Y-%m-%dT%H:%M:%SZ"), idx[-1]])
    assert out.iloc[10] == 110.0 and out.iloc[-1] == 170.0 and s.iloc[-1] == 171.0  # the input is unchanged
    # a 5-hour run at the end (longer than interp_max_gap_h = 2): the same hour 24 h before
    assert impute_hours(s, list(idx[-5:])).iloc[-5:].tolist() == [143.0, 144.0, 145.0, 146.0, 147.0]
    # nothing listed, or every hour listed: unchanged
    pd.testing.assert_series_equal(impute_hours(s, []), s)
    pd.testing.assert_series_equal(impute_hours(s, list(idx)), s)


# --- Zone of a tz-aware column, missing stamps, and imputation with values a wrong rule changes -------------


def test_tz_aware_column_sets_the_clock_iana_and_fixed_offset():
    idx = pd.date_range("2025-03-01", periods=72, freq="h", tz="Europe/London")
    s, d = ingest(pd.DataFrame({"ts": pd.Series(idx), "value": np.arange(72.0)}), None)
    assert (d["timezone"], d["zone"]["kind"], d["zone"]["source"]) == ("Europe/London", "iana", "dtype")
    assert s.index[0] == pd.Timestamp("2025-03-01T00:00Z")  # GMT in March before the change
    fixed = pd.date_range("2025-03-01", periods=72, freq="h", tz=dt.timezone(dt.timedelta(hours=-5)))
    s, d = ingest(pd.DataFrame({"ts": pd.Series(fixed), "value": np.arange(72.0)}), None)
    assert (d["timezone"], d["zone"]["kind"], d["zone"]["offsets"]) == ("UTC-05:00", "fixed_offset", ["-05:00"])
    assert s.index[0] == pd.Timestamp("2025-03-01T05:00Z")


def test_a_missing_stamp_is_named_by_row():
    df = pd.DataFrame({"ts": ["2025-01-01T00:00Z", "2025-01-01T01:00Z", None], "value": [1.0, 2.0, 3.0]})
    with pytest.raises(InputError, match=r"^traffic row 2: ts is missing$"):
        ingest(df, None)


def test_a_complete_series_has_no_gap(make_utc):
    s, d = ingest(make_utc("2025-01-01T00:00", 48, np.arange(48.0)), None)
    assert (d["missing_hours"], d["longest_gap_h"], d["imputed"]) == (0, 0, [])


def _days(levels, missing):
    """Hour k of day d has value levels[d] + k; the hours in ``missing`` are NaN (rows kept, value empty)."""
    vals = np.array([lv + k for lv in levels for k in range(24)], dtype=float)
    truth = vals.copy()
    vals[list(missing)] = np.nan
    return vals, truth


def test_imputation_short_gaps_linear_long_gaps_from_the_neighbouring_days(make_utc):
    # 5 days at levels 10, 20, 50, 60, 100 (+ hour of day). interp_max_gap_h = 2.
    vals, truth = _days([10, 20, 50, 60, 100], [0, 1, 2, 30, 31, 32, 50, 51, 60, 62, 119])
    s, d = ingest(make_utc("2025-01-06T00:00", 120, vals), None)
    assert (d["missing_hours"], d["longest_gap_h"]) == (11, 3)
    got = s.to_numpy()
    # hours 0-2 (3 h, at the start): only the next day exists -> 20 + k
    assert got[0:3].tolist() == [20.0, 21.0, 22.0]
    # hours 30-32 (day 1, 3 h): mean of day 0 and day 2 at that hour, (10 + 50) / 2 + k (linear: 26..28)
    assert got[30:33].tolist() == [36.0, 37.0, 38.0]
    # hours 50-51 (day 2, 2 h = the limit): linear from 51 to 54 (the neighbouring days would give 42, 43)
    assert got[50:52].tolist() == [52.0, 53.0]
    # hours 60 and 62, single-hour gaps with 61 between: each linear (62, 64), not seasonal (52, 54)
    assert (got[60], got[62]) == (62.0, 64.0)
    # the last hour (a 1-h gap at the end): carried from hour 118
    assert got[119] == 122.0
    # every observed hour is kept as it was
    observed = ~np.isnan(vals)
    assert (got[observed] == truth[observed]).all()


def test_a_long_gap_in_a_series_shorter_than_two_days_uses_the_day_before(make_utc):
    # 47 hours: day 0 at 10 + k, day 1 at 50 + k; hour 0 (1 h) and hours 30-32 (3 h) missing
    vals, _ = _days([10, 50], [0, 30, 31, 32])
    s, d = ingest(make_utc("2025-01-06T00:00", 47, vals[:47]), None)
    got = s.to_numpy()
    assert got[0] == 11.0  # a leading short gap: carried back from hour 1
    assert got[30:33].tolist() == [16.0, 17.0, 18.0]  # the day before alone (linear would give 56..58)


def test_text_stamps_messages_and_counts():
    aware = pd.DataFrame({"ts": ["2025-01-01T00:00Z", "2025-13-01T01:00Z"], "value": [1.0, 2.0]})
    with pytest.raises(InputError, match=r"^traffic: ts not ISO 8601 \("):
        ingest(aware, None)
    mixed = pd.DataFrame({"ts": ["2025-01-01T00:00Z", "2025-01-01 01:00"], "value": [1.0, 2.0]})
    with pytest.raises(InputError, match=r"^traffic row 1: ts '2025-01-01 01:00' has no zone while other rows "
                                         r"do; use one convention$"):
        ingest(mixed, None)
    # stamps with offsets are never ambiguous: 01:00 twice in London (BST, then GMT) is two known instants
    s, d = ingest(pd.DataFrame({"ts": ["2025-10-26T01:00+01:00", "2025-10-26T01:00+00:00"], "value": [1.0, 2.0]}),
                  "Europe/London")
    assert d["ambiguous_hours"] == 0 and _pairs(s) == [("2025-10-26T00:00Z", 1.0), ("2025-10-26T01:00Z", 2.0)]


def test_naive_iso_stamps_in_mixed_forms_are_all_read():
    # ISO 8601 allows a space or T and optional seconds; a format inferred from the first row would not
    df = pd.DataFrame({"ts": ["2025-01-06 00:00", "2025-01-06T01:00:00", "2025-01-06 02:00:00"], "value": [1.0, 2.0, 3.0]})
    s, d = ingest(df, "UTC")
    assert _pairs(s) == [("2025-01-06T00:00Z", 1.0), ("2025-01-06T01:00Z", 2.0), ("2025-01-06T02:00Z", 3.0)]


def test_value_and_zone_refusals_name_the_row_and_the_fix():
    def frame(values, ts=None):
        ts = ts or [f"2025-01-06T{h:02d}:00Z" for h in range(len(values))]
        return pd.DataFrame({"ts": ts, "value": values})
    with pytest.raises(InputError, match=r"^traffic row 2: value is infinite$"):
        ingest(frame([1.0, 2.0, np.inf, np.inf]), None)
    with pytest.raises(InputError, match=r"^traffic row 2: value -1 is negative; traffic must be >= 0$"):
        ingest(frame([0.0, 0.5, -1.0]), None)
    # a blank value is a missing hour, not a bad number
    s, d = ingest(frame(["1", " ", "3"] + ["4"] * 21), None)
    assert d["missing_hours"] == 1 and s.iloc[1] == 2.0
    naive = [f"2025-01-06 {h:02d}:00" for h in range(3)]
    with pytest.raises(InputError, match=r"^traffic: timestamps have no time zone; declare the source time zone "
                                         r"\(--timezone, an IANA name such as Europe/Berlin\) or give UTC offsets$"):
        ingest(frame([1.0, 2.0, 3.0], naive), None)
    with pytest.raises(InputError, match=r"^timezone 'Mars/Olympus': not a known IANA zone \("):
        ingest(frame([1.0, 2.0, 3.0], naive), "Mars/Olympus")
    with pytest.raises(InputError, match=r"^traffic: ts not ISO 8601 \("):
        ingest(frame([1.0, 2.0], ["2025-01-06 00:00", "2025-01-06 99:00"]), "UTC")


def test_one_service_column_is_accepted_and_a_given_zone_sets_the_clock(make_utc):
    df = make_utc("2025-01-06T00:00", 24, np.arange(24.0)).assign(service="chat")
    s, d = ingest(df, "Europe/London")
    assert len(s) == 24 and (d["timezone"], d["timezone_given"], d["zone"]["kind"]) == ("Europe/London",
                                                                                     "Europe/London", "utc")
    with pytest.raises(InputError, match=r"^traffic: 2 services in one file \(\['chat', 'embed'\]\)"):
        ingest(df.assign(service=["chat"] * 23 + ["embed"]), None)


# --- The outlier rule by hand (robust z over the same hour of the surrounding +-3 days) -------------------
def _hours(values_by_day_hour: np.ndarray) -> pd.Series:
    """(days, 24) values -> hourly UTC series from Monday 2025-01-06 00:00Z."""
    flat = np.asarray(values_by_day_hour, dtype=float).ravel()
    return pd.Series(flat, index=pd.date_range("2025-01-06T00:00Z", periods=len(flat), freq="h"))


def test_outlier_threshold_window_and_scale_by_hand():
    # 7 days. Hours 0-15 alternate 0, 1, 0, ... by day: the median of the other days' same hour is the
    # other value, so every deviation is -1 (even days, 64) or +1 (odd days, 48). Hours 16-23 are 0,
    # with single spikes on day 3 at hours 16-19 (2.9, 2.9652, 4, 6: deviation = the value) and hour 20
    # stepping 0, 0, 0, 0, 9, 9, 9 (medians of +-3 days: day 3 -> 4.5, dev -4.5; day 4 -> 0, dev 9;
    # day 5 -> 4.5, dev 4.5; the rest dev 0). Median deviation 0 (65 negative, 49 zero);
    # median |dev| 1 (49 zeros, 112 ones), so the robust sd is 1.4826 and z = 2 puts the bar at 2.9652:
    # strictly above it are 4 and 6 at hours 18-19 of day 3, and hour 20 of days 3, 4 and 5.
    v = np.zeros((7, 24))
    v[:, :16] = (np.arange(7) % 2)[:, None]
    v[3, 16:20] = [2.9, 2.9652, 4.0, 6.0]
    v[4:, 20] = 9.0
    s = _hours(v)
    flagged = _outliers(s, np.zeros(len(s), dtype=bool), 2.0)
    assert [t.strftime("%m-%d %H") for t in flagged] == ["01-09 18", "01-09 19", "01-09 20", "01-10 20", "01-11 20"]


def test_outliers_need_two_reference_days_and_24_scored_hours():
    # 3 days: each hour has exactly two other days to take the median of. Hours 8-23 miss day 1, so
    # their other days have one reference each and are not scored: 8 hours x 3 days = 24 scored, the
    # least the rule accepts. Hours 0-5 are 0, 2, 0 (devs -1, 2, -1), hour 6 is 0, hour 7 is 0, 0, 20
    # (medians 10, 10, 0: devs -10, -10, 20). Median dev -1; |dev + 1| has 12 zeros and 3 ones, so the
    # robust sd is 1.4826 x 0.5 and the bar at z = 6 is 4.4478: hour 7 is flagged on all three days.
    v = np.zeros((3, 24))
    v[1, :6] = 2.0
    v[2, 7] = 20.0
    v[1, 8:] = np.nan
    s = _hours(v)
    missing = s.isna().to_numpy().copy()
    assert [t.strftime("%m-%d %H") for t in _outliers(s, missing, 6.0)] == ["01-06 07", "01-07 07", "01-08 07"]
    # one scored hour fewer (hour 6 loses day 1 too): 21 scored hours, nothing is judged
    missing[24 + 6] = True
    assert _outliers(s, missing, 6.0) == []


# --- ingest's own rules and the diagnostics contract, with values a bug would change ---------------------
def _utc_rows(rows):
    """[(ISO UTC text, value)] -> frame."""
    return pd.DataFrame({"ts": [r[0] for r in rows], "value": [r[1] for r in rows]})


def test_refusals_for_services_empty_input_and_all_missing_are_exact():
    six = pd.DataFrame({"ts": [f"2025-01-06T0{h}:00Z" for h in range(6)], "value": 1.0, "service": list("abcdef")})
    with pytest.raises(InputError, match=r"^traffic: 6 services in one file \(\['a', 'b', 'c', 'd', 'e'\]\); "
                                         r"pass one service at a time$"):
        ingest(six, None)
    with pytest.raises(InputError, match=r"^traffic: no rows$"):
        ingest(pd.DataFrame({"ts": [], "value": []}), None)
    with pytest.raises(InputError, match=r"^traffic: every value is missing$"):
        ingest(_utc_rows([("2025-01-06T00:00Z", np.nan), ("2025-01-06T01:00Z", np.nan)]), None)
    with pytest.raises(InputError, match=r"^traffic: conflicting duplicate values at 2025-02-14T14:00:00\+00:00 "
                                         r"\(UTC hour 2025-02-14T14:00Z\): 120, 180; remove one before ingest$"):
        ingest(_utc_rows([("2025-02-14T13:00Z", 1.0), ("2025-02-14T14:00Z", 120.0), ("2025-02-14T14:00Z", 180.0)]), None)


def test_one_row_is_one_hour():
    s, d = ingest(_utc_rows([("2025-01-06T05:00Z", 7.0)]), None)
    assert _pairs(s) == [("2025-01-06T05:00Z", 7.0)] and d["hours"] == 1 and d["rows_in"] == 1


def test_duplicate_stamps_keep_the_value_count_once_and_keep_the_hour():
    # 01:00 twice, NaN first then 7: the 7 is kept (not the NaN, which would make the hour missing).
    # 02:30 twice, both NaN: one off-grid stamp, not two. 03:00 twice, both NaN, the last stamp: the
    # hour stays on the grid as missing and is imputed from 02:00 (linear, one-sided at the end).
    s, d = ingest(_utc_rows([("2025-01-06T00:00Z", 5.0), ("2025-01-06T01:00Z", np.nan), ("2025-01-06T01:00Z", 7.0),
                             ("2025-01-06T02:00Z", 9.0), ("2025-01-06T02:30Z", np.nan), ("2025-01-06T02:30Z", np.nan),
                             ("2025-01-06T03:00Z", np.nan), ("2025-01-06T03:00Z", np.nan)]), None,
                  settings=IngestSettings(max_missing_share=0.5))
    assert _pairs(s) == [("2025-01-06T00:00Z", 5.0), ("2025-01-06T01:00Z", 7.0), ("2025-01-06T02:00Z", 9.0),
                         ("2025-01-06T03:00Z", 9.0)]
    assert (d["duplicates_dropped"], d["off_grid_stamps"], d["missing_hours"]) == (3, 1, 1)
    assert d["imputed"] == ["2025-01-06T03:00:00Z"]


def test_off_grid_rules_take_the_max_the_mean_or_the_latest_stamp():
    df = _utc_rows([("2025-01-06T10:00Z", 9.0), ("2025-01-06T10:30Z", 5.0), ("2025-01-06T11:00Z", 1.0)])
    got = {rule: ingest(df, None, offgrid_rule=rule)[0].iloc[0] for rule in ("max", "mean", "last")}
    assert got == {"max": 9.0, "mean": 7.0, "last": 5.0}
    assert ingest(df, None)[0].iloc[0] == 9.0  # max is the default


def test_missing_share_at_the_limit_is_accepted_and_one_hour_more_is_refused():
    vals = [1.0 + (h % 3) for h in range(20)]
    vals[5] = vals[6] = np.nan  # 2 of 20 hours = 10 %, the limit
    _, d = ingest(make_rows := utc_frame("2025-01-06T00:00", 20, vals), None)
    assert d["missing_share"] == 0.1 and d["missing_hours"] == 2
    make_rows.loc[7, "value"] = np.nan
    with pytest.raises(InputError, match=r"^traffic: 3 of 20 hours missing \(15\.00%\) exceeds the limit 10%; "
                                         r"longest gap 3 h$"):
        ingest(make_rows, None)


def test_diagnostics_keys_and_values_of_a_constant_series():
    s, d = ingest(utc_frame("2025-01-06T00:00", 48, [4.0] * 48), None)
    assert s.index.name == "ts" and str(s.index.tz) == "UTC" and s.dtype == np.float64
    assert list(d) == ["rows_in", "hours", "missing_hours", "longest_gap_h", "duplicates_dropped", "ambiguous_hours",
                       "nonexistent_hours", "off_grid_stamps", "outliers", "constant", "missing_share", "imputed",
                       "offgrid_rule", "imputation", "timezone", "timezone_given", "zone", "level_shift"]
    assert d["constant"] is True and d["outliers"] == [] and d["level_shift"] is None
    assert d["imputation"] == "linear for gaps <= 2 h, else mean of the same hour +-24 h"
    assert (d["timezone"], d["timezone_given"]) == ("UTC", None)
    assert list(d["zone"])[-3:] == ["clock", "status", "message"]
    assert (d["zone"]["clock"], d["zone"]["status"]) == ("UTC", "ok")
    _, given = ingest(utc_frame("2025-01-06T00:00", 48, [4.0] * 48), "Europe/Berlin")
    assert (given["timezone"], given["timezone_given"], given["zone"]["clock"]) == ("Europe/Berlin",) * 3
    # one imputed hour does not make a varying series constant, nor does a constant gap fill
    vals = [4.0] * 47 + [6.0]
    vals[10] = np.nan
    assert ingest(utc_frame("2025-01-06T00:00", 48, vals), None)[1]["constant"] is False


def test_outliers_are_measured_from_the_median_deviation():
    # 7 days. Hours 0-19 alternate 0, 1 by day (devs -1 on the 4 even days, +1 on the 3 odd ones),
    # hour 20 alternates 1, 0 (-1 on 3 odd days, +1 on 4 even ones): 83 devs of -1. Hour 21 is 0 with
    # 4.2 on day 3 (dev 4.2); hour 22 is 5 with 0.5 on day 3 (dev -4.5); hour 23 is 0. Sorted devs:
    # -4.5, 83 x -1, then 19 zeros, so the median deviation is (-1 + 0) / 2 = -0.5. |dev + 0.5| is 0.5
    # for 102 hours: robust sd 1.4826 x 0.5, bar at z = 6: 4.4478. The spike is 4.7 from the median
    # (flagged); the dip only 4.0 (not flagged). Measured from 0 instead, both would be 4.2 and 4.5.
    v = np.zeros((7, 24))
    v[:, :20] = (np.arange(7) % 2)[:, None]
    v[:, 20] = (np.arange(7) + 1) % 2
    v[3, 21] = 4.2
    v[:, 22] = 5.0
    v[3, 22] = 0.5
    s = _hours(v)
    assert [t.strftime("%m-%d %H") for t in _outliers(s, np.zeros(len(s), dtype=bool), 6.0)] == ["01-09 21"]


def _shift_traffic(factor: float | None, spike_at: slice | None = None, hours: int = 72) -> pd.DataFrame:
    """24 days (from Monday 2025-09-01, UTC) of a daily shape with 3 % noise; the last ``hours`` x ``factor``."""
    idx = pd.date_range("2025-09-01T00:00Z", periods=24 * 24, freq="h")
    v = np.asarray(100.0 + 40.0 * np.sin(2 * np.pi * (idx.hour - 8) / 24) + 5.0 * (idx.day_of_week >= 5))
    v *= 1 + np.random.default_rng(0).normal(0, 0.03, len(v))
    if factor is not None:
        v[-hours:] *= factor
    if spike_at is not None:
        v[spike_at] *= 4.0
    return pd.DataFrame({"ts": idx.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": v})


def test_a_lasting_new_level_is_followed_not_flagged_and_can_be_switched_off():
    s, d = ingest(_shift_traffic(0.5), None)
    shift = d["level_shift"]
    assert (shift["since"], shift["hours"]) == ("2025-09-22T00:00:00Z", 72)
    assert shift["factor"] == pytest.approx(0.5, abs=0.01)
    assert shift["message"] == (f"level shift x{shift['factor']:.2f} since 2025-09-22T00:00Z (72 h, 100% of hours "
                                "moved the same way)")
    assert d["outliers"] == []  # the new level, from its first hour, is compared on the old level's scale
    assert s.iloc[-1] == _shift_traffic(0.5)["value"].iloc[-1]  # the series itself is not rescaled
    # without the level-shift test (IngestSettings.level_shift None) nothing is followed, and the new
    # level is flagged hour by hour
    _, off = ingest(_shift_traffic(0.5), None, settings=IngestSettings(level_shift=None))
    assert off["level_shift"] is None and len(off["outliers"]) > 24
    # no change: no shift
    assert ingest(_shift_traffic(None), None)[1]["level_shift"] is None
    # a spike inside the new level (x4 on 2025-09-23 18:00-20:00Z) is still an outlier
    _, spiked = ingest(_shift_traffic(0.5, slice(-30, -27)), None)
    assert spiked["level_shift"]["since"] == "2025-09-22T00:00:00Z"
    assert spiked["outliers"] == ["2025-09-23T18:00:00Z", "2025-09-23T19:00:00Z", "2025-09-23T20:00:00Z"]


def test_impute_hours_reads_stamps_with_different_offsets_as_utc():
    from forecasters.realtime.ingest import impute_hours
    vals = np.arange(24.0)
    vals[10] = vals[12] = 100.0  # two bad hours at 10:00Z and 12:00Z
    s = ingest(utc_frame("2025-01-06T00:00", 24, vals), None)[0]
    # 11:00+01:00 is 10:00Z, 07:00-05:00 is 12:00Z: both are replaced by the line through their neighbours
    out = impute_hours(s, ["2025-01-06T11:00+01:00", "2025-01-06T07:00-05:00"])
    assert out.iloc[9:14].tolist() == [9.0, 10.0, 11.0, 12.0, 13.0]


def test_the_level_shift_settings_given_to_ingest_are_used():
    # one low day (24 h at half the level): shorter than the default min_hours = 48, so no new level;
    # with ShiftSettings(min_hours=24) it is one, from 2025-09-24 00:00Z
    df = _shift_traffic(0.5, hours=24)
    assert ingest(df, None)[1]["level_shift"] is None
    short = IngestSettings(level_shift=ShiftSettings(min_hours=24))
    assert ingest(df, None, settings=short)[1]["level_shift"]["since"] == "2025-09-24T00:00:00Z"


def test_a_spike_or_outage_beside_a_noise_free_series_is_flagged():
    # 7 days of an exact daily pattern (hour h = 10 + h): every same-hour median is the value itself, so the
    # MAD of the deviations is 0. One hour reads 0 (an outage, deviation -25 at 01-09 15) and one 100 (a
    # spike, +79 at 01-10 11): the mean absolute deviation is (25 + 79) / 168, its robust sd 1.253314 x that
    # = 0.7759 (Iglewicz and Hoaglin's rule for MAD = 0), so at z = 3.5 both are flagged and nothing else.
    v = np.tile(10.0 + np.arange(24), (7, 1))
    v[3, 15], v[4, 11] = 0.0, 100.0
    s = _hours(v)
    flagged = _outliers(s, np.zeros(len(s), dtype=bool), 3.5)
    assert [t.strftime("%m-%d %H") for t in flagged] == ["01-09 15", "01-10 11"]
    # the same through ingest: the outage and the spike are listed
    _, d = ingest(pd.DataFrame({"ts": s.index, "value": s.to_numpy()}), None)
    assert d["outliers"] == ["2025-01-09T15:00:00Z", "2025-01-10T11:00:00Z"]
    # nothing deviates at all: nothing is flagged
    assert _outliers(_hours(np.tile(10.0 + np.arange(24), (7, 1))), np.zeros(168, dtype=bool), 3.5) == []
    # the factor and the mean decide a small deviation: +50 at 01-07 05 and +1.5 at 01-08 09 give a mean absolute
    # deviation of 51.5 / 168, a scale of 1.253314 x that = 0.3842 and a bar at z = 3.5 of 1.345: the +1.5 is
    # flagged (a factor of 2.25, or 1.253314 divided by the mean, would put the bar above it)
    w = np.tile(10.0 + np.arange(24), (7, 1))
    w[1, 5], w[2, 9] = w[1, 5] + 50.0, w[2, 9] + 1.5
    assert [t.strftime("%m-%d %H") for t in _outliers(_hours(w), np.zeros(168, dtype=bool), 3.5)] == [
        "01-07 05", "01-08 09"]
    # the mean absolute deviation is taken around the median deviation, not 0: 3 days, the last one 2 lower at
    # every hour. Each hour's reference is the mean of the other two days: deviations +1, +1, -2, so the median
    # deviation is +1 and the MAD 0; |dev - 1| is 0 (48 hours) or 3 (24), its mean 1, the bar at z = 2 is
    # 2 x 1.253314 = 2.507 < 3: the last day's 24 hours are flagged (around 0 the mean would be 5/3 and the bar 4.18)
    v3 = np.tile(10.0 + np.arange(24), (3, 1))
    v3[2] -= 2.0
    flagged3 = _outliers(_hours(v3), np.zeros(72, dtype=bool), 2.0)
    assert [t.strftime("%m-%d %H") for t in flagged3] == [f"01-08 {h:02d}" for h in range(24)]
