"""The macro space (--space=nasnet_macro): genotypes, sampling, one mutation per child, JSON, the
search settings that choose it, and the networks it builds."""

import dataclasses
import json
import random

import pytest

from experiments.search.search_config import SearchConfig
from searchspace import (Macro, MacroGenotype, NasNetMacroSpace, NasNetSpace, genotype_from_json,
                         space_from_config)
from searchspace.nasnet import Block, make_cell
from searchspace.nasnet_macro import MACRO_FILTERS

OPS = ("none", "max_pool_3x3", "conv_1x1", "plain_conv_3x3", "sep_conv_3x3")
SPACE = NasNetMacroSpace(ops=OPS)
# The closest genotype to Page's ResNet-9: stem 64; a conv-pool reduction to 128 wide and a residual
# cell (h0 + conv(h0), twice); another to 256 with no cell; a third to 512 and one more residual cell.
RESIDUAL = make_cell([Block((0, 0), ("plain_conv_3x3", "none")), Block((2, 2), ("plain_conv_3x3", "none"))])
RESNET9_LIKE = MacroGenotype(RESIDUAL, RESIDUAL, macro=Macro((0, 1, 0, 1), 64, "conv_pool", "none"))


def differences(a: MacroGenotype, b: MacroGenotype) -> list[str]:
    """What differs: macro fields by name, and cell elements as (cell, block, element)."""
    changed = [f for f in ("cells_per_stack", "filters", "reduction", "projection")
               if getattr(a.macro, f) != getattr(b.macro, f)]
    if len(a.macro.cells_per_stack) != len(b.macro.cells_per_stack):
        changed[0] = "stacks"
    if a.num_blocks != b.num_blocks:
        return changed + ["blocks"]
    for name in ("normal", "reduction"):
        for i, (x, y) in enumerate(zip(a.cell(name).blocks, b.cell(name).blocks)):
            changed += [(name, i, e) for e in (0, 1) if (x.inputs[e], x.ops[e]) != (y.inputs[e], y.ops[e])]
    return changed


def test_a_macro_genotype_round_trips_through_json_with_a_canonical_key():
    data = json.loads(json.dumps(RESNET9_LIKE.to_json()))
    assert data["macro"] == {"cells_per_stack": [0, 1, 0, 1], "filters": 64, "reduction": "conv_pool",
                             "projection": "none"}
    assert genotype_from_json(data) == RESNET9_LIKE == SPACE.genotype_from_json(data)
    assert RESNET9_LIKE.key().endswith("|macro[cells=0.1.0.1;F=64;reduction=conv_pool;projection=none]")
    assert "network: 0/1/0/1 normal cells per stack, F=64" in RESNET9_LIKE.describe()
    assert RESNET9_LIKE.resized(filters=16, cells=2).macro == Macro((2, 2, 2, 2), 16, "conv_pool", "none")


@pytest.mark.parametrize("change, message", [
    ({"macro": {"cells_per_stack": [1, 1], "filters": 8}}, "macro, cells_per_stack: 3 or 4 counts"),
    ({"macro": {"cells_per_stack": [1, 1, 1], "filters": 1}}, "macro, filters: a whole number of 2 or more"),
    ({"macro": {"cells_per_stack": [1, 1, 1], "filters": 8, "reduction": "pool"}}, "macro, reduction: unknown 'pool'"),
    ({"macro": {"cells_per_stack": [1, 1, 1], "filters": 8, "width": 2}}, "unknown fields ['width']"),
])
def test_a_bad_macro_part_is_refused_naming_the_field(change, message):
    with pytest.raises(ValueError, match=message.replace("[", "\\[").replace("]", "\\]")):
        SPACE.genotype_from_json({**RESNET9_LIKE.to_json(), **change})


def test_each_space_refuses_the_others_genotypes():
    plain = NasNetSpace(num_blocks=2).sample(random.Random(0)).to_json()
    with pytest.raises(ValueError, match="macro: missing; a genotype of space nasnet_macro"):
        SPACE.genotype_from_json(plain)
    with pytest.raises(ValueError, match="macro: a genotype of space nasnet has no macro part"):
        NasNetSpace(num_blocks=2).genotype_from_json(RESNET9_LIKE.to_json())


