"""``causal-lm``: fine-tuning a decoder-only model (Llama, GPT-2, Qwen...) to continue text.

Two data layouts:

- ``data.text_column``: language modelling on raw text; every token is a target.
- ``data.prompt_column`` and ``data.completion_column``: the model learns to write the
  completion after the prompt; prompt positions are labelled ``IGNORED_LABEL``, so the loss
  (and the accuracy) is over the completion only. The prompt is tokenized with the
  tokenizer's special tokens (a BOS), the completion without, so the boundary is the one the
  model sees when it generates from the prompt alone. With a chat template
  (``task.chat_template``) the prompt is rendered as a user turn with the generation prompt
  (``apply_chat_template(..., add_generation_prompt=True)``), and the completion is the answer.

Every example ends with EOS (so the model learns to stop). Without ``task.packing`` an
example is one sequence truncated to ``data.max_length``; with it the examples are
concatenated and cut into ``data.max_length`` blocks, the labels cut alongside, so a packed
prompt keeps its ignored labels. The collator pads input ids with the padding token (EOS for
a tokenizer without one) and labels with ``IGNORED_LABEL``. Accuracy is next-token accuracy.
"""

from __future__ import annotations

import logging
from typing import Any

from ftplat.errors import UserError
from ftplat.tasks.base import IGNORED_LABEL, column_list, is_missing_value
from ftplat.tasks.language_model import LanguageModelTask, check_text_inputs, group_into_blocks

logger = logging.getLogger(__name__)

#: ``predict``'s defaults: tokens generated per input, and greedy decoding.
DEFAULT_MAX_NEW_TOKENS = 64
DEFAULT_TEMPERATURE = 0.0


def join_prompt_parts(rows: Any) -> list[str]:
    """Each row's prompt from its parts (``data.prompt_column``'s columns, in order): the
    non-empty ones a blank line apart, so an open question's empty context leaves no blank lines."""
    return ["\n\n".join(v.strip() for v in row if isinstance(v, str) and v.strip()) for row in rows]


def build_user_turn(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}]


