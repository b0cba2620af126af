"""What a task does for an exported model: the ``transformers.pipeline`` that serves it, its
predictions as JSON and as lines, the settings its ``ftplat_task.json`` records, and the model
card's usage example. ``Task`` (``ftplat.tasks.base``) inherits these; a task module overrides
what differs, reading the task's class attributes (``pipeline_task``, ``auto_model``,
``truncates_inputs``, ``accepts_text_pair``) and ``settings``."""

from __future__ import annotations

import os
from typing import Any


class TaskServing:
    """The serving half of the task interface (see the module docstring)."""

    def run_complete_export(self, out_dir: str, job: dict[str, Any]) -> None:
        """Add to an exported model folder (whole weights) what its checkpoints lack."""

    @classmethod
    def build_serving_settings(cls, data: dict[str, Any]) -> dict[str, Any]:
        """What an export's ``ftplat_task.json`` records of the job's ``data`` section (a dict)
        for serving this task as it trained."""
        return {}

    def read_table_texts(self, columns: dict[str, list[Any]]) -> list[Any] | None:
        """The texts of a served table without a ``text`` column (columns by name), when this
        model was trained on columns of other names; None otherwise."""
        return None

    def build_pipeline_kwargs(self) -> dict[str, Any]:
        """Arguments of the ``transformers.pipeline`` call that serves an exported model."""
        return {}

    def build_predict_call_kwargs(self) -> dict[str, Any]:
        return {"truncation": True}

    def format_prediction(self, result: Any) -> dict[str, Any]:
        """One pipeline output as a JSON-ready dict (``predict --json`` and the MLflow model)."""
        return dict(result)

    def format_prediction_line(self, prediction: dict[str, Any]) -> str:
        """One prediction for ``predict``'s table (the input text is appended)."""
        return "\t".join(str(v) for v in prediction.values())

    def build_pipeline(self, model_dir: str, *, device: str = "cpu") -> Any:
        """The ``transformers.pipeline`` that serves an exported model of this task."""
        from transformers import AutoTokenizer, pipeline

        from ftplat.adapters import ADAPTER_CONFIG, build_adapter_serving_model

        if os.path.isfile(os.path.join(model_dir, ADAPTER_CONFIG)):  # an adapter-only export
            model = build_adapter_serving_model(model_dir, self.auto_model)
            pipe = pipeline(self.pipeline_task, model=model, tokenizer=AutoTokenizer.from_pretrained(model_dir),
                            device=device, **self.build_pipeline_kwargs())
        else:
            pipe = pipeline(self.pipeline_task, model=model_dir, device=device, **self.build_pipeline_kwargs())
        if self.truncates_inputs and self.settings.max_length is not None:
            # The pipelines truncate at the tokenizer's limit (BERT's 512); the token-classification
            # one takes no per-call max_length, so the limit itself is set.
            pipe.tokenizer.model_max_length = self.settings.max_length
        return pipe

    def build_example_texts(self, tokenizer: Any) -> list[str]:
        """Two inputs this task's model predicts on: the example a registered MLflow model is
        logged with, and its output signature is inferred from."""
        return ["i love this movie", "a dull and tedious film"]

    def check_pair_inputs(self, inputs: list[Any]) -> None:
        """ValueError naming the first input (from 1) that is a sentence pair for a model
        trained on single texts, or a lone text for a model trained on pairs (as its export's
        ``text_pair`` says; a model that does not say takes either)."""
        for number, item in enumerate(inputs, start=1):
            is_pair = isinstance(item, dict) and item.get("text_pair") is not None
            if is_pair and (self.settings.text_pair is False or not self.accepts_text_pair):
                raise ValueError(f"input {number} is a sentence pair (text and text_pair), but the model takes one "
                                 "text per input")
            if not is_pair and self.settings.text_pair:
                raise ValueError(f"input {number} is one text, but the model was trained on sentence pairs: give "
                                 "text and text_pair")

    def run_predict(self, pipe: Any, inputs: list[Any], *, batch_size: int = 32) -> list[dict[str, Any]]:
        """Predictions for ``inputs`` (texts, or ``{"text", "text_pair"}`` dicts), JSON-ready."""
        results = pipe(inputs, batch_size=batch_size, **self.build_predict_call_kwargs())
        return [self.format_prediction(r) for r in results]

    def build_usage_example(self, text_pair: bool = False) -> list[str]:
        """Python lines of the model card's "Use" section; ``text_pair``: the model reads
        sentence pairs (``data.text_pair_column``)."""
        return ["from transformers import pipeline", f'pipe = pipeline("{self.pipeline_task}", model="<this directory>")',
                f'pipe({build_usage_inputs(["I hate this movie", "I love this movie"], text_pair)}'
                f'{self.build_usage_truncation()})']

    def build_usage_truncation(self) -> str:
        """The usage example's truncation arguments: the length the model trained on."""
        if not self.truncates_inputs or self.settings.max_length is None:
            return ""
        return f", truncation=True, max_length={self.settings.max_length}"


def build_usage_inputs(texts: list[str], text_pair: bool) -> str:
    """The inputs of a card's pipeline call, as Python: texts, or for a pair model the
    ``{"text", "text_pair"}`` dicts the pipeline reads as pairs (a list of two texts would be
    two single texts, classified without a word)."""
    if not text_pair:
        return "[" + ", ".join(f'"{t}"' for t in texts) + "]"
    return '[{"text": "A man is playing a guitar.", "text_pair": "A man plays music."}]'
