"""The sweep winner as an MLflow pyfunc model: the pipeline of its task (``ftplat.tasks``).

The model's ``hf_model`` artifact is a Hugging Face model folder with ``ftplat_task.json``
(written when the winner is registered); the task it names builds the pipeline and formats
the predictions, so every task is served by this one class.
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mlflow.pyfunc

from ftplat.tasks.base import is_missing_value
from ftplat.tasks.values import GENERATION_LEAST, build_generation_options

logger = logging.getLogger(__name__)
#: Inputs predicted per pipeline batch unless ``params={"batch_size": N}`` says otherwise.
DEFAULT_BATCH_SIZE = 32
#: What serving the model imports, pinned to the versions it was trained and checked with.
SERVING_PACKAGES = ("mlflow", "torch", "transformers", "tokenizers", "safetensors", "pandas", "numpy")


def build_pip_requirements(*, uses_peft: bool, read_version=version) -> list[str]:
    """``pkg==version`` for each package serving imports (and peft for an adapter job), as
    installed here. A local version label is dropped (``2.13.0+cpu`` -> ``2.13.0``): it names a
    wheel index, and a GPU server must be free to install the CUDA build of the same release."""
    pins = []
    for name in SERVING_PACKAGES + (("peft",) if uses_peft else ()):
        try:
            pins.append(f"{name}=={read_version(name).split('+', 1)[0]}")
        except PackageNotFoundError:
            pins.append(name)
    return pins


def build_package_dir() -> str:
    """The ``ftplat`` package folder, shipped in the model as its code."""
    import ftplat

    return os.path.dirname(os.path.abspath(ftplat.__file__))


def build_model_code_path() -> str:
    """The file MLflow logs as the model's code (``pyfunc_code.py``)."""
    return os.path.join(build_package_dir(), "tracking", "pyfunc_code.py")


def build_input_example(task: Any, tokenizer: Any, text_pair: bool):
    """The task's example texts, or for a sentence-pair job a DataFrame with ``text`` and
    ``text_pair`` columns.

    A list infers an unnamed string column, so ``predict(["a text"])`` passes the signature; a
    named ``text`` column would make MLflow refuse every plain list of texts."""
    import pandas as pd

    texts = task.build_example_texts(tokenizer)
    if not text_pair:
        return texts
    return pd.DataFrame({"text": texts, "text_pair": ["it is a film about a dog", "the film was long"][:len(texts)]})


def build_params_example(task: Any) -> dict[str, Any]:
    """The ``params`` the model takes, at the values ``predict`` uses when they are not given."""
    params: dict[str, Any] = {"batch_size": DEFAULT_BATCH_SIZE}
    params.update(task.generation_defaults)
    return params


def run_infer_signature(model_dir: str, *, text_pair: bool) -> tuple[Any, Any]:
    """The model's input example (``build_input_example``) and its signature: the output
    schema from what the model really predicts on the example (loaded here, on CPU), and its
    ``params``; no input schema.

    MLflow enforces an input schema before ``predict`` sees the input, and no schema holds what
    ``predict`` takes (texts, pair dicts, a dict of columns, a DataFrame whose ``text`` column
    need not come first): one unnamed string column made MLflow keep a DataFrame's first column
    (a ``title`` was classified in place of the ``text``) and turn a dict of columns into one
    row of lists. ``build_pyfunc_inputs`` reads and checks the input itself."""
    from mlflow.models import ModelSignature, infer_signature
    from mlflow.pyfunc import PythonModelContext

    model = TaskPipelineModel()
    model.load_context(PythonModelContext(artifacts={"hf_model": model_dir}, model_config=None), device="cpu")
    example = build_input_example(model.task, model.pipe.tokenizer, text_pair)
    params = build_params_example(model.task)
    output = model.predict(None, example, params)
    try:
        inferred = infer_signature(example, output, params)
    except Exception as exc:  # an output MLflow cannot type (say, no entity found in any example)
        logger.warning("Registering the model without an output signature: its output %r has no MLflow type (%s)",
                       output, exc)
        inferred = infer_signature(example, None, params)
    return example, ModelSignature(inputs=None, outputs=inferred.outputs, params=inferred.params)


def build_generation_params(task: Any, params: dict[str, Any] | None) -> dict[str, Any]:
    """The generation keywords of ``params`` for ``task.run_predict``, checked as ``predict``
    checks its flags (its defaults fill the rest); ValueError naming the param otherwise."""
    given = {k: v for k, v in (params or {}).items() if k in GENERATION_LEAST}
    return build_generation_options(task, given, spell=lambda name: f"params {name}")


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


