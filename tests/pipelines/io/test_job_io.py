"""Loading operators' histories and job files (CSV/parquet), validated; shipped histories regenerate exactly."""

from __future__ import annotations

import pandas as pd
import pytest

from forecasters.errors import InputError as ForecasterInputError
from forecasters.generators import generate_history
from pipelines.catalog import history_path
from pipelines.io.errors import InputError
from pipelines.io.job_io import SHIPPED, load_history, load_jobs, write_history

BAD_INPUT = (InputError, ForecasterInputError)  # both are exit-2 errors at the CLI


@pytest.fixture(scope="module")
def hist():
    return generate_history("quantization", 60, seed=2)


def test_csv_and_parquet_round_trip(hist, tmp_path):
    hist.to_csv(tmp_path / "h.csv", index=False)
    write_history(hist, tmp_path / "h.parquet")
    a = load_history(tmp_path / "h.csv", "quantization")
    b = load_history(tmp_path / "h.parquet", "quantization")
    for frame in (a, b):
        assert str(frame["started_at"].dtype) == "datetime64[us, UTC]"
        pd.testing.assert_series_equal(frame["finished_at"], hist["finished_at"])
        assert frame["duration_h"].tolist() == pytest.approx(hist["duration_h"].tolist())


def test_history_errors_name_file_row_and_column(hist, tmp_path):
    bad = hist.drop(columns=["group_size"])
    bad.to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(BAD_INPUT, match="missing column\\(s\\) group_size"):
        load_history(tmp_path / "a.csv", "quantization")
    naive = hist.copy()
    naive["started_at"] = naive["started_at"].dt.tz_localize(None)
    naive.to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(InputError, match="row 0, column 'started_at'.*no UTC offset"):
        load_history(tmp_path / "b.csv", "quantization")
    back = hist.copy()
    back.loc[5, "finished_at"] = back.loc[5, "started_at"] - pd.Timedelta(minutes=1)
    write_history(back, tmp_path / "c.parquet")
    with pytest.raises(InputError, match="row 5: finished_at is before started_at"):
        load_history(tmp_path / "c.parquet", "quantization")
    off = hist.copy()
    off.loc[9, "duration_h"] = off.loc[9, "duration_h"] + 1.0
    write_history(off, tmp_path / "d.parquet")
    with pytest.raises(InputError, match="row 9: duration_h .* does not match"):
        load_history(tmp_path / "d.parquet", "quantization")
    (tmp_path / "e.txt").write_text("x")
    with pytest.raises(InputError, match="unsupported file type"):
        load_history(tmp_path / "e.txt", "quantization")
    with pytest.raises(FileNotFoundError):
        load_history(tmp_path / "none.csv", "quantization")


def test_load_jobs_checks_columns_and_duplicate_ids(hist, tmp_path):
    hist.drop(columns=["act_order"]).to_csv(tmp_path / "j.csv", index=False)
    with pytest.raises(BAD_INPUT, match="missing column\\(s\\) act_order"):
        load_jobs(tmp_path / "j.csv", "quantization")
    dup = hist.copy()
    dup.loc[3, "job_id"] = dup.loc[2, "job_id"]
    dup.to_csv(tmp_path / "k.csv", index=False)
    with pytest.raises(InputError, match="row 3: duplicate job_id"):
        load_jobs(tmp_path / "k.csv", "quantization")


@pytest.mark.parametrize("kind", sorted(SHIPPED))
def test_shipped_history_is_regenerated_bit_for_bit(kind):
    n, seed = SHIPPED[kind]
    shipped = pd.read_parquet(history_path(kind))
    pd.testing.assert_frame_equal(shipped, generate_history(kind, n, seed), check_exact=True)
    assert history_path(kind).stat().st_size < 400_000
