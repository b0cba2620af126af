"""Whether a model's loss is normalised by the Trainer's ``num_items_in_batch``.

The Trainer (transformers 5) takes a model whose ``forward`` accepts ``**kwargs`` to compute
its loss as a sum over the label tokens of all micro-batches and all workers divided by
``num_items_in_batch``: it then skips the division by ``gradient_accumulation_steps`` and
multiplies the loss by the number of workers. Many heads accept ``**kwargs`` and still return
a plain mean (BERT's classification, token-classification and masked-LM heads, the Llama-style
sequence classifier), so with gradient accumulation or several workers their training loss and
gradients came out x GA x workers (``max_grad_norm`` clipping that much harder) and a
multi-worker ``eval_loss`` x workers (huggingface/transformers#47688). Such a model is trained
as the Trainer trains a model without loss kwargs: a mean per micro-batch divided by GA.
"""

from __future__ import annotations

import ast
import inspect
import logging
import textwrap
from typing import Any

logger = logging.getLogger(__name__)


def build_unwrapped_model(model: Any) -> Any:
    """The transformers model under a peft wrapper (the class whose ``forward`` computes the loss)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def uses_items_count(model: Any) -> bool:
    """True when the model's ``forward`` hands the Trainer's loss kwargs to its loss: it
    names ``num_items_in_batch``, or passes ``**kwargs`` on to ``self.loss_function``
    (transformers' token-summing losses). Read from the source of ``forward``; a source that
    cannot be read counts as False, which costs at most the exact token weighting across
    micro-batches, never a wrongly scaled loss."""
    forward = type(build_unwrapped_model(model)).forward
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(forward)))
    except (OSError, TypeError, SyntaxError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "num_items_in_batch":
            return True
        if isinstance(node, ast.keyword) and node.arg == "num_items_in_batch":
            return True
        if isinstance(node, ast.Constant) and node.value == "num_items_in_batch":  # kwargs.get("...")
            return True
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "loss_function" and any(k.arg is None for k in node.keywords)):
            return True
    return False


def set_loss_kwargs_path(trainer: Any) -> Any:
    """Turn off the Trainer's loss-kwargs path for a model whose loss ignores it (see the
    module's docstring); a model that uses it keeps HF's exact token weighting."""
    if trainer.model_accepts_loss_kwargs and not uses_items_count(trainer.model):
        trainer.model_accepts_loss_kwargs = False
        logger.debug("%s returns a mean loss: trained without loss kwargs",
                     type(build_unwrapped_model(trainer.model)).__name__)
    return trainer
