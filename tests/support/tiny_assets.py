"""Offline test assets: a tiny BERT built from a config, a WordPiece tokenizer trained on the
fly, and a synthetic sentiment data set in the IMDB layout (train/test parquet, text/label)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

POSITIVE = ["great", "wonderful", "superb", "loved", "brilliant", "moving", "fun", "best", "charming", "delight"]
NEGATIVE = ["awful", "boring", "terrible", "hated", "dull", "worst", "mess", "waste", "bland", "painful"]
NEUTRAL = ["movie", "film", "plot", "actor", "scene", "story", "the", "a", "was", "and", "this", "it",
           "director", "cast", "ending", "music", "really", "quite", "very", "some"]


def build_sentiment_rows(n: int, seed: int, noise: float = 0.15) -> dict[str, list]:
    """Reviews whose label follows their sentiment words, with ``noise`` of labels flipped so
    accuracy depends on how well a trial trains."""
    rng = random.Random(seed)
    texts, labels = [], []
    for i in range(n):
        label = i % 2
        words = [rng.choice(NEUTRAL) for _ in range(rng.randint(8, 20))]
        cue = POSITIVE if label else NEGATIVE
        other = NEGATIVE if label else POSITIVE
        for _ in range(rng.randint(1, 3)):
            words.insert(rng.randrange(len(words)), rng.choice(cue))
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), rng.choice(other))
        if rng.random() < noise:
            label = 1 - label
        texts.append(" ".join(words))
        labels.append(label)
    return {"text": texts, "label": labels}


def write_sentiment_dataset(root: Path, n_train: int = 256, n_eval: int = 128) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(build_sentiment_rows(n_train, seed=1)), root / "train.parquet")
    pq.write_table(pa.table(build_sentiment_rows(n_eval, seed=2)), root / "test.parquet")
    return root


def save_seeded_model(model_class, config, root: Path, seed: int = 0) -> None:
    """Initialise ``model_class(config)`` from its own seeded generator and save it: a test's
    model must not take its weights from whatever the process drew before (a learning-quality
    assertion then passes or fails by test order)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model_class(config).save_pretrained(root)


def write_tiny_bert(root: Path) -> Path:
    """Save a 2-layer, 32-wide BERT and its tokenizer (trained here) to ``root``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    root.mkdir(parents=True, exist_ok=True)
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    corpus = build_sentiment_rows(500, seed=0)["text"] + ["i love this movie", "i hate this movie"]
    tok.train_from_iterator(corpus, trainers.WordPieceTrainer(vocab_size=200, special_tokens=special))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    fast = BertTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                             cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    fast.save_pretrained(root)
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=512)
    save_seeded_model(BertForSequenceClassification, config, root)
    return root


def write_tiny_headless_bert(root: Path, words: list[str]) -> Path:
    """Save a 1-layer BERT without a task head (as a pretrained base model is) and a WordPiece
    tokenizer whose vocabulary is the special tokens plus ``words``. The vocabulary path goes
    in positionally: transformers 5 ignores ``vocab_file=`` and makes a 5-token vocabulary."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizerFast(str(root / "vocab.txt"))
    assert len(tokenizer) == len(vocab), "the tokenizer did not read the vocabulary"
    tokenizer.save_pretrained(root)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=64)
    save_seeded_model(BertModel, config, root)
    return root


def write_tiny_bert_mlm(root: Path, words: list[str]) -> Path:
    """Save a 1-layer BERT with its masked-LM head (``BertForMaskedLM``, as a pretrained MLM
    checkpoint is) and a WordPiece tokenizer of the special tokens plus ``words``."""
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    root.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizerFast(str(root / "vocab.txt"))  # positionally: see write_tiny_headless_bert
    assert len(tokenizer) == len(vocab), "the tokenizer did not read the vocabulary"
    tokenizer.save_pretrained(root)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=64)
    save_seeded_model(BertForMaskedLM, config, root)
    return root


#: Words of the tiny Llama's vocabulary (``write_tiny_llama``): the sentiment words, the chat
#: template's words and those of ``build_color_rows``.
COLORS = {"sky": "blue", "grass": "green", "snow": "white", "sun": "yellow", "coal": "black", "blood": "red",
          "sea": "blue", "leaf": "green", "milk": "white", "lemon": "yellow", "night": "black", "rose": "red"}
LLAMA_WORDS = sorted({*NEUTRAL, *POSITIVE, *NEGATIVE, *COLORS, *COLORS.values(), "user", "assistant", ":", "?",
                      "question", "answer", "what", "color", "is", "of"})
#: A chat template in the usual shape: the turns, then the assistant's cue when one is asked for.
TINY_CHAT_TEMPLATE = ("{{ bos_token }}{% for message in messages %}{{ message['role'] }} : {{ message['content'] }} "
                      "{% endfor %}{% if add_generation_prompt %}assistant :{% endif %}")
LLAMA_SPECIAL = ["<unk>", "<s>", "</s>", "<pad>"]


def build_tiny_llama_tokenizer(*, chat_template: bool = False, pad_token: bool = True, words: list[str] = LLAMA_WORDS):
    """A fast word-level tokenizer (lowercased, split on whitespace and punctuation) with
    ``<s>`` added before every text, ``</s>`` as EOS, ``<unk>`` and, with ``pad_token``,
    ``<pad>``; with ``chat_template`` a template that renders turns as ``role : content``."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(LLAMA_SPECIAL + [w for w in words if w not in LLAMA_SPECIAL])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                       special_tokens=[("<s>", vocab["<s>"])])
    tok.decoder = decoders.WordPiece(prefix="##")  # joins the words with spaces
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>" if pad_token else None)
    if chat_template:
        fast.chat_template = TINY_CHAT_TEMPLATE
    return fast


def write_tiny_llama(root: Path, *, chat_template: bool = False, pad_token: bool = True) -> Path:
    """Save a 2-layer, 32-wide Llama (``LlamaForCausalLM`` from a config) and its word-level
    tokenizer (``build_tiny_llama_tokenizer``) to ``root``, as a hub model is."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    root.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tiny_llama_tokenizer(chat_template=chat_template, pad_token=pad_token)
    tokenizer.save_pretrained(root)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    save_seeded_model(LlamaForCausalLM, config, root)
    return root


def build_color_rows(n: int, seed: int) -> dict[str, list]:
    """``prompt`` / ``completion`` pairs asking the color of a thing (``COLORS``), with a few
    filler words in the prompt: the completion follows from one word of the prompt."""
    rng = random.Random(seed)
    things = sorted(COLORS)
    prompts, completions = [], []
    for _ in range(n):
        thing = rng.choice(things)
        filler = " ".join(rng.choice(NEUTRAL) for _ in range(rng.randint(0, 3)))
        prompts.append(f"question : {filler} what is the color of the {thing} ? answer :".replace("  ", " "))
        completions.append(COLORS[thing])
    return {"prompt": prompts, "completion": completions}


def build_two_weight_classifier():
    """A 2-in, 2-class linear model with the Trainer's loss contract: for tests of what the
    Trainer does around training (evaluations, saves, logs), where a transformer is only cost."""
    import torch

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 2)

        def forward(self, x, labels=None):
            logits = self.linear(x)
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

    return Classifier()


def build_two_weight_rows(n: int) -> list[dict]:
    """Rows for :func:`build_two_weight_classifier`: the label is the first input."""
    import torch

    return [{"x": torch.tensor([float(i % 2), 1.0]), "labels": i % 2} for i in range(n)]
