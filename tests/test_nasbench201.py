import random

import pytest

from searchspace import NasBench201Genotype, NasBench201Space, space_from_config

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"


def test_string_round_trip():
    genotype = NasBench201Genotype.from_string(ARCH)
    assert str(genotype) == ARCH == genotype.key()
    assert genotype.ops[2] == "avg_pool_3x3"  # edge 1->2
    assert NasBench201Genotype.from_json(genotype.to_json()) == genotype


@pytest.mark.parametrize(
    "text, message",
    [
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|", "3 node groups"),
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~2|+|none~0|none~1|none~2|", "from node 1"),
        ("|conv_9x9~0|+|none~0|none~1|+|none~0|none~1|none~2|", "edge 0->1: unknown op 'conv_9x9'"),
        ("|none~0|+|none~0|+|none~0|none~1|none~2|", "node 2 needs 2 edges"),
    ],
)
def test_malformed_strings_say_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=message):
        NasBench201Genotype.from_string(text)


def test_mutation_changes_one_edge():
    space = NasBench201Space()
    rng = random.Random(0)
    for _ in range(500):
        parent = space.sample(rng)
        child, description = space.mutate(parent, rng)
        changed = [i for i in range(6) if parent.ops[i] != child.ops[i]]
        assert len(changed) == 1, description


def test_space_covers_every_cell_and_round_trips_config():
    space = NasBench201Space()
    assert len({g.key() for g in space.all_genotypes()}) == 5**6
    assert space_from_config(space.to_config()) == space


def test_the_engine_runs_and_resumes_on_this_space(tmp_path):
    from evolution import RegularizedEvolution, resume
    from tests.conftest import run_fake

    path = str(tmp_path / "j.jsonl")
    algorithm = RegularizedEvolution(NasBench201Space(), population_size=10, sample_size=3, seed=0,
                                     journal_path=path)
    trials = run_fake(algorithm, 60)
    assert any(t.parent_id is not None for t in trials)
    assert all(isinstance(t.genotype, NasBench201Genotype) for t in trials)
    algorithm.close()
    assert resume(path).trials == algorithm.trials
