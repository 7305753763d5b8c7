"""The three job forecasters' tasks never run LightGBM at the same time (issue 32: a served replan's SIGSEGV).

``ShippedJobs.start_models`` submits one ``train_or_load`` per job kind to Prefect's thread pool; the native
work (load, train, evaluate) must run one kind after another (:data:`pipelines.models.jobs.LIGHTGBM_LOCK`).
Two threads call ``train_or_load`` at once, as the tasks do; the probe standing in for the model load meets
the other thread at a barrier if both are inside: without the lock both arrive (the barrier passes at
once), with it the first waits out the barrier's timeout alone and the second finds it broken.
"""

from __future__ import annotations

import threading

import pytest

from pipelines.config.settings import load_settings
from pipelines.models import jobs as job_forecasters


def test_two_kinds_at_once_run_their_lightgbm_work_one_after_the_other(iso_env, monkeypatch):
    barrier = threading.Barrier(2, timeout=2.0)
    inside_together, held, order = [], [], []

    class ProbeCatalog:
        def __init__(self, settings):
            self.settings = settings

        def load_model(self, kind):
            held.append(job_forecasters.LIGHTGBM_LOCK.locked())
            order.append(kind)
            try:
                barrier.wait()
                inside_together.append(kind)
            except threading.BrokenBarrierError:
                pass
            return f"saved {kind} model"

    monkeypatch.setattr(job_forecasters, "Catalog", ProbeCatalog)
    settings = load_settings()
    got: dict[str, object] = {}
    threads = [threading.Thread(target=lambda k=k: got.__setitem__(k, job_forecasters.train_or_load(settings, k)))
               for k in ("training", "quantization")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {"training": "saved training model", "quantization": "saved quantization model"}
    assert sorted(order) == ["quantization", "training"]
    assert held == [True, True]  # each load ran with the lock held
    assert inside_together == []  # never both inside at once
    assert not job_forecasters.LIGHTGBM_LOCK.locked()  # released after each call


def test_the_lock_is_released_when_training_raises(iso_env, monkeypatch):
    class FailingCatalog:
        def __init__(self, settings):
            pass

        def load_model(self, kind):
            raise OSError(f"{kind}: disk gone")

    monkeypatch.setattr(job_forecasters, "Catalog", FailingCatalog)
    settings = load_settings()
    for _ in range(2):  # the second call would block forever on a lock the first left held
        with pytest.raises(OSError, match="^training: disk gone$"):
            job_forecasters.train_or_load(settings, "training")
    assert not job_forecasters.LIGHTGBM_LOCK.locked()
