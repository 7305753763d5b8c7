"""The one reader of operators' CSV files: separator, decimal mark, header spaces and index column sniffed.

Every CSV the project reads from an operator (traffic files, job histories, job files) goes through
:func:`read_operator_csv`. It reads the file with :mod:`csv` (to decide the format) and pandas (to
parse it), and either returns the frame read correctly or raises one :class:`InputError` line naming
the columns found and the likely cause.

Rules:

* Separator: the first of ``,`` ``;`` tab ``|`` for which the header has at least two fields and every
  data row has as many fields as the header (blank lines skipped). No such separator: refused.
* Decimal mark (separators other than ``,``): numeric fields are looked at; a field such as ``130,5`` or
  ``1.234,5`` (the last mark not followed by exactly three digits, or ``.`` then ``,``) proves a decimal
  comma; ``130.5`` or ``1,234.5`` proves a decimal point. A decimal comma makes ``.`` the thousands mark
  when fields carry it, and a decimal point makes ``,`` the thousands mark. Both proven, or commas seen
  with nothing to prove their role (``1,234`` only), is refused as ambiguous.
* A comma-separated file whose data rows have one field more than the header, the extra split inside
  a number (``...,130,5``), is refused: the comma can be a decimal comma or a separator.
* Column names are stripped of surrounding spaces (``ts, value`` reads as ``ts``, ``value``), as are
  text values; two names equal after stripping are refused.
* A first column without a name (``,ts,value`` or ``Unnamed: 0``, as written by pandas ``to_csv`` with
  its index) is an index and is dropped.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from pathlib import Path

import pandas as pd

from pipelines.io.errors import InputError

#: Separators tried, in order of preference.
SEPARATORS = (",", ";", "\t", "|")
_SEP_NAMES = {",": "','", ";": "';'", "\t": "tab", "|": "'|'"}
#: A number written with digits, optional sign, and ',' / '.' marks.
_NUMBER = re.compile(r"^[+-]?\d[\d.,]*$")
_UNNAMED = re.compile(r"^(Unnamed: ?\d+)?$")


def _text(path: Path) -> str:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as fh:
        return fh.read()


def _rows(text: str, sep: str) -> list[list[str]]:
    return [r for r in csv.reader(io.StringIO(text), delimiter=sep) if any(f.strip() for f in r)]


def _mark_role(token: str) -> str | None:
    """The decimal mark ``token`` proves (``","`` or ``"."``).

    ``"?"`` if it has a mark of unproven role (``1,234``, ``1.234``), None if it has no mark.
    """
    marks = {c for c in token if c in ",."}
    if not marks:
        return None
    last = max(token.rfind(","), token.rfind("."))
    mark = token[last]
    if len(marks) == 2:  # 1.234,5 / 1,234.5: the last mark is the decimal mark
        return mark
    if token.count(mark) > 1:  # 1.234.567: a repeated mark groups thousands
        return "," if mark == "." else "."
    if len(token) - last - 1 != 3 or token[:last].lstrip("+-") == "0":
        return mark
    return "?"


def _decimal_marks(rows: list[list[str]], sep: str) -> tuple[str, str | None, str | None]:
    """(decimal, thousands, refusal cause) from the numeric fields of ``rows``."""
    proof: dict[str, str] = {}  # decimal mark -> first field proving it
    unproven: dict[str, str] = {}  # mark -> first field with that mark of unproven role
    seen: set[str] = set()  # marks seen in any number
    for row in rows:
        for f in row:
            f = f.strip()
            if _NUMBER.match(f):
                role = _mark_role(f)
                seen.update(c for c in f if c in ",.")
                if role == "?":
                    unproven.setdefault(f[max(f.rfind(","), f.rfind("."))], f)
                elif role is not None:
                    proof.setdefault(role, f)
    if "," in proof and "." in proof:
        return ".", None, f"mixed decimal marks ({proof[',']!r} and {proof['.']!r})"
    if "," in proof:
        return ",", "." if "." in seen else None, None
    if "." in proof:
        return ".", "," if "," in seen else None, None
    if "," in unproven:
        return ".", None, f"ambiguous number {unproven[',']!r} (decimal comma or thousands separator)"
    return ".", None, None


def read_operator_csv(path: str | Path, label: str, text_columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """Read an operator's CSV (``.csv`` or ``.csv.gz``) with the format sniffed (see the module rules).

    Args:
        path: the file.
        label: how messages name it, e.g. ``"traffic file data/x.csv"``.
        text_columns: columns kept as text (e.g. ``ts``, ``job_id``).

    Raises:
        pipelines.io.errors.InputError: one line naming the columns found and the likely cause.
    """
    p = Path(path)
    try:
        text = _text(p)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise InputError(f"{label}: cannot read ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None
    comma_rows = _rows(text, ",")
    if not comma_rows:
        raise InputError(f"{label}: empty file (no header)")
    chosen = None
    for sep in SEPARATORS:
        rows = comma_rows if sep == "," else _rows(text, sep)
        n = len(rows[0])
        if n >= 2 and all(len(r) == n for r in rows[1:]):
            chosen = sep, rows
            break
    if chosen is None:
        raise InputError(_no_separator(label, text, comma_rows))
    sep, rows = chosen
    header = [h.strip() for h in rows[0]]
    dup = sorted({h for h in header if h and header.count(h) > 1})
    if dup:
        raise InputError(f"{label}: column(s) {dup} given twice (names compared without surrounding spaces); "
                         f"columns found: {header}")
    decimal, thousands = ".", None
    if sep != ",":
        decimal, thousands, cause = _decimal_marks(rows[1:], sep)
        if cause:
            raise InputError(f"{label}: columns found {header} (separator {_SEP_NAMES[sep]}); "
                             f"cannot read the numbers: {cause}; write numbers with one decimal mark")
    names = [f"{i}:{h}" for i, h in enumerate(rows[0])]  # unique raw names, renamed below
    dtype = {names[i]: str for i, h in enumerate(header) if h in text_columns}
    try:
        df = pd.read_csv(io.StringIO(text), sep=sep, decimal=decimal, thousands=thousands, header=0, names=names,
                         dtype=dtype, skipinitialspace=True, skip_blank_lines=True, index_col=False)
    except (ValueError, csv.Error) as exc:
        raise InputError(f"{label}: cannot read ({' '.join(str(exc).split())[:200]})") from None
    df.columns = header
    if _UNNAMED.match(header[0]):
        df = df.iloc[:, 1:]
    for col in df.columns:
        if df[col].dtype == object or pd.api.types.is_string_dtype(df[col].dtype):
            df[col] = df[col].map(lambda v: v.strip() if isinstance(v, str) else v)
    return df


def _no_separator(label: str, text: str, comma_rows: list[list[str]]) -> str:
    """The one-line refusal when no separator gives a consistent table."""
    header = [h.strip() for h in comma_rows[0]]
    widths = sorted({len(r) for r in comma_rows[1:]})
    if len(header) >= 2 and widths and widths[-1] > len(header):
        split_numbers = [r for r in comma_rows[1:] if len(r) > len(header)
                         and all(f.strip().isdigit() for f in r[len(header) - 1:])]
        if split_numbers:
            ex = ",".join(split_numbers[0][len(header) - 1:])
            return (f"{label}: columns found {header} but data rows have {widths[-1]} fields when split on ','; "
                    f"likely cause: decimal commas in a comma-separated file (e.g. {ex!r}), ambiguous with a "
                    f"separator: use '.' decimals, quote the numbers, or separate fields with ';'")
        return (f"{label}: columns found {header} but data rows have {widths} fields when split on ','; "
                f"likely cause: an unquoted ',' inside a value or a missing column name")
    if len(header) >= 2:
        return (f"{label}: columns found {header} but data rows have {widths} fields when split on ','; "
                f"likely cause: rows with missing or extra fields")
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    return (f"{label}: one column found {header}; likely cause: separator not recognised "
            f"(tried ',', ';', tab, '|'; header line {first[:60]!r})")
