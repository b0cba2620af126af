"""Offline data sets for the task tests (tests/integration/test_tasks.py): one small, learnable
set per task, written in the file format and split layout each test reads.

Every label follows words of the text, as in ``tiny_assets.build_sentiment_rows``: the cue
words (``POSITIVE``, ``NEGATIVE``, people words) are whole tokens of the tiny WordPiece
tokenizer, so a 2-layer BERT learns them in an epoch or two. Entity words (names, places) are
split into word pieces; their tags are learnable from the words and their context.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tiny_assets import NEGATIVE, NEUTRAL, POSITIVE

#: Words of the multi-label set's "people" label (removed from its filler words).
PEOPLE = ["actor", "director", "cast"]
FILLER = [w for w in NEUTRAL if w not in PEOPLE]


def _sentence(rng: random.Random, low: int = 5, high: int = 12, words: list[str] = FILLER) -> list[str]:
    return [rng.choice(words) for _ in range(rng.randint(low, high))]


def _insert(rng: random.Random, words: list[str], cues: list[str], count: int) -> None:
    for _ in range(count):
        words.insert(rng.randrange(len(words) + 1), rng.choice(cues))


# --- text-classification, sentence pairs, 3 classes by name ----------------------------------
#: ``model.id2label`` of the pair data set.
PAIR_ID2LABEL = {0: "negative", 1: "neutral", 2: "positive"}
#: The neutral class's own cue words (left out of the pair set's filler).
MILD = ["quite", "some", "really", "very"]
PAIR_CUES = {0: NEGATIVE, 1: MILD, 2: POSITIVE}
PAIR_FILLER = [w for w in FILLER if w not in MILD]


def build_pair_rows(n: int, seed: int, noise: float = 0.05) -> list[dict]:
    """``premise`` / ``hypothesis`` pairs labelled ``negative``, ``neutral`` or ``positive``
    by the cue words the pair holds (negative words, mild words, positive words), spread over
    both sides; ``noise`` of the labels are redrawn at random."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = i % 3
        premise, hypothesis = _sentence(rng, 3, 7, PAIR_FILLER), _sentence(rng, 2, 5, PAIR_FILLER)
        for _ in range(rng.randint(2, 4)):
            _insert(rng, rng.choice([premise, hypothesis]), PAIR_CUES[label], 1)
        if rng.random() < noise:
            label = rng.randrange(3)
        rows.append({"premise": " ".join(premise), "hypothesis": " ".join(hypothesis),
                     "label": PAIR_ID2LABEL[label]})
    return rows


def write_pair_jsonl(root: Path, n_train: int = 300, n_validation: int = 90, n_test: int = 90) -> Path:
    """train.jsonl, validation.jsonl and test.jsonl (premise, hypothesis, label as a name)."""
    root.mkdir(parents=True, exist_ok=True)
    for split, n, seed in (("train", n_train, 11), ("validation", n_validation, 12), ("test", n_test, 13)):
        with open(root / f"{split}.jsonl", "w") as f:
            for row in build_pair_rows(n, seed):
                f.write(json.dumps(row) + "\n")
    return root


