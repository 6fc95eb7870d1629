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


def test_triangular_is_airbenchs_warm_up_and_warm_down():
    # 0.2 -> 1 over the first 23% of the steps, then down to 0.07 at the last (airbench94's)
    s = WarmupDecay(2.0, steps_per_epoch=10, total_steps=100, kind="triangular")
    assert lr(s, 0) == pytest.approx(2.0 * 0.2)
    assert lr(s, 10) == pytest.approx(2.0 * (0.2 + 0.8 * 10 / 23))
    assert lr(s, 23) == pytest.approx(2.0)
    assert lr(s, 50) == pytest.approx(2.0 * (1 - 0.93 * 27 / 77))
    assert lr(s, 100) == pytest.approx(2.0 * 0.07) and lr(s, 150) == pytest.approx(2.0 * 0.07)
    own = WarmupDecay(1.0, 10, 100, kind="triangular", start_factor=0.0, peak_at=0.5, end_factor=0.0)
    assert [lr(own, k) for k in (0, 25, 50, 75, 100)] == pytest.approx([0.0, 0.5, 1.0, 0.5, 0.0])
    assert lr(WarmupDecay(1.0, 10, 100, kind="triangular", peak_at=0.0), 0) == pytest.approx(1.0)  # no warm-up


def test_nesterov_and_a_moving_average_of_the_weights_are_the_keras_optimizers_own():
    plain = make_optimizer("momentum", WarmupDecay(1.0, 10, 100), 0.85)
    assert (plain.momentum, plain.nesterov, plain.use_ema) == (0.85, False, False)
    fast = make_optimizer("momentum", WarmupDecay(1.0, 10, 100), 0.85, nesterov=True, ema_decay=0.9999)
    assert (fast.nesterov, fast.use_ema, fast.ema_momentum) == (True, True, 0.9999)
    assert make_optimizer("rmsprop", WarmupDecay(1.0, 10, 100), ema_decay=0.5).ema_momentum == 0.5
