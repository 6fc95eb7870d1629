"""evolution/surrogate.py: the features of a genotype and the additive model that ranks children."""

import random

import pytest

from evolution.surrogate import features, fit_additive
from searchspace import ChoiceSpace, NasBench201Space


def test_features_are_one_token_per_position():
    cell = NasBench201Space().genotype_from_json({"arch": "|nor_conv_3x3~0|+|skip_connect~0|none~1|+|"
                                                          "avg_pool_3x3~0|nor_conv_1x1~1|none~2|"})
    assert features(cell) == ["0->1=nor_conv_3x3", "0->2=skip_connect", "1->2=none", "0->3=avg_pool_3x3",
                              "1->3=nor_conv_1x1", "2->3=none"]
    assert features(ChoiceSpace({"depth": [2, 4], "width": [8, 16]}).genotype({"depth": 4, "width": 8})) == \
        ["depth=4", "width=8"]  # a genotype without features of its own: its JSON's leaves by path


def test_the_additive_model_ranks_an_additive_landscape_and_ignores_unseen_tokens():
    rng = random.Random(0)
    effect = {(p, v): rng.gauss(0, 1) for p in range(5) for v in range(4)}
    value = lambda cells: sum(effect[(p, v)] for p, v in enumerate(cells))  # noqa: E731
    seen = [[rng.randrange(4) for _ in range(5)] for _ in range(80)]
    predict = fit_additive([[f"{p}={v}" for p, v in enumerate(c)] for c in seen], [value(c) for c in seen],
                           ridge=0.01, sweeps=40)
    fresh = [[rng.randrange(4) for _ in range(5)] for _ in range(40)]
    predicted = [predict([f"{p}={v}" for p, v in enumerate(c)]) for c in fresh]
    assert all(abs(p - value(c)) < 0.05 for p, c in zip(predicted, fresh))
    assert predict(["9=never"]) == pytest.approx(sum(value(c) for c in seen) / len(seen))
    with pytest.raises(ValueError, match="surrogate: 0 rows"):
        fit_additive([], [])
