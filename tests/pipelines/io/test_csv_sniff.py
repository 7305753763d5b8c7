"""F08: operators' CSVs read through pipelines.io.csv_sniff: separator, decimal comma, header spaces, index column.

Each sub-kind: the shipped field-2 instance (when there is one) plus constructed ones; exact values read,
exact one-line messages for the refused files. The same reader serves job files (last tests).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.io.csv_sniff import read_operator_csv
from pipelines.io.errors import InputError
from pipelines.io.job_io import load_jobs
from pipelines.io.traffic_io import read_traffic

FIELD2 = Path("/work/shared/cases/field-2")
needs_field2 = pytest.mark.skipif(not FIELD2.exists(), reason="needs the shared field-2 cases")


def _write(tmp_path, name, text):
    f = tmp_path / name
    f.write_text(text)
    return f


def _check(df, n, first, last, ts0="2025-05-05T00:00:00Z"):
    assert list(df.columns[:2]) == ["ts", "value"]
    assert len(df) == n
    assert df["ts"].iloc[0] == ts0
    assert df["value"].dtype == "float64" or df["value"].dtype == "int64"
    assert df["value"].iloc[0] == pytest.approx(first) and df["value"].iloc[-1] == pytest.approx(last)


# --- shipped instances -------------------------------------------------------------------------------

@needs_field2
def test_shipped_header_space_is_read():
    _check(read_traffic(FIELD2 / "header_space.csv"), 504, 130.0, 87.1)


@needs_field2
def test_shipped_semicolon_comma_is_read():
    _check(read_traffic(FIELD2 / "semicolon_comma.csv"), 504, 130.0, 87.1)


@needs_field2
def test_shipped_comma_decimal_unquoted_is_refused_in_one_line():
    p = FIELD2 / "comma_decimal_unquoted.csv"
    with pytest.raises(InputError) as e:
        read_traffic(p)
    assert str(e.value) == (
        f"traffic file {p}: columns found ['ts', 'value'] but data rows have 3 fields when split on ','; "
        "likely cause: decimal commas in a comma-separated file (e.g. '130,0'), ambiguous with a separator: "
        "use '.' decimals, quote the numbers, or separate fields with ';'"
    )


# --- constructed instances ---------------------------------------------------------------------------

ROWS = [("2025-05-05T00:00:00Z", "130.5"), ("2025-05-05T01:00:00Z", "142.9"), ("2025-05-05T02:00:00Z", "1234.25")]


@pytest.mark.parametrize("sep", ["\t", "|"])
def test_tab_and_pipe_separators(tmp_path, sep):
    f = _write(tmp_path, "t.csv", f"ts{sep}value\n" + "".join(f"{a}{sep}{b}\n" for a, b in ROWS))
    _check(read_traffic(f), 3, 130.5, 1234.25)


def test_tab_separator_with_decimal_commas(tmp_path):
    f = _write(tmp_path, "t.csv", "ts\tvalue\n" + "".join(f"{a}\t{b.replace('.', ',')}\n" for a, b in ROWS))
    _check(read_traffic(f), 3, 130.5, 1234.25)


@pytest.mark.parametrize("header", ["ts ,value ", " ts , value ", "ts,\tvalue"])
def test_header_spaces_around_both_columns(tmp_path, header):
    f = _write(tmp_path, "t.csv", header + "\n" + "".join(f" {a} , {b} \n" for a, b in ROWS))
    _check(read_traffic(f), 3, 130.5, 1234.25)


def test_header_spaces_making_a_name_twice_is_refused(tmp_path):
    f = _write(tmp_path, "t.csv", "ts,value, value\n2025-05-05T00:00:00Z,1,2\n")
    with pytest.raises(InputError) as e:
        read_traffic(f)
    assert str(e.value) == (f"traffic file {f}: column(s) ['value'] given twice (names compared without "
                            "surrounding spaces); columns found: ['ts', 'value', 'value']")


def test_semicolon_with_dot_decimals(tmp_path):
    f = _write(tmp_path, "t.csv", "ts;value\n" + "".join(f"{a};{b}\n" for a, b in ROWS))
    _check(read_traffic(f), 3, 130.5, 1234.25)


def test_semicolon_with_dot_decimals_and_comma_thousands(tmp_path):
    f = _write(tmp_path, "t.csv", "ts;value\n2025-05-05T00:00:00Z;1,130.5\n2025-05-05T01:00:00Z;1,234,567.25\n")
    _check(read_traffic(f), 2, 1130.5, 1234567.25)


def test_semicolon_with_decimal_commas_and_thousands_dots(tmp_path):
    f = _write(tmp_path, "t.csv", "ts;value\n2025-05-05T00:00:00Z;1.130,5\n2025-05-05T01:00:00Z;142,9\n"
                                  "2025-05-05T02:00:00Z;1.234.567,25\n")
    _check(read_traffic(f), 3, 1130.5, 1234567.25)


def test_semicolon_with_decimal_commas_and_a_service_column(tmp_path):
    f = _write(tmp_path, "t.csv", "ts;value;service\n2025-05-05T00:00:00Z;0,5;chat\n2025-05-05T01:00:00Z;7;chat\n")
    df = read_traffic(f)
    _check(df, 2, 0.5, 7.0)
    assert df["service"].tolist() == ["chat", "chat"]


def test_semicolon_with_both_decimal_marks_is_refused(tmp_path):
    f = _write(tmp_path, "t.csv", "ts;value\n2025-05-05T00:00:00Z;130,5\n2025-05-05T01:00:00Z;142.9\n")
    with pytest.raises(InputError) as e:
        read_traffic(f)
    assert str(e.value) == (f"traffic file {f}: columns found ['ts', 'value'] (separator ';'); cannot read the "
                            "numbers: mixed decimal marks ('130,5' and '142.9'); write numbers with one decimal mark")


def test_semicolon_with_only_three_digit_comma_groups_is_refused(tmp_path):
    f = _write(tmp_path, "t.csv", "ts;value\n2025-05-05T00:00:00Z;1,234\n2025-05-05T01:00:00Z;2,500\n")
    with pytest.raises(InputError) as e:
        read_traffic(f)
    assert str(e.value) == (f"traffic file {f}: columns found ['ts', 'value'] (separator ';'); cannot read the "
                            "numbers: ambiguous number '1,234' (decimal comma or thousands separator); "
                            "write numbers with one decimal mark")


@pytest.mark.parametrize("rows", [["1,5,2", "2,5,3"], ["130,25", "142,9"]])
def test_comma_decimal_unquoted_constructed_is_refused(tmp_path, rows):
    f = _write(tmp_path, "t.csv", "ts,value\n" + "".join(f"2025-05-05T0{i}:00:00Z,{r}\n" for i, r in enumerate(rows)))
    with pytest.raises(InputError) as e:
        read_traffic(f)
    width = rows[0].count(",") + 2
    assert str(e.value) == (
        f"traffic file {f}: columns found ['ts', 'value'] but data rows have {width} fields when split on ','; "
        f"likely cause: decimal commas in a comma-separated file (e.g. {rows[0]!r}), ambiguous with a separator: "
        "use '.' decimals, quote the numbers, or separate fields with ';'"
    )


def test_quoted_decimal_comma_in_comma_file_is_a_text_value_not_a_split(tmp_path):
    f = _write(tmp_path, "t.csv", 'ts,value\n2025-05-05T00:00:00Z,"130,5"\n')
    assert read_traffic(f)["value"].tolist() == ["130,5"]  # left as text; ingest refuses it as not numeric


def test_unrecognised_separator_is_refused(tmp_path):
    f = _write(tmp_path, "t.csv", "ts:value\n2025-05-05T00-00:1\n")
    with pytest.raises(InputError) as e:
        read_traffic(f)
    assert str(e.value) == (f"traffic file {f}: one column found ['ts:value']; likely cause: separator not "
                            "recognised (tried ',', ';', tab, '|'; header line 'ts:value')")


def test_missing_column_names_the_columns_found(tmp_path):
    f = _write(tmp_path, "t.csv", "time;value\n2025-05-05T00:00:00Z;1,5\n")
    with pytest.raises(InputError) as e:
        read_traffic(f)
    assert str(e.value) == (f"traffic file {f}: missing column(s) ['ts']; columns found ['time', 'value']; "
                            "expected ts, value[, service]")


@pytest.mark.parametrize("header", [",ts,value", "Unnamed: 0,ts,value", '"",ts,value'])
def test_unnamed_index_column_is_dropped(tmp_path, header):
    f = _write(tmp_path, "t.csv", header + "\n" + "".join(f"{i},{a},{b}\n" for i, (a, b) in enumerate(ROWS)))
    df = read_traffic(f)
    assert list(df.columns) == ["ts", "value"]
    _check(df, 3, 130.5, 1234.25)


def test_pandas_to_csv_with_index_round_trips(tmp_path):
    import pandas as pd

    f = tmp_path / "t.csv"
    pd.DataFrame({"ts": [a for a, _ in ROWS], "value": [float(b) for _, b in ROWS]}).to_csv(f)
    _check(read_traffic(f), 3, 130.5, 1234.25)


def test_gzip_semicolon_file(tmp_path):
    import gzip

    f = tmp_path / "t.csv.gz"
    with gzip.open(f, "wt") as fh:
        fh.write("ts;value\n" + "".join(f"{a};{b.replace('.', ',')}\n" for a, b in ROWS))
    _check(read_traffic(f), 3, 130.5, 1234.25)


# --- the same reader for job files -------------------------------------------------------------------

def test_job_file_semicolon_decimal_comma_index_and_spaces(tmp_path):
    f = _write(tmp_path, "j.csv", ";job_id ; value \n0;007;1,5\n1;008;2,25\n")
    df = read_operator_csv(f, str(f), text_columns=("job_id",))
    assert list(df.columns) == ["job_id", "value"]
    assert df["job_id"].tolist() == ["007", "008"] and df["value"].tolist() == [1.5, 2.25]


def test_load_jobs_goes_through_the_sniffing_reader(tmp_path):
    f = _write(tmp_path, "j.csv", "job_id,x\nA,1,5\nB,2,5\n")
    with pytest.raises(InputError, match=r"^" + str(f).replace(".", r"\.") + r": columns found \['job_id', 'x'\] "
                       r"but data rows have 3 fields when split on ','; likely cause: decimal commas"):
        load_jobs(f, "quantization")
