import json
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searchspace import Block, Cell, NasNetGenotype, NasNetSpace, make_cell, space_from_config
from searchspace.nasnet import unused_outputs
from searchspace.ops import NASNET_SEARCH_OPS
from searchspace.references import AMOEBANET_D, REFERENCES, reference

seeds = st.integers(min_value=0, max_value=2**32 - 1)
SPACE = NasNetSpace()


def elements(genotype):
    """(cell, block, element) -> (input, op) for every element of a genotype."""
    return {
        (name, b, e): (block.inputs[e], block.ops[e])
        for name in ("normal", "reduction")
        for b, block in enumerate(genotype.cell(name).blocks)
        for e in (0, 1)
    }


def test_amoebanet_d_is_exact():
    n, r = AMOEBANET_D.normal, AMOEBANET_D.reduction
    assert [(b.ops[0], b.inputs[0], b.ops[1], b.inputs[1]) for b in n.blocks] == [
        ("conv_1x1", 1, "max_pool_3x3", 1),
        ("none", 1, "conv_1x7_7x1", 0),
        ("conv_1x1", 0, "conv_1x7_7x1", 0),
        ("max_pool_3x3", 2, "none", 2),
        ("avg_pool_3x3", 1, "conv_1x1", 5),
    ]
    assert n.concat == (0, 3, 4, 6)
    assert [(b.ops[0], b.inputs[0], b.ops[1], b.inputs[1]) for b in r.blocks] == [
        ("max_pool_2x2", 0, "max_pool_3x3", 0),
        ("none", 2, "conv_3x3", 1),
        ("conv_1x7_7x1", 2, "max_pool_3x3", 2),
        ("none", 3, "max_pool_2x2", 1),
        ("avg_pool_3x3", 2, "conv_1x1", 3),
    ]
    assert r.concat == (4, 5, 6)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_references_round_trip_and_load_by_name(name):
    genotype = reference(name)
    assert NasNetGenotype.from_json(json.loads(json.dumps(genotype.to_json()))) == genotype
    # Every block output of a published cell is either consumed or concatenated.
    for cell in (genotype.normal, genotype.reduction):
        assert set(unused_outputs(cell.blocks)) <= set(cell.concat)


def test_unknown_reference_names_the_known_ones():
    with pytest.raises(ValueError, match="amoebanet_d"):
        reference("amoebanet_z")


def _with_block(cell, index, block):
    blocks = list(cell.blocks)
    blocks[index] = block
    return Cell(tuple(blocks), cell.concat)


def test_bad_op_names_cell_block_and_field():
    bad = _with_block(AMOEBANET_D.reduction, 3, Block((3, 1), ("none", "sep_conv_9x9")))
    with pytest.raises(ValueError, match=r"reduction cell, block 3, ops\[1\]: unknown op 'sep_conv_9x9'"):
        NasNetGenotype(AMOEBANET_D.normal, bad)


def test_forward_input_names_cell_block_and_field():
    bad = _with_block(AMOEBANET_D.normal, 1, Block((4, 0), ("none", "none")))
    with pytest.raises(ValueError, match=r"normal cell, block 1, inputs\[0\]: 4 .*allowed 0\.\.2"):
        NasNetGenotype(bad, AMOEBANET_D.reduction)


def test_bad_concat_is_rejected():
    with pytest.raises(ValueError, match="normal cell, concat"):
        NasNetGenotype(Cell(AMOEBANET_D.normal.blocks, (9,)), AMOEBANET_D.reduction)
    with pytest.raises(ValueError, match="repeats"):
        NasNetGenotype(Cell(AMOEBANET_D.normal.blocks, (3, 3)), AMOEBANET_D.reduction)


def test_genotype_is_frozen():
    with pytest.raises(AttributeError):
        AMOEBANET_D.normal = AMOEBANET_D.reduction  # type: ignore[misc]


@settings(max_examples=50, deadline=None)
@given(seeds)
def test_sampled_genotypes_are_valid_and_round_trip(seed):
    genotype = SPACE.sample(random.Random(seed))
    again = NasNetGenotype.from_json(json.loads(json.dumps(genotype.to_json())))
    assert again == genotype and again.key() == genotype.key()
    for cell in (genotype.normal, genotype.reduction):
        assert cell.concat == unused_outputs(cell.blocks)
        assert all(op in NASNET_SEARCH_OPS for b in cell.blocks for op in b.ops)


