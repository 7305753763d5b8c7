"""The one status StrEnum (optimizer.solver.SolveStatus): HiGHS's model status -> SolveOutcome -> Plan."""

from __future__ import annotations

import highspy
import numpy as np
import pytest
from scipy import sparse

from optimizer.solver import OUTCOMES, SolveStatus, SparseModel, map_status, solve


@pytest.mark.parametrize(("name", "incumbent", "expected"), [
    ("kOptimal", False, SolveStatus.OPTIMAL),
    ("HighsModelStatus.kOptimal", True, SolveStatus.OPTIMAL),
    ("kModelEmpty", False, SolveStatus.OPTIMAL),
    ("kTimeLimit", True, SolveStatus.TIME_LIMIT),
    ("kTimeLimit", False, SolveStatus.NO_SOLUTION),
    ("kInterrupt", True, SolveStatus.TIME_LIMIT),
    ("kInfeasible", False, SolveStatus.INFEASIBLE),
    ("kUnboundedOrInfeasible", False, SolveStatus.UNBOUNDED_OR_INFEASIBLE),
    ("kUnbounded", False, SolveStatus.UNBOUNDED),
    ("kSolveError", False, SolveStatus.SOLVER_ERROR),
    ("kMemoryLimit", True, SolveStatus.SOLVER_ERROR),
])
def test_a_known_highs_status_maps_to_its_outcome(name, incumbent, expected):
    got = map_status(name, incumbent)
    assert got is expected and isinstance(got, SolveStatus) and got in OUTCOMES
    assert got == expected.value  # a StrEnum: equal to its string


@pytest.mark.parametrize("name", ["kNotset", "kUnknown", "kSomethingNew", "HighsModelStatus.kNotset", ""])
def test_an_unknown_highs_status_maps_to_unknown(name):
    assert map_status(name, True) is SolveStatus.UNKNOWN and map_status(name, False) == "unknown"


def test_every_status_highspy_knows_maps_into_the_outcomes():
    for member in highspy.HighsModelStatus.__members__:
        assert isinstance(map_status(member, True), SolveStatus)
        assert map_status(member, False) in OUTCOMES


def test_a_solve_outcome_carries_the_enum():
    """A two-column knapsack solved in this process: its status is the enum member, equal to "optimal"."""
    model = SparseModel(cost=np.array([3.0, 2.0]), col_lower=np.zeros(2), col_upper=np.ones(2),
                        integer=np.ones(2, bool), A=sparse.csr_matrix([[2.0, 1.0]]),
                        row_lower=np.array([-np.inf]), row_upper=np.array([2.0]))
    out = solve(model, time_limit_s=10.0, isolate=False)
    assert out.status is SolveStatus.OPTIMAL and out.status == "optimal" and out.objective == pytest.approx(3.0)
