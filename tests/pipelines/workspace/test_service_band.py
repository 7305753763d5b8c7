"""A ``[[services]]`` band the GPU conversion cannot use is refused when the config is read (one line, exit 2).

Before: ``min_gpus`` not a multiple of ``replica_gpus`` passed the config and crashed the flow's real-time task
(``forecasters.realtime.to_gpus``) with a traceback after ingest (found by an operator trial on the openb-typed
example workspace). The ``gpuplan.toml`` form: ``tests/pipelines/workspace/test_workspace_store.py``.
"""

from __future__ import annotations

import pytest

from pipelines.io.errors import InputError
from pipelines.workspace.config import ServiceSettings

BASE = {"service": "chat", "capacity_per_gpu_per_h": 1000.0, "swap_cap_gpus": 2}


@pytest.mark.parametrize(("band", "message"), [
    ({"min_gpus": 3, "max_gpus": 8, "replica_gpus": 2}, "min_gpus 3 is not a multiple of replica_gpus 2"),
    ({"min_gpus": 2, "max_gpus": 7, "replica_gpus": 2}, "max_gpus 7 is not a multiple of replica_gpus 2"),
    ({"min_gpus": 6, "max_gpus": 4}, "min_gpus 6 > max_gpus 4: need min_gpus <= max_gpus"),
])
def test_a_band_the_conversion_cannot_use_is_refused(band, message):
    with pytest.raises(ValueError, match=message):
        ServiceSettings(**BASE, **band)


def test_a_good_band_is_kept():
    s = ServiceSettings(**BASE, min_gpus=2, max_gpus=8, replica_gpus=2)
    assert (s.min_gpus, s.max_gpus, s.replica_gpus) == (2, 8, 2)


def test_a_services_json_entry_with_a_bad_band_is_named():
    entry = {"service": "a", "file": "a.csv", "timezone": "UTC", "capacity_per_gpu_per_h": 1, "headroom": 0.1,
             "min_gpus": 3, "max_gpus": 8, "swap_cap_gpus": 1, "replica_gpus": 2}
    with pytest.raises(InputError) as err:
        ServiceSettings.from_dict(entry, "services.json services[0]")
    assert str(err.value) == "services.json services[0]: min_gpus 3 is not a multiple of replica_gpus 2"
