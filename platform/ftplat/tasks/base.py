"""The task interface: everything that differs between workloads, asked by the rest of ftplat.

A task says which columns it reads, how a split becomes checked inputs and labels, how they
are tokenized and batched, which ``AutoModelFor...`` class and head it trains, its metrics and
their modes, and how an exported model predicts and is described. The data preparation, the
worker, the summary, export, predict and the MLflow model ask the task and never branch on
its type; adding a task is adding one module to ``ftplat.tasks`` and one line to its registry.

This layer sits below the config schema (which validates a job against its task), so task
modules import no other ftplat layer; the configs they receive are duck-typed, and the heavy
libraries (transformers, scikit-learn, scipy, seqeval) are imported where they are used.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ftplat.errors import UserError
from ftplat.tasks.serving import TaskServing
from ftplat.tasks.user_metrics import build_user_metric_fn, check_metric_modes

from ftplat.tasks.values import (  # noqa: F401 - the task modules import them from here
    IGNORED_LABEL,
    NEW_WEIGHTS_ATTR,
    UNLABELLED_SPLIT_FIX,
    Examples,
    TaskSettings,
    build_load_dtype,
    column_list,
    is_missing_value,
)


class Task(TaskServing):
    """Base of every task; the defaults fit a sequence-level task (one label per text). What an
    exported model does (serving, the card's usage example) is in ``TaskServing``."""

    name: ClassVar[str]
    #: Bare metric names (``accuracy``; logged as ``eval_accuracy``) and whether they are
    #: maximised or minimised; ``loss`` is the Trainer's own.
    metrics: ClassVar[dict[str, str]]
    default_metric: ClassVar[str]
    #: What the model card calls the model ("Text classifier").
    description: ClassVar[str]
    #: The ``transformers.pipeline`` task an exported model is served with.
    pipeline_task: ClassVar[str] = "text-classification"
    #: The ``AutoModelFor...`` class name in ``transformers``.
    auto_model: ClassVar[str] = "AutoModelForSequenceClassification"
    #: HF ``problem_type`` of the head (``None``: the model decides from num_labels).
    problem_type: ClassVar[str | None] = None
    #: The head's loss when it is not a cross-entropy over classes, which HF's label smoothing
    #: assumes (None: it is one, and label smoothing applies).
    loss_name: ClassVar[str | None] = None
    #: Whether a text pair (``data.text_pair_column``) can be given.
    accepts_text_pair: ClassVar[bool] = True
    #: The ``peft.TaskType`` of this head (``model.peft``): it makes peft keep the head
    #: trainable and saved with the adapter. None: a model peft has no task type for.
    peft_task_type: ClassVar[str | None] = "SEQ_CLS"
    #: Whether predictions are generated text: ``run_predict`` then takes ``max_new_tokens``
    #: and ``temperature`` (``predict --max-new-tokens --temperature``), these their defaults.
    generates_text: ClassVar[bool] = False
    generation_defaults: ClassVar[dict[str, Any]] = {}
    #: Whether serving truncates inputs at ``data.max_length`` as training did. A language
    #: model's input (a prompt, a text around its mask token) would lose the end it works on.
    truncates_inputs: ClassVar[bool] = True

    def __init__(self, settings: TaskSettings) -> None:
        self.settings = settings

    # --- configuration -------------------------------------------------------------------
    def check_inputs_and_loss(self, job: Any) -> None:
        """The checks every task's ``check_job`` starts with: a text pair, a prompt and completion
        only where the task takes them, label smoothing only with a cross-entropy head, and
        ``task.metric_modes`` naming only metrics of the user's own."""
        check_metric_modes(self.settings.metric_modes, self.metrics, task_type=self.name)
        if job.data.text_pair_column is not None and not self.accepts_text_pair:
            raise ValueError(f"data.text_pair_column applies to sentence-level tasks, not task.type {self.name}; "
                             "remove it")
        for name in ("prompt_column", "completion_column"):
            if getattr(job.data, name, None) is not None and not any(
                    field.split("[")[0] == name for field in self.read_columns(job.data)):
                reads = ", ".join(f"data.{f} {c!r}" for f, c in self.read_columns(job.data).items())
                raise ValueError(f"data.{name} applies to task.type causal-lm (prompt/completion pairs), not task.type "
                                 f"{self.name}, which reads {reads}; remove it")
        smoothing = (job.training.hf_args or {}).get("label_smoothing_factor") or 0
        if smoothing > 0 and self.loss_name is not None:
            raise ValueError(f"training.hf_args.label_smoothing_factor is {smoothing}; HF's label smoothing is a "
                             f"cross-entropy over one class per row and is wrong for task.type {self.name} "
                             f"({self.loss_name}); remove it")

    def build_metric_modes(self) -> dict[str, str]:
        """Every metric this job's evaluation logs (bare names) with its mode; the task's own
        keep theirs."""
        return {**self.metrics, **{k: v for k, v in self.settings.metric_modes.items() if k not in self.metrics}}

    def resolve_model_defaults(self, model: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        """Fill ``model.num_labels`` / ``model.id2label`` the user left out (raw config dicts of
        the model and data sections, before validation). Default: num_labels from id2label."""
        model = dict(model)
        if model.get("num_labels") is None and model.get("id2label"):
            model["num_labels"] = len(model["id2label"])
        return model

    def check_job(self, job: Any) -> None:
        """Refuse settings this task cannot use; ValueError naming the field and the fix."""
        self.check_inputs_and_loss(job)
        if job.model.num_labels is None:
            raise ValueError(f"model.num_labels is required for task.type {self.name} (or give model.id2label)")
        if job.model.num_labels < 2:
            raise ValueError(f"model.num_labels is {job.model.num_labels}; task.type {self.name} needs at least 2 "
                             "classes (a single float target is task.type: regression)")
        if job.data.label_columns is not None:
            raise ValueError(f"data.label_columns (several 0/1 columns) is for task.type multi-label-classification; "
                             f"task.type {self.name} reads data.label_column")

    def read_columns(self, data: Any) -> dict[str, str]:
        """The columns this task reads, by the config field that names them (``data.<field>``).
        The inputs ``build_inputs`` returns use the roles ``text``, ``text_pair``, ``tokens``,
        ``prompt``, ``completion``, whose fields are ``<role>_column``."""
        columns = {"text_column": data.text_column}
        if data.text_pair_column is not None:
            columns["text_pair_column"] = data.text_pair_column
        columns["label_column"] = data.label_column
        return columns

    # --- data ----------------------------------------------------------------------------
    def build_inputs(self, ds: Any, data: Any, split: str | None = None) -> dict[str, list[Any]]:
        """The raw model inputs of a split by role (``text``, ``text_pair``); ``split`` names
        it in errors."""
        inputs = {"text": column_list(ds, data.text_column)}
        if data.text_pair_column is not None:
            inputs["text_pair"] = column_list(ds, data.text_pair_column)
        return inputs

    def build_labels(self, ds: Any, data: Any, model: Any, split: str) -> np.ndarray:
        """The split's labels as the model trains on them; UserError naming the column."""
        raise NotImplementedError

    def build_stratify_key(self, labels: np.ndarray) -> np.ndarray | None:
        """A class per row for stratified subsets and hold-outs; None draws them at random."""
        return None

    def build_label_stats(self, labels: np.ndarray) -> dict[str, Any]:
        """What the summary and the model card say about a split's labels."""
        return {}

    #: Each row's tokens depend on that row alone, so a split can be tokenized in chunks.
    tokenizes_rows = True

    def run_table_checks(self, tokenizer: Any, examples: Examples, table: Any, role: str, data: Any) -> dict[str, Any]:
        """What tokenizing a split (``role``) into ``table`` lost, as entries of its summary
        stats, each logged as a warning; nothing for a task that loses nothing it scores."""
        return {}

    def tokenize(self, tokenizer: Any, examples: Examples, data: Any) -> dict[str, list[Any]]:
        """Model input columns plus ``labels`` for one split (plain lists: they become Arrow)."""
        pair = examples.inputs.get("text_pair")
        encoded = tokenizer(examples.inputs["text"], pair, truncation=True, max_length=data.max_length,
                            padding="max_length" if data.pad_to_max_length else False)
        columns = {k: encoded[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in encoded}
        columns["labels"] = examples.labels.tolist()
        return columns

    def prepare_tokenizer(self, tokenizer: Any) -> Any:
        """The model's tokenizer as this task uses it; data preparation and every worker get it
        from here. A decoder-only model's tokenizer (Llama, GPT-2, Qwen) usually has no padding
        token: batches pad with EOS, as HF's examples for these models do (the head reads the
        last token before the padding, and the attention mask hides the rest)."""
        if tokenizer.pad_token is None and tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        return tokenizer

    def build_collator(self, tokenizer: Any) -> Any:
        from transformers import DataCollatorWithPadding

        return DataCollatorWithPadding(tokenizer)

    def build_evaluation_table(self, table: Any, tokenizer: Any, *, seed: int) -> Any:
        """The tokenized eval (or test) table as every evaluation of a trial reads it. A task
        whose collator draws at random (masked-lm's masks) draws here once, seeded, so each
        evaluation scores the same thing; the others' tables are final already."""
        return table

    # --- model ---------------------------------------------------------------------------
    def build_model_kwargs(self, model: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"num_labels": model.num_labels}
        if self.problem_type is not None:
            kwargs["problem_type"] = self.problem_type
        if model.id2label is not None:
            kwargs["id2label"] = dict(model.id2label)
            kwargs["label2id"] = {v: k for k, v in model.id2label.items()}
        return kwargs

    def build_model(self, model: Any, tokenizer: Any = None) -> Any:
        """The pretrained model with this task's head (``model.name_or_path``). ``tokenizer``
        (``prepare_tokenizer``'s) gives the model its padding id when its config has none, as
        decoder-only checkpoints ship: their sequence heads find each row's last token by it,
        and refuse batches of more than one row without it."""
        import transformers

        auto = getattr(transformers, self.auto_model)
        # A checkpoint fine-tuned with another head (2 classes, now regression) starts this
        # task with a new head, as run_glue.py's --ignore_mismatched_sizes; transformers logs
        # which weights were re-initialised.
        built, info = auto.from_pretrained(model.name_or_path, trust_remote_code=model.trust_remote_code,
                                           ignore_mismatched_sizes=True, output_loading_info=True,
                                           dtype=build_load_dtype(model.dtype), **self.build_model_kwargs(model),
                                           **model.config_overrides)
        # Randomly initialised here, so a peft adapter must train and save them (adapters.py).
        setattr(built, NEW_WEIGHTS_ATTR, sorted({*info["missing_keys"], *(k[0] for k in info["mismatched_keys"])}))
        if getattr(built.config, "pad_token_id", None) is None and getattr(tokenizer, "pad_token_id", None) is not None:
            built.config.pad_token_id = tokenizer.pad_token_id
        return built

    # --- training ------------------------------------------------------------------------
    def build_logits_reducer(self) -> Any:
        """The Trainer's ``preprocess_logits_for_metrics``: shrink each evaluation batch's
        logits before they are gathered (a language model's are batch x length x vocabulary).
        None keeps them whole."""
        return None

    # --- metrics -------------------------------------------------------------------------
    def compute_task_metrics(self, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        raise NotImplementedError

    def compute_metrics(self, eval_pred: Any) -> dict[str, float]:
        """The Trainer's ``compute_metrics``: the task's built-ins, then the user's function."""
        predictions = eval_pred.predictions
        if isinstance(predictions, tuple):
            predictions = predictions[0]
        predictions, labels = np.asarray(predictions), np.asarray(eval_pred.label_ids)
        result = self.compute_task_metrics(predictions, labels)
        if self.settings.metric_fn:
            extra = build_user_metric_fn(self.settings.metric_fn)(eval_pred)
            missing = sorted(set(self.settings.metric_modes) - set(extra or {}))
            if missing:
                raise UserError(f"task.metric_fn {self.settings.metric_fn!r} returned no {missing} "
                                "(task.metric_modes names them)")
            # A built-in replaced would rank checkpoints and trials by the user's number under
            # the built-in's name (eval_accuracy is the default metric_for_best_model).
            clashes = sorted(set(extra or {}) & set(self.metrics))
            if clashes:
                raise UserError(f"task.metric_fn {self.settings.metric_fn!r} returned {clashes}, built-in metrics "
                                f"of task.type {self.name}; return them under names of your own "
                                f"(e.g. {clashes[0]!r} as 'my_{clashes[0]}')")
            result.update({k: float(v) for k, v in extra.items()})
        return result
