"""The MLflow pyfunc wrapper of a saved forecaster, built once per kind of model (job-kind or scheduler-history).

Importing mlflow costs about a second, so each model module builds its class on first use
(:func:`pipelines.io.lazy.lazy_class`) and names it there, so it pickles by reference (``module.Name``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd


def pyfunc_class(name: str, module: str, artifact: str, load: Callable[[str], Any],
                 predict: Callable[[Any, pd.DataFrame], pd.DataFrame], doc: str) -> type:
    """A ``mlflow.pyfunc.PythonModel`` subclass ``module.name``.

    ``load_context`` reads the model with ``load(path of the artifact named artifact)``; ``predict`` turns
    the input into a frame and returns ``predict(model, frame)``.
    """
    import mlflow.pyfunc

    class Pyfunc(mlflow.pyfunc.PythonModel):
        def load_context(self, context):  # noqa: D401 - mlflow hook
            self._model = load(context.artifacts[artifact])

        def predict(self, context, model_input, params=None):  # noqa: D401 - mlflow hook
            frame = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
            return predict(self._model, frame)

    Pyfunc.__name__ = Pyfunc.__qualname__ = name
    Pyfunc.__module__ = module
    Pyfunc.__doc__ = doc
    return Pyfunc
