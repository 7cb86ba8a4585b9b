"""The TF32 kernel's load-balancing schedule (host side, no GPU needed): segments cover every
block of every window exactly once, in order; split windows own consecutive slots."""

import numpy as np
import pytest

from accspmm._tf32 import MAX_BLOCKS_PER_SEGMENT, build_schedule, choose_schedule, round_tf32


@pytest.mark.parametrize("counts", [[], [0], [0, 0, 3], [1] * 50, [500, 0, 2, 33, 64, 65, 0, 1000, 7],
                                    list(np.random.default_rng(0).integers(0, 300, 400))])
def test_schedule_covers_blocks(counts):
    wo = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    segments, item_offsets, split_windows, nslots, item_cost = build_schedule(wo)
    W = len(counts)
    # every window has at least one segment (empty windows must still write zeros)
    assert set(segments[:, 0].tolist()) == set(range(W))
    for w in range(W):
        segs = segments[segments[:, 0] == w]
        assert segs[0, 1] == wo[w] and segs[-1, 2] == wo[w + 1]
        assert np.all(segs[1:, 1] == segs[:-1, 2])
        assert np.all(segs[:, 2] - segs[:, 1] <= MAX_BLOCKS_PER_SEGMENT)
        if len(segs) > 1:
            row = split_windows[split_windows[:, 0] == w][0]
            assert list(segs[:, 3]) == list(range(row[1], row[2]))
        else:
            assert segs[0, 3] == -1
    assert item_offsets[0] == 0 and item_offsets[-1] == len(segments)
    assert np.all(np.diff(item_offsets) >= 1)
    assert nslots == int((segments[:, 3] >= 0).sum())
    assert len(item_cost) == len(item_offsets) - 1


def _choose(wo, n, sms, balance="auto"):
    _, _, _, nsplit, item_cost = build_schedule(wo)
    return choose_schedule(wo, item_cost, nsplit, n, sms, balance)


def test_cost_model_prefers_balance_only_when_skewed():
    even = np.arange(0, 4 * 10001, 4, dtype=np.int64)  # 10,000 windows x 4 blocks
    use, rep = _choose(even, 128, 132)
    assert not use and "identity" in rep["reason"]
    skew = np.concatenate([[0], np.cumsum([2] * 2000 + [3000])]).astype(np.int64)
    use, rep = _choose(skew, 128, 132)
    assert use and rep["predicted_balanced"] < rep["predicted_identity"]
    assert _choose(skew, 128, 132, balance=False)[0] is False


def test_round_tf32():
    x = np.array([1.0, 1 + 2**-11, 1 + 2**-10 + 2**-11, -(1 + 2**-11), 3e38, np.inf, -np.inf], np.float32)
    r = round_tf32(x)
    assert r[0] == 1.0
    assert r[1] == 1 + 2**-10  # tie rounds away from zero
    assert r[2] == 1 + 2**-9
    assert r[3] == -(1 + 2**-10)
    assert np.isinf(r[5]) and np.isinf(r[6])
    assert np.isnan(round_tf32(np.array([np.nan], np.float32)))[0]
    assert np.all((r[np.isfinite(r)].view(np.uint32) & 0x1FFF) == 0)
