"""The TF32 kernel's schedule (host side, no GPU needed): every window in exactly one task, PACK
warps contiguous and within the cap, SPLIT only for long windows, and an emulation of the
kernel's task semantics on the CPU that must reproduce scipy's product bit for bit."""

import numpy as np
import pytest
import scipy.sparse as sp

import accspmm
from accspmm import _tf32
from accspmm._tf32 import (CAPS, TASK_WORDS, WARPS, WB, build_tasks, choose_variant, lpt_order, pack_meta, predict,
                           round_tf32)
from conftest import int_dense, with_int_values
from schedule_reference import build_tasks_reference

COUNTS = [[], [0], [0, 0, 3], [1] * 50, [500, 0, 2, 33, 64, 65, 0, 1000, 7],
          list(np.random.default_rng(0).integers(0, 300, 400)), [0] * 9 + [5] + [0] * 20]


def _ranges(tasks, wo):
    """(window, first block, end block, part key, warp) of every warp range of every task, in the
    kernel's encoding (cuda/tf32_spmm.h); part key None = a whole window written by its warp,
    else (part, parts, group leader) of a window cut over several warps."""
    out = []
    for t, row in enumerate(tasks):
        if row[0] < 0:
            w, q, parts = -int(row[0]) - 1, int(row[1]), int(row[2])
            nb = wo[w + 1] - wo[w]
            pb = wo[w] + nb * q // parts
            pn = wo[w] + nb * (q + 1) // parts - pb
            for i in range(WARPS):
                out.append((w, pb + pn * i // WARPS, pb + pn * (i + 1) // WARPS, (q, parts, (t, 0)), i))
        elif row[0] == 1:
            for i in range(WARPS):
                w, jg = int(row[1 + 2 * i]), int(row[2 + 2 * i])
                if w < 0:
                    continue
                j, g = jg >> 4, jg & 15
                nb = wo[w + 1] - wo[w]
                out.append((w, wo[w] + nb * j // g, wo[w] + nb * (j + 1) // g, (0, 1, (t, i - j)), i))
        else:
            for i in range(WARPS):
                for w in range(row[1 + 2 * i], row[2 + 2 * i]):
                    out.append((w, wo[w], wo[w + 1], None, i))
    return out


@pytest.mark.parametrize("cap", CAPS)
@pytest.mark.parametrize("counts", COUNTS)
def test_tasks_cover_windows(counts, cap):
    wo = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    nb = np.diff(wo)
    tasks, cost = build_tasks(wo, cap)
    assert tasks.dtype == np.int32 and tasks.shape[1] == TASK_WORDS and cost.shape == (tasks.shape[0],)
    # every block of every window exactly once, whole windows in one warp, cut ones in one task
    # (GROUP: consecutive warps, leader first) or in all parts of one split
    covered = np.zeros(int(wo[-1]), int)
    whole = np.zeros(len(counts), int)
    first, slots, ids = [], [], []
    for t, row in enumerate(tasks):
        if row[0] < 0:
            w, q, parts = -row[0] - 1, row[1], row[2]
            assert cap > 0 and nb[w] > WARPS * cap and 0 <= q < parts
            assert parts == -(-nb[w] // (WARPS * cap)), "about cap blocks per warp"
            slots.append(row[4] + q)
            ids.append(row[3])
            first.append(w)
        elif row[0] == 1:
            ws = [int(row[1 + 2 * i]) for i in range(WARPS)]
            live = [w for w in ws if w >= 0]
            assert live and live == sorted(live)
            for i, w in enumerate(ws):
                if w < 0:
                    continue
                j, g = row[2 + 2 * i] >> 4, row[2 + 2 * i] & 15
                assert cap < nb[w] <= WARPS * cap and g == -(-nb[w] // cap) and 0 <= j < g
                assert ws[i - j: i - j + g] == [w] * g, "a group's warps are consecutive"
            first.append(live[0])
        else:
            assert row[0] == 0
            starts, ends = row[1::2], row[2::2]
            assert np.all(ends >= starts) and np.all(starts[1:] >= ends[:-1]) and ends.max() > starts[0]
            for i in range(WARPS):
                ws = list(range(starts[i], ends[i]))
                whole[ws] += 1
                if cap == 0:
                    assert len(ws) <= 1
                elif ws:
                    assert np.all(nb[ws] <= cap)
                    assert (nb[ws] + WB).sum() <= 2 * (cap + WB)
            first.append(row[1])
    for w, b0, b1, key, _ in _ranges(tasks, wo):
        covered[b0:b1] += 1
        assert wo[w] <= b0 <= b1 <= wo[w + 1]
    assert np.all(covered == 1), "every block in exactly one warp range"
    in_ranges = {w for w, *_ in _ranges(tasks, wo)}
    assert all(w in in_ranges for w in range(len(counts))), "every window (empty ones too) in a task"
    assert np.all(whole <= 1)
    assert first == sorted(first), "tasks in window order"
    assert slots == list(range(len(slots))), "workspace slots: one per part, dense, in order"
    assert ids == sorted(ids) and (not ids or set(ids) == set(range(max(ids) + 1))), "split ids dense"


def _emulate(fmt, tasks, B):
    """The kernel's arithmetic on the CPU in float64 from the task list (exact on integers)."""
    m, _ = fmt.shape
    C = np.full((m, B.shape[1]), np.nan)
    wo = np.asarray(fmt.window_offsets)
    cols, masks, vo, vals = fmt.block_cols, fmt.block_mask, fmt.block_value_offsets, fmt.values

    def blocks_sum(b0, b1):
        acc = np.zeros((8, B.shape[1]))
        for b in range(b0, b1):
            bits = [i for i in range(64) if (int(masks[b]) >> i) & 1]
            for j, bit in enumerate(bits):
                r, c = divmod(bit, 8)
                acc[r] += float(vals[vo[b] + j]) * B[cols[8 * b + c]]
        return acc

    # the kernel's order of sums: warps of a part in order, then parts in order
    parts = {}
    for w, b0, b1, split, _ in _ranges(tasks, wo):
        q = split[0] if split else 0
        tile = blocks_sum(b0, b1)
        parts.setdefault(w, {})
        parts[w][q] = parts[w][q] + tile if q in parts[w] else tile
    partial = {w: sum(ps[q] for q in sorted(ps)) for w, ps in parts.items()}
    for w, acc in partial.items():
        for r in range(8):
            if 8 * w + r < m:
                C[fmt.perm[8 * w + r]] = acc[r]
    return C


@pytest.mark.parametrize("cap", [0, 1, 2, 8])
def test_emulated_kernel_matches_scipy(cap):
    rng = np.random.default_rng(cap)
    d = (rng.random((90, 70)) < 0.15) * rng.integers(-8, 9, (90, 70))
    d[8:24] = 0  # empty windows
    d[40] = rng.integers(1, 9, 70)  # one dense row: a long window
    A = sp.csr_matrix(d.astype(np.float32))
    fmt = accspmm.BitTCF.from_csr(A, rng.permutation(90))
    tasks, _ = build_tasks(fmt.window_offsets, cap)
    B = int_dense(70, 5).astype(np.float64)
    C = _emulate(fmt, tasks, B)
    np.testing.assert_array_equal(C, A.toarray().astype(np.float64) @ B)


def test_packed_metadata_lane_decode():
    """pack_meta's 48-byte records, decoded per lane (g, t) exactly as the kernel does (columns
    t and t+4 from the interleaved words, the mask word of row g, popcounts below the bit),
    give every block entry A_block[g][t] and A_block[g][t+4] with its column; padding slots
    hold a real column of the block (slot t < 4: slot 0's, slot t + 4: slot t's) and no value."""
    rng = np.random.default_rng(5)
    d = (rng.random((70, 300)) < 0.2) * rng.integers(1, 9, (70, 300))
    d[16:32] = 0
    fmt = accspmm.BitTCF.from_csr(sp.csr_matrix(d.astype(np.float32)), rng.permutation(70))
    assert fmt.num_blocks > 50
    rec = pack_meta(fmt).reshape(-1, 12)
    assert rec.shape == (fmt.num_blocks, 12)
    u = rec.view(np.uint32).astype(np.uint64)
    cols = np.asarray(fmt.block_cols).reshape(-1, 8)
    padded = 0
    for b in range(fmt.num_blocks):
        mask, voff = int(fmt.block_mask[b]), int(fmt.block_value_offsets[b])
        assert int(u[b, 8] | (u[b, 9] << 32)) == mask and int(u[b, 10] | (u[b, 11] << 32)) == voff
        for g in range(8):
            for t in range(4):
                high = g >= 4
                word = int(u[b, 9] if high else u[b, 8])
                base = bin(int(u[b, 8])).count("1") if high else 0
                bit0 = 1 << ((g & 3) * 8 + t)
                for c, below, bit in ((rec[b, 2 * t], bit0 - 1, bit0), (rec[b, 2 * t + 1], (bit0 << 4) - 1, bit0 << 4)):
                    col = t if bit == bit0 else t + 4
                    real = cols[b, col] if cols[b, col] >= 0 else cols[b, col - 4] if col >= 4 else -1
                    assert c == (real if real >= 0 else cols[b, 0]) and c >= 0
                    padded += cols[b, col] < 0
                    want = (mask >> (g * 8 + col)) & 1
                    assert cols[b, col] >= 0 or not want
                    assert bool(word & bit) == bool(want)
                    if want:
                        idx = voff + base + bin(word & below).count("1")
                        row = fmt.perm[8 * np.searchsorted(fmt.window_offsets, b, side="right") - 8 + g]
                        assert fmt.values[idx] == d[row, c]
    assert padded > 0  # the matrix has blocks with fewer than 8 columns


def test_cost_model():
    even = np.arange(0, 4 * 10001, 4, dtype=np.int64)  # 10,000 windows x 4 blocks
    skew = np.concatenate([[0], np.cumsum([2] * 2000 + [3000])]).astype(np.int64)
    v = {"slice_s": 2, "staged": 0, "depth": 2}
    p_even = {c: predict(build_tasks(even, c)[1], 2, v) for c in CAPS}
    p_skew = {c: predict(build_tasks(skew, c)[1], 2, v) for c in CAPS}
    # the 3000-block window dominates the identity schedule; splitting it wins by a wide margin
    assert p_skew[0] > 5 * min(p_skew.values())
    # regular windows: packing never predicts worse than half the identity time, splitting is not needed
    assert min(p_even.values()) <= p_even[0]
    assert predict(np.zeros(0), 4, v) == 0.0


def test_packing_caps():
    """At most PACK_WINDOWS mean-length windows per warp; the identity schedule (cap 0) always stays,
    and a list without it keeps its smallest cap rather than none."""
    from accspmm._tf32 import PACK_WINDOWS, packing_caps

    assert packing_caps(CAPS, 3.81) == tuple(c for c in CAPS if c <= PACK_WINDOWS * (3.81 + WB))
    assert 0 in packing_caps(CAPS, 0.0) and 64 not in packing_caps(CAPS, 3.81)
    assert packing_caps(CAPS, 1000.0) == CAPS  # long windows: every cap (they split hub windows)
    assert packing_caps((16, 32, 64), 0.5) == (16,)


def test_packing_caps_bound_the_longest_windows_parts():
    """The packing limit does not force a hub window into more than SPLIT_PARTS_MAX parts: on a star
    graph (every window 2 blocks but one of 25,000) the kept caps reach one that cuts the hub in at most
    that many, and the decision's prediction picks a cap above the packing limit; windows that fit
    leave the packing limit as it was."""
    from accspmm import datasets
    from accspmm._tf32 import (DECISION_TERMS, PACK_WINDOWS, REF_SMS, SPLIT_PARTS_MAX, blocks_per_sm,
                               decision_predictions, packing_caps, price_terms)

    assert packing_caps(CAPS, 3.81, 10) == packing_caps(CAPS, 3.81)
    assert packing_caps(CAPS, 2.0, WARPS * SPLIT_PARTS_MAX * 16) == packing_caps(CAPS, 2.0)
    assert max(packing_caps(CAPS, 2.0, WARPS * SPLIT_PARTS_MAX * 16 + 1)) == 32
    assert packing_caps(CAPS, 2.0, 10**9) == CAPS  # no cap reaches: every cap
    assert packing_caps((0,), 0.0, 10**9) == (0,)
    from accspmm._format import BitTCF

    wo = np.asarray(BitTCF.from_csr(datasets.adversarial("star", 200_000)).window_offsets, np.int64)
    nb = np.diff(wo)
    longest, mean = int(nb.max()), float(wo[-1]) / nb.size
    assert longest > WARPS * SPLIT_PARTS_MAX * max(packing_caps(CAPS, mean))  # the old limit: too many parts
    kept = packing_caps(CAPS, mean, longest)
    assert max(kept) > PACK_WINDOWS * (mean + WB)
    v = choose_variant(128, nb.size * 8, 50 << 20)
    slices = -(-128 // (32 * v["slice_s"]))
    terms, identity = price_terms(wo, kept)
    pred = decision_predictions(terms, identity, slices, REF_SMS * blocks_per_sm(v), *DECISION_TERMS[0])
    best = min(kept, key=lambda c: (pred[c], -c))
    assert best > max(packing_caps(CAPS, mean))  # the model prefers a cap the packing limit alone would drop
    assert WARPS * SPLIT_PARTS_MAX * max(kept) >= longest  # one that cuts the hub in at most that many parts


def test_variant_choice():
    l2 = 50 << 20
    assert choose_variant(16, 1000, l2)["slice_s"] == 1
    v = choose_variant(512, 60_000, l2)  # B 123 MB > L2, one 64-column slice 15 MB <= L2 / 2
    assert v["slice_s"] == 2 and v["slice_major"] == 1 and v["staged"] == 1
    v = choose_variant(128, 1_500_000, l2)  # B 770 MB: one slice (385 MB) does not fit either
    assert v["slice_major"] == 0 and v["staged"] == 1
    v = choose_variant(512, 10_000, l2)  # B 20 MB: L2-resident; S = 2 stages B, longest task first
    assert v["slice_major"] == 0 and v["staged"] == 1 and v["depth"] == 2 and v["order"] == 1
    v = choose_variant(16, 1000, l2)  # S = 1 and L2-resident: the register pipeline, longest task first
    assert v["staged"] == 0 and v["depth"] == 3 and v["order"] == 1
    v = choose_variant(32, 1_000_000, l2)  # S = 1, B 128 MB: staged, window order
    assert v["slice_s"] == 1 and v["staged"] == 1 and v["depth"] == 2 and v["order"] == 0
    for elem in (1, 2):  # the half formats: staged at depth 3, longest task first where B is L2-resident
        v = choose_variant(512, 10_000, l2, elem=elem)
        assert v["slice_s"] == 1 and v["staged"] == 1 and v["depth"] == 3 and v["order"] == 1
        v = choose_variant(512, 100_000, l2, elem=elem)  # B 102 MB: window order
        assert v["slice_s"] == 1 and v["staged"] == 1 and v["depth"] == 3 and v["order"] == 0
    assert choose_variant(128, 10, 1, {"depth": 3})["depth"] == 3
    assert choose_variant(128, 10, 1 << 20, {"staged": 1})["staged"] == 1
    with pytest.raises(ValueError):
        choose_variant(128, 10, 1, {"bogus": 1})


def test_narrow_steps_rule_and_slices():
    """Narrow steps (variant S = 0: TF32 16 columns, a half format 32): under one wave of S = 1 thread
    blocks, n a multiple of 4 (TF32) or 8 (half formats), and a longest task above NARROW_STEPS_MIN_LONGEST
    units; they run the S = 1 launch bounds, and a plan's split counters are sized for 16-column slices.
    An override of S = 0 must keep the register pipeline at depth 2 or 3."""
    from accspmm._tf32 import (MIN_SLICE, NARROW_STEPS_MIN_LONGEST, REF_SMS, WAVE_BLOCKS_PER_SM, blocks_per_sm,
                               narrow_steps, slice_cols)

    long = NARROW_STEPS_MIN_LONGEST + 1
    resident = REF_SMS * blocks_per_sm({"slice_s": 0, "staged": 0, "depth": 2})
    for elem in (0, 1, 2):
        # the most S = 1 thread blocks taken: under one wave (half formats); every narrow one resident (TF32)
        top = REF_SMS * WAVE_BLOCKS_PER_SM - 1 if elem else resident // 2
        assert narrow_steps(128, elem, top, long) and not narrow_steps(128, elem, top + 1, long)
        assert narrow_steps(8, elem, 1, long) and narrow_steps(200, elem, 10, long)
        assert not narrow_steps(128, elem, 10, NARROW_STEPS_MIN_LONGEST)  # short tasks: their fixed part dominates
        assert not any(narrow_steps(n, elem, 10, long) for n in (1, 4, 7, 33, 102))  # the element path's widths
    assert narrow_steps(36, 0, 10, long) and not narrow_steps(36, 1, 10, long)  # TF32's 16-byte runs: n % 4
    assert [slice_cols(0, 0), slice_cols(0, 1), slice_cols(0, 2), slice_cols(1, 0), slice_cols(1, 1),
            slice_cols(2, 2)] == [16, 32, 64, 32, 64, 128]
    assert MIN_SLICE == min(slice_cols(e, s) for e in (0, 1, 2) for s in (0, 1, 2))
    for staged, depth in ((0, 2), (0, 3)):
        v = {"slice_s": 0, "staged": staged, "depth": depth}
        assert blocks_per_sm(v) == blocks_per_sm(dict(v, slice_s=1))
    assert choose_variant(128, 1000, 50 << 20, {"slice_s": 0, "staged": 0, "depth": 3})["slice_s"] == 0
    for bad in ({"slice_s": 0, "staged": 1}, {"slice_s": 0, "staged": 0, "depth": 4}, {"slice_s": 3}):
        with pytest.raises(ValueError, match="slice_s"):
            choose_variant(128, 1000, 50 << 20, bad)


def test_tuning_needs_gpu_tf32(bundled_int):
    with pytest.raises(ValueError, match="TF32 kernel only"):
        accspmm.plan(bundled_int, device="cpu", tuning={"cap": 4})


@pytest.mark.parametrize("cap", [-1, (1 << 20) + 1, 2.0, True, "8", None])
def test_tuning_cap_checked_at_plan_time(cap, bundled_int):
    """A forced cap outside what the schedule pass takes is refused by plan(), before any device
    work (the schedule would only refuse it at the first call)."""
    with pytest.raises(ValueError, match=r"tuning\['cap'\] must be an int"):
        accspmm.plan(bundled_int, device="cpu", tuning={"cap": cap})


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


def test_lpt_order():
    """Longest predicted task first, ties in window order; a permutation of the tasks."""
    cost = np.array([3.0, 9.0, 3.0, 5.0, 9.0, 1.0])
    assert lpt_order(cost).tolist() == [1, 4, 3, 0, 2, 5]
    skew = np.concatenate([[0], np.cumsum([2] * 300 + [500] + [3] * 200)]).astype(np.int64)
    tasks, tc = build_tasks(skew, 8)
    o = lpt_order(tc)
    assert sorted(o.tolist()) == list(range(len(tc))) and np.all(np.diff(tc[o]) <= 0)
    assert tasks[o[0], 0] < 0  # the parts of the 500-block window start first


@pytest.mark.parametrize("spread", [3, 10**7, 0.5])  # counting sort, merge sort (wide range), merge sort (fractions)
def test_lpt_order_matches_numpy_stable_argsort(spread):
    """The C order (csrc/acc_lpt_rows.c) is NumPy's stable argsort of the negated costs, on both of
    its paths, and lpt_rows moves whole rows; a NaN cost is refused."""
    from accspmm import _core

    rng = np.random.default_rng(7)
    for T in (0, 1, 2, 7, 1000, 4099):
        cost = np.floor(rng.random(T) * 40) * spread + (1e6 if spread == 10**7 and T else 0)
        if T > 3 and spread == 10**7:
            cost[0] = 0.0  # a range above the counting sort's limit
        want = np.argsort(-cost, kind="stable")
        assert lpt_order(cost).tolist() == want.tolist()
        rows = rng.integers(-9, 99, (T, TASK_WORDS)).astype(np.int32)
        assert np.array_equal(_core.lpt_rows(rows, cost), rows[want])
    with pytest.raises(ValueError):
        lpt_order(np.array([1.0, np.nan]))
    with pytest.raises(TypeError):
        _core.lpt_rows(np.zeros((2, TASK_WORDS), np.int64), np.zeros(2))


def test_extension_schedule_encoding():
    """The built CUDA extension and the Python schedule agree on warps per task and task words."""
    _cuda = pytest.importorskip("accspmm._cuda")
    assert (_cuda.TF32_WARPS, _cuda.TF32_TASK_WORDS) == (WARPS, TASK_WORDS)


def _random_window_offsets(rng, trial):
    nb = rng.integers(0, [3, 10, 100, 1000][trial % 4], size=int(rng.integers(0, 400)))
    if trial % 5 == 0 and nb.size:
        nb[rng.integers(0, nb.size, 3)] = 5000
    return np.r_[0, np.cumsum(nb)].astype(np.int64)


def test_c_schedule_matches_reference():
    """The C builder (csrc/acc_schedule_cost.c) gives the NumPy reference's task rows and costs
    exactly, for every cap, on PACK runs, GROUP windows, multi-part SPLIT windows, empty windows,
    hubs, and the bundled matrix's windows in three orders."""
    rng = np.random.default_rng(7)
    cases = [_random_window_offsets(rng, t) for t in range(200)]
    A = accspmm.datasets.load_bundled(np.float32)
    for perm in (None, "degree", "affinity"):
        p = None if perm is None else accspmm.reorder(A, perm)
        cases.append(np.asarray(accspmm.BitTCF.from_csr(A, p).window_offsets))
    for wo in cases:
        for cap in CAPS:
            tasks, cost = build_tasks(wo, cap)
            ref_tasks, ref_cost = build_tasks_reference(wo, cap)
            assert tasks.dtype == np.int32 and cost.dtype == np.float64
            assert np.array_equal(tasks, ref_tasks) and np.array_equal(cost, ref_cost), (wo[:10], cap)
            # the counts the runner sizes split workspaces with, from the same pass
            _, _, (slots, splits, cut) = _tf32.schedule(wo, cap)
            multi = (ref_tasks[:, 0] < 0) & (ref_tasks[:, 2] > 1)
            assert (slots, splits) == (int(multi.sum()), int((multi & (ref_tasks[:, 1] == 0)).sum()))
            assert cut == (int((np.diff(wo) > cap).sum()) if cap else 0)


def test_predict_cap_matches_built_schedule():
    """The C costs of every cap at once (in parallel) give exactly the prediction of the built tasks."""
    rng = np.random.default_rng(7)
    variant = _tf32.choose_variant(128, 1000, 50 << 20)
    for trial in range(200):
        wo = _random_window_offsets(rng, trial)
        for slices in (1, 4):
            pred = _tf32.predict_caps(wo, _tf32.CAPS, slices, variant)
            for cap in _tf32.CAPS:
                built = _tf32.predict(build_tasks_reference(wo, cap)[1], slices, variant)
                assert pred[cap] == built == _tf32.predict_cap(wo, cap, slices, variant), (trial, cap)


def test_schedule_costs_match_task_build():
    """The costs-only pass (every cap at once, in parallel) gives exactly the sum, max and count of
    the tasks that the row-writing pass builds, for the package's constants and other integer ones
    (WB = 0 included), on random windows with hubs and one window of 2^24 blocks (split up to 2^23
    ways).  Constants that are not whole numbers in [0, 1024], and decreasing offsets, are refused."""
    from accspmm import _core

    rng = np.random.default_rng(11)
    cases = [_random_window_offsets(rng, t) for t in range(120)]
    cases.append(np.array([0, 3, 3, 1 << 24, (1 << 24) + 5], np.int64))
    consts = [(WB, _tf32.FILL, _tf32.REDUCE, _tf32.TASK, _tf32.MERGE), (0.0, 1.0, 3.0, 7.0, 5.0),
              (5.0, 0.0, 0.0, 0.0, 0.0), (1024.0, 1.0, 1.0, 1.0, 1024.0)]
    caps = np.asarray(CAPS + (1, 3, 1000), np.int64)
    for wo in cases:
        for c in consts[:3] if wo[-1] > 1 << 20 else consts:  # (its sums pass 2^53 with MERGE = 1024)
            sums, maxes, ntasks = _core.schedule_costs(wo, caps, WARPS, c)
            for j, cap in enumerate(caps.tolist()):
                tasks, cost, counts = _core.schedule_build(wo, cap, WARPS, c)
                assert ntasks[j] == tasks.shape[0] == cost.shape[0], (wo[:6], c, cap)
                if cost.size:
                    assert sums[j] == cost.sum() and maxes[j] == cost.max(), (wo[:6], c, cap)
                if j % 4 == 0:  # with the counted tasks given (a plan's first call), one pass: the same rows
                    t2, c2, k2 = _core.schedule_build(wo, cap, WARPS, c, int(ntasks[j]))
                    assert np.array_equal(t2, tasks) and np.array_equal(c2, cost) and k2 == counts
    wo = cases[0]
    for bad in ((2.5, 2.0, 2.0, 4.0, 2.0), (2.0, -1.0, 2.0, 4.0, 2.0), (2.0, 2.0, 2.0, 4.0, 1025.0)):
        with pytest.raises(ValueError):
            _core.schedule_costs(wo, caps, WARPS, bad)
        with pytest.raises(ValueError):
            _core.schedule_build(wo, 8, WARPS, bad)
    with pytest.raises(ValueError):
        _core.schedule_build(np.array([0, 5, 3, 9], np.int64), 8, WARPS, consts[0])
    true = _core.schedule_build(wo, 8, WARPS, consts[0])[0].shape[0]
    for wrong in (true - 1, true + 1):  # a task count that is not the schedule's is refused, not trusted
        with pytest.raises(ValueError, match=f"has {true} tasks, not the {wrong} given"):
            _core.schedule_build(wo, 8, WARPS, consts[0], wrong)


def test_schedule_bad_input():
    with pytest.raises(ValueError, match="at least one entry"):
        build_tasks(np.zeros(0, np.int64), 4)
    with pytest.raises(ValueError):
        _tf32.predict_caps(np.array([0, 3], np.int64), [-1], 1, _tf32.choose_variant(128, 10, 1 << 20))


def test_price_terms_match_the_built_schedules():
    """price_terms: each cap's sum, max and task count as the C schedule builds them, its cut windows
    as the build counts them (windows of more than cap > 0 blocks), and the identity's task count
    also when cap 0 is not asked for."""
    rng = np.random.default_rng(11)
    for trial in range(20):
        W = int(rng.integers(1, 400))
        blocks = rng.integers(0, 5, size=W) + (rng.random(W) < 0.1) * rng.integers(0, 300, size=W)
        wo = np.concatenate([[0], np.cumsum(blocks)]).astype(np.int64)
        caps = [c for c in CAPS if c > 0] if trial % 2 else list(CAPS)
        terms, identity = _tf32.price_terms(wo, caps)
        assert identity == _tf32.schedule(wo, 0)[0].shape[0]
        for cap in caps:
            tasks, cost, counts = _tf32.schedule(wo, cap)
            s, w, t, cut = terms[cap]
            assert (s, w, t, cut) == (float(cost.sum()), float(cost.max()) if cost.size else 0.0,
                                      tasks.shape[0], counts[2]), (trial, cap)


def test_decision_terms_apply_only_where_the_identity_fills_a_wave():
    """decision_predictions: the bound alone below a wave; at a wave or more, the cost per cut window
    and the factor on packed caps (the identity has no cut windows and no factor); half plans take the
    same terms."""
    P, slices = 1584, 2
    terms = {0: (18000.0, 35.0, 1233, 0), 8: (18500.0, 25.0, 1114, 356)}
    below = _tf32.decision_predictions(terms, 700, slices, P)  # 700 x 2 < P
    assert below == {c: s * slices / P + w for c, (s, w, _, _) in terms.items()}
    assert min(below, key=below.get) == 8
    full = _tf32.decision_predictions(terms, 1233, slices, P)
    assert full[0] == below[0]
    cut = (18500.0 + 16.0 * 356) * slices / P + 25.0
    assert full[8] == pytest.approx(cut * 1.05)
    assert set(_tf32.DECISION_TERMS) == set(_tf32.ELEM.values())
    assert all(t == (16.0, 0.05) for t in _tf32.DECISION_TERMS.values())  # half plans take TF32's terms
    assert _tf32.decision_predictions(terms, 1233, slices, P, *_tf32.DECISION_TERMS[1]) == full
    assert min(full, key=full.get) == 0
    assert _tf32.decision_predictions(terms, 1233, slices, P, 0.0, 0.0) == below  # no terms: the bound
    assert _tf32.decision_predictions({4: (0.0, 0.0, 0, 0)}, 0, slices, P) == {4: 0.0}  # no tasks


def test_wide_csr_rule():
    """Widths 5-32 of BitTCF plans: the wide CSR kernel's lanes (the least power of two >= n / 4, 2 to 32, as the
    extension's), its parts (rows of more than CSR_WIDE_LONG entries in parts of at most CSR_WIDE_PART), and the
    rule: the CSR kernel where its model predicts at most CSR_WIDE_MARGIN x BitTCF's (a tall matrix of one
    column), BitTCF for dense 8 x 8 blocks, never above CSR_WIDE_MAX_N; a known call count must repay the CSR
    upload unless it is already on the device."""
    from accspmm._tf32 import (BITTCF_WIDE_MODEL, CSR_WIDE_ELEMENT, CSR_WIDE_ELEMENT_MAX_N, CSR_WIDE_LONG,
                               CSR_WIDE_MARGIN, CSR_WIDE_MAX_N, CSR_WIDE_PART, csr_long_parts, csr_wide_lanes,
                               csr_wide_time, wide_csr)

    assert [csr_wide_lanes(n) for n in (5, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 10**6)] == \
        [2, 2, 4, 4, 8, 8, 16, 16, 32, 32, 32, 32]
    lengths = np.array([CSR_WIDE_LONG, CSR_WIDE_LONG + 1, 0, 3 * CSR_WIDE_PART + 1])
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    parts = csr_long_parts(indptr, CSR_WIDE_LONG, CSR_WIDE_PART).reshape(-1, 4)
    assert parts[:, 0].tolist() == [1, 1, 3, 3, 3, 3]  # row 1 in 2 parts, row 3 in 4; row 0 (= LONG) in none
    assert (parts[:, 2] - parts[:, 1]).max() <= CSR_WIDE_PART and (parts[:, 3] >> 32).tolist() == [2, 2, 4, 4, 4, 4]
    tall = (200_000, 1, 200_000, 1, 25_000, 25_000)  # m, k, nnz, longest row, blocks, windows
    for n in (5, 8, 16):
        on, why = wide_csr(n, *tall)
        assert on and why.startswith("wide CSR kernel: CSR predicts"), n
        b0, b1, b2 = BITTCF_WIDE_MODEL
        assert csr_wide_time(n, *tall[:4]) <= CSR_WIDE_MARGIN * (b0 + b1 * 25_000 / 1e6 + b2 * 25_000 / 1e6)
    assert wide_csr(CSR_WIDE_MAX_N + 1, *tall) == (False, "")
    assert wide_csr(8, *tall, calls=1)[0] is False and "save less than the CSR upload" in wide_csr(8, *tall, calls=1)[1]
    assert wide_csr(8, *tall, calls=1, uploaded=True)[0] and wide_csr(8, *tall, calls=10**6)[0]
    on, why = wide_csr(16, 24_000, 24_000, 192_000, 8, 3_000, 3_000)  # dense 8 x 8 blocks on the diagonal
    assert not on and why.startswith("Tensor Cores:")
    # a hub: its parts' chain is priced (the last part sums them one after another)
    assert csr_wide_time(8, 1000, 1000, 10**6, 10**6) > csr_wide_time(8, 1000, 1000, 10**6, 100)
    assert csr_wide_time(16, 10**6, 10**6, 10**7, 10) > csr_wide_time(16, 10**6, 10**3, 10**7, 10)  # B beyond L2
    # n not a multiple of 4: B's rows read element by element, priced by CSR_WIDE_ELEMENT (the same 8 columns)
    assert csr_wide_time(6, *tall[:4]) == pytest.approx(CSR_WIDE_ELEMENT * csr_wide_time(8, *tall[:4]))
    # half operands: their own constants, the Tensor-Core side by whether n is a multiple of 8
    from accspmm._tf32 import (BITTCF_WIDE_MODEL_HALF, BITTCF_WIDE_MODEL_HALF_LT8, CSR_WIDE_ELEMENT_HALF,
                               CSR_WIDE_MODEL_HALF_LT8)

    assert csr_wide_time(10, *tall[:4], elem=1) == \
        pytest.approx(CSR_WIDE_ELEMENT_HALF * csr_wide_time(12, *tall[:4], 1))
    for n in (8, 12):
        b0, b1, b2 = BITTCF_WIDE_MODEL_HALF[n % 8 != 0]
        assert f"BitTCF {b0 + b1 * 25_000 / 1e6 + b2 * 25_000 / 1e6:.1f}" in wide_csr(n, *tall, elem=2)[1], n
    # below n = 8 the half constants fitted on n = 5-16 (the n = 8-32 fit lost to them at n = 5-6)
    c0, c1, c2, _, c4, _ = CSR_WIDE_MODEL_HALF_LT8
    lt8 = c0 + (c1 + c2) * 200_000 * 8 / 1e6 + c4 / 100  # w = 8 columns, one part (log2 1 = 0)
    assert csr_wide_time(6, *tall[:4], elem=1) == pytest.approx(CSR_WIDE_ELEMENT_HALF * lt8)
    b0, b1, b2 = BITTCF_WIDE_MODEL_HALF_LT8[1]
    assert f"BitTCF {b0 + b1 * 25_000 / 1e6 + b2 * 25_000 / 1e6:.1f}" in wide_csr(6, *tall, elem=2)[1]
    assert wide_csr(8, *tall, elem=1)[0] and wide_csr(CSR_WIDE_MAX_N + 1, *tall, elem=1) == (False, "")
    # up to n = 32 the Tensor Cores still compute one 32-column slice (TF32) or one 64-column slice (half), so
    # the same models decide there: uniform random columns, 40 a row (BitTCF's blocks one entry a column)
    uniform = (8000, 8000, 320_000, 40, 40_000, 1000)
    assert CSR_WIDE_MAX_N == 32
    for n in (24, 32):
        assert wide_csr(n, *uniform)[0] and wide_csr(n, *uniform, elem=1)[0], n
    assert not wide_csr(33, *uniform)[0] and not wide_csr(33, *uniform, elem=1)[0]
    # TF32 widths above CSR_WIDE_ELEMENT_MAX_N that are not a multiple of 4 stay on the Tensor Cores; half plans not
    assert wide_csr(30, *uniform) == (False, "") and wide_csr(30, *uniform, elem=1)[0]
    assert wide_csr(CSR_WIDE_ELEMENT_MAX_N - 1, *uniform)[0]


def test_wide_csr_small_regime_rule():
    """Above CSR_WIDE_MAX_N, up to CSR_WIDE_SMALL_MAX_N and n a multiple of 4: the wide CSR kernel where its row
    groups fit one wave of a reference H100 (m x lanes <= REF_SMS x 2,048), BitTCF's blocks hold at most
    CSR_WIDE_SMALL_FILL entries on average, no row is longer than CSR_WIDE_SMALL_LONGEST and its last column slice
    (4 x lanes columns) is more than half used; beyond one wave where rows hold at least CSR_WIDE_ROWS_MEAN entries on
    average, A at most CSR_WIDE_ROWS_MAX_NNZ and B in the reference L2 (and such plans keep the build's CSR upload);
    the same rule for every
    operand format; a known call count must repay the CSR upload."""
    from accspmm._tf32 import (CSR_KEEP_MAX_ROWS, CSR_WIDE_MAX_N, CSR_WIDE_ROWS_MAX_NNZ, CSR_WIDE_ROWS_MEAN,
                               CSR_WIDE_SMALL_FILL, CSR_WIDE_SMALL_LONGEST, CSR_WIDE_SMALL_MAX_N, L2_REF, REF_SMS,
                               csr_keep, csr_wide_lanes, wide_csr)

    small = (2642, 2642, 6606, 5, 896, 331)  # minnesota: m, k, nnz, longest row, blocks, windows
    for elem in (0, 1, 2):
        for n in (36, 48, 64, 96, 100, 128, 224, 256):
            on, why = wide_csr(n, *small, elem=elem)
            assert on and why.startswith("wide CSR kernel:") and "a block" in why, (n, elem)
        # not a multiple of 4, the last slice at most half used (160: 32 of 128 columns, 192: 64), too wide
        for n in (CSR_WIDE_MAX_N + 1, 34, 130, 160, 192, CSR_WIDE_SMALL_MAX_N + 4, 512):
            assert wide_csr(n, *small, elem=elem) == (False, ""), (n, elem)
    wave = REF_SMS * 2048
    for n in (64, 128):
        g = csr_wide_lanes(n)
        m = wave // g
        at = (m, m, 8 * m, 40, m, -(-m // 8))
        assert wide_csr(n, *at)[0] and not wide_csr(n, m + 1, *at[1:])[0], n  # one wave of row groups
        assert not wide_csr(n, m, m, CSR_WIDE_SMALL_FILL * m + 1, 40, m, -(-m // 8))[0]  # blocks too full
        assert wide_csr(n, m, m, CSR_WIDE_SMALL_FILL * m, 40, m, -(-m // 8))[0]
        assert wide_csr(n, m, m, 8 * m, CSR_WIDE_SMALL_LONGEST, m, -(-m // 8))[0]
        on, why = wide_csr(n, m, m, 8 * m, CSR_WIDE_SMALL_LONGEST + 1, m, -(-m // 8))  # a long row's chain of parts
        assert not on and why.startswith("Tensor Cores:")
        # beyond one wave: rows of CSR_WIDE_ROWS_MEAN entries or more on average, A of at most CSR_WIDE_ROWS_MAX_NNZ
        m = 3 * wave // g  # past CSR_KEEP_MAX_ROWS too
        nnz = CSR_WIDE_ROWS_MEAN * m
        if nnz <= CSR_WIDE_ROWS_MAX_NNZ:
            assert wide_csr(n, m, m, nnz, 40, nnz // 10, -(-m // 8))[0] and csr_keep(m, nnz), n
            assert not wide_csr(n, m, m, nnz - 1, 40, nnz // 10, -(-m // 8))[0] and not csr_keep(m, nnz - 1), n
            assert not wide_csr(n, m, m, nnz, 40, nnz // 13, -(-m // 8))[0]  # blocks too full
    m = 50_000  # 20 a row: one nonzero too many
    assert wide_csr(128, m, m, CSR_WIDE_ROWS_MAX_NNZ, 40, CSR_WIDE_ROWS_MAX_NNZ // 8, m // 8)[0]
    assert not wide_csr(128, m, m, CSR_WIDE_ROWS_MAX_NNZ + 1, 40, CSR_WIDE_ROWS_MAX_NNZ // 8, m // 8)[0]
    for elem, k in ((0, L2_REF // (4 * 256)), (1, L2_REF // (2 * 256))):  # B of k x 256 fills the reference L2
        assert wide_csr(256, m, k, CSR_WIDE_ROWS_MAX_NNZ, 40, CSR_WIDE_ROWS_MAX_NNZ // 8, m // 8, elem=elem)[0]
        assert not wide_csr(256, m, k + 1, CSR_WIDE_ROWS_MAX_NNZ, 40, CSR_WIDE_ROWS_MAX_NNZ // 8, m // 8, elem=elem)[0]
    assert csr_keep(CSR_KEEP_MAX_ROWS, 0) and not csr_keep(CSR_KEEP_MAX_ROWS + 1, CSR_KEEP_MAX_ROWS + 1)
    assert not wide_csr(128, *small, calls=1)[0] and "save less than the CSR upload" in wide_csr(128, *small, calls=1)[1]
    assert wide_csr(128, *small, calls=1, uploaded=True)[0] and wide_csr(128, *small, calls=1000)[0]


def test_wide_csr_lane_cols_rule():
    """Half operands take 8 columns a lane at n >= CSR_WIDE8_MIN_N, a multiple of 8, on at least CSR_WIDE8_MIN_ROWS
    rows of at least CSR_WIDE8_MEAN entries on average; every other case, and TF32 always, 4."""
    from accspmm._tf32 import CSR_WIDE8_MEAN, CSR_WIDE8_MIN_N, CSR_WIDE8_MIN_ROWS, csr_wide_lane_cols

    m = CSR_WIDE8_MIN_ROWS
    nnz = CSR_WIDE8_MEAN * m
    for elem in (1, 2):
        for n in (CSR_WIDE8_MIN_N, 128, 136, 256):
            assert csr_wide_lane_cols(n, m, nnz, elem) == 8, (elem, n)
            assert csr_wide_lane_cols(n, m, nnz - 1, elem) == 4, (elem, n)  # rows a little shorter
            assert csr_wide_lane_cols(n, m - 1, nnz, elem) == 4, (elem, n)  # too few rows
            assert csr_wide_lane_cols(n, m, nnz, 0) == 4, n  # TF32
        for n in (CSR_WIDE8_MIN_N - 8, CSR_WIDE8_MIN_N + 4, 100, 1):
            assert csr_wide_lane_cols(n, m, nnz, elem) == 4, (elem, n)


def test_wide_csr_part_length():
    """The wide CSR kernel's parts: CSR_WIDE_PART_LONG where its groups at CSR_WIDE_PART (rows, a long row once
    per part) exceed the reference GPU's groups at once (REF_SMS x 2,048 / lanes a row), else CSR_WIDE_PART."""
    from accspmm._tf32 import (CSR_WIDE_LONG, CSR_WIDE_PART, CSR_WIDE_PART_LONG, REF_SMS, csr_long_parts,
                               csr_wide_count, csr_wide_lanes, csr_wide_part)

    assert (CSR_WIDE_PART, CSR_WIDE_PART_LONG) == (32, 64)

    def part(lengths, n):
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        records = csr_long_parts(indptr, CSR_WIDE_LONG, CSR_WIDE_PART).reshape(-1, 4)  # the groups, from records
        groups = len(lengths) - int(((records[:, 3] & 0xFFFFFFFF) == 0).sum()) + records.shape[0]
        part = csr_wide_part(indptr, n)
        count = csr_wide_count(indptr)  # what a plan passes (its count of the same offsets)
        assert count[2] == (int(np.max(lengths)) if len(lengths) else 0) and csr_wide_part(indptr, n, count) == part
        assert part == (CSR_WIDE_PART_LONG if groups > REF_SMS * 2048 // csr_wide_lanes(n) else CSR_WIDE_PART)
        return part

    cap = {n: REF_SMS * 2048 // csr_wide_lanes(n) for n in (8, 32)}  # 135,168 and 33,792 groups
    assert part(np.full(60_000, 50), 32) == 64 and part(np.full(60_000, 50), 8) == 32  # 120,000 groups
    assert part(np.full(1000, 50), 32) == 32  # few rows: short parts spread them
    # the boundary: rows of 33 entries are 2 parts each; rows of at most 32 one group
    short = cap[32] - 2 * 100
    assert part(np.r_[np.full(100, 33), np.full(short, 3)], 32) == 32
    assert part(np.r_[np.full(100, 33), np.full(short + 1, 3)], 32) == 64
    assert part(np.full(cap[32] + 1, 32), 32) == 64 and part(np.zeros(0, np.int64), 32) == 32


def test_narrow_csr_rule():
    """The narrow widths' kernel of TF32 plans: the CSR kernel at the lanes that minimise its model where it
    predicts less than the BitTCF model, else BitTCF; rows of more than CSR_LONG entries cut into thread-block
    parts (the longest part's turns a term of its own); short rows over many windows take one lane; forced,
    the CSR kernel."""
    from accspmm import datasets
    from accspmm._tf32 import (BITTCF_NARROW_MODEL, CSR_BLOCK, CSR_LANES, CSR_LONG, CSR_PART, csr_narrow_time,
                               narrow_csr)

    # G3_circuit's shape: 1.58M rows of <= 6 entries, 754k blocks over 198k windows
    road = np.concatenate([[0], np.cumsum(np.tile([4, 5, 6, 4], 396370))]).astype(np.int64)
    lanes, rows, why = narrow_csr(road, 754_366, 198_185)
    assert lanes == 1 and rows.size == 0 and why.startswith("CSR kernel:")
    times = [csr_narrow_time(road.shape[0] - 1, int(road[-1]), 6, L) for L in CSR_LANES]
    assert times == sorted(times)  # more lanes only add work to rows this short
    # a hub of 10,000 entries among short rows: listed, and its turns priced by the thread block
    lengths = np.full(5000, 3)
    lengths[[7, 4000]] = [10_000, CSR_LONG + 1]
    hub = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    lanes, parts, why = narrow_csr(hub, 5000 * 3 // 8, 625, force=True)
    three, r7, r4000 = 3 << 32, int(hub[7]), int(hub[4000])  # row 7's 10,000 entries in 3 parts, 4000's 1,025 in one
    assert parts.tolist() == [7, r7, r7 + 3333, three, 7, r7 + 3333, r7 + 6666, three | 1,
                              7, r7 + 6666, r7 + 10_000, three | 2, 4000, r4000, r4000 + CSR_LONG + 1, 1 << 32]
    assert parts.dtype == np.int64 and "2 long rows in 4 parts" in why
    assert csr_narrow_time(5000, int(hub[-1]), 3, lanes, 10_000) == pytest.approx(
        csr_narrow_time(5000, int(hub[-1]), 3, lanes) + csr_narrow_time(0, 0, 0, 1, 10_000) -
        csr_narrow_time(0, 0, 0, 1))
    assert csr_narrow_time(0, 0, 0, 1, 10_000) > csr_narrow_time(0, 0, 0, 1, CSR_BLOCK * 8)
    # the parts bound a long row's turns: a row of a million entries costs no more turns than one part
    assert csr_narrow_time(0, 0, 0, 1, 1_000_000) <= csr_narrow_time(0, 0, 0, 1, CSR_PART)
    # a star's hub of 500,000 entries: 123 parts over as many thread blocks, the CSR kernel
    star = datasets.adversarial("star", 1_000_000)
    W = -(-star.shape[0] // 8)
    lanes, parts, why = narrow_csr(star.indptr, W + 1_000_000 // 64, W)
    assert lanes == 1 and parts.size == 4 * 123 and why.startswith("CSR kernel:")
    # where BitTCF's blocks are full (8,000 rows of 1,000 entries in dense 8 x 8 blocks), BitTCF
    dense = np.arange(0, 1000 * 8001, 1000, dtype=np.int64)
    assert narrow_csr(dense, 125_000, 1000)[0] == 0
    assert narrow_csr(dense, 125_000, 1000, force=True)[2].startswith("CSR kernel (forced):")
    b0 = BITTCF_NARROW_MODEL[0]
    assert narrow_csr(np.zeros(1, np.int64), 0, 0)[2].endswith(f"BitTCF {b0:.1f} (longest row 0)")
    # half operands: the BitTCF side priced by its own constants
    from accspmm._tf32 import BITTCF_NARROW_MODEL_HALF

    h0, h1, h2 = BITTCF_NARROW_MODEL_HALF
    why = narrow_csr(road, 754_366, 198_185, bittcf_model=BITTCF_NARROW_MODEL_HALF)[2]
    assert why.endswith(f"BitTCF {h0 + h1 * 0.754366 + h2 * 0.198185:.1f} (longest row 6)")
    # a known call count must pay for the CSR upload: G3_circuit's 61 MB against ~70 us a call
    assert narrow_csr(road, 754_366, 198_185, calls=10_000)[0] == 1
    lanes, rows, why = narrow_csr(road, 754_366, 198_185, calls=1)
    assert lanes == 0 and "1 calls save less than the CSR upload" in why
    assert narrow_csr(road, 754_366, 198_185, force=True, calls=1)[0] == 1


def test_csr_long_parts_cover_each_long_row_once():
    """The CSR kernel's long-row parts (csr_long_parts): every entry of every row longer than CSR_LONG in
    exactly one part, in order, each part of at most CSR_PART entries and at least one, the row's parts
    equal to a part or one entry apart, consecutive with the first at q - j; nothing for the other rows;
    offsets that do not start at zero move the parts with them."""
    from accspmm._tf32 import CSR_LONG, CSR_PART, csr_long_parts

    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 3 * CSR_LONG, 500)
    lengths[[0, 99, 100, 499]] = [CSR_LONG + 1, CSR_PART, CSR_PART + 1, 37 * CSR_PART - 1]
    lengths[[5, 6]] = [CSR_LONG, 0]
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    parts = csr_long_parts(indptr).reshape(-1, 4)
    assert parts.dtype == np.int64 and csr_long_parts(np.arange(0, 9 * CSR_LONG + 1, CSR_LONG)).size == 0
    covered = {}
    for q, (row, e0, e1, info) in enumerate(parts):
        j, P = int(info & 0xFFFFFFFF), int(info >> 32)
        assert P == -(-lengths[row] // CSR_PART) and 0 <= j < P
        assert parts[q - j][0] == row and parts[q - j][3] == P << 32  # the row's first part
        assert 1 <= e1 - e0 <= CSR_PART and e1 - e0 in (lengths[row] // P, -(-lengths[row] // P))
        covered.setdefault(int(row), []).append((int(e0), int(e1)))
    assert sorted(covered) == np.flatnonzero(lengths > CSR_LONG).tolist()
    for row, ranges in covered.items():
        assert ranges[0][0] == indptr[row] and ranges[-1][1] == indptr[row + 1]
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    shifted = csr_long_parts(indptr.astype(np.int64) + 5).reshape(-1, 4)
    assert np.array_equal(shifted[:, 1:3], parts[:, 1:3] + 5) and np.array_equal(shifted[:, [0, 3]], parts[:, [0, 3]])


def _long_parts_numpy(indptr, long, part):
    """csr_long_parts in NumPy (its implementation before the C pass): the reference."""
    indptr = np.asarray(indptr, np.int64)
    lengths = np.diff(indptr)
    rows = np.flatnonzero(lengths > long).astype(np.int64)
    length = lengths[rows]
    parts = -(-length // part)
    first = np.cumsum(parts) - parts
    j = np.arange(int(parts.sum()), dtype=np.int64) - np.repeat(first, parts)
    P, n, start = np.repeat(parts, parts), np.repeat(length, parts), np.repeat(indptr[rows], parts)
    out = np.empty((j.size, 4), np.int64)
    out[:, 0], out[:, 1], out[:, 2], out[:, 3] = np.repeat(rows, parts), start + j * n // P, start + (j + 1) * n // P, \
        j | (P << 32)
    return out.reshape(-1)


def test_csr_long_parts_c_pass_matches_numpy():
    """The C pass of csr_long_parts (csrc/acc_csr_long_parts.c) gives NumPy's records for the narrow and the wide
    kernels' lengths, on random lengths, empty A and no long rows; its count mode gives the rows, parts and longest
    row; given the parts' number it makes the same records in one pass and refuses a wrong number; bad lengths
    raise."""
    from accspmm import _core
    from accspmm._tf32 import CSR_LONG, CSR_PART, CSR_WIDE_LONG, CSR_WIDE_PART, csr_long_parts

    rng = np.random.default_rng(8)
    for trial in range(20):
        lengths = rng.integers(0, rng.choice([40, 300, 5000]), rng.integers(0, 400))
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64) + trial
        for long, part in ((CSR_LONG, CSR_PART), (CSR_WIDE_LONG, CSR_WIDE_PART), (CSR_WIDE_LONG, 64), (0, 1)):
            got = csr_long_parts(indptr, long, part)
            assert got.dtype == np.int64 and np.array_equal(got, _long_parts_numpy(indptr, long, part)), (trial, long)
            rows, parts, longest = _core.csr_long_parts(indptr, long, part, True)
            assert (rows, 4 * parts) == (int((lengths > long).sum()), got.size)
            assert longest == (int(lengths.max()) if lengths.size else 0)
            assert np.array_equal(csr_long_parts(indptr, long, part, parts), got)  # the count given: one pass
            for wrong in (parts - 1, parts + 1):  # a count of other offsets: refused, never written past
                if wrong >= 0:
                    with pytest.raises(ValueError):
                        csr_long_parts(indptr, long, part, wrong)
    assert csr_long_parts(np.zeros(1, np.int64)).size == 0
    for bad in ((np.zeros(3, np.int64), 32, 0), (np.zeros(3, np.int64), -1, 32), (np.zeros(0, np.int64), 32, 32)):
        with pytest.raises(ValueError):
            _core.csr_long_parts(*bad)
