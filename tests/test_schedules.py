import math

import pytest

from trainer.schedules import WarmupDecay, make_optimizer


def lr(schedule, step):
    return float(schedule(step))


def test_warmup_then_exponential_staircase():
    # AmoebaNet: lr * 0.88 ^ floor(epoch / 1), after a 0.5-epoch linear warm-up; 100 steps per epoch.
    s = WarmupDecay(2.56, steps_per_epoch=100, total_steps=1000, kind="exponential", decay_value=0.88,
                    decay_epochs=(1.0,), warmup_epochs=0.5)
    assert lr(s, 0) == 0.0
    assert lr(s, 25) == pytest.approx(2.56 * 25 / 50)
    assert lr(s, 50) == pytest.approx(2.56)
    assert lr(s, 99) == pytest.approx(2.56)
    assert lr(s, 100) == pytest.approx(2.56 * 0.88)
    assert lr(s, 350) == pytest.approx(2.56 * 0.88**3)


def test_piecewise_resnet_recipe():
    s = WarmupDecay(0.4, steps_per_epoch=10, total_steps=900, kind="piecewise", decay_value=0.1,
                    decay_epochs=(30, 60, 80), warmup_epochs=5)
    assert lr(s, 25) == pytest.approx(0.2)
    assert [lr(s, e * 10) for e in (29, 30, 59, 60, 80, 89)] == pytest.approx(
        [0.4, 0.04, 0.04, 0.004, 0.0004, 0.0004])


def test_cosine_and_constant():
    s = WarmupDecay(1.0, steps_per_epoch=10, total_steps=100, kind="cosine")
    assert lr(s, 0) == pytest.approx(1.0) and lr(s, 50) == pytest.approx(0.5) and lr(s, 100) == pytest.approx(0.0, abs=1e-7)
    assert lr(WarmupDecay(0.3, 10, 100, kind="constant"), 77) == pytest.approx(0.3)
    warm = WarmupDecay(1.0, steps_per_epoch=10, total_steps=110, kind="cosine", warmup_epochs=1)
    assert lr(warm, 10) == pytest.approx(1.0) and lr(warm, 60) == pytest.approx(0.5)  # cosine after warm-up
    assert math.isfinite(lr(s, 1000))


def test_bad_schedules_fail_at_once():
    with pytest.raises(ValueError, match="lr_schedule"):
        WarmupDecay(1.0, 10, 100, kind="linear")
    with pytest.raises(ValueError, match="one positive value"):
        WarmupDecay(1.0, 10, 100, kind="exponential", decay_epochs=(1, 2))
    with pytest.raises(ValueError, match="must increase"):
        WarmupDecay(1.0, 10, 100, kind="piecewise", decay_epochs=(60, 30))
    with pytest.raises(ValueError, match="optimizer"):
        make_optimizer("adagrad", WarmupDecay(1.0, 10, 100))


def test_rmsprop_is_amoebanets():
    optimizer = make_optimizer("rmsprop", WarmupDecay(1.0, 10, 100))
    assert (optimizer.rho, optimizer.momentum, optimizer.epsilon) == (0.9, 0.9, 1.0)
