"""The sweep winner as an MLflow pyfunc model: the pipeline of its task (``ftplat.tasks``).

The model's ``hf_model`` artifact is a Hugging Face model folder with ``ftplat_task.json``
(written when the winner is registered); the task it names builds the pipeline and formats
the predictions, so every task is served by this one class.
"""

from __future__ import annotations

from typing import Any

import mlflow.pyfunc

from ftplat.tasks.base import is_missing_value

#: Inputs predicted per pipeline batch unless ``params={"batch_size": N}`` says otherwise.
DEFAULT_BATCH_SIZE = 32
#: ``params`` a model that generates text (causal-lm) takes: tokens per input, sampling temperature.
GENERATION_PARAMS = ("max_new_tokens", "temperature")


def build_generation_params(task: Any, params: dict[str, Any] | None) -> dict[str, Any]:
    """The generation keywords of ``params`` for ``task.run_predict`` (its defaults fill the
    rest); ValueError when they are given to a task that does not generate."""
    given = {k: v for k, v in (params or {}).items() if k in GENERATION_PARAMS and v is not None}
    if given and not task.generates_text:
        raise ValueError(f"params {sorted(given)} apply to models that generate text (causal-lm), not to a "
                         f"{task.name} model")
    if "max_new_tokens" in given and int(given["max_new_tokens"]) < 1:
        raise ValueError(f"params max_new_tokens is {given['max_new_tokens']}; give 1 or more")
    if "temperature" in given and not float(given["temperature"]) >= 0:
        raise ValueError(f"params temperature is {given['temperature']}; give 0 (greedy) or more")
    return {k: int(v) if k == "max_new_tokens" else float(v) for k, v in given.items()}


def build_pyfunc_input(item: Any, index: int) -> str | dict[str, str]:
    """One input as the task takes it: a text, or ``{"text", "text_pair"}`` for a pair."""
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and isinstance(item.get("text"), str):
        pair = item.get("text_pair")
        if is_missing_value(pair):
            return item["text"]
        if not isinstance(pair, str):
            raise ValueError(f"input {index}: text_pair is {type(pair).__name__}, not a string")
        return {"text": item["text"], "text_pair": pair}
    raise ValueError(f"input {index} is {type(item).__name__}: give a text, or a dict with a 'text' string "
                     "(and optional 'text_pair')")


def build_pyfunc_inputs(model_input: Any) -> list[str | dict[str, str]]:
    """The inputs of ``predict``: a text, a list of texts or of ``{"text", "text_pair"}`` dicts,
    a dict of columns, or a DataFrame with a ``text`` column (its first column otherwise) and
    an optional ``text_pair`` column."""
    if isinstance(model_input, str):
        return [model_input]
    if hasattr(model_input, "columns"):  # a pandas DataFrame
        column = "text" if "text" in model_input.columns else model_input.columns[0]
        texts = model_input[column].tolist()
        pairs = model_input["text_pair"].tolist() if "text_pair" in model_input.columns else [None] * len(texts)
        rows = [{"text": t, "text_pair": p} for t, p in zip(texts, pairs)]
    elif isinstance(model_input, dict):
        if isinstance(model_input.get("text"), str):
            rows = [model_input]
        else:  # columns: {"text": [...], "text_pair": [...]}
            texts = list(model_input.get("text") or [])
            pairs = list(model_input.get("text_pair") or [None] * len(texts))
            if len(pairs) != len(texts):
                raise ValueError(f"{len(texts)} texts but {len(pairs)} text pairs")
            rows = [{"text": t, "text_pair": p} for t, p in zip(texts, pairs)]
    else:
        rows = list(model_input)
    return [build_pyfunc_input(item, i) for i, item in enumerate(rows)]


class TaskPipelineModel(mlflow.pyfunc.PythonModel):
    """``predict`` takes texts (a list, ``{"text", "text_pair"}`` dicts for sentence pairs, or
    a DataFrame with a ``text`` and optional ``text_pair`` column) and returns one JSON-ready
    dict per input, as ``ftplat predict --json`` prints it: ``{"label", "score"}``
    (text-classification), ``{"labels", "scores"}`` (multi-label), ``{"value"}`` (regression),
    ``{"entities"}`` (token-classification), ``{"predictions"}`` (masked-lm: the likeliest
    tokens for each text's one mask token), ``{"generated_text"}`` (causal-lm: the continuation,
    ``params`` ``max_new_tokens`` and ``temperature`` as ``predict``'s options)."""

    def load_context(self, context):
        from ftplat.tasks import build_task_for_model_dir

        model_dir = context.artifacts["hf_model"]
        self.task = build_task_for_model_dir(model_dir)
        self.pipe = self.task.build_pipeline(model_dir)

    def predict(self, context, model_input, params=None):
        batch_size = int((params or {}).get("batch_size") or DEFAULT_BATCH_SIZE)
        return self.task.run_predict(self.pipe, build_pyfunc_inputs(model_input), batch_size=batch_size,
                                     **build_generation_params(self.task, params))


#: The class's name before tasks: models registered then were pickled naming it, and load as
#: the generic class (their folder has no ftplat_task.json; the task is read from config.json).
TextClassifierModel = TaskPipelineModel
