"""The model file MLflow logs with the sweep's winner (MLflow's "models from code"): loading the
model runs this file, which names the model object. Nothing is pickled, so a model logged here
loads under any Python that runs its pinned packages, and what it runs is this readable file
plus the ``ftplat`` package logged beside it."""

import mlflow.models

from ftplat.tracking.pyfunc_model import TaskPipelineModel

mlflow.models.set_model(TaskPipelineModel())
