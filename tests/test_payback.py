"""Break-even against cuSPARSE (accspmm._payback): the arithmetic and the model on the CPU, the
plan's prediction and the measured comparison on the GPU (marked `gpu`)."""

import math

import numpy as np
import pytest

import accspmm
from accspmm import _payback
from conftest import assert_bit_exact, int_dense, scipy_ref, with_int_values


def test_break_even_arithmetic():
    assert _payback.break_even(1.0, 0.1, 2.0, 0.2) == 0.0  # our setup is cheaper
    assert _payback.break_even(3.0, 0.1, 2.0, 0.3) == pytest.approx(5.0)  # 1 s more, 0.2 s saved per call
    assert _payback.break_even(3.0, 0.3, 2.0, 0.3) == math.inf  # no saving
    assert _payback.break_even(3.0, 0.4, 2.0, 0.3) == math.inf  # cuSPARSE's call is faster


def test_predict_model():
    """More TC blocks per nonzero cost us more per call; setup time adds calls; the fields add up."""
    M = _payback.CUSPARSE_MODEL
    dense = _payback.predict((1_000_000, 1_000_000), 8_000_000, 300_000, 0.02)
    sparse = _payback.predict((1_000_000, 1_000_000), 8_000_000, 900_000, 0.02)
    assert dense["ours_call_s"] < sparse["ours_call_s"]
    assert dense["cusparse_call_s"] == sparse["cusparse_call_s"]
    slow = _payback.predict((1_000_000, 1_000_000), 8_000_000, 300_000, 0.2)
    assert slow["break_even_calls"] > dense["break_even_calls"]
    be = (dense["ours_setup_s"] - dense["cusparse_setup_s"]) / dense["saving_per_call_s"]
    assert dense["break_even_calls"] == pytest.approx(max(be, 0.0))
    assert dense["ours_setup_s"] == pytest.approx(0.02 + M["ours_first_call_s"]
                                                  + M["ours_first_call_s_per_window"] * 125_000)
    tiny = _payback.predict((10, 10), 20, 2, 0.001)
    assert tiny["ours_call_s"] == M["ours_call_floor_s"]
    wide = _payback.predict((1_000_000, 1_000_000), 8_000_000, 300_000, 0.02, n=512)
    assert wide["ours_call_s"] == pytest.approx(4 * dense["ours_call_s"])


@pytest.mark.gpu
def test_plan_predicts_and_measures():
    import torch

    A = with_int_values(accspmm.datasets.load_bundled(np.float32))
    with accspmm.plan(A) as p:
        pred = p.stats["vs_cusparse"]
        assert pred["predicted"] and pred["n"] == 128 and pred["ours_setup_s"] > 0
        got = p.compare_cusparse(n=64, reps=5)
        assert p.stats["vs_cusparse_measured"] is got and not got["predicted"] and got["n"] == 64
        assert got["cusparse_alg"] in got["cusparse_by_alg"]
        for key in ("ours_setup_s", "ours_call_s", "cusparse_setup_s", "cusparse_call_s"):
            assert 0 < got[key] < 10, key
        assert got["break_even_calls"] == _payback.break_even(got["ours_setup_s"], got["ours_call_s"],
                                                              got["cusparse_setup_s"], got["cusparse_call_s"])
        # the calls timed in a loop: per launch, and the algorithm fastest in a loop (of those timed)
        for key in ("ours_loop_call_s", "cusparse_loop_call_s", "cusparse_loop_setup_s"):
            assert 0 < got[key] < 10, key
        by_alg = got["cusparse_by_alg"]
        assert got["cusparse_loop_call_s"] == min(a["loop_call_s"] for a in by_alg.values())
        assert got["cusparse_loop_setup_s"] == by_alg[got["cusparse_loop_alg"]]["setup_s"]
        assert got["break_even_calls_loop"] == _payback.break_even(
            got["ours_setup_s"], got["ours_loop_call_s"], got["cusparse_loop_setup_s"], got["cusparse_loop_call_s"])
        # the comparison made the plan's first call for n = 64: later calls stay exact
        B = int_dense(A.shape[1], 64)
        assert_bit_exact(p(torch.from_numpy(B).cuda()).cpu().numpy(), scipy_ref(A, B))
    with pytest.raises(ValueError, match="GPU TF32"):
        accspmm.plan(A, precision="fp32").compare_cusparse()
