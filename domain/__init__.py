"""Shared vocabulary of gpuplan: the words both pure packages use, defined once.

``forecasters`` and ``optimizer`` may import this package; it imports neither of them, nor
``pipelines``, Prefect, MLflow or any file IO (tests/test_layering.py checks it).

- :mod:`domain.kinds`: batch job kinds, the real-time kind, QoS classes and their priority.
- :mod:`domain.units`: powers of two, hours -> planning steps (one rule), :class:`Horizon`.
- :mod:`domain.records`: canonical job and traffic record columns, states, censoring.
- :mod:`domain.errors`: :class:`GpuplanError` and :class:`InputError` (bad input, exit 2).
- :mod:`domain.conformal`: the split-conformal rank of an upper quantile (one rule for every calibration).
"""

from domain.errors import GpuplanError, InputError
from domain.kinds import JOB_KINDS, QOS_KIND, QOS_PRIORITY, REALTIME, JobKind
from domain.units import Horizon, hours_to_steps, hours_to_steps_array, is_pow2, pow2_ceil

__all__ = [
    "JOB_KINDS",
    "QOS_KIND",
    "QOS_PRIORITY",
    "REALTIME",
    "GpuplanError",
    "Horizon",
    "InputError",
    "JobKind",
    "hours_to_steps",
    "hours_to_steps_array",
    "is_pow2",
    "pow2_ceil",
]