def test_each_child_changes_one_macro_choice_by_a_step_or_one_element_of_a_used_cell():
    rng, seen = random.Random(7), set()
    parent = SPACE.sample(rng)
    for _ in range(600):
        child, what = SPACE.mutate(parent, rng)
        changed = differences(parent, child)
        if what == "identity":
            assert child == parent
        else:
            assert child.key() != parent.key(), what  # every other mutation changes the network
        if what.startswith(("normal", "reduction")):  # an element: the paper's mutation
            assert len(changed) == 1 and child.macro == parent.macro
            assert what.startswith("normal") or parent.macro.reduction == "cell"
            assert what.startswith("reduction") or any(parent.macro.cells_per_stack)
        elif what != "identity":
            assert len(changed) == 1 and what.startswith("macro "), (what, changed)
            seen.add(changed[0])
        if "blocks" in changed:
            assert abs(child.num_blocks - parent.num_blocks) == 1
            assert child.normal.blocks[:1] == parent.normal.blocks[:1]
        if "filters" in changed:
            assert abs(MACRO_FILTERS.index(child.macro.filters) - MACRO_FILTERS.index(parent.macro.filters)) == 1
        if "cells_per_stack" in changed:
            assert sum(abs(a - b) for a, b in zip(child.macro.cells_per_stack, parent.macro.cells_per_stack)) == 1
        if "stacks" in changed:  # the last stack added or dropped
            short, long = sorted((child.macro.cells_per_stack, parent.macro.cells_per_stack), key=len)
            assert len(long) == len(short) + 1 and long[:-1] == short
        assert set(op for c in (child.normal, child.reduction) for b in c.blocks for op in b.ops) <= set(OPS)
        parent = child
    assert seen == {"cells_per_stack", "filters", "reduction", "projection", "blocks", "stacks"}


def with_macro(genotype: MacroGenotype, **fields) -> MacroGenotype:
    return dataclasses.replace(genotype, macro=dataclasses.replace(genotype.macro, **fields))


# ResNet-9's normal cell reading h1 where it reads h0: in a network whose every normal cell is the
# first of its stack after a fixed reduction, both are one tensor.
H1_FIRST = make_cell([Block((1, 0), ("plain_conv_3x3", "none")), Block((2, 2), ("plain_conv_3x3", "none"))])
OTHER_REDUCTION = make_cell([Block((0, 1), ("sep_conv_3x3", "max_pool_3x3")), Block((2, 0), ("conv_1x1", "none"))])


@pytest.mark.parametrize("a, b, same", [
    (RESNET9_LIKE, MacroGenotype(H1_FIRST, RESIDUAL, macro=RESNET9_LIKE.macro), True),
    (RESNET9_LIKE, MacroGenotype(RESIDUAL, OTHER_REDUCTION, macro=RESNET9_LIKE.macro), True),  # reduction cell unused
    (with_macro(RESNET9_LIKE, projection="conv_1x1"), MacroGenotype(H1_FIRST, RESIDUAL, macro=Macro(
        (0, 1, 0, 1), 64, "conv_pool", "conv_1x1")), False),  # h0 projected, h1 not: two tensors
    (with_macro(RESNET9_LIKE, cells_per_stack=(0, 2, 0, 1)), MacroGenotype(H1_FIRST, RESIDUAL, macro=Macro(
        (0, 2, 0, 1), 64, "conv_pool", "none")), False),  # a stack's second cell reads two states
    (with_macro(RESNET9_LIKE, reduction="cell"), MacroGenotype(RESIDUAL, OTHER_REDUCTION, macro=Macro(
        (0, 1, 0, 1), 64, "cell", "none")), False),
    (with_macro(RESNET9_LIKE, cells_per_stack=(0, 0, 0, 0), projection="conv_1x1"),
     MacroGenotype(H1_FIRST, OTHER_REDUCTION, macro=Macro((0, 0, 0, 0), 64, "conv_pool", "none")), True),
])
def test_the_key_is_the_networks_and_the_builder_agrees(a, b, same):
    from trainer.models import ModelSpec, build_model

    assert (a.key() == b.key()) is same
    configs = [build_model(ModelSpec("nasnet_macro", 10, 8, genotype=with_macro(g, filters=4))).get_config()
               for g in (a, b)]
    assert (configs[0] == configs[1]) is same


def test_no_mutation_but_identity_leaves_resnet9_as_it_was():
    rng = random.Random(0)
    for _ in range(300):
        child, what = SPACE.mutate(RESNET9_LIKE, rng)
        assert what == "identity" or child.key() != RESNET9_LIKE.key(), what