def build_pyfunc_inputs(model_input: Any, task: Any = None) -> list[str | dict[str, str]]:
    """The inputs of ``predict``: a text, a list of texts or of ``{"text", "text_pair"}`` dicts,
    a dict of columns, or a DataFrame with a ``text`` column (or one column only, as MLflow
    makes of a list of texts) and an optional ``text_pair`` column; for a causal LM trained on
    several prompt columns, a table of those columns (``task.read_table_texts``). Columns
    under other names are refused, naming ``text``: guessing one classified a ``title`` in
    place of the review."""
    if isinstance(model_input, str):
        return [model_input]
    if hasattr(model_input, "columns"):  # a pandas DataFrame
        columns = {str(c): model_input[c].tolist() for c in model_input.columns}
        if "text" not in columns and len(columns) == 1:
            columns = {"text": next(iter(columns.values()))}
    elif isinstance(model_input, dict) and not isinstance(model_input.get("text"), str):
        # columns: {"text": [...], "text_pair": [...]} (numpy arrays from MLflow's REST server)
        columns = {str(k): [] if v is None else list(v) for k, v in model_input.items()}
    else:
        rows = [model_input] if isinstance(model_input, dict) else list(model_input)
        return [build_pyfunc_input(item, i) for i, item in enumerate(rows, start=1)]
    texts = columns.get("text")
    if texts is None and task is not None:
        texts = task.read_table_texts(columns)
    if texts is None:
        wanted = "'text'" + (f" (or the prompt columns {task.settings.prompt_columns})"
                             if task is not None and task.settings.prompt_columns else "")
        raise ValueError(f"the input has columns {sorted(columns)} and no {wanted}; name the column of texts 'text' "
                         "(and a pair's second 'text_pair')")
    pairs = columns.get("text_pair") or [None] * len(texts)
    if len(pairs) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(pairs)} text pairs")
    rows = [{"text": t, "text_pair": p} for t, p in zip(texts, pairs)]
    return [build_pyfunc_input(item, i) for i, item in enumerate(rows, start=1)]


class TaskPipelineModel(mlflow.pyfunc.PythonModel):
    """``predict`` takes texts (a list, ``{"text", "text_pair"}`` dicts for sentence pairs, or
    a DataFrame with a ``text`` and optional ``text_pair`` column) and returns one JSON-ready
    dict per input, as ``ftplat predict --json`` prints it: ``{"label", "score"}``
    (text-classification), ``{"labels", "scores"}`` (multi-label), ``{"value"}`` (regression),
    ``{"entities"}`` (token-classification), ``{"predictions"}`` (masked-lm: the likeliest
    tokens for each text's one mask token), ``{"generated_text"}`` (causal-lm: the continuation,
    ``params`` ``max_new_tokens`` and ``temperature`` as ``predict``'s options)."""

    # MLflow wraps an untyped ``predict`` to tell every process that defines this class (each
    # sweep, each server loading the model) to add type hints. The signature is inferred from
    # real predictions (``run_infer_signature``), and no type hint fits every accepted input: a
    # list of texts, dicts of sentence pairs, a DataFrame. MLflow's own flag for classes whose
    # predict it must not wrap; without it (a later MLflow) only the warning comes back.
    _skip_type_hint_validation = True

    def load_context(self, context, device: str | None = None):
        """Serve on the first GPU when one is visible, else on CPU."""
        import torch

        from ftplat.tasks import build_task_for_model_dir

        model_dir = context.artifacts["hf_model"]
        self.task = build_task_for_model_dir(model_dir)
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.pipe = self.task.build_pipeline(model_dir, device=device)

    def predict(self, context, model_input, params=None):
        batch_size = int((params or {}).get("batch_size") or DEFAULT_BATCH_SIZE)
        inputs = build_pyfunc_inputs(model_input, self.task)
        self.task.check_pair_inputs(inputs)
        return self.task.run_predict(self.pipe, inputs, batch_size=batch_size,
                                     **build_generation_params(self.task, params))


#: The class's name before tasks: models registered then were pickled naming it, and load as
#: the generic class (their folder has no ftplat_task.json; the task is read from config.json).
TextClassifierModel = TaskPipelineModel