class CausalLM(LanguageModelTask):
    name = "causal-lm"
    description = "Causal language model"
    pipeline_task = "text-generation"
    auto_model = "AutoModelForCausalLM"
    peft_task_type = "CAUSAL_LM"
    shift_labels = True
    generates_text = True
    generation_defaults = {"max_new_tokens": DEFAULT_MAX_NEW_TOKENS, "temperature": DEFAULT_TEMPERATURE}

    # --- configuration -------------------------------------------------------------------
    def check_job(self, job: Any) -> None:
        super().check_job(job)
        if self.settings.chat_template is True and job.data.prompt_column is None:
            raise ValueError("task.chat_template is true but the data is raw text (data.text_column); the chat "
                             "template renders prompts: give data.prompt_column and data.completion_column, or "
                             "remove task.chat_template")

    def read_columns(self, data: Any) -> dict[str, str]:
        if isinstance(data.prompt_column, list):
            return {**{f"prompt_column[{i}]": c for i, c in enumerate(data.prompt_column)},
                    "completion_column": data.completion_column}
        if data.prompt_column is not None:
            return {"prompt_column": data.prompt_column, "completion_column": data.completion_column}
        return {"text_column": data.text_column}

    # --- data ----------------------------------------------------------------------------
    def build_inputs(self, ds: Any, data: Any, split: str | None = None) -> dict[str, list[Any]]:
        if isinstance(data.prompt_column, list):
            parts = [column_list(ds, c) for c in data.prompt_column]
            for i, (column, values) in enumerate(zip(data.prompt_column, parts)):
                row = next((r for r, v in enumerate(values) if not isinstance(v, str) and not is_missing_value(v)), None)
                if row is not None:
                    raise UserError(f"data.prompt_column[{i}] {column!r} of split {split!r} holds non-text values "
                                    f"(row {row}: {type(values[row]).__name__} {values[row]!r:.40}); name columns "
                                    "of texts")
            return {"prompt": join_prompt_parts(zip(*parts)), "completion": column_list(ds, data.completion_column)}
        if data.prompt_column is not None:
            return {"prompt": column_list(ds, data.prompt_column),
                    "completion": column_list(ds, data.completion_column)}
        return {"text": column_list(ds, data.text_column)}

    def prepare_tokenizer(self, tokenizer: Any) -> Any:
        """A tokenizer without a padding token pads with EOS (the labels of padding are
        ignored, so the model still learns its EOS)."""
        if tokenizer.eos_token is None:
            raise UserError(f"model.name_or_path {getattr(tokenizer, 'name_or_path', '?')!r} has a tokenizer without "
                            "an EOS token; task.type causal-lm ends every example with it: choose a model whose "
                            "tokenizer has one")
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        return tokenizer

    def uses_chat_template(self, tokenizer: Any) -> bool:
        """Whether prompts are rendered with the tokenizer's chat template (``task.chat_template``)."""
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if self.settings.chat_template is True and not has_template:
            name = getattr(tokenizer, "name_or_path", "?")
            raise UserError(f"task.chat_template is true but the tokenizer of {name!r} has no chat template "
                            "(chat_template.jinja or tokenizer_config.json's chat_template); set task.chat_template "
                            "to null or false, or use a model that ships one")
        return has_template and self.settings.chat_template is not False

    def build_sequences(self, tokenizer: Any, inputs: dict[str, list[Any]]) -> tuple[list[list[int]], list[list[int]]]:
        """Each example's token ids, ending with EOS, and its labels (the prompt's ignored)."""
        eos = tokenizer.eos_token_id
        if "prompt" not in inputs:
            encoded = tokenizer(inputs["text"], verbose=False)["input_ids"]
            ids = [row if row and row[-1] == eos else [*row, eos] for row in encoded]
            return ids, [list(row) for row in ids]
        prompts = inputs["prompt"]
        if self.uses_chat_template(tokenizer):
            rendered = [tokenizer.apply_chat_template(build_user_turn(p), add_generation_prompt=True, tokenize=False)
                        for p in prompts]
            # The template writes the special tokens itself (as the pipeline tokenizes a chat).
            prompt_ids = tokenizer(rendered, add_special_tokens=False, verbose=False)["input_ids"]
        else:
            prompt_ids = tokenizer(prompts, verbose=False)["input_ids"]
        completion_ids = tokenizer(inputs["completion"], add_special_tokens=False, verbose=False)["input_ids"]
        ids = [[*p, *c, eos] for p, c in zip(prompt_ids, completion_ids)]
        labels = [[IGNORED_LABEL] * len(p) + [*c, eos] for p, c in zip(prompt_ids, completion_ids)]
        return ids, labels

    def tokenize(self, tokenizer: Any, examples: Any, data: Any) -> dict[str, list[Any]]:
        """``input_ids``, ``attention_mask`` and ``labels``: one row per example, or per block
        with ``task.packing``."""
        ids, labels = self.build_sequences(tokenizer, examples.inputs)
        if self.settings.packing:
            columns = group_into_blocks({"input_ids": ids, "labels": labels}, data.max_length)
        else:
            columns = {"input_ids": [row[:data.max_length] for row in ids],
                       "labels": [row[:data.max_length] for row in labels]}
            cut = [len(row) - data.max_length for row in ids if len(row) > data.max_length]
            if cut:
                total = sum(len(row) for row in ids)
                logger.warning("%d of %d examples are longer than data.max_length %d: %d of the split's %d tokens (%.0f%%) are "
                               "cut off, and those examples end without EOS (the model learns no stop after them); "
                               "raise data.max_length, or set task.packing: true (every token trains)",
                               len(cut), len(ids), data.max_length, sum(cut), total, 100 * sum(cut) / total)
            lost = sum(1 for row in columns["labels"] if all(t == IGNORED_LABEL for t in row))
            if lost:
                logger.warning("%d of %d examples have no completion token within data.max_length %d (a long prompt); "
                               "they train nothing: raise data.max_length, or set task.packing: true",
                               lost, len(ids), data.max_length)
        columns["attention_mask"] = [[1] * len(row) for row in columns["input_ids"]]
        if data.pad_to_max_length:
            for row, mask, target in zip(columns["input_ids"], columns["attention_mask"], columns["labels"]):
                missing = data.max_length - len(row)
                row += [tokenizer.pad_token_id] * missing
                mask += [0] * missing
                target += [IGNORED_LABEL] * missing
        return columns

    def build_collator(self, tokenizer: Any) -> Any:
        from transformers import DataCollatorForSeq2Seq

        # Pads labels with IGNORED_LABEL beside the inputs; it needs no encoder-decoder model
        # (decoder_input_ids are made only when it is given one).
        return DataCollatorForSeq2Seq(tokenizer, label_pad_token_id=IGNORED_LABEL)

    # --- serving -------------------------------------------------------------------------
    @classmethod
    def build_serving_settings(cls, data: dict[str, Any]) -> dict[str, Any]:
        prompt_column = data.get("prompt_column")
        if not prompt_column:
            # Trained on plain text: serving must not wrap inputs in the tokenizer's chat template.
            return {"chat_template": False}
        if isinstance(prompt_column, list) and len(prompt_column) > 1:
            return {"prompt_columns": list(prompt_column)}
        return {}

    def read_table_texts(self, columns: dict[str, list[Any]]) -> list[Any] | None:
        """A table of the prompt columns the model was trained on, joined as training did."""
        names = self.settings.prompt_columns
        if not names or not all(name in columns for name in names):
            return None
        return join_prompt_parts(zip(*(columns[name] for name in names)))

    def build_pipeline(self, model_dir: str, *, device: str = "cpu") -> Any:
        pipe = super().build_pipeline(model_dir, device=device)
        self.prepare_tokenizer(pipe.tokenizer)  # batches need a padding token
        # A decoder generates after the last position: padding goes on the left.
        pipe.tokenizer.padding_side = "left"
        return pipe

    def run_predict(self, pipe: Any, inputs: list[Any], *, batch_size: int = 32,
                    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                    temperature: float = DEFAULT_TEMPERATURE) -> list[dict[str, Any]]:
        """The continuation of each prompt (rendered as in training): greedy at temperature 0,
        sampled above it."""
        check_text_inputs(self, inputs)
        prompts = [build_user_turn(t) for t in inputs] if self.uses_chat_template(pipe.tokenizer) else list(inputs)
        sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
        results = pipe(prompts, batch_size=batch_size, max_new_tokens=max_new_tokens, return_full_text=False,
                       **sampling)
        return [self.format_prediction(r) for r in results]

    def format_prediction(self, result: Any) -> dict[str, Any]:
        if isinstance(result, list):  # one generated sequence per input
            result = result[0]
        return {"generated_text": result["generated_text"]}

    def format_prediction_line(self, prediction: dict[str, Any]) -> str:
        return prediction["generated_text"].replace("\t", " ").replace("\n", "\\n")

    def build_usage_example(self, text_pair: bool = False) -> list[str]:
        lines = ["from transformers import pipeline", f'gen = pipeline("{self.pipeline_task}", model="<this directory>")']
        plain = 'gen("the sky is", max_new_tokens=64, return_full_text=False)  # [{"generated_text": ...}]'
        chat = ('gen([[{"role": "user", "content": "What color is the sky?"}]], max_new_tokens=64, '
                'return_full_text=False)')
        if self.settings.chat_template is False:  # trained on text as it is
            return [*lines, plain]
        if self.settings.chat_template:  # each prompt was a user turn of the chat template
            return [*lines, "# prompts were user turns of the tokenizer's chat template: pass a chat", chat]
        return [*lines, "# prompts were user turns of the tokenizer's chat template when it has one (then pass a "
                        "chat), else given as they are", chat, plain]