@settings(max_examples=50, deadline=None)
@given(seeds, st.integers(0, 4))
def test_key_is_invariant_to_swapping_a_blocks_elements(seed, index):
    genotype = SPACE.sample(random.Random(seed))
    block = genotype.normal.blocks[index]
    swapped = Block(block.inputs[::-1], block.ops[::-1])
    other = NasNetGenotype(_with_block(genotype.normal, index, swapped), genotype.reduction)
    assert other.key() == genotype.key()


def test_key_tells_different_genotypes_apart():
    keys = {SPACE.sample(random.Random(seed)).key() for seed in range(200)}
    assert len(keys) == 200


def test_string_form_is_one_readable_line():
    text = str(AMOEBANET_D)
    assert "\n" not in text
    assert "h2=conv_1x1(h1)+max_pool_3x3(h1)" in text and "out=concat(h4,h5,h6)" in text


@settings(max_examples=100, deadline=None)
@given(seeds)
def test_non_identity_mutation_changes_exactly_one_element(seed):
    rng = random.Random(seed)
    parent = SPACE.sample(rng)
    child, description = NasNetSpace(identity_prob=0.0).mutate(parent, rng)
    before, after = elements(parent), elements(child)
    changed = [k for k in before if before[k] != after[k]]
    assert len(changed) == 1, description
    (cell, b, e), = changed
    assert f"{cell} block {b} element {e}" in description
    for name in ("normal", "reduction"):
        assert child.cell(name).concat == unused_outputs(child.cell(name).blocks)


def test_mutation_distributions():
    rng = random.Random(1)
    parent = SPACE.sample(rng)
    space = NasNetSpace(identity_prob=0.05)
    kinds, cells, blocks = Counter(), Counter(), Counter()
    n = 20000
    for _ in range(n):
        child, description = space.mutate(parent, rng)
        if description == "identity":
            assert child == parent
            kinds["identity"] += 1
            continue
        kinds["op" if ": op " in description else "hidden"] += 1
        cells[description.split()[0]] += 1
        blocks[int(description.split()[2])] += 1
    assert abs(kinds["identity"] / n - 0.05) < 0.01
    assert abs(kinds["op"] / (n - kinds["identity"]) - 0.5) < 0.02
    assert abs(cells["normal"] / sum(cells.values()) - 0.5) < 0.02
    for b in range(5):
        assert abs(blocks[b] / sum(blocks.values()) - 0.2) < 0.02


def test_op_mutation_picks_uniformly_among_other_ops():
    rng = random.Random(2)
    block = Block((0, 1), ("none", "none"))
    cell = make_cell([block])
    parent = NasNetGenotype(cell, cell)
    space = NasNetSpace(num_blocks=1, identity_prob=0.0)
    new_ops = Counter()
    for _ in range(14000):
        child, description = space.mutate(parent, rng)
        if ": op " in description:
            new_ops[description.rsplit(" ", 1)[1]] += 1
    assert set(new_ops) == set(NASNET_SEARCH_OPS) - {"none"}
    expected = sum(new_ops.values()) / 7
    assert all(abs(c - expected) / expected < 0.1 for c in new_ops.values())


def test_identity_prob_one_always_copies():
    rng = random.Random(3)
    parent = SPACE.sample(rng)
    assert NasNetSpace(identity_prob=1.0).mutate(parent, rng) == (parent, "identity")


def test_sampling_is_uniform_over_inputs_and_ops():
    rng = random.Random(4)
    inputs, ops = Counter(), Counter()
    for _ in range(3000):
        block = SPACE.sample(rng).normal.blocks[2]  # inputs from h0..h3
        inputs.update(block.inputs)
        ops.update(block.ops)
    assert set(inputs) == {0, 1, 2, 3}
    assert max(inputs.values()) / min(inputs.values()) < 1.15
    assert set(ops) == set(NASNET_SEARCH_OPS)
    assert max(ops.values()) / min(ops.values()) < 1.2


def test_space_config_round_trip_and_validation():
    space = NasNetSpace(num_blocks=3, ops=("none", "sep_conv_3x3"), identity_prob=0.1)
    assert space_from_config(space.to_config()) == space
    with pytest.raises(ValueError, match="ops"):
        NasNetSpace(ops=("none", "warp_drive"))
    with pytest.raises(ValueError, match="space name"):
        space_from_config({"name": "darts"})


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["normal"]["blocks"][1].update(inputs=5), r"normal cell, block 1, inputs: needs a list of two"),
        (lambda d: d["reduction"].update(blocks=3), r"reduction cell: needs a 'blocks' list"),
        (lambda d: d["normal"].update(concat=None), r"normal cell: needs a 'blocks' list and a 'concat' list"),
        (lambda d: d.pop("reduction"), r"reduction cell: missing"),
        (lambda d: d["normal"]["blocks"][0].update(ops=["none"]), r"block 0, ops: needs a list of two"),
    ],
)
def test_malformed_json_names_the_field(edit, message):
    data = json.loads(json.dumps(AMOEBANET_D.to_json()))
    edit(data)
    with pytest.raises(ValueError, match=message):
        NasNetGenotype.from_json(data)


