"""``masked-lm``: domain-adaptive pretraining of a BERT-family model on raw text (``run_mlm.py``).

The texts of ``data.text_column`` are tokenized with their special tokens, concatenated and
cut into ``data.max_length`` blocks (``task.line_by_line: true``: one truncated sequence per
text). The tables hold no labels: ``DataCollatorForLanguageModeling`` masks
``task.mlm_probability`` of each training batch's tokens (80% become the mask token, 10% a
random token, 10% stay) and labels those positions only. The eval and test tables are masked
the same way once per trial, seeded by ``data.validation.seed`` (``mlm_masking.py``), so every
evaluation scores the same tokens. Accuracy is over the masked tokens, perplexity is exp of
their mean NLL (language_model.py).

An exported model is a plain Hugging Face folder with its MLM head: ``predict`` fills in the
mask token, and ``model.name_or_path`` of a later classification sweep starts from it (the
MLM head is dropped and a new classifier made, as from any pretrained checkpoint).
"""

from __future__ import annotations

import logging
from typing import Any

from ftplat.errors import UserError
from ftplat.tasks.base import build_load_dtype, column_list
from ftplat.tasks.language_model import MODEL_INPUTS, LanguageModelTask, check_text_inputs, group_into_blocks

logger = logging.getLogger(__name__)

#: Candidates ``predict`` lists for the mask token.
TOP_K = 5


class MaskedLM(LanguageModelTask):
    name = "masked-lm"
    description = "Masked language model"
    pipeline_task = "fill-mask"
    auto_model = "AutoModelForMaskedLM"
    # peft has no task type for an MLM head; a LoRA on one is the model's own business.
    peft_task_type = None
    shift_labels = False

    # --- configuration -------------------------------------------------------------------
    def read_columns(self, data: Any) -> dict[str, str]:
        return {"text_column": data.text_column}

    # --- data ----------------------------------------------------------------------------
    def build_inputs(self, ds: Any, data: Any, split: str | None = None) -> dict[str, list[Any]]:
        return {"text": column_list(ds, data.text_column)}

    def prepare_tokenizer(self, tokenizer: Any) -> Any:
        """The tokenizer must have the mask token the model was pretrained with, and a
        padding token for the batches."""
        where = f"model.name_or_path {getattr(tokenizer, 'name_or_path', '?')!r}"
        if tokenizer.mask_token is None:
            raise UserError(f"{where} has a tokenizer without a mask token; task.type masked-lm continues the "
                            "pretraining of a masked language model (BERT, RoBERTa, Longformer...): choose one, or "
                            "task.type causal-lm for a decoder-only model")
        if tokenizer.pad_token is None:
            raise UserError(f"{where} has a tokenizer without a padding token; task.type masked-lm pads its "
                            "batches: choose a model whose tokenizer has one")
        return tokenizer

    def tokenize(self, tokenizer: Any, examples: Any, data: Any) -> dict[str, list[Any]]:
        """Model inputs only (no labels: the collator masks and labels each batch)."""
        texts = examples.inputs["text"]
        if self.settings.line_by_line:
            encoded = tokenizer(texts, truncation=True, max_length=data.max_length,
                                padding="max_length" if data.pad_to_max_length else False)
            return {k: encoded[k] for k in MODEL_INPUTS if k in encoded}
        # Whole texts: the blocks are cut from their concatenation, so nothing is truncated.
        encoded = tokenizer(texts, verbose=False)
        return group_into_blocks({k: encoded[k] for k in MODEL_INPUTS if k in encoded}, data.max_length)

    def build_collator(self, tokenizer: Any) -> Any:
        from ftplat.tasks.mlm_masking import MaskOnceCollator

        return MaskOnceCollator(tokenizer, mlm=True, mlm_probability=self.settings.mlm_probability)

    def build_evaluation_table(self, table: Any, tokenizer: Any, *, seed: int) -> Any:
        """Masked once, seeded: every evaluation of the trial scores the same tokens
        (``ftplat.tasks.mlm_masking``)."""
        from ftplat.tasks.mlm_masking import build_masked_table

        return build_masked_table(table, tokenizer, mlm_probability=self.settings.mlm_probability, seed=seed)

    # --- serving -------------------------------------------------------------------------
    def run_complete_export(self, out_dir: str, job: dict[str, Any]) -> None:
        """The base model's pretrained pooler beside the MLM weights. An MLM head model has
        none (BERT's and Longformer's MLM classes drop it at load), so a classifier started
        from this export, the next step of domain adaptation, began with a random pooler
        where one from the base checkpoint began with the pretrained one."""
        import transformers

        model = job.get("model") or {}
        name = model.get("name_or_path")
        try:
            base = transformers.AutoModel.from_pretrained(name, trust_remote_code=bool(model.get("trust_remote_code")),
                                                          dtype=build_load_dtype(model.get("dtype") or "float32"))
        except (OSError, ValueError) as exc:
            logger.warning("The export has no pooler: the base model %r could not be loaded (%s); a classifier "
                           "started from the export begins with a random one", name, str(exc).splitlines()[0])
            return
        pooler = getattr(base, "pooler", None)
        mlm = transformers.AutoModelForMaskedLM.from_pretrained(out_dir)
        if pooler is None or getattr(mlm.base_model, "pooler", "none of its own") is not None:
            return
        mlm.base_model.pooler = pooler
        mlm.save_pretrained(out_dir)
        logger.info("The export holds the base model's pooler beside the MLM weights (for a classifier started "
                    "from it)")

    def build_predict_call_kwargs(self) -> dict[str, Any]:
        return {"top_k": TOP_K}

    def run_predict(self, pipe: Any, inputs: list[Any], *, batch_size: int = 32) -> list[dict[str, Any]]:
        """The ``TOP_K`` likeliest tokens for the one mask token of each text."""
        check_text_inputs(self, inputs)
        mask = pipe.tokenizer.mask_token
        for number, text in enumerate(inputs, start=1):
            count = text.count(mask)
            if count != 1:
                raise UserError(f"input {number} holds {count} mask tokens; a masked-lm model fills in one: put "
                                f"{mask} once where the word goes (e.g. 'the movie was {mask}')")
        results = pipe(inputs, batch_size=batch_size, **self.build_predict_call_kwargs())
        if len(inputs) == 1 and results and isinstance(results[0], dict):
            results = [results]  # the fill-mask pipeline unwraps a list of one input
        return [self.format_prediction(r) for r in results]

    def format_prediction(self, result: Any) -> dict[str, Any]:
        return {"predictions": [{"token": r["token_str"], "score": round(float(r["score"]), 6)} for r in result]}

    def format_prediction_line(self, prediction: dict[str, Any]) -> str:
        return ", ".join(f"{p['token']}:{p['score']:.4f}" for p in prediction["predictions"])

    def build_example_texts(self, tokenizer: Any) -> list[str]:
        return [f"i love this {tokenizer.mask_token}", f"a dull and tedious {tokenizer.mask_token}"]

    def build_usage_example(self, text_pair: bool = False) -> list[str]:
        return ["from transformers import pipeline",
                f'fill = pipeline("{self.pipeline_task}", model="<this directory>")',
                'fill(f"the movie was {fill.tokenizer.mask_token}.", top_k=5)  # [{"token_str", "score", ...}, ...]',
                "# or fine-tune it for a task: model.name_or_path: <this directory> in a text-classification sweep"]
