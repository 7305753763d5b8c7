"""The one MLflow pyfunc wrapper: both forecasters' classes are named in their modules and pickle by reference."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import cloudpickle
import pandas as pd

from pipelines.models import job_files, scheduler


def test_both_pyfunc_classes_pickle_by_reference_to_their_module():
    for module, name in ((job_files, "JobModelPyfunc"), (scheduler, "SchedulerModelPyfunc")):
        cls = getattr(module, name)
        assert cls is getattr(module, name)  # built once
        assert (cls.__module__, cls.__qualname__) == (module.__name__, name)
        blob = cloudpickle.dumps(cls())
        assert module.__name__.encode() in blob and name.encode() in blob
        assert type(pickle.loads(blob)) is cls


def test_scheduler_pyfunc_loads_the_pickled_model_and_predicts_a_frame(tmp_path, monkeypatch):
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps({"scale": 2.0}))
    monkeypatch.setattr("forecasters.scheduler.predict_runtime",
                        lambda model, frame: frame.assign(duration_p50_h=frame["x"] * model["scale"]))
    py = scheduler.SchedulerModelPyfunc()
    py.load_context(SimpleNamespace(artifacts={"model": str(path)}))
    out = py.predict(None, [{"x": 1.5}, {"x": 3.0}])
    assert isinstance(out, pd.DataFrame) and out["duration_p50_h"].tolist() == [3.0, 6.0]