def test_sampling_and_mutation_follow_the_seed_and_the_space_comes_back_from_its_config():
    def run(seed):
        rng = random.Random(seed)
        g = SPACE.sample(rng)
        return [g.key()] + [SPACE.mutate(g, rng)[0].key() for _ in range(20)]

    assert run(3) == run(3) != run(4)
    assert space_from_config(json.loads(json.dumps(SPACE.to_config()))) == SPACE
    recorded_before_4_stacks = {k: v for k, v in SPACE.to_config().items() if k != "stacks"}
    assert space_from_config(recorded_before_4_stacks).stacks == (3,)
    narrow, rng = NasNetMacroSpace(ops=OPS, stacks=(4,), projections=("none",)), random.Random(0)
    g = narrow.sample(rng)
    for _ in range(50):  # the choices with one option are never drawn
        g, what = narrow.mutate(g, rng)
        assert len(g.macro.cells_per_stack) == 4 and g.macro.projection == "none", what
    with pytest.raises(ValueError, match="filters: two or more increasing widths"):
        NasNetMacroSpace(filters=(16, 8))


def test_the_search_flags_choose_the_space_its_ops_and_its_mutations(tmp_path):
    macro = SearchConfig(output_dir=str(tmp_path), proxy_space="nasnet_macro", ops=OPS, num_blocks=3)
    assert macro.search_space() == NasNetMacroSpace(ops=OPS, max_blocks=3)
    plain = SearchConfig(output_dir=str(tmp_path), ops=("none", "plain_conv_3x3"))
    assert plain.search_space() == NasNetSpace(ops=("none", "plain_conv_3x3"))
    assert SearchConfig(output_dir=str(tmp_path)).search_space() == NasNetSpace()  # the paper's, unchanged
    with pytest.raises(ValueError, match="ops: need two or more known ops, got \\['none', 'conv_9x9'\\]"):
        SearchConfig(output_dir=str(tmp_path), ops=("none", "conv_9x9"))
    assert SearchConfig(output_dir=str(tmp_path), mutations=("op",)).search_space() == NasNetSpace(mutations=("op",))
    convnet = SearchConfig(output_dir=str(tmp_path), proxy_space="convnet", mutations=("activation", "stem"))
    assert convnet.search_space().mutations == ("activation", "stem")
    with pytest.raises(ValueError, match="mutations: the nasnet and convnet spaces'"):
        SearchConfig(output_dir=str(tmp_path), proxy_space="nasnet_macro", mutations=("op",)).search_space()


def test_the_network_follows_the_macro_part_at_its_own_size():
    import dataclasses

    from trainer.models import ModelSpec, build_model, model_report

    def built(genotype, **spec):
        return build_model(ModelSpec("nasnet_macro", num_classes=10, image_size=16, genotype=genotype, **spec))

    resnet9_like = built(RESNET9_LIKE, filters=8, num_cells=3)  # its own F and cells, whatever the spec says
    # ResNet-9's multiply-adds (at 16 px), and its parameters and the logits' 10 biases
    assert model_report(resnet9_like) == {"params": 6_573_120 + 10, "multiply_adds": 94_819_328}
    assert [l.name for l in resnet9_like.layers if l.name.endswith("_pool")] == [
        "reduction0_pool", "reduction1_pool", "reduction2_pool", "final_pool"]
    assert not [l for l in resnet9_like.layers if "_h0" in l.name]  # projection "none": widths already agree
    assert resnet9_like.get_layer("stack3_cell0_out").output.shape == (None, 2, 2, 512)
    projected = built(dataclasses.replace(RESNET9_LIKE, macro=Macro((0, 1, 1), 8, "strided_conv", "conv_1x1")))
    assert sum(l.name.endswith("_h0_conv") for l in projected.layers) == 2
    only_reductions = built(dataclasses.replace(RESNET9_LIKE, macro=Macro((0, 0, 0), 8, "cell", "none")))
    assert [l.name for l in only_reductions.layers if l.name.endswith("_out")] == [
        "reduction_cell0_out", "reduction_cell1_out"]
    assert ModelSpec("nasnet_macro", 10, 16, genotype=RESNET9_LIKE).with_filters(16).genotype.macro.filters == 16
    with pytest.raises(ValueError, match="built by model 'nasnet_macro'"):
        ModelSpec("genotype", 10, 16, genotype=RESNET9_LIKE)