# --- regression ------------------------------------------------------------------------------
def build_regression_rows(n: int, seed: int, noise: float = 0.1) -> list[dict]:
    """``text`` with a float ``score``: positive minus negative cue words, plus a little noise."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        words = _sentence(rng)
        n_pos, n_neg = rng.randint(0, 3), rng.randint(0, 3)
        _insert(rng, words, POSITIVE, n_pos)
        _insert(rng, words, NEGATIVE, n_neg)
        rows.append({"text": " ".join(words), "score": round(float(n_pos - n_neg) + rng.gauss(0.0, noise), 4)})
    return rows


def write_regression_csv(root: Path, n_train: int = 320, n_test: int = 80) -> Path:
    """train.csv and test.csv (text, score): no validation split, so trials select on a hold-out."""
    root.mkdir(parents=True, exist_ok=True)
    for split, n, seed in (("train", n_train, 21), ("test", n_test, 22)):
        with open(root / f"{split}.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["text", "score"])
            writer.writeheader()
            writer.writerows(build_regression_rows(n, seed))
    return root


# --- multi-label, one 0/1 column per label ---------------------------------------------------
#: The 0/1 columns of the multi-label set (``data.label_columns``), in id order.
MULTI_LABEL_COLUMNS = ["praise", "complaint", "people"]


def build_multi_label_rows(n: int, seed: int) -> dict[str, list]:
    """``text`` and one 0/1 column per label: praise (positive words), complaint (negative
    words), people (actor, director, cast). Any number of labels per row, none included."""
    rng = random.Random(seed)
    columns: dict[str, list] = {"text": [], **{c: [] for c in MULTI_LABEL_COLUMNS}}
    for _ in range(n):
        words = _sentence(rng, 3, 8)
        flags = [int(rng.random() < 0.5) for _ in MULTI_LABEL_COLUMNS]
        for flag, cues in zip(flags, (POSITIVE, NEGATIVE, PEOPLE)):
            if flag:
                _insert(rng, words, cues, rng.randint(2, 3))
        columns["text"].append(" ".join(words))
        for column, flag in zip(MULTI_LABEL_COLUMNS, flags):
            columns[column].append(flag)
    return columns


def write_multi_label_parquet(root: Path, n_train: int = 400, n_test: int = 80) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for split, n, seed in (("train", n_train, 31), ("test", n_test, 32)):
        pq.write_table(pa.table(build_multi_label_rows(n, seed)), root / f"{split}.parquet")
    return root


# --- token-classification, CoNLL style -------------------------------------------------------
#: ``model.id2label`` of the NER set (IOB2 tags, CoNLL order).
NER_ID2LABEL = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}
FIRST_NAMES = ["anna", "maria", "paul", "peter", "sarah", "thomas", "laura", "daniel"]
LAST_NAMES = ["smith", "miller", "brown", "wilson", "taylor", "moore"]
PLACES = [["paris"], ["london"], ["berlin"], ["rome"], ["new", "delhi"], ["buenos", "aires"], ["san", "diego"]]
PERSON_CUES = ["met", "with", "called"]
PLACE_CUES = ["in", "to", "from"]


def _entity_tags(words: list[str], begin: int) -> list[int]:
    return [begin] + [begin + 1] * (len(words) - 1)


def build_ner_rows(n: int, seed: int) -> dict[str, list]:
    """``tokens`` (a list of words) and ``ner_tags`` (ids of ``NER_ID2LABEL``): sentences of
    filler words with one or two people (first name, often a last name) and places (one or
    two words), each after a cue word."""
    rng = random.Random(seed)
    tokens, tags = [], []
    for _ in range(n):
        words, row_tags = [], []
        for _ in range(rng.randint(1, 3)):
            filler = _sentence(rng, 1, 3, NEUTRAL + POSITIVE)
            words += filler
            row_tags += [0] * len(filler)
            if rng.random() < 0.5:
                person = [rng.choice(FIRST_NAMES)] + ([rng.choice(LAST_NAMES)] if rng.random() < 0.6 else [])
                words += [rng.choice(PERSON_CUES), *person]
                row_tags += [0, *_entity_tags(person, 1)]
            else:
                place = list(rng.choice(PLACES))
                words += [rng.choice(PLACE_CUES), *place]
                row_tags += [0, *_entity_tags(place, 3)]
        tokens.append(words)
        tags.append(row_tags)
    return {"tokens": tokens, "ner_tags": tags}


def write_ner_parquet(root: Path, n_train: int = 300, n_test: int = 80) -> Path:
    """train.parquet and test.parquet (tokens: list<string>, ner_tags: list<int64>)."""
    root.mkdir(parents=True, exist_ok=True)
    for split, n, seed in (("train", n_train, 41), ("test", n_test, 42)):
        pq.write_table(pa.table(build_ner_rows(n, seed)), root / f"{split}.parquet")
    return root
