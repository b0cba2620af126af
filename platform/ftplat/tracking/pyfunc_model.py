"""The sweep winner as an MLflow pyfunc model: a Hugging Face text-classification pipeline."""

from __future__ import annotations

import mlflow.pyfunc

class TextClassifierModel(mlflow.pyfunc.PythonModel):
    """``predict`` takes a list of texts (or a DataFrame with a ``text`` column) and returns
    ``[{"label": ..., "score": ...}, ...]``."""

    def load_context(self, context):
        from transformers import pipeline

        self.pipe = pipeline("text-classification", model=context.artifacts["hf_model"], device="cpu")

    def predict(self, context, model_input, params=None):
        if hasattr(model_input, "columns"):
            column = "text" if "text" in model_input.columns else model_input.columns[0]
            texts = model_input[column].tolist()
        else:
            texts = list(model_input)
        return self.pipe(texts, truncation=True)