# ---- mutations as objects ----------------------------------------------------------------------


class CountingRandom(random.Random):
    """A Random that counts its `random()` calls."""

    calls = 0

    def random(self):
        self.calls += 1
        return super().random()


def test_draw_makes_one_random_call_for_two_or_more_and_none_for_one():
    from searchspace.mutations import draw

    rng = CountingRandom(0)
    assert draw(("only",), rng) == "only" and rng.calls == 0
    for _ in range(200):
        twin = random.Random()
        twin.setstate(rng.getstate())
        assert draw(("a", "b"), rng) == ("a" if twin.random() < 0.5 else "b")  # the old 50/50 test, same call
    assert rng.calls == 200
    assert Counter(draw(("a", "b", "c"), rng) for _ in range(3000)).keys() == {"a", "b", "c"}


def test_the_default_mutations_leave_every_space_config_as_it_was():
    from searchspace import ChoiceSpace, NasBench201Space

    assert "mutations" not in NasNetSpace().to_config()
    assert "mutations" not in NasBench201Space().to_config()
    assert "mutations" not in ChoiceSpace({"a": [1, 2]}).to_config()


def test_a_space_names_its_mutations_and_an_unknown_one_is_refused():
    from searchspace import ChoiceSpace, NasBench201Space

    op_only = NasNetSpace(identity_prob=0.0, mutations=["op"])
    assert op_only.mutations == ("op",)
    rng = random.Random(5)
    parent = op_only.sample(rng)
    assert all(": op " in op_only.mutate(parent, rng)[1] for _ in range(100))
    assert space_from_config(json.loads(json.dumps(op_only.to_config()))) == op_only
    for make in (lambda m: NasNetSpace(mutations=m), lambda m: NasBench201Space(mutations=m),
                 lambda m: ChoiceSpace({"a": [1, 2]}, m)):
        with pytest.raises(ValueError, match=r"mutations: unknown 'warp'; known: \["):
            make(("warp",))
        with pytest.raises(ValueError, match="mutations: need one or more distinct names"):
            make(())


def test_a_new_mutation_is_one_class_and_one_table_entry(monkeypatch):
    from searchspace.nasnet import NASNET_MUTATIONS

    class SameOpMutation:
        """The element applies the other element's op."""

        def apply(self, space, block, b, e, rng):
            ops = list(block.ops)
            old, ops[e] = ops[e], ops[1 - e]
            return Block(block.inputs, tuple(ops)), f"op {old} -> {ops[e]} (the other element's)"

    monkeypatch.setitem(NASNET_MUTATIONS, "same_op", SameOpMutation())
    space = NasNetSpace(identity_prob=0.0, mutations=("hidden_state", "op", "same_op"))
    rng = random.Random(6)
    parent = space.sample(rng)
    descriptions = [space.mutate(parent, rng)[1] for _ in range(300)]
    kinds = Counter("same" if "other element" in d else "op" if ": op " in d else "hidden" for d in descriptions)
    assert all(60 < n < 140 for n in kinds.values()) and len(kinds) == 3  # a third each
    assert space_from_config(json.loads(json.dumps(space.to_config()))) == space  # the journal names it


def test_the_neighbour_mutation_steps_one_value_along_the_choice():
    from searchspace import ChoiceSpace

    space = ChoiceSpace({"depth": [2, 4, 8, 16], "act": ["relu", "gelu"]}, mutations=("neighbour",))
    rng = random.Random(7)
    genotype = space.sample(rng)
    steps = Counter()
    for _ in range(400):
        child, description = space.mutate(genotype, rng)
        order = space.choices["depth"]
        if child["depth"] != genotype["depth"]:
            step = order.index(child["depth"]) - order.index(genotype["depth"])
            assert abs(step) == 1 and description == f"depth: {genotype['depth']} -> {child['depth']}"
            steps[step] += 1
        else:
            assert child["act"] != genotype["act"]
        genotype = child
    assert set(steps) == {-1, 1}
    both = ChoiceSpace({"depth": [2, 4, 8]}, mutations=("value", "neighbour"))
    assert both.to_config()["mutations"] == ["value", "neighbour"]
