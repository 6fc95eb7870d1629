"""Spaces of one's own: the choice space (sampling, one mutation, JSON, its errors by choice) and a
registered space that resumes from its journal."""

import json
import random

import pytest


def test_a_choice_space_samples_mutates_once_and_round_trips_through_json_and_its_config():
    from searchspace import ChoiceSpace, space_from_config

    space = ChoiceSpace({"depth": [2, 4, 8], "width": [16, 32, 64], "act": ["relu", "gelu"], "bias": [True]})
    rng = random.Random(3)
    genotype = space.sample(rng)
    for _ in range(50):
        child, description = space.mutate(genotype, rng)
        changed = [n for n in space.choices if child[n] != genotype[n]]
        assert len(changed) == 1 and changed[0] != "bias" and description.startswith(changed[0] + ": ")
        genotype = child
    assert space.genotype_from_json(json.loads(json.dumps(genotype.to_json()))) == genotype
    assert genotype.key() == space.genotype(dict(reversed(list(genotype.values.items())))).key()
    assert space_from_config(json.loads(json.dumps(space.to_config()))) == space
    with pytest.raises(TypeError):
        genotype.values["depth"] = 3
    with pytest.raises(AttributeError):
        genotype.extra = 1
    assert space.size() == 18


@pytest.mark.parametrize("choices, message", [
    ({"depth": []}, "choice 'depth': needs a non-empty list"),
    ({"depth": [1, 1]}, "choice 'depth': values repeat"),
    ({"depth": [[1], 2]}, "choice 'depth': values must be JSON scalars"),
    ({"depth": [2]}, "at least one choice needs two or more values"),
])
def test_a_bad_choice_space_names_the_choice(choices, message):
    from searchspace import ChoiceSpace

    with pytest.raises(ValueError, match=message):
        ChoiceSpace(choices)


def test_a_choice_genotype_off_its_space_names_the_choice():
    from searchspace import ChoiceSpace

    space = ChoiceSpace({"depth": [2, 4], "act": ["relu", "gelu"]})
    with pytest.raises(ValueError, match="choice 'depth': 3 is not one of"):
        space.genotype_from_json({"depth": 3, "act": "relu"})
    with pytest.raises(ValueError, match="choice 'act': missing"):
        space.genotype_from_json({"depth": 2})
    with pytest.raises(ValueError, match="choice 'lr': not in this space"):
        space.genotype_from_json({"depth": 2, "act": "relu", "lr": 0.1})
    assert space.genotype({"depth": 2, "act": "relu"}) != space.genotype({"depth": 4, "act": "relu"})


def test_a_registered_space_of_ones_own_resumes_and_names_clash_are_refused(tmp_path):
    import doctest

    import searchspace
    from evolution import RegularizedEvolution, resume

    runner = doctest.DocTestRunner()
    for example in doctest.DocTestFinder().find(searchspace):  # the protocol's own example runs
        runner.run(example, clear_globs=False)
    assert runner.failures == 0 and runner.tries >= 8
    bit_space = searchspace.SPACES["bits"]
    search = RegularizedEvolution(bit_space(), population_size=3, sample_size=2, seed=1,
                                  journal_path=str(tmp_path / "j.jsonl"))
    for _ in range(6):
        trial = search.ask()
        search.tell(trial.trial_id, {"val_accuracy": sum(trial.genotype.bits) / 8})
    search.close()
    again = resume(str(tmp_path / "j.jsonl"), read_only=True)
    assert [t.genotype for t in again.trials.values()] == [t.genotype for t in search.trials.values()]
    del searchspace.SPACES["bits"]  # another process, which never registered it, reads the search
    read = resume(str(tmp_path / "j.jsonl"), read_only=True)
    assert [t.genotype.to_json() for t in read.trials.values()] == [t.genotype.to_json() for t in search.trials.values()]
    assert read.best()[0].trial_id == search.best()[0].trial_id
    with pytest.raises(Exception, match="unknown 'bits'.*register_space"):
        resume(str(tmp_path / "j.jsonl"))  # but cannot go on with it
    searchspace.register_space(bit_space)
    with pytest.raises(ValueError, match="the name 'choice' is taken by ChoiceSpace"):
        searchspace.register_space(bit_space, name="choice")
    with pytest.raises(ValueError, match="unknown 'nope'.*register_space"):
        searchspace.space_from_config({"name": "nope"})


def test_a_space_whose_json_has_tuples_resumes(tmp_path):
    import dataclasses

    import searchspace
    from evolution import RegularizedEvolution, resume
    from experiments.search.driver import SearchConfig, open_search

    @dataclasses.dataclass(frozen=True)
    class Pair:
        v: tuple

        def key(self):
            return str(self.v)

        def to_json(self):
            return self.v  # a tuple: the journal gives back a list

    @dataclasses.dataclass(frozen=True)
    class PairSpace:
        shape: tuple = (3, 3)
        name = "tuple_pairs"

        def sample(self, rng):
            return Pair(tuple(rng.randrange(n) for n in self.shape))

        def mutate(self, parent, rng):
            return Pair((parent.v[1], parent.v[0])), "swapped"

        def genotype_from_json(self, data):
            return Pair(tuple(data))

        def to_config(self):
            return {"name": self.name, "shape": self.shape}

    searchspace.register_space(PairSpace)
    path = str(tmp_path / "journal.jsonl")
    search = RegularizedEvolution(PairSpace(), population_size=2, sample_size=1, seed=0, journal_path=path,
                                  initial=[Pair((1, 2))])
    for _ in range(5):
        trial = search.ask()
        search.tell(trial.trial_id, {"val_accuracy": float(sum(trial.genotype.v))})
    search.close()
    assert [t.genotype for t in resume(path, read_only=True).trials.values()] == list(
        t.genotype for t in search.trials.values())
    config = SearchConfig(output_dir=str(tmp_path / "s"), space=PairSpace().to_config(), initial=((1, 2),),
                          trainable="tests.pairs", population_size=2, sample_size=1)
    open_search(config).close()
    open_search(config).close()  # the same search, not "a different one"
