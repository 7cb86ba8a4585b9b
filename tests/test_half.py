"""Half precision ("fp16", "bf16"; accspmm._half): rounding, the BSR16 format, the CPU reference
(CI) and the GPU block-CSR kernel (marked gpu): bit-exact on integer data, within the GUIDE bound
on random data, scipy's non-finite semantics, every shape."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import (assert_capture_needs_warm_up, data_dir, half_ref, int_csr, int_dense, long_window_matrix,
                      to_format, with_int_values)
from hypothesis import given, settings
from hypothesis import strategies as st

import accspmm
from accspmm import _core, _half, datasets
from accspmm._validate import as_csr

torch = pytest.importorskip("torch")
PRECS = ["fp16", "bf16"]
TORCH_DT = {"fp16": torch.float16, "bf16": torch.bfloat16}


def exact_half(value: Fraction, p: int, bias: int) -> float:
    """Round-to-nearest-even of a rational to a binary format with p fraction bits (reference)."""
    if value == 0:
        return 0.0
    a, sign = abs(value), (1 if value > 0 else -1)
    e = 1 - bias
    while a >= Fraction(2) ** (e + 1):
        e += 1
    while e > 1 - bias and a < Fraction(2) ** e:
        e -= 1
    q = a / Fraction(2) ** (e - p)
    fl = q.numerator // q.denominator
    rem = q - fl
    fl += 1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2) else 0
    return sign * float(Fraction(fl) * Fraction(2) ** (e - p))


# ---- rounding ---------------------------------------------------------------------------

def test_round_float32_matches_numpy_and_torch():
    rng = np.random.default_rng(0)
    u = np.concatenate([rng.integers(0, 2**32, 400_000, dtype=np.uint64).astype(np.uint32),
                        np.arange(0x33000000, 0x38900000, 997, dtype=np.uint32),  # FP16 subnormals
                        np.arange(0x477FE000, 0x47801000, dtype=np.uint32)])  # around FP16's overflow
    x = u.view(np.float32)
    ok = ~np.isnan(x)
    with np.errstate(over="ignore"):
        ref16 = x.astype(np.float16).view(np.uint16)
    refbf = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    h16 = _half.round_bits(x, "fp16")[0]
    hbf = _half.round_bits(x, "bf16")[0]
    assert np.array_equal(h16[ok], ref16[ok]) and np.array_equal(hbf[ok], refbf[ok])
    assert np.isnan(_half.widen(h16[~ok], "fp16")).all() and np.isnan(_half.widen(hbf[~ok], "bf16")).all()


def test_widen_is_exact_for_every_pattern():
    bits = np.arange(65536, dtype=np.uint16)
    f16 = bits.view(np.float16).astype(np.float32)
    bf = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).float().numpy()
    for prec, ref in (("fp16", f16), ("bf16", bf)):
        w = _half.widen(bits, prec)
        same = (w.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(w) & np.isnan(ref))
        assert same.all(), prec


@pytest.mark.parametrize("prec,p,bias", [("fp16", 10, 15), ("bf16", 7, 127)])
def test_float64_rounds_once(prec, p, bias):
    # 1 + half an ulp + a little: float32 first would make it a tie and round it down to 1
    x = np.array([1 + 2.0**-(p + 1) + 2.0**-40, -(1 + 2.0**-(p + 1) + 2.0**-40), 3 * 2.0**-(bias + p + 1) + 2**-200])
    got = _half.widen(_half.round_bits(x, prec)[0], prec).astype(np.float64)
    want = [exact_half(Fraction(v), p, bias) for v in x]
    assert got.tolist() == want
    assert got[0] == 1 + 2.0**-p  # rounded up, not to 1


@pytest.mark.parametrize("prec", PRECS)
def test_values_outside_the_range_raise_naming_them(prec):
    lo, hi = _half.RANGE[prec]
    A = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 3.0 * hi, 0]]))
    with pytest.raises(ValueError, match=r"A\[1, 1\] = .* outside the " + prec + ".*inf"):
        accspmm.plan(A, device="cpu", precision=prec)
    A = sp.csr_matrix(np.array([[1.0, 0, lo / 4], [0, 1, 0]]))
    with pytest.raises(ValueError, match=r"A\[0, 2\] = .*round to zero"):
        accspmm.plan(A, device="cpu", precision=prec)
    # the smallest subnormal and the largest finite value are in range
    A = sp.csr_matrix(np.array([[lo, 0, hi]]))
    p = accspmm.plan(A, device="cpu", precision=prec)
    assert p(np.array([[1.0], [0], [0]], np.float32))[0, 0] == np.float32(lo)


# ---- the BSR16 format -------------------------------------------------------------------

def frag_pos(i, j):
    return 8 * (4 * (i % 8) + (j % 8) // 2) + 2 * (i // 8 + 2 * (j // 8)) + j % 2


def bsr16_to_dense(f, perm, shape):
    """A (original row order, float64 of the half bits) and its stored-entry mask, from BSR16."""
    m, k = shape
    M = -(-m // 16) * 16
    K = -(-k // 16) * 16 + 16
    dense = np.zeros((M, K), np.uint16)
    mask = np.zeros((M, K), bool)
    bo, cols = f["brow_offsets"], f["block_cols"]
    vals = f["block_values"].reshape(-1, 256)
    masks = f["block_masks"].reshape(-1, 4)
    ij = [(i, j) for i in range(16) for j in range(16)]
    pos = np.array([frag_pos(i, j) for i, j in ij])
    for r in range(bo.shape[0] - 1):
        for b in range(bo[r], bo[r + 1]):
            c = cols[b]
            dense[16 * r:16 * r + 16, 16 * c:16 * c + 16] = vals[b][pos].reshape(16, 16)
            bits = np.array([(int(masks[b][(16 * i + j) // 64]) >> ((16 * i + j) % 64)) & 1 for i, j in ij], bool)
            mask[16 * r:16 * r + 16, 16 * c:16 * c + 16] = bits.reshape(16, 16)
    out_v = np.zeros((m, k), np.uint16)
    out_m = np.zeros((m, k), bool)
    out_v[perm] = dense[:m, :k]
    out_m[perm] = mask[:m, :k]
    return out_v, out_m


@pytest.mark.parametrize("shape,density", [((37, 53), 0.2), ((16, 16), 1.0), ((100, 7), 0.5), ((5, 300), 0.1),
                                           ((64, 64), 0.0)])
def test_bsr16_build_reconstructs_A(shape, density):
    rng = np.random.default_rng(5)
    A = sp.random(*shape, density=density, format="csr", random_state=7, dtype=np.float64)
    A.data = rng.integers(-8, 9, A.nnz).astype(np.float64)  # explicit zeros included: they are stored
    A.sort_indices()
    check_bsr16_build(A, rng.permutation(shape[0]).astype(np.int64))


def test_bsr16_build_rows_running_out_at_different_blocks():
    """Block rows whose rows have different lengths and interleaved columns (the build's merge drops
    a row from its cursor when the row runs out), a dense row and empty rows among them."""
    m, k = 48, 300
    rows, cols = zip(*[(i, j) for i in range(m) if i % 16 not in (5, 6) for j in
                       (range(k) if i % 16 == 9 else range(0, 40 + 30 * (i % 5), i % 8 + 1))])
    A = sp.csr_matrix((np.random.default_rng(3).integers(1, 9, len(rows)).astype(np.float64), (rows, cols)),
                      shape=(m, k))
    for perm in (np.arange(m), np.random.default_rng(4).permutation(m)):
        check_bsr16_build(A, perm.astype(np.int64))


@settings(max_examples=80, deadline=None)
@given(case=int_csr(), permute=st.booleans())
def test_bsr16_build_drawn(case, permute):
    """Drawn matrices (empty block rows, rows of every length, duplicates summed), identity or a random
    row order."""
    A, seed = case
    A = sp.csr_matrix(A, dtype=np.float64)
    A.sum_duplicates()  # canonical: sorted columns, no duplicates (explicit zeros stay stored)
    perm = np.random.default_rng(seed).permutation(A.shape[0]) if permute else np.arange(A.shape[0])
    check_bsr16_build(A, perm.astype(np.int64))


def check_bsr16_build(A, perm):
    """BSR16 of A (canonical, values exact in FP16) with rows in ``perm`` order holds exactly A."""
    shape = A.shape
    bits = _half.round_bits(A.data, "fp16")[0]
    f = _core.bsr16_build(shape[0], shape[1], A.indptr.astype(np.int64), A.indices.astype(np.int32), bits, perm)
    v, mask = bsr16_to_dense(f, perm, shape)
    assert np.array_equal(mask, (A != 0).toarray() | _stored(A))
    assert np.array_equal(v.view(np.float16).astype(np.float64), A.toarray())
    bo, cols = f["brow_offsets"], f["block_cols"]
    for r in range(bo.shape[0] - 1):  # each block row's column blocks ascend strictly
        assert (np.diff(cols[bo[r]:bo[r + 1]]) > 0).all()


def _stored(A):
    S = sp.csr_matrix((np.ones(A.nnz, bool), A.indices, A.indptr), shape=A.shape)
    return S.toarray()


def test_bsr16_build_hub_and_wide_columns_are_linear():
    # one row holding every column of a 2^22-column matrix, and a column block per row elsewhere
    k = 1 << 22
    rows = [np.arange(k, dtype=np.int32)] + [np.array([(i * 7919) % k], np.int32) for i in range(1, 64)]
    indptr = np.concatenate(([0], np.cumsum([r.size for r in rows]))).astype(np.int64)
    indices = np.concatenate(rows)
    bits = np.full(indices.size, 0x3C00, np.uint16)
    f = _core.bsr16_build(64, k, indptr, indices, bits, np.arange(64, dtype=np.int64))
    assert int(f["brow_offsets"][1]) == k // 16  # block row 0: the hub fills every column block


# ---- the schedule -----------------------------------------------------------------------

def check_schedule(bo):
    tasks, splits, slots, cap, pack = _half.schedule(bo)
    nb = np.diff(bo)
    covered = np.zeros(bo[-1], int)
    rows = np.zeros(nb.size, int)
    for w0, w1, lo, hi, slot in tasks:
        assert w0 < w1 and bo[w0] <= lo <= hi <= bo[w1]
        covered[lo:hi] += 1
        if slot >= 0:  # a part of a split row
            assert w1 == w0 + 1 and nb[w0] > cap and 0 < hi - lo <= cap
            rows[w0] = 1
        else:  # a pack: whole rows
            assert (lo, hi) == (bo[w0], bo[w1]) and not (nb[w0:w1] > cap).any()
            rows[w0:w1] += 1
    assert (covered == 1).all() and (rows == 1).all()  # every block once, every row (empty ones too) once
    assert (np.diff(tasks[:, 0]) >= 0).all()  # row order
    assert sorted(tasks[tasks[:, 4] >= 0, 4].tolist()) == list(range(slots))
    return tasks, splits, slots, cap, pack


def test_schedule_covers_every_block_once_and_splits_hubs():
    nb = np.array([0, 3, 1000, 5, 0, 129, 1], np.int64)
    tasks, splits, slots, cap, _ = check_schedule(np.concatenate(([0], np.cumsum(nb))))
    # 1138 blocks: under one wave of resident warps, so the floor (16) or 4 x the median row (5)
    assert cap == max(_half.CAP_FLOOR, _half.CAP_MEDIAN * 5) == 20
    p2, p5 = -(-1000 // cap), -(-129 // cap)
    assert splits.tolist() == [[2, 0, p2], [5, p2, p5]] and slots == p2 + p5


@pytest.mark.parametrize("nb", [[51] * 512, [0] * 40, [3], [0, 0, 7, 0], list(range(300))])
def test_schedule_without_split_rows(nb):
    tasks, splits, slots, _, _ = check_schedule(np.concatenate(([0], np.cumsum(nb))).astype(np.int64))
    assert splits.shape == (0, 3) and slots == 0 and (tasks[:, 4] == -1).all()


def test_schedule_of_no_rows():
    tasks, splits, slots, _, _ = _half.schedule(np.zeros(1, np.int64))
    assert tasks.shape == (0, 5) and splits.shape == (0, 3) and slots == 0


@pytest.mark.parametrize("seed", range(5))
def test_schedule_packs_random_rows(seed):
    rng = np.random.default_rng(seed)
    nb = rng.integers(0, 6, 3000) * (rng.random(3000) < 0.7)
    nb[rng.integers(0, 3000, 4)] = rng.integers(500, 5000, 4)  # hubs
    tasks, splits, _, _, pack = check_schedule(np.concatenate(([0], np.cumsum(nb))).astype(np.int64))
    assert splits.shape[0] >= 1 and (tasks[:, 4] < 0).sum() < 3000  # small rows were packed


# ---- pairs of block rows -------------------------------------------------------------------

@pytest.mark.parametrize("size", [2, 4])
@pytest.mark.parametrize("seed", range(6))
def test_group_index_is_the_union_of_its_block_rows(seed, size):
    """Each group of `size` block rows (pairs; the quads of the wgmma kernel) gets the ascending union of
    its column blocks, and each entry the BSR16 block of each row there (or -1): empty rows and groups, a
    number of block rows that is not a multiple of the size, a block row holding every column block."""
    rng = np.random.default_rng(seed)
    R, k = int(rng.integers(1, 40)), int(rng.integers(1, 500))
    ncb = -(-k // 16)
    rows = [np.sort(rng.choice(ncb, size=int(rng.integers(0, min(ncb, 7) + 1)), replace=False)) for _ in range(R)]
    rows[rng.integers(0, R)] = np.arange(ncb)
    if R > 4:
        rows[2] = rows[3] = np.zeros(0, np.int64)  # an empty pair
    bo = np.concatenate(([0], np.cumsum([r.size for r in rows]))).astype(np.int64)
    cols = np.concatenate(rows).astype(np.int32)
    offsets, pcols, blocks = _half.group_index(bo, cols, k, size)
    if size == 2:
        assert all(np.array_equal(a, b) for a, b in zip(_half.pair_index(bo, cols, k), (offsets, pcols, blocks)))
    assert offsets.shape == (-(-R // size) + 1,) and offsets[-1] == pcols.size == blocks.shape[0]
    assert blocks.shape[1:] == (size,)
    for q in range(offsets.shape[0] - 1):
        want = sorted(set(np.concatenate([rows[r] for r in range(size * q, min(R, size * q + size))]).tolist()))
        assert pcols[offsets[q]:offsets[q + 1]].tolist() == want
        for u in range(offsets[q], offsets[q + 1]):
            for h in range(size):
                r = size * q + h
                b = blocks[u, h]
                if r < R and pcols[u] in rows[r]:
                    assert b == bo[r] + rows[r].tolist().index(pcols[u]) and cols[b] == pcols[u]
                else:
                    assert b == -1


def test_pack_group_values_places_each_rows_block():
    """The quad kernel's packed values: entry u, row h holds BSR16 block blocks[u, h] (256 halves in
    fragment order), zeros where the row has none; no entries gives an empty array."""
    rng = np.random.default_rng(3)
    values = rng.integers(1, 2**16, 7 * 256).astype(np.uint16)
    blocks = np.array([[0, -1, 3, 6], [-1, -1, -1, 2], [5, 4, 1, -1]])
    packed = _half.pack_group_values(blocks, values)
    assert packed.shape == (3, 4, 256) and packed.dtype == np.uint16
    for u in range(3):
        for h in range(4):
            want = values[256 * blocks[u, h]:256 * blocks[u, h] + 256] if blocks[u, h] >= 0 else np.zeros(256)
            assert np.array_equal(packed[u, h], want)
    assert _half.pack_group_values(np.zeros((0, 4), np.int64), values).shape == (0, 4, 256)


def check_quad_schedule(per_quad):
    """quad_schedule's invariants: every entry in one task, a task within its quad, parts of split quads
    at most cap entries on consecutive slots that the splits list, every quad (empty ones too) present,
    biggest tasks first."""
    c = np.asarray(per_quad, np.int64)
    go = np.concatenate(([0], np.cumsum(c))).astype(np.int64)
    tasks, splits, slots, cap, pred = _half.quad_schedule(go)
    covered = np.zeros(go[-1], int)
    seen = np.zeros(c.size, int)
    parts = {}
    for q0, q1, lo, hi, slot in tasks:
        assert q1 == q0 + 1 and go[q0] <= lo <= hi <= go[q1]
        covered[lo:hi] += 1
        if slot >= 0:
            assert c[q0] > cap and 0 < hi - lo <= cap
            parts.setdefault(int(q0), []).append((int(lo), int(slot)))
        else:
            assert (lo, hi) == (go[q0], go[q1])
            seen[q0] += 1
    assert (covered == 1).all()
    for q, first, n in splits.tolist():  # a split quad's parts: consecutive slots in entry order
        got = sorted(parts.pop(q))
        assert [sl for _, sl in got] == list(range(first, first + n)) and n > 1
        seen[q] += 1
    assert not parts and (seen == 1).all() and slots == int(splits[:, 2].sum() if splits.size else 0)
    size = tasks[:, 3] - tasks[:, 2] + np.where(tasks[:, 4] >= 0, _half.QUAD_PART_COST, 0)
    assert (np.diff(size) <= 0).all()  # biggest first: the GPU starts thread blocks in order
    return tasks, splits, slots, cap, pred


def test_quad_schedule_splits_hubs_and_spreads_few_quads():
    """A hub quad is cut (it would be the kernel's tail), quads as uniform as 32 x 32 blocks give never are,
    and fewer quads than SMs (ogbl-ddi: 67 of 267 entries) are cut so that they spread over the GPU; the
    predicted time never exceeds the unsplit schedule's."""
    hub = [40] * 300
    hub[17] = 2000
    tasks, splits, _, cap, pred = check_quad_schedule(hub)
    assert splits[:, 0].tolist() == [17] and splits[0, 2] == -(-2000 // cap)
    assert pred < _half.makespan(np.sort(np.array(hub) + _half.QUAD_TASK_COST)[::-1], _half.REF_SMS)
    for uniform in ([384] * 128, [97] * 128, [97, 104, 93] * 300):
        assert check_quad_schedule(uniform)[1].shape == (0, 3)
    _, splits, _, _, pred = check_quad_schedule([267] * 67)
    assert splits.shape[0] == 67 and pred < 267 + _half.QUAD_TASK_COST
    for few in ([0] * 5, [3], [0, 50, 0, 7], [], list(range(200))):
        check_quad_schedule(few)


def quad_model_of(A):
    """(_quads_may_win, _quad_model, whether LAYOUT_BYTES alone picks BitTCF) of A in its own row order, as
    the format model computes them."""
    A = sp.csr_matrix(A)
    m, k = A.shape
    perm = np.arange(m, dtype=np.int64)
    ip, ix = A.indptr.astype(np.int64), A.indices.astype(np.int32)
    bo16 = _core.bsr16_count(m, k, ip, ix, perm)
    ntc = int(_core.bittcf_count_stats(m, k, ip, ix, perm, False)["tc_blocks"])
    f = _core.bsr16_build(m, k, ip, ix, np.zeros(A.nnz, np.uint16), perm)
    quads = _half.group_index(f["brow_offsets"], f["block_cols"], k, 4)
    by_bytes = _half.LAYOUT_BYTES["bittcf"] * ntc < _half.LAYOUT_BYTES["bsr16"] * int(bo16[-1])
    model = _half._quad_model(quads, _half.quad_schedule(quads[0]), int(bo16[-1]), ntc)
    return _half._quads_may_win(bo16, ntc), model, by_bytes


def test_quad_model_takes_dense_graphs_only():
    """The format model's quads: a dense unstructured graph (7% of entries; ogbl-ddi has 10%) where BitTCF
    moves fewer bytes in all moves fewer bytes an SM as BSR16 quads (each 16-row tile of B feeds 64 rows);
    a sparse one does not even pass the count-only gate; the gate never refuses a matrix the full model
    takes."""
    gate, model, bittcf_by_bytes = quad_model_of(sp.random(3000, 3000, density=0.07, random_state=3))
    assert gate and model["wins"] and bittcf_by_bytes
    assert model["bytes_per_sm"]["quads"] < model["bytes_per_sm"]["bittcf"]
    assert model["mean_entries"] >= _half.QUAD_MIN_ENTRIES and model["entries_per_block"] <= _half.QUAD_SHARE_MAX
    gate, model, _ = quad_model_of(sp.random(3000, 3000, density=0.01, random_state=0))
    assert not gate and not model["wins"]
    for seed in range(4):
        gate, model, _ = quad_model_of(sp.random(1500, 1200, density=0.02 * (seed + 1) ** 2, random_state=seed))
        assert gate or not model["wins"]


def band_csr(size, width, seed=0):
    """size x size band matrix, entries |i - j| <= width // 2 with integer values (SMaT's band matrices)."""
    i = np.arange(size)
    lo, hi = np.maximum(0, i - width // 2), np.minimum(size - 1, i + width // 2)
    counts = hi - lo + 1
    indptr = np.concatenate(([0], np.cumsum(counts)))
    cols = np.arange(indptr[-1]) - np.repeat(indptr[:-1] - lo, counts)
    values = np.random.default_rng(seed).integers(1, 4, indptr[-1]).astype(np.float32)
    return sp.csr_matrix((values, cols, indptr), shape=(size, size))


def test_quad_rule_takes_quads_that_share_more_than_pairs():
    """The kernel choice's quads (_quad_rule with the pairs' entries): a band matrix of bandwidth 256, whose
    quads hold about 0.56 times the pairs' entries with about 21 entries each, runs quads; without the pairs'
    entries (the format model's rule) it needs QUAD_MIN_ENTRIES; a narrow band (13 entries a quad) and 32 x 32
    blocks (quads hold about as many entries as pairs) keep their rows or pairs."""
    def rule(A, with_pairs=True):
        A = sp.csr_matrix(A)
        m, k = A.shape
        perm = np.arange(m, dtype=np.int64)
        f = _core.bsr16_build(m, k, A.indptr.astype(np.int64), A.indices.astype(np.int32),
                              np.zeros(A.nnz, np.uint16), perm)
        bo, bc = f["brow_offsets"], f["block_cols"]
        quads, pairs = _half.group_index(bo, bc, k, 4), _half.pair_index(bo, bc, k)
        got = _half._quad_rule(quads, int(bo[-1]), pairs[1].size if with_pairs else None)
        return got, quads[1].size / pairs[1].size
    (share, mean, takes), ratio = rule(band_csr(2048, 256))
    assert takes and _half.QUAD_MIN_ENTRIES_SHARED <= mean < _half.QUAD_MIN_ENTRIES
    assert share > _half.QUAD_SHARE_MAX / 2 and ratio <= _half.QUAD_PAIR_RATIO
    assert not rule(band_csr(2048, 256), with_pairs=False)[0][2]
    assert not rule(band_csr(2048, 128))[0][2]  # 0.60 of the pairs' entries, 13 entries a quad
    blocks = blocky_matrix(2048, 2048, density=0.05, seed=3)
    assert not rule(blocks)[0][2] and rule(blocks)[0][1] < _half.QUAD_MIN_ENTRIES


def test_fills_slices_matches_the_c_call():
    """The plan's width rule below PAIR_MIN_N (fills_slices) is the C call's (acc_half_fills_slices)."""
    cu = pytest.importorskip("accspmm._cuda")
    want = [n for n in range(1, 600) if _half.fills_slices(n)]
    assert want == [n for n in range(1, 600) if cu.HalfLauncher.fills_slices(n)]
    assert want[:4] == [72, 80, 88, 96] and 128 in want and 136 not in want and 192 not in want and 200 in want


def test_makespan_is_greedy_list_scheduling():
    rng = np.random.default_rng(0)
    for _ in range(20):
        costs, machines = rng.integers(1, 50, int(rng.integers(0, 30))), int(rng.integers(1, 6))
        load = [0] * machines
        for x in costs:  # the next task to the machine that is free first
            load[int(np.argmin(load))] += x
        assert _half.makespan(costs, machines) == (max(load) if costs.size else 0)


def test_pair_index_of_no_blocks():
    offsets, pcols, blocks = _half.pair_index(np.zeros(6, np.int64), np.zeros(0, np.int32), 40)
    assert offsets.tolist() == [0, 0, 0, 0] and pcols.size == 0 and blocks.shape == (0, 2)


@pytest.mark.parametrize("tuning", [{"kernel": "fast"}, {"cap": 4}, "pairs", {"autotune": "yes"}, {"autotune": 1},
                                    {"narrow": "csr"}, {"csr_lanes": 4}])
def test_half_tuning_is_checked(tuning):
    with pytest.raises(ValueError, match="tuning"):
        accspmm.plan(odd_matrix(), device="cpu", precision="fp16", tuning=tuning)


def test_half_launcher_set_wide_is_checked():
    """HalfLauncher.set_wide (the C call's hand-over of some widths to the pair or quad kernel, two routes at
    most) takes another launcher without routes of its own, or None; the launchers free cleanly either way.
    No device is touched (the launchers are never called)."""
    cu = pytest.importorskip("accspmm._cuda")
    make = lambda pairs: cu.HalfLauncher(40, 30, *([0] * 6), 0, 0, 0, 0, 0, 0, pairs, 0, 0, 0, 0, 0, 0)  # noqa: E731
    rows, pairs, other = make(0), make(1), make(0)
    for bad in (rows, 3, "pairs"):
        with pytest.raises(TypeError, match="set_wide"):
            rows.set_wide(bad, 256)
    other.set_wide(pairs, 256)
    with pytest.raises(TypeError, match="set_wide"):
        rows.set_wide(other, 256)  # a launcher with a wide launcher of its own
    rows.set_wide(pairs, 256)
    rows.set_wide(None, 0)
    rows.set_wide(pairs, 512)
    quads = make(2)
    rows.set_wide(quads, 1, 1, 0, 256, 0)  # quads up to 256 columns, then pairs: two routes
    rows.set_wide(pairs, 257, 1, 0, -1, 1)
    for route in (-1, 2):
        with pytest.raises(ValueError, match="route"):
            rows.set_wide(pairs, 1, 1, 0, -1, route)
    with pytest.raises(TypeError, match="set_wide"):
        quads.set_wide(rows, 1)  # rows has routes of its own
    del pairs, other, quads  # rows keeps its wide launchers alive
    import gc

    gc.collect()
    del rows


def test_half_kernel_choice_needs_a_gpu_bsr16_plan():
    with pytest.raises(ValueError, match="format='bsr16'"):
        accspmm.plan(odd_matrix(), device="cpu", precision="fp16", tuning={"kernel": "pairs"})


# ---- the CPU reference (CI) -------------------------------------------------------------

def odd_matrix(seed=0):
    """45 x 61 with empty rows, an empty tail of rows, a dense row and integer values."""
    rng = np.random.default_rng(seed)
    d = (rng.random((45, 61)) < 0.15) * rng.integers(-8, 9, (45, 61))
    d[3] = 0
    d[40:] = 0
    d[7] = rng.integers(1, 9, 61)
    return sp.csr_matrix(d.astype(np.float32))


@pytest.mark.parametrize("prec", PRECS)
@pytest.mark.parametrize("n", [1, 7, 37, 64])
def test_cpu_integer_bit_exact(prec, n):
    A = odd_matrix()
    B = int_dense(61, n, seed=n)
    p = accspmm.plan(A, device="cpu", precision=prec)
    C = p(B)  # float32 B: float32 C
    assert C.dtype == np.float32 and np.array_equal(C, half_ref(A, B, prec, "float32"))
    Bt = torch.from_numpy(B).to(TORCH_DT[prec])
    Ct = p(Bt)
    assert Ct.dtype == TORCH_DT[prec]
    assert np.array_equal(Ct.double().numpy(), half_ref(A, B, prec, "half"))
    assert np.array_equal(A @ B, C)  # integer data: the same as scipy itself


def test_cpu_numpy_float16_in_and_out_and_float32_out():
    A = odd_matrix(1)
    B = int_dense(61, 9).astype(np.float16)
    p = accspmm.plan(A, device="cpu", precision="fp16")
    C = p(B)
    assert C.dtype == np.float16 and np.array_equal(C.astype(np.float64), half_ref(A, B, "fp16", "half"))
    out = np.empty((45, 9), np.float32)
    assert p(B, out=out) is out and np.array_equal(out, A @ B.astype(np.float32))
    v = p(B[:, 0])
    assert v.shape == (45,) and np.array_equal(v, C[:, 0])


def test_cpu_int64_indices_unsorted_and_duplicates():
    A = sp.csr_matrix((np.array([2.0, 3, -1, 4, 4]), np.array([5, 1, 5, 0, 0], np.int64),
                       np.array([0, 3, 3, 5], np.int64)), shape=(3, 6))
    B = int_dense(6, 5)
    for prec in PRECS:
        assert np.array_equal(accspmm.spmm(A, B, device="cpu", precision=prec), (A @ B).astype(np.float32))


@pytest.mark.parametrize("prec", PRECS)
def test_cpu_random_within_the_bound(prec):
    rng = np.random.default_rng(3)
    A = sp.random(500, 400, density=0.05, format="csr", random_state=3, dtype=np.float64)
    A.data = rng.standard_normal(A.nnz)
    B = rng.standard_normal((400, 33)).astype(np.float32)
    C = accspmm.plan(A, device="cpu", precision=prec)(B)
    check_bound(A, B, C, prec)


def check_bound(A, B, C, prec, output_rounded=False):
    """GUIDE section 3: |C - A B| <= (3u + k_i 2^-24) |A| |B| (+ u |A B| for a half output)."""
    ref = np.asarray(A @ np.asarray(B, np.float64))
    absref = np.asarray(abs(A) @ np.abs(np.asarray(B, np.float64)))
    k_i = np.diff(sp.csr_matrix(A).indptr)[:, None]
    u = _half.UNIT_ROUNDOFF[prec]
    bound = (3 * u + k_i * 2.0**-24) * absref + (u * np.abs(ref) if output_rounded else 0)
    err = np.abs(np.asarray(C, np.float64) - ref)
    assert (err <= bound).all(), float((err / np.maximum(bound, 1e-300)).max())


def test_cpu_nonfinite_b_like_scipy():
    A = odd_matrix(2)
    B = int_dense(61, 5)
    B[4, 1] = np.inf
    B[9, 3] = np.nan
    C = accspmm.plan(A, device="cpu", precision="fp16")(B)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    assert np.array_equal(np.isnan(C), np.isnan(ref)) and np.array_equal(np.isinf(C), np.isinf(ref))


def test_b_dtype_rules():
    A = odd_matrix()
    p = accspmm.plan(A, device="cpu", precision="bf16")
    with pytest.raises(TypeError, match="float16 but this plan computes in bf16"):
        p(np.ones((61, 2), np.float16))
    with pytest.raises(TypeError, match="float64"):
        p(np.ones((61, 2)))
    with pytest.raises(ValueError, match="dimension mismatch"):
        p(np.ones((60, 2), np.float32))
    with pytest.raises(ValueError, match="takes format 'auto' or one of \\('csr',\\)"):
        accspmm.plan(A, device="cpu", precision="fp16", format="bittcf")
    tf32 = accspmm.plan(A, device="cpu")
    with pytest.raises(TypeError, match="precision='fp16' or 'bf16'"):
        tf32(np.ones((61, 2), np.float16))


def test_cpu_torch_autograd():
    A = odd_matrix()
    p = accspmm.plan(A, device="cpu", precision="fp16")
    B = torch.from_numpy(int_dense(61, 4)).requires_grad_()
    p(B).sum().backward()
    want = np.asarray(A.T @ np.ones((45, 4)), np.float32)
    assert torch.equal(B.grad, torch.from_numpy(want))


# ---- the GPU kernel ---------------------------------------------------------------------

def hub_matrix():
    """300 x 20000 integers: a dense hub row (1250 column blocks, about 8x the median block row:
    a split block row), an empty tail."""
    rng = np.random.default_rng(4)
    d = (rng.random((300, 20000)) < 0.0005) * rng.integers(-8, 9, (300, 20000))
    d[17] = rng.integers(1, 9, 20000)
    d[280:] = 0
    return sp.csr_matrix(d.astype(np.float32))


def poisoned(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


FORMATS = ["bsr16", "bsr16-pairs", "bsr16-quads", "bittcf"]


def quads_usable():
    from accspmm import _cuda

    return _cuda.half_quads_usable()


def gpu_half_plan(A, prec, fmt, **kw):
    """A GPU half plan of format fmt: "bsr16" (BSR16, a warp per block row), "bsr16-pairs" (BSR16, a
    warp per pair of block rows), "bsr16-quads" (BSR16, a warpgroup per quad of block rows on wgmma
    where the GPU has it, other widths than multiples of 8 on padded copies; the row kernel otherwise) or
    "bittcf"."""
    if fmt.startswith("bsr16"):
        kw["tuning"] = {"kernel": fmt.split("-")[1] if "-" in fmt else "rows"}
    p = accspmm.plan(A, device="gpu", precision=prec, format=fmt.split("-")[0], **kw)
    assert p.format == fmt.split("-")[0]
    if fmt == "bsr16-quads":
        assert p.kernel_for(1) == p.kernel_for(7) == p.kernel_for(8) == ("quads" if quads_usable() else "rows")
    elif fmt.startswith("bsr16"):
        assert p.kernel_for(1) == p.kernel_for(10**6) == kw["tuning"]["kernel"]
    return p


def assert_c_routes(p):
    """The C call (HalfLauncher.route_for) runs every width above the narrow ones on kernel_for's kernel."""
    launcher = p._fast.__self__
    widths = (*range(5, 600), 1000, 4096, 10**6)
    assert [p._half_routes[launcher.route_for(n)] for n in widths] == [p.kernel_for(n) for n in widths]


def runs_quads(p, n):
    """Whether a plan runs the quad kernel at width n (which cuts a quad only where quad_schedule predicts
    a gain, so a hub matrix need not have split rows there)."""
    return p.format == "bsr16" and p.kernel_for(n) == "quads"


def same_bits_either_way(monkeypatch, var, p, B, shape, prec):
    """p(B) into poisoned half and FP32 outputs with the kernel switch ``var`` (an environment variable of
    cuda/half_spmm.cu) at "0" and at "1": asserts both settings give the same bits, returns (half, f32) on the
    host."""
    got = {}
    for setting in ("0", "1"):
        monkeypatch.setenv(var, setting)
        half, f32 = poisoned(shape, TORCH_DT[prec]), poisoned(shape, torch.float32)
        p(B, out=half)
        p(B, out=f32)
        got[setting] = (half.cpu(), f32.cpu())
    assert torch.equal(got["0"][0].view(torch.int16), got["1"][0].view(torch.int16)), (var, shape)
    assert torch.equal(got["0"][1].view(torch.int32), got["1"][1].view(torch.int32)), (var, shape)
    return got["1"]


def split_rows(p, n):
    """Block rows (BSR16) or windows (BitTCF: the TF32 kernel's schedule for width n, after a call)
    that the plan's schedule cuts over several warps or thread blocks."""
    if p.format == "bsr16":
        return p.stats["schedule"][p.kernel_for(n)]["split_rows"]
    return p.stats["schedule_by_n"][n]["split_windows"]


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("prec", PRECS)
@pytest.mark.parametrize("n", [1, 7, 32, 37, 64, 96, 129])  # 32, 96: 16-byte runs under a predicate
@pytest.mark.parametrize("mat", ["odd", "hub"])
def test_gpu_integer_bit_exact(prec, n, mat, fmt):
    A = odd_matrix() if mat == "odd" else hub_matrix()
    p = gpu_half_plan(A, prec, fmt)
    B = int_dense(A.shape[1], n, seed=n)
    Bt = torch.from_numpy(B).cuda().to(TORCH_DT[prec])
    out = poisoned((A.shape[0], n), TORCH_DT[prec])
    assert p(Bt, out=out) is out
    if mat == "hub":
        assert split_rows(p, n) >= 1 or runs_quads(p, n)
    assert np.array_equal(out.double().cpu().numpy(), half_ref(A, B, prec, "half"))
    out32 = poisoned((A.shape[0], n), torch.float32)
    p(Bt, out=out32)
    assert np.array_equal(out32.cpu().numpy(), (A @ B).astype(np.float32))
    C = p(torch.from_numpy(B).cuda())  # float32 B: rounded by the call, float32 C
    assert C.dtype == torch.float32 and np.array_equal(C.cpu().numpy(), (A @ B).astype(np.float32))
    assert np.array_equal(p(B), (A @ B).astype(np.float32))  # host B on a GPU plan


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["bsr16", "bsr16-pairs", "bsr16-quads"])
@pytest.mark.parametrize("prec", PRECS)
def test_gpu_bsr16_narrow_b_on_many_block_rows(prec, fmt):
    """n < 8 on at least 4096 block rows runs BSR16 in copies of B and C padded to 8 columns
    (cuda/half_spmm.cu): bit-exact, a split hub block row included (its workspace at 8 columns),
    a misaligned C, nothing written around C, B untouched."""
    rng = np.random.default_rng(11)
    m, k = 16 * 4096 + 5, 3000
    A = sp.random(m, k, density=0.0004, format="lil", random_state=np.random.default_rng(12))
    A[60000, :] = rng.integers(1, 9, k)  # a hub: a split block row
    A = with_int_values(sp.csr_matrix(A), seed=13)
    p = gpu_half_plan(A, prec, fmt)
    assert split_rows(p, 1) >= 1 or runs_quads(p, 1)  # quads: 4,097 of them, the hub's is not the tail
    for n in (1, 5):
        B = int_dense(k, n, seed=n)
        Bt = torch.from_numpy(B).cuda().to(TORCH_DT[prec])
        Bcopy = Bt.clone()
        buf = poisoned((m * n + 9,), TORCH_DT[prec])
        out = buf[1 : 1 + m * n].view(m, n)  # C 2 bytes past an aligned address
        p(Bt, out=out)
        assert np.array_equal(out.double().cpu().numpy(), half_ref(A, B, prec, "half"))
        assert torch.isnan(buf[:1]).all() and torch.isnan(buf[1 + m * n :]).all()
        assert torch.equal(Bt, Bcopy)
        out32 = poisoned((m, n), torch.float32)
        p(Bt, out=out32)
        assert np.array_equal(out32.cpu().numpy(), (A @ B).astype(np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("prec", PRECS)
def test_gpu_bsr16_plan_narrow_widths_on_the_tf32_kernel(prec):
    """A BSR16 plan whose kernel is not forced runs n <= 4 on the TF32 kernel's CUDA-core paths (A's CSR or
    BitTCF), built at the first such call (stats["narrow"]), later calls through the C call; exact against scipy
    (half and float32 C, a vector, poisoned outputs); n = 8 keeps BSR16; a forced BSR16 kernel keeps its own
    narrow widths; a CUDA-graph capture of a first narrow call is a clear error; tuning["narrow"] reaches it."""
    rng = np.random.default_rng(5)
    A = sp.random(3000, 700, density=0.02, format="lil", random_state=rng)
    A[17, :] = rng.integers(1, 9, 700)  # a dense row
    A = with_int_values(sp.csr_matrix(A), seed=6)
    dt = TORCH_DT[prec]
    p = accspmm.plan(A, device="gpu", precision=prec, format="bsr16")
    assert p.format == "bsr16" and p._narrow_runner is None and "narrow" not in p.stats
    Bt = torch.from_numpy(int_dense(700, 1, seed=1)).cuda().to(dt)
    assert_capture_needs_warm_up(lambda: p(Bt))
    for n in (1, 2, 3, 4, 8):
        B = int_dense(700, n, seed=n)
        Bt = torch.from_numpy(B).cuda().to(dt)
        out = poisoned((3000, n), dt)
        p(Bt, out=out)
        assert np.array_equal(out.double().cpu().numpy(), half_ref(A, B, prec, "half")), n
        out32 = poisoned((3000, n), torch.float32)
        p(Bt, out=out32)
        assert np.array_equal(out32.cpu().numpy(), (A @ B).astype(np.float32)), n
    narrow = p.stats["narrow"]
    assert narrow["format"] == "bittcf" and set(narrow["schedule_by_n"]) == {1, 2, 3, 4}
    assert all(r["kernel"].startswith("cuda_cores") for r in narrow["schedule_by_n"].values())
    before = p._narrow_runner.launcher.fast_calls
    v = int_dense(700, 1, seed=9)[:, 0]
    got = p(torch.from_numpy(v).cuda().to(dt))
    want = half_ref(A, v[:, None], prec, "half")[:, 0]
    assert got.shape == (3000,) and np.array_equal(got.double().cpu().numpy(), want)
    assert p._narrow_runner.launcher.fast_calls == before + 1
    p.close()
    forced = accspmm.plan(A, device="gpu", precision=prec, format="bsr16", tuning={"kernel": "rows"})
    B = int_dense(700, 2, seed=2)
    got = forced(torch.from_numpy(B).cuda().to(dt))
    assert np.array_equal(got.double().cpu().numpy(), half_ref(A, B, prec, "half"))
    assert forced._narrow_runner is None and "narrow" not in forced.stats
    forced.close()
    with pytest.raises(ValueError, match="narrow"):
        accspmm.plan(A, device="gpu", precision=prec, format="bsr16", tuning={"kernel": "rows", "narrow": "csr"})
    with accspmm.plan(A, device="gpu", precision=prec, format="bsr16", tuning={"narrow": "csr", "csr_lanes": 4}) as q:
        assert np.array_equal(q(torch.from_numpy(B).cuda().to(dt)).double().cpu().numpy(), half_ref(A, B, prec, "half"))
        assert q.stats["narrow"]["schedule_by_n"][2]["kernel"] == "cuda_cores_csr4"


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["bsr16", "bsr16-pairs"])  # pairs: the switch must change nothing there
@pytest.mark.parametrize("prec", PRECS)
def test_gpu_bsr16_tma_path_same_bits(prec, fmt, monkeypatch):
    """The row kernel in slice-major thread blocks (n >= 256) loads B tiles by TMA on sm_90 where B's
    rows are a multiple of 128 bytes from a 128-byte aligned B (cuda/half_spmm.cu); ACC_HALF_TMA=0
    forces the cp.async path.  Both give the same bits, equal to the exact product on integer data:
    k and m not multiples of 16 (TMA's zero fill of rows beyond k), a split hub block row, FP32 and
    half C; TMA at n = 256 and 320 on an aligned B, the cp.async path either way at widths that end
    inside a 64-column slice and on a B 16 bytes into its buffer."""
    rng = np.random.default_rng(21)
    m, k = 1000, 2011
    A = sp.random(m, k, density=0.0003, format="lil", random_state=np.random.default_rng(22))
    A[500, :] = rng.integers(1, 9, k)  # a hub: a split block row
    A = with_int_values(sp.csr_matrix(A), seed=23)
    p = gpu_half_plan(A, prec, fmt)
    assert split_rows(p, 256) >= 1
    for n, skip in ((256, 0), (264, 0), (320, 0), (392, 0), (256, 8)):
        B = int_dense(k, n, seed=n)
        base = torch.from_numpy(np.concatenate([np.zeros(skip, np.float32), B.ravel()])).cuda().to(TORCH_DT[prec])
        Bt = base[skip:].view(k, n)  # skip 8: 16 bytes into the buffer
        half, f32 = same_bits_either_way(monkeypatch, "ACC_HALF_TMA", p, Bt, (m, n), prec)
        assert np.array_equal(f32.numpy(), (A @ B).astype(np.float32))
        assert np.array_equal(half.double().numpy(), half_ref(A, B, prec, "half"))


@pytest.mark.gpu
@pytest.mark.parametrize("var", ["ACC_HALF_PAIR_CTA", "ACC_HALF_PAIR_WIDE"])
@pytest.mark.parametrize("prec", PRECS)
def test_gpu_pairs_in_thread_blocks_same_bits(prec, var, monkeypatch):
    """At widths with 16-byte rows of B and C the pairs run in thread blocks of 128 columns (pair_cta_kernel,
    cuda/half_spmm.cu); ACC_HALF_PAIR_CTA=0 forces the warp kernel, and ACC_HALF_PAIR_WIDE=1 the wide thread
    blocks of 256 columns (two column groups a warp) that the launch takes where only their grid fits one
    wave.  All give the same bits: a split hub pair (workspace parts), packs of short pairs with empty ones
    among them, m off the 32-row grid (the last pair's rows beyond m), widths ending inside a warp's 32
    columns and inside a thread block's 128 or 256 (warps or a warp's second group wholly beyond n in the last
    slice: 72, 320, 384), inf and NaN in B (sums recomputed from the stored entries), FP32 and half C; exact on
    integer data."""
    rng = np.random.default_rng(31)
    m, k = 1400, 2011
    A = sp.random(m, k, density=0.0003, format="lil", random_state=np.random.default_rng(32))
    A[300:420] = 0  # empty pairs inside packs
    A[1000, :] = rng.integers(1, 9, k)  # a hub: a split pair
    A = with_int_values(sp.csr_matrix(A), seed=33)
    p = gpu_half_plan(A, prec, "bsr16-pairs")
    assert split_rows(p, 256) >= 1
    for n in (8, 40, 72, 128, 136, 264, 320, 384, 512):
        B = int_dense(k, n, seed=n)
        if n in (136, 320, 512):
            B[rng.integers(0, k, 4), rng.integers(0, n, 4)] = np.inf
            B[rng.integers(0, k, 2), rng.integers(0, n, 2)] = np.nan
        Bt = torch.from_numpy(B).cuda().to(TORCH_DT[prec])
        half, f32 = same_bits_either_way(monkeypatch, var, p, Bt, (m, n), prec)
        with np.errstate(invalid="ignore"):
            want = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
        assert np.array_equal(f32.numpy(), want, equal_nan=True), n
        if n not in (136, 320, 512):
            assert np.array_equal(half.double().numpy(), half_ref(A, B, prec, "half")), n


@pytest.mark.gpu
def test_gpu_pair_wide_thread_blocks_rule(monkeypatch):
    """The pair kernel's wide thread blocks (256 columns; cuda/half_spmm.cu, use_wide_cta) run where the last
    256-column slice is over 3/4 full, the schedule's tasks average 4 entries or more, and the longest task is
    at most twice the entries a place of the 128-column grid takes (resident thread blocks x ...): the plan's
    statistics carry the sizes the rule reads.  Bounds here hold for 512 to 2,048 resident thread blocks of
    the 128-column kernel (924 on an H100: 7 on each of 132 SMs).  The switches override it; widths that are
    not a multiple of 8 run the warp kernel (0 columns)."""
    from accspmm import _cuda

    def cols(p, n, layout="pairs"):
        B = torch.zeros(p.shape[1], n, dtype=torch.float16, device="cuda")
        C = torch.empty(p.shape[0], n, dtype=torch.float16, device="cuda")
        return _cuda.half_pair_cols(p._layout_args(layout, B.data_ptr(), C.data_ptr(), n, False, 0))

    A = uniform_blocks(8192, 8192, per_row=12)  # 256 pairs of 24 entries each
    big = gpu_half_plan(A, "fp16", "bsr16-pairs")
    sched = big.stats["schedule"]["pairs"]
    assert sched["entries"] >= 4 * sched["tasks"] and sched["longest_task"] * 2048 <= 2 * sched["entries"] * 4, sched
    assert [cols(big, n) for n in (512, 480, 448, 384, 100)] == [256, 256, 128, 128, 0]
    assert cols(big, 512, "rows") == 0
    small = gpu_half_plan(uniform_blocks(1024, 1024, per_row=12), "fp16", "bsr16-pairs")  # 32 tasks: critical
    sched = small.stats["schedule"]["pairs"]
    assert sched["longest_task"] * 512 > 2 * sched["entries"] * 4, sched
    short = gpu_half_plan(uniform_blocks(8192, 8192, per_row=1), "fp16", "bsr16-pairs")  # 2 entries a task
    assert short.stats["schedule"]["pairs"]["entries"] < 4 * short.stats["schedule"]["pairs"]["tasks"]
    assert cols(small, 512) == cols(short, 512) == 128
    monkeypatch.setenv("ACC_HALF_PAIR_WIDE", "1")
    assert cols(big, 384) == cols(small, 512) == 256
    monkeypatch.setenv("ACC_HALF_PAIR_WIDE", "0")
    assert cols(big, 512) == 128
    monkeypatch.setenv("ACC_HALF_PAIR_CTA", "0")
    assert cols(big, 512) == 0
    monkeypatch.delenv("ACC_HALF_PAIR_WIDE")
    monkeypatch.delenv("ACC_HALF_PAIR_CTA")
    B = int_dense(8192, 512, seed=3)
    C = big(torch.from_numpy(B).cuda().half(), out=poisoned((8192, 512), torch.float32))
    assert np.array_equal(C.cpu().numpy(), (A @ B).astype(np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,n", [(f, 3) for f in FORMATS] + [("bsr16-quads", 136)])
def test_gpu_narrow_b_without_room_for_padded_copies(fmt, n):
    """When the padded copies of B and C (n < 8; for quads, n not a multiple of 64) do not fit in device
    memory, the call takes the element path (the quads at n = 3: the row kernel; at n = 136: the quads
    on B itself, a request per 64-column chunk) instead of failing: the same bits.  The device is filled
    by a torch tensor after the library's pool is trimmed."""
    from accspmm._spgemm_gpu import trim_pool

    m, k = (1 << 19) + 3, 2000  # the padded C alone is 8 MiB
    A = with_int_values(sp.random(m, k, density=0.0005, format="csr", random_state=np.random.default_rng(15)), seed=16)
    p = gpu_half_plan(A, "fp16", fmt)
    B = int_dense(k, n, seed=17)
    Bt = torch.from_numpy(B).cuda().half()
    ref = half_ref(A, B, "fp16", "half")
    out = poisoned((m, n), torch.float16)
    p(Bt, out=out)  # padded; also allocates the plan's workspace and per-width state
    assert np.array_equal(out.double().cpu().numpy(), ref)
    out.fill_(float("nan"))
    torch.cuda.synchronize()
    trim_pool()
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info()
    try:
        hog = torch.empty(free - (4 << 20), dtype=torch.uint8, device="cuda")  # <= 4 MiB left
    except RuntimeError:
        pytest.skip("could not fill the device to leave less than the padded copies need")
    try:
        p(Bt, out=out)
        torch.cuda.synchronize()
    finally:
        del hog
        torch.cuda.empty_cache()  # the device back for the other tests (torch caches freed blocks)
    assert np.array_equal(out.double().cpu().numpy(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("prec", PRECS)
def test_gpu_reordered_rectangular_and_deterministic(prec, fmt):
    A = with_int_values(sp.random(333, 1000, density=0.03, format="csr", random_state=9), seed=2)
    p = gpu_half_plan(A, prec, fmt, reorder="jaccard")
    assert p.stats["reorder"]["method"] == "jaccard"
    B = int_dense(1000, 40)
    Bt = torch.from_numpy(B).cuda().to(TORCH_DT[prec])
    C1, C2 = p(Bt), p(Bt)
    assert torch.equal(C1.view(torch.int16), C2.view(torch.int16))
    assert np.array_equal(C1.double().cpu().numpy(), half_ref(A, B, prec, "half"))


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("prec", PRECS)
def test_gpu_random_within_the_bound_and_run_to_run_identical(prec, fmt):
    rng = np.random.default_rng(8)
    A = hub_matrix().astype(np.float64)
    A.data = rng.standard_normal(A.nnz)
    B = rng.standard_normal((20000, 96)).astype(np.float32)
    p = gpu_half_plan(A, prec, fmt)
    Bt = torch.from_numpy(B).cuda()
    C = p(Bt)
    check_bound(A, B, C.cpu().numpy(), prec)
    assert torch.equal(C, p(Bt))
    Ch = p(Bt.to(TORCH_DT[prec]))
    check_bound(A, to_format(B, prec), Ch.double().cpu().numpy(), prec, output_rounded=True)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [70, 3])  # 3: computed in copies padded to 8 columns
def test_gpu_nonfinite_b_like_scipy(n):
    A = hub_matrix()
    B = int_dense(20000, 70)
    B[3, 5] = np.inf
    B[17, 66] = -np.inf
    B[4000, 0] = np.nan
    B[9, 2] = -np.inf
    B = np.ascontiguousarray(B[:, :n])
    ref = A.astype(np.float64) @ B.astype(np.float64)
    for prec, fmt in [(p, f) for p in PRECS for f in FORMATS]:
        C = gpu_half_plan(A, prec, fmt)(torch.from_numpy(B).cuda()).cpu().numpy()
        assert np.array_equal(np.isnan(C), np.isnan(ref)) and np.array_equal(np.isinf(C), np.isinf(ref))
        fin = np.isfinite(ref)
        assert np.array_equal(C[fin], ref[fin].astype(np.float32))


@pytest.mark.gpu
def test_gpu_cupy_float16_and_float32():
    cp = pytest.importorskip("cupy")
    A = odd_matrix()
    B = int_dense(61, 24)
    p = accspmm.plan(A, device="gpu", precision="fp16")
    C = p(cp.asarray(B.astype(np.float16)))
    assert isinstance(C, cp.ndarray) and C.dtype == np.float16
    assert np.array_equal(cp.asnumpy(C).astype(np.float64), half_ref(A, B, "fp16", "half"))
    C = accspmm.plan(A, device="gpu", precision="bf16")(cp.asarray(B))
    assert C.dtype == np.float32 and np.array_equal(cp.asnumpy(C), (A @ B).astype(np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("prec", PRECS)
def test_gpu_steady_call_takes_the_c_path(prec, fmt):
    A = hub_matrix()  # split rows: the C call allocates their workspace too
    p = gpu_half_plan(A, prec, fmt)
    B = torch.from_numpy(int_dense(20000, 64)).cuda().to(TORCH_DT[prec])
    C0 = p(B)  # the first call (Python) hands PyTorch's types to the C call
    assert split_rows(p, 64) >= 1 or runs_quads(p, 64)
    launcher = p._fast.__self__
    before = launcher.fast_calls
    C1 = p(B)
    out = poisoned(tuple(C1.shape), TORCH_DT[prec])
    assert p(B, out=out) is out
    assert launcher.fast_calls == before + 2
    assert torch.equal(C0, C1) and torch.equal(C1, out)
    assert np.array_equal(C1.double().cpu().numpy(), half_ref(A, int_dense(20000, 64), prec, "half"))
    p(B.float())  # float32 B: the Python layer rounds it
    assert launcher.fast_calls == before + 2


@pytest.mark.gpu
def test_gpu_empty_and_degenerate():
    for A in (sp.csr_matrix((40, 30), dtype=np.float32), sp.csr_matrix((0, 30), dtype=np.float32)):
        p = accspmm.plan(A, device="gpu", precision="fp16")
        C = p(torch.ones(30, 5, device="cuda", dtype=torch.float16))
        assert C.shape == (A.shape[0], 5) and not C.any()
    p = accspmm.plan(odd_matrix(), device="gpu", precision="bf16")
    assert p(torch.ones(61, 0, device="cuda", dtype=torch.bfloat16)).shape == (45, 0)


@pytest.mark.gpu
@pytest.mark.parametrize("n, fmt", [(16, "auto"), (7, "bittcf"), (320, "bsr16")])
def test_gpu_autograd_and_cuda_graph(n, fmt):
    """BitTCF at n = 7 takes the padded copy of B and C (pool memory in the stream's order, captured
    too); BSR16 at n = 320 the row kernel in slice-major blocks, on sm_90 with TMA loads of B (its
    tensor map, made at capture, is a kernel parameter of the graph)."""
    A = hub_matrix()
    p = accspmm.plan(A, device="gpu", precision="bf16", format=fmt)
    B = torch.from_numpy(int_dense(20000, n)).cuda().to(torch.bfloat16).requires_grad_()
    p(B).float().sum().backward()
    want = np.asarray(A.T @ np.ones((300, n)))
    assert np.array_equal(B.grad.double().cpu().numpy(), to_format(want, "bf16"))
    Bs = torch.zeros(20000, n, device="cuda", dtype=torch.bfloat16)
    p(Bs)  # warm-up
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        Cs = p(Bs)
    for seed in (11, 12):  # replayed twice: the captured allocations come back each time
        Bi = int_dense(20000, n, seed=seed)
        Bs.copy_(torch.from_numpy(Bi).to(torch.bfloat16))
        g.replay()
        torch.cuda.synchronize()
        assert np.array_equal(Cs.double().cpu().numpy(), half_ref(A, Bi, "bf16", "half"))


def _real_files():
    d = data_dir()
    return datasets.matrix_files(d) if d else []


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("path", _real_files() or [None], ids=lambda f: datasets.matrix_name(f) if f else "none")
def test_gpu_real_matrices_integer_bit_exact(path):
    if path is None:
        pytest.skip("no real-matrix directory")
    A = with_int_values(datasets.load_matrix(path, np.float32), seed=1)
    B = int_dense(A.shape[1], 33)
    for prec, fmt in [(p, f) for p in PRECS for f in FORMATS]:
        out = poisoned((A.shape[0], 33), torch.float32)
        p = gpu_half_plan(A, prec, fmt)
        p(torch.from_numpy(B).cuda().to(TORCH_DT[prec]), out=out)
        assert np.array_equal(out.cpu().numpy(), (A @ B).astype(np.float32)), (prec, fmt)


def blocky_matrix(m, k, block=32, density=0.12, seed=0, values="int"):
    """m x k (cut from a grid of dense block x block blocks, so m, k need not be multiples)."""
    S = sp.random(-(-m // block), -(-k // block), density=density, format="csr", random_state=seed)
    A = sp.csr_matrix(sp.kron(S, np.ones((block, block)), format="csr")[:m, :k], dtype=np.float32)
    rng = np.random.default_rng(seed)
    A.data = (rng.integers(-4, 5, A.nnz) if values == "int" else rng.standard_normal(A.nnz)).astype(np.float32)
    A.eliminate_zeros()
    return A


def uniform_blocks(m, k, per_row=2, block=32, seed=0):
    """m x k of dense block x block blocks, `per_row` of them in every block row (random columns): rows no
    longer than their neighbours, so the quads' critical rule (QUAD_CRITICAL_RATIO) leaves them to rows and
    pairs."""
    rng = np.random.default_rng(seed)
    R, K = -(-m // block), -(-k // block)
    cols = np.concatenate([rng.choice(K, per_row, replace=False) for _ in range(R)])
    S = sp.csr_matrix((np.ones(R * per_row), cols, np.arange(0, R * per_row + 1, per_row)), shape=(R, K))
    A = sp.csr_matrix(sp.kron(S, np.ones((block, block)), format="csr")[:m, :k], dtype=np.float32)
    A.data = rng.integers(-4, 5, A.nnz).astype(np.float32)
    A.eliminate_zeros()
    return A


@pytest.mark.gpu
@pytest.mark.parametrize("prec", PRECS)
def test_gpu_pairs_same_bits_as_rows(prec):
    """Pairs of block rows give the row kernel's bits (each row sums its own blocks in column order;
    a pair's missing blocks add zeros): random values, FP32 and half outputs, m and k off the block
    grid, an odd number of block rows, blocks present in one row of a pair only, empty block rows,
    and widths of every path (padded n < 8, the element path at odd n or a misaligned B)."""
    A = sp.lil_matrix(blocky_matrix(1500, 1100, density=0.1, seed=3, values="normal"))
    A[400:700] = 0  # empty block rows and pairs
    A[1000:1008, :] = 0  # the top half of a 32-row block: one row of the pair only
    A = sp.csr_matrix(A)
    A.eliminate_zeros()
    rows, pairs = gpu_half_plan(A, prec, "bsr16"), gpu_half_plan(A, prec, "bsr16-pairs")
    assert split_rows(rows, 64) == split_rows(pairs, 64) == 0
    rng = np.random.default_rng(5)
    for n in (1, 5, 8, 37, 64, 100, 200):
        B = torch.from_numpy(rng.standard_normal((1100, n)).astype(np.float32)).cuda().to(TORCH_DT[prec])
        Bmis = torch.empty(1100 * n + 1, dtype=TORCH_DT[prec], device="cuda")[1:].view(1100, n)
        Bmis.copy_(B)  # 2 bytes past an aligned address: the element path
        for out_dt, bits in ((torch.float32, torch.int32), (TORCH_DT[prec], torch.int16)):
            want = rows(B, out=poisoned((1500, n), out_dt)).view(bits)
            assert torch.equal(pairs(B, out=poisoned((1500, n), out_dt)).view(bits), want), (n, out_dt)
            assert torch.equal(pairs(Bmis, out=poisoned((1500, n), out_dt)).view(bits), want), (n, "misaligned")
    Bf = rng.standard_normal((1100, 24)).astype(np.float32)
    check_bound(A, Bf, pairs(torch.from_numpy(Bf).cuda()).cpu().numpy(), prec)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["bsr16", "bsr16-pairs"])
def test_gpu_bsr16_slice_major_thread_blocks(fmt):
    """From four 64-column slices on (n > 192) the warps of a thread block run one task on
    consecutive slices (cuda/half_spmm.cu): a split hub block row, a last slice of a few columns,
    idle warps in the last thread block of slices, and B 2 bytes off alignment (the element path)
    all give the integer-exact product."""
    rng = np.random.default_rng(11)
    A = sp.lil_matrix(blocky_matrix(3000, 2000, density=0.05, seed=4))
    A[40:56, :] = (rng.random((16, 2000)) < 0.5) * rng.integers(-3, 4, (16, 2000))  # a hub block row
    A = sp.csr_matrix(A)
    A.eliminate_zeros()
    p = gpu_half_plan(A, "fp16", fmt)
    assert split_rows(p, 320) > 0
    for n in (193, 320, 456):
        B = int_dense(2000, n, seed=n)
        want = np.asarray(A @ B).astype(np.float32)
        Bt = torch.from_numpy(B).cuda().half()
        assert np.array_equal(p(Bt, out=poisoned((3000, n), torch.float32)).cpu().numpy(), want), n
        Bmis = torch.empty(2000 * n + 1, dtype=torch.float16, device="cuda")[1:].view(2000, n)
        Bmis.copy_(Bt)
        assert np.array_equal(p(Bmis, out=poisoned((3000, n), torch.float32)).cpu().numpy(), want), n


@pytest.mark.gpu
def test_gpu_bsr16_kernel_model():
    """Pairs (from PAIR_MIN_N columns, or PAIR_MIN_N_SLICED with enough pair tasks) where 32 x 32 blocks put the
    same column blocks in both rows of a pair, through the C call too; rows where the pairs' rows have
    different column blocks."""
    blocky = uniform_blocks(8000, 4000, seed=1)
    p = accspmm.plan(blocky, device="gpu", precision="fp16")
    sched = p.stats["schedule"]
    assert p.format == "bsr16" and sched["pair_entries_per_block"] == 0.5, sched["kernel_why"]
    assert not quads_usable() or sched["quad_critical"]["ratio"] > _half.QUAD_CRITICAL_RATIO, sched["kernel_why"]
    assert p.kernel_for(_half.PAIR_MIN_N - 1) == "rows" and p.kernel_for(_half.PAIR_MIN_N) == "pairs"
    # 250 pair tasks (>= PAIR_SLICED_MIN_TASKS): from PAIR_MIN_N_SLICED at the widths that fill their slices
    assert [p.kernel_for(n) for n in (64, 72, 120, 128, 136, 192, 200, 248, 250)] == [
        "rows", "pairs", "pairs", "pairs", "rows", "rows", "pairs", "pairs", "rows"], sched["kernel"]
    assert_c_routes(p)
    launcher = p._fast.__self__
    before = launcher.fast_calls
    for n in (136, _half.PAIR_MIN_N_SLICED, _half.PAIR_MIN_N):  # either kernel by width, from Python and the C call
        B = int_dense(4000, n, seed=n)
        Bt = torch.from_numpy(B).cuda().half()
        C = p(Bt, out=poisoned((8000, n), torch.float32))  # a float32 C: the Python layer's call
        assert np.array_equal(C.cpu().numpy(), (blocky @ B).astype(np.float32))
        C = p(Bt)  # a half C: the C call
        assert np.array_equal(C.double().cpu().numpy(), half_ref(blocky, B, "fp16", "half"))
    assert launcher.fast_calls == before + 3
    few = accspmm.plan(blocky[:4000], device="gpu", precision="fp16", format="bsr16")  # 125 pair tasks
    assert few.stats["schedule"]["pairs"]["tasks"] < _half.PAIR_SLICED_MIN_TASKS
    assert [few.kernel_for(n) for n in (72, 128, 200, 256)] == ["rows", "rows", "rows", "pairs"]
    shifted = uniform_blocks(4000, 4000, block=16, seed=2)
    p = accspmm.plan(shifted, device="gpu", precision="fp16", format="bsr16")
    assert p.stats["schedule"]["pair_entries_per_block"] > _half.PAIR_SHARE_MAX
    assert p.kernel_for(10**6) == p.kernel_for(128) == "rows" and "pairs" not in p.stats["schedule"]


@pytest.mark.gpu
def test_gpu_bsr16_kernel_model_split_pairs():
    """32 x 32 blocks with a hub block row, whose pair the schedule splits: pairs from PAIR_MIN_N_SLICED at the
    widths that fill their thread blocks' slices all the same (the split parts go to the workspace without
    the slow path), from Python and the C call alike; exact, also with inf in B at a width ending inside a
    warp's columns."""
    A = sp.lil_matrix(uniform_blocks(8000, 4000, seed=5))
    A[2016:2048, :] = np.random.default_rng(6).integers(1, 5, (32, 4000))  # a dense pair of block rows
    A = sp.csr_matrix(A)
    p = accspmm.plan(A, device="gpu", precision="fp16", format="bsr16")
    sched = p.stats["schedule"]
    assert sched["pair_entries_per_block"] <= _half.PAIR_SHARE_MAX, sched["kernel_why"]
    assert "quads" in sched or sched["pairs"]["split_rows"] >= 1 and sched["pairs"]["tasks"] >= 200, sched
    if "quads" in sched:
        pytest.skip("quads take this matrix on this GPU (their own tests cover split quads)")
    assert [p.kernel_for(n) for n in (64, 72, 136, 200)] == ["rows", "pairs", "rows", "pairs"], sched["kernel"]
    assert_c_routes(p)
    launcher = p._fast.__self__
    before = launcher.fast_calls
    for n in (72, 200):
        B = int_dense(4000, n, seed=n)
        if n == 200:
            B[[3, 2030], [198, 5]] = np.inf
        Bt = torch.from_numpy(B).cuda().half()
        with np.errstate(invalid="ignore", over="ignore"):
            want = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
            want_half = want.astype(np.float16).astype(np.float32)  # the exact sum rounded once
        C = p(Bt, out=poisoned((8000, n), torch.float32))  # a float32 C: the Python layer's call
        assert np.array_equal(C.cpu().numpy(), want, equal_nan=True), n
        C = p(Bt)  # a half C: the C call
        assert np.array_equal(C.float().cpu().numpy(), want_half, equal_nan=True), n
    assert launcher.fast_calls == before + 2


@pytest.mark.gpu
def test_gpu_bsr16_quads_up_to_the_critical_width():
    """Random 32 x 32 blocks (block rows of uneven length, 24 entries a quad): the quads' predicted makespan is
    under QUAD_CRITICAL_RATIO times the row kernel's longest task, so quads run up to QUAD_CRITICAL_MAX_N
    columns and pairs above, from Python and through the C call's two routes alike (route_for: the C call's
    choice), each width's result the forced kernel's bit for bit on random values."""
    if not quads_usable():
        pytest.skip("no warpgroup MMA on this GPU or build (sm_90a)")
    A = blocky_matrix(8000, 4000, density=0.05, seed=1, values="normal")
    p = accspmm.plan(A, device="gpu", precision="fp16")
    sched = p.stats["schedule"]
    assert p.format == "bsr16" and sched["kernel"].startswith("quads for 1 <= n <= 256"), sched["kernel_why"]
    crit = sched["quad_critical"]
    assert crit["ratio"] == crit["quad_makespan"] / crit["rows_longest_task"] <= _half.QUAD_CRITICAL_RATIO, crit
    top = _half.QUAD_CRITICAL_MAX_N
    assert [p.kernel_for(n) for n in (8, 72, 200, top, top + 1, top + 8, 512)] == ["quads"] * 4 + ["pairs"] * 3
    assert_c_routes(p)
    launcher = p._fast.__self__
    forced = {kern: gpu_half_plan(A, "fp16", f"bsr16-{kern}") for kern in ("quads", "pairs")}
    before = launcher.fast_calls
    for n in (200, top, top + 8, 512):
        B = torch.randn(4000, n, device="cuda").half()
        got = p(B)  # the C call
        assert torch.equal(got, forced[p.kernel_for(n)](B)), n
        got32 = p(B, out=poisoned((8000, n), torch.float32))  # the Python layer's call
        assert torch.equal(got32, forced[p.kernel_for(n)](B, out=poisoned((8000, n), torch.float32))), n
    assert launcher.fast_calls == before + 4


@pytest.mark.gpu
@pytest.mark.parametrize("prec", PRECS)
def test_gpu_quads_narrow_tiles_same_bits(monkeypatch, prec):
    """Few quads (32 and a split hub quad) at wide n: the quad kernel's column tile narrows until the grid
    fills the SMs (acc_half_quad_cols), and gives the widest tile's bits (ACC_HALF_QUAD_NARROW=0), on random
    values with inf and NaN in B, at widths a multiple of 64 and not (padded copies or per-chunk requests);
    integer data exact."""
    if not quads_usable():
        pytest.skip("no warpgroup MMA on this GPU or build (sm_90a)")
    A = sp.lil_matrix(blocky_matrix(2000, 1500, density=0.1, seed=11, values="normal"))
    A[0:64, :] = np.random.default_rng(12).standard_normal((64, 1500))  # a hub quad, cut into parts
    A = sp.csr_matrix(A)
    p = gpu_half_plan(A, prec, "bsr16-quads")
    assert p.stats["schedule"]["quads"]["tasks"] * 2 <= 132, p.stats["schedule"]["quads"]
    rng = np.random.default_rng(13)
    for n in (264, 320, 512):
        B = rng.standard_normal((1500, n)).astype(np.float32)
        Bt = torch.from_numpy(B).cuda().to(TORCH_DT[prec])
        half, f32 = same_bits_either_way(monkeypatch, "ACC_HALF_QUAD_NARROW", p, Bt, (2000, n), prec)
        check_bound(A, B, f32.numpy(), prec)
        B[[7, 900], [n - 1, 3]] = [np.inf, np.nan]  # scipy's non-finite semantics, either tile
        Bt = torch.from_numpy(B).cuda().to(TORCH_DT[prec])
        half, f32 = same_bits_either_way(monkeypatch, "ACC_HALF_QUAD_NARROW", p, Bt, (2000, n), prec)
        with np.errstate(invalid="ignore"):
            ref = half_ref(A, B, prec, "float32")
        assert np.array_equal(np.isnan(f32.numpy()), np.isnan(ref)) and np.isnan(ref).any(), n
        assert np.array_equal(np.isposinf(f32.numpy()), np.isposinf(ref)), n
        assert np.array_equal(np.isneginf(f32.numpy()), np.isneginf(ref)), n
    Ai = blocky_matrix(2000, 1500, density=0.1, seed=11)
    pi = gpu_half_plan(Ai, prec, "bsr16-quads")
    B = int_dense(1500, 512, seed=14)
    C = pi(torch.from_numpy(B).cuda().to(TORCH_DT[prec]), out=poisoned((2000, 512), torch.float32))
    assert np.array_equal(C.cpu().numpy(), (Ai @ B).astype(np.float32))


@pytest.mark.gpu
def test_gpu_bsr16_kernel_model_bands():
    """Band matrices: pairs at 0.60 union entries per block (bandwidth 64) only at widths a multiple of 8,
    which run them on thread blocks, from Python and the C call alike, below 256 columns only with enough
    pair tasks; quads for bandwidth 256, whose quads hold under QUAD_PAIR_RATIO times the pairs' entries.
    Exact either way."""
    narrow = band_csr(2048, 64, seed=1)
    p = accspmm.plan(narrow, device="gpu", precision="fp16", format="bsr16")
    sched = p.stats["schedule"]
    assert _half.PAIR_SHARE_MAX < sched["pair_entries_per_block"] <= _half.PAIR_SHARE_MAX_BLOCKS, sched["kernel_why"]
    assert [p.kernel_for(n) for n in (248, 256, 260, 264)] == ["rows", "pairs", "rows", "pairs"], sched["kernel"]
    assert_c_routes(p)
    launcher = p._fast.__self__
    before = launcher.fast_calls
    for n in (256, 260):
        B = int_dense(2048, n, seed=n)
        Bt = torch.from_numpy(B).cuda().half()
        C = p(Bt)  # a half C: the C call, which routes n as kernel_for does
        assert np.array_equal(C.double().cpu().numpy(), half_ref(narrow, B, "fp16", "half")), n
        C = p(Bt, out=poisoned((2048, n), torch.float32))  # a float32 C: the Python layer's call
        assert np.array_equal(C.cpu().numpy(), (narrow @ B).astype(np.float32)), n
    assert launcher.fast_calls == before + 2
    # 8192 rows: 256 pair tasks, so from PAIR_MIN_N_SLICED at the widths a multiple of 8 that fill their slices
    tall = band_csr(8192, 64, seed=3)
    p = accspmm.plan(tall, device="gpu", precision="fp16", format="bsr16")
    sched = p.stats["schedule"]
    assert sched["pairs"]["tasks"] >= _half.PAIR_SLICED_MIN_TASKS and sched["pair_entries_per_block"] > 0.55, sched
    assert [p.kernel_for(n) for n in (64, 72, 76, 136, 200)] == ["rows", "pairs", "rows", "rows", "pairs"]
    assert_c_routes(p)
    launcher = p._fast.__self__
    before = launcher.fast_calls
    for n in (72, 76, 200):
        B = int_dense(8192, n, seed=n)
        C = p(torch.from_numpy(B).cuda().half())  # the C call, which routes n as kernel_for does
        assert np.array_equal(C.double().cpu().numpy(), half_ref(tall, B, "fp16", "half")), n
    assert launcher.fast_calls == before + 3
    if not quads_usable():
        return
    wide = band_csr(2048, 256, seed=2)
    p = accspmm.plan(wide, device="gpu", precision="fp16", format="bsr16")
    assert p.kernel_for(128) == "quads" and p.kernel_for(100) == "quads", p.stats["schedule"]["kernel_why"]
    assert_c_routes(p)
    for n in (100, 128):
        B = int_dense(2048, n, seed=n)
        C = p(torch.from_numpy(B).cuda().half())
        assert np.array_equal(C.double().cpu().numpy(), half_ref(wide, B, "fp16", "half")), n


@pytest.mark.gpu
@pytest.mark.parametrize("prec", PRECS)
def test_gpu_quad_values_packed_on_device(prec):
    """The quad kernel's group values, gathered on the device from the plan's BSR16 blocks, are
    pack_group_values' host layout bit for bit (zero blocks where a row of the quad has none), with a
    hub quad and empty quads."""
    if not quads_usable():
        pytest.skip("no warpgroup MMA on this GPU or build (sm_90a)")
    A = blocky_matrix(1000, 3000, density=0.06, seed=7, values="normal")
    keep = np.ones(1000)
    keep[300:400] = 0  # empty quads
    hub = np.zeros((1000, 3000), np.float32)
    hub[0:64] = 0.5  # a hub quad
    A = sp.csr_matrix(sp.diags(keep) @ A + sp.csr_matrix(hub), dtype=np.float32)
    A.eliminate_zeros()
    p = gpu_half_plan(A, prec, "bsr16-quads")
    m, k = A.shape
    perm = np.arange(m, dtype=np.int64)
    c = as_csr(A).canonicalized()
    f = _core.bsr16_build(m, k, c.indptr, c.indices, _half.round_csr(c, prec), perm)
    want = _half.pack_group_values(_half.group_index(f["brow_offsets"], f["block_cols"], k, 4)[2], f["block_values"])
    got = p._dev["quads_pair_blocks"].to_host()
    assert want.size > 0 and (want == 0).any() and np.array_equal(got[: want.size], want.reshape(-1))


@pytest.mark.gpu
def test_gpu_quad_kernel_model_and_fallbacks():
    """Quads (wgmma, from QUAD_MIN_N columns; at n <= 4 the plan runs the TF32 kernel's narrow paths) where
    dense 32 x 32 blocks give quads that share their column blocks, through the C call too; widths that are
    not a multiple of 8 and a B off a 16-byte boundary on padded copies (the same bits as the padded width);
    hub quads split in parts (non-finite sums included).  Exact on integer data everywhere, and within the bound
    on random values."""
    if not quads_usable():
        pytest.skip("no warpgroup MMA on this GPU or build (sm_90a)")
    dense = blocky_matrix(2000, 1500, density=0.4, seed=4)
    p = accspmm.plan(dense, device="gpu", precision="fp16")
    sched = p.stats["schedule"]
    assert p.format == "bsr16" and sched["kernel"].startswith("quads"), sched["kernel_why"]
    assert _half.QUAD_MIN_N == 1 and p.kernel_for(1) == p.kernel_for(13) == p.kernel_for(128) == "quads"
    launcher = p._fast.__self__
    before = launcher.fast_calls
    for n in (1, 13, 128, 520):  # 1, 13 (and 520 where pad_pays): on copies padded to a multiple of 64
        B = int_dense(1500, n, seed=n)
        Bt = torch.from_numpy(B).cuda().half()
        C = p(Bt, out=poisoned((2000, n), torch.float32))  # a float32 C: the Python layer's call
        assert np.array_equal(C.cpu().numpy(), (dense @ B).astype(np.float32)), n
        C = p(Bt, out=poisoned((2000, n), torch.float16))  # a half C: the C call
        assert np.array_equal(C.double().cpu().numpy(), half_ref(dense, B, "fp16", "half")), n
        buf = torch.empty(1500 * n + 1, dtype=torch.float16, device="cuda")  # B 2 bytes off: copied
        Bm = buf[1:].view(1500, n)
        Bm.copy_(Bt)
        C = p(Bm, out=poisoned((2000, n), torch.float16))
        assert np.array_equal(C.double().cpu().numpy(), half_ref(dense, B, "fp16", "half")), (n, "misaligned")
    # n = 1 ran on the TF32 kernel's narrow paths (their own Launcher: test_gpu_bsr16_plan_narrow_widths_on_the_
    # tf32_kernel); forced quads at narrow widths: test_gpu_bsr16_narrow_b_on_many_block_rows
    assert launcher.fast_calls == before + 6 and p._narrow_runner.launcher.fast_calls == 2
    Bf = np.random.default_rng(5).standard_normal((1500, 256)).astype(np.float32)
    A = blocky_matrix(2000, 1500, density=0.4, seed=4, values="normal")
    q = gpu_half_plan(A, "fp16", "bsr16-quads")
    check_bound(A, Bf, q(torch.from_numpy(Bf).cuda()).cpu().numpy(), "fp16")
    # random values: the padded widths' bits are the quads' at the padded width (not the row kernel's sums)
    B16 = torch.from_numpy(Bf[:, :16]).cuda().half()
    B16[:, 13:] = 0
    want = q(B16, out=poisoned((2000, 16), torch.float32))[:, :13]
    assert torch.equal(q(B16[:, :13].contiguous(), out=poisoned((2000, 13), torch.float32)), want)
    assert not torch.equal(gpu_half_plan(A, "fp16", "bsr16")(B16[:, :13].contiguous(),
                                                              out=poisoned((2000, 13), torch.float32)), want)
    wide = blocky_matrix(1000, 8192, density=0.06, seed=6)  # about 60 entries a quad, of 512 column blocks
    p = accspmm.plan(wide, device="gpu", precision="fp16", format="bsr16")
    assert p.kernel_for(10**6) == "quads", p.stats["schedule"]["kernel_why"]
    hub = sp.lil_matrix(wide)
    hub[0:64, :] = 1  # one quad holds every column block: split in parts, summed by the reduction
    hub[900:964, 4000:4400] = 3  # and another, its own parts (a quad that does not start at slot 0)
    hub = sp.csr_matrix(hub)
    p = accspmm.plan(hub, device="gpu", precision="fp16", format="bsr16")
    quads = p.stats["schedule"]["quads"]
    assert p.kernel_for(10**6) == "quads" and quads["split_rows"] >= 2 and quads["parts"] > quads["split_rows"], quads
    for n in (128, 264):
        B = int_dense(8192, n, seed=n)
        B[[5, 4100], 3] = [np.inf, np.nan]  # non-finite sums of split quads: recomputed by the reduction
        Bt = torch.from_numpy(B).cuda().half()
        want = (hub @ B.astype(np.float64)).astype(np.float32)
        C = p(Bt, out=poisoned((1000, n), torch.float32))
        assert np.array_equal(C.cpu().numpy(), want, equal_nan=True), n
        C = p(Bt, out=poisoned((1000, n), torch.float16))  # the C call, its workspace from the allocator
        assert np.array_equal(C.float().cpu().numpy(), want.astype(np.float16).astype(np.float32), equal_nan=True), n


@pytest.mark.gpu
def test_gpu_format_model_picks_by_bytes():
    blocky = sp.csr_matrix(sp.kron(sp.random(40, 40, density=0.1, random_state=1), np.ones((32, 32)), format="csr"),
                           dtype=np.float32)
    assert accspmm.plan(blocky, device="gpu", precision="fp16").format == "bsr16"
    scattered = sp.random(2000, 2000, density=0.002, format="csr", random_state=2, dtype=np.float32)
    p = accspmm.plan(scattered, device="gpu", precision="fp16")
    assert p.format == "bittcf"
    model = p.stats["format_model"]
    assert model["bytes_per_64_columns"]["bittcf"] < model["bytes_per_64_columns"]["bsr16"]
    if quads_usable():  # a dense graph (as ogbl-ddi): BSR16 on quads, though BitTCF has fewer bytes in all
        graph = sp.random(3000, 3000, density=0.07, format="csr", random_state=3, dtype=np.float32)
        graph.data = np.random.default_rng(3).integers(-4, 5, graph.nnz).astype(np.float32)
        graph.eliminate_zeros()
        p = accspmm.plan(graph, device="gpu", precision="fp16")
        model = p.stats["format_model"]
        assert p.format == "bsr16" and model["quads"]["wins"], model
        assert model["bytes_per_64_columns"]["bittcf"] < model["bytes_per_64_columns"]["bsr16"]
        for n in (24, 128, 200):
            B = int_dense(3000, n, seed=n)
            C = p(torch.from_numpy(B).cuda().half(), out=poisoned((3000, n), torch.float32))
            assert np.array_equal(C.cpu().numpy(), (graph @ B).astype(np.float32)), n


def test_schedule_cap_falls_on_small_matrices_only():
    """CAP_MIN holds wherever there are blocks for several waves of resident warps; a matrix under a
    wave gets a lower cap, so its longest rows split, but never below 4 x its median row."""
    big = np.full(4096, 40, np.int64)
    big[7] = 200  # 163880 blocks: 2 x 104 blocks per resident warp > CAP_MIN
    _, splits, _, cap, _ = check_schedule(np.concatenate(([0], np.cumsum(big))))
    assert cap == _half.CAP_MEDIAN * 40 == 160 and splits[:, 0].tolist() == [7]
    small = np.full(300, 5, np.int64)
    small[[10, 200]] = 100  # 1690 blocks: 2 per resident warp
    _, splits, _, cap, _ = check_schedule(np.concatenate(([0], np.cumsum(small))))
    assert cap == max(_half.CAP_FLOOR, _half.CAP_MEDIAN * 5) == 20
    assert splits[:, 0].tolist() == [10, 200] and splits[:, 2].tolist() == [5, 5]
    uniform = np.full(512, 51, np.int64)  # rows of a uniform matrix are never cut
    assert check_schedule(np.concatenate(([0], np.cumsum(uniform))))[1].shape == (0, 3)


@pytest.mark.gpu
@pytest.mark.parametrize("prec", PRECS)
@pytest.mark.parametrize("n", [8, 64, 96])
def test_gpu_bittcf_misaligned_operands(prec, n):
    """B and C 2 bytes off a 16-byte boundary: the BitTCF kernel's element path (16-bit loads and
    stores), which an aligned call never takes for these widths; the same bits as the aligned call."""
    A = hub_matrix()
    p = accspmm.plan(A, device="gpu", precision=prec, format="bittcf")
    B = int_dense(A.shape[1], n, seed=n)
    dt = TORCH_DT[prec]
    Bbuf = torch.empty(B.size + 1, dtype=dt, device="cuda")
    Bt = Bbuf[1:].view(B.shape)
    Bt.copy_(torch.from_numpy(B).to(dt))
    assert Bt.data_ptr() % 16 == 2
    Cbuf = torch.full((A.shape[0] * n + 1,), float("nan"), dtype=dt, device="cuda")
    out = Cbuf[1:].view(A.shape[0], n)
    assert p(Bt, out=out) is out
    assert np.array_equal(out.double().cpu().numpy(), half_ref(A, B, prec, "half"))
    assert torch.equal(out, p(Bt.contiguous().clone()))


@pytest.mark.gpu
@pytest.mark.parametrize("prec", PRECS)
def test_gpu_bittcf_variant_timing_follows_calls(prec):
    """A half BitTCF plan times its kernel variants on the first call only from AUTOTUNE_MIN_CALLS calls
    or with tuning={"autotune": True}, as TF32 plans; timed or not, the same bits."""
    A = hub_matrix()
    B = torch.from_numpy(int_dense(A.shape[1], 96, seed=3)).to(TORCH_DT[prec]).cuda()
    plans = {"default": accspmm.plan(A, device="gpu", precision=prec, format="bittcf"),
             "few calls": accspmm.plan(A, device="gpu", precision=prec, format="bittcf",
                                       calls=_half.AUTOTUNE_MIN_CALLS - 1),
             "many calls": accspmm.plan(A, device="gpu", precision=prec, format="bittcf",
                                        calls=_half.AUTOTUNE_MIN_CALLS),
             "forced": accspmm.plan(A, device="gpu", precision=prec, format="bittcf", tuning={"autotune": True}),
             "forced off": accspmm.plan(A, device="gpu", precision=prec, format="bittcf", calls=10**6,
                                        tuning={"autotune": False})}
    outs = {name: p(B) for name, p in plans.items()}
    timed = {name: "tuned_ms" in p.stats["schedule_by_n"][96] for name, p in plans.items()}
    assert timed == {"default": False, "few calls": False, "many calls": True, "forced": True, "forced off": False}
    ref = half_ref(A, int_dense(A.shape[1], 96, seed=3), prec, "half")
    for name, C in outs.items():
        assert np.array_equal(C.double().cpu().numpy(), ref), name
    for p in plans.values():
        p.close()



@pytest.mark.gpu
@pytest.mark.parametrize("prec", PRECS)
@pytest.mark.parametrize("cap", [0, 2, 8])
def test_gpu_bittcf_32_column_steps(prec, cap):
    """A half BitTCF plan's 32-column steps (variant S = 0: two MMAs a step, 8-byte pieces, the register
    pipeline) against its 64-column slices on every task kind (long_window_matrix: PACK with empty windows,
    GROUPs and multi-part SPLITs at small caps): exact on integer data, and the same bits on random data
    (only the schedule orders the sums), half and float32 C, both grid orders, at widths whose last 32- or
    64-column slice is full or not (16- or 8-byte runs under a predicate), and widths where S = 0 falls back:
    odd n (the element path) and n < 8 (padded copies).  Twice each: the split counters are left at zero and
    were sized for 32-column slices."""
    from accspmm._tf32 import variant_tag

    A = long_window_matrix()
    rng = np.random.default_rng(cap)
    Ar = A.copy()
    Ar.data = rng.standard_normal(A.nnz).astype(np.float32)
    dt = TORCH_DT[prec]
    base = {"cache_l1": 1, "order": 0}
    ref_v = dict(base, slice_s=1, depth=3, staged=1, slice_major=0)
    steps = [dict(base, slice_s=0, depth=d, staged=0, slice_major=o) for d in (2, 3) for o in (0, 1)]
    for M, integer in ((A, True), (Ar, False)):
        with accspmm.plan(M, device="gpu", precision=prec, format="bittcf", reorder="none") as p:
            for n in (5, 8, 24, 32, 40, 64, 96, 129, 200):
                B = int_dense(A.shape[1], n, seed=n) if integer else rng.standard_normal((A.shape[1], n))
                Bt = torch.from_numpy(np.asarray(B, np.float32)).cuda().to(dt)
                p(Bt)  # the first call: decision and workspace (sized for 32-column slices)
                for out_f32 in (False, True):
                    want = None
                    for v in [ref_v] + steps:
                        for _ in range(2):
                            out = poisoned((A.shape[0], n), torch.float32 if out_f32 else dt)
                            a, vt = p._runner.args(Bt.data_ptr(), out.data_ptr(), n, None, cap, v, out_f32=out_f32)
                            accspmm._cuda.tf32_spmm(a, vt, None)
                            if want is None:
                                want = out.clone()
                                if integer:
                                    ref = half_ref(A, B, prec, "float32" if out_f32 else "half")
                                    assert np.array_equal(out.double().cpu().numpy(), ref), (n, out_f32)
                            assert torch.equal(out, want), (n, out_f32, variant_tag(v))
            if cap in (2, 8):
                assert p._runner._counts(cap)[1] > 0, "the schedule must have a multi-part split"


@pytest.mark.gpu
@pytest.mark.parametrize("prec", PRECS)
def test_gpu_bittcf_32_column_steps_rule(prec):
    """Under one wave of thread blocks on 64-column slices a half BitTCF plan runs 32-column steps (S = 0,
    the register pipeline; the reason says so), at widths a multiple of 8 only; a grid of more than a wave
    keeps 64-column slices.  Timed variants include both slice widths, and every choice gives the same bits."""
    from accspmm import _tf32

    small = hub_matrix()
    rng = np.random.default_rng(1)
    big = sp.random(60_000, 60_000, density=2e-4, random_state=rng, format="csr", dtype=np.float32)
    dt = TORCH_DT[prec]
    with accspmm.plan(small, device="gpu", precision=prec, format="bittcf") as p, \
            accspmm.plan(small, device="gpu", precision=prec, format="bittcf", tuning={"autotune": True}) as q:
        for n in (64, 128, 200):
            B = torch.from_numpy(int_dense(small.shape[1], n, seed=n)).cuda().to(dt)
            C = p(B)
            rep = p.stats["schedule_by_n"][n]
            assert rep["variant"]["slice_s"] == 0 and rep["variant"]["staged"] == 0, rep
            assert _tf32.narrow_steps(n, _tf32.ELEM[prec], rep["tasks"] * -(-n // 64), p._runner._longest(rep["cap"]))
            assert "32-column steps" in rep["reason"]
            cands = q._runner.candidates(n)
            assert {c["slice_s"] for c in cands} == {0, 1}
            assert not any(c["slice_s"] == 0 and c["staged"] for c in cands)
            assert torch.equal(q(B), C)
            assert np.array_equal(C.double().cpu().numpy(), half_ref(small, int_dense(small.shape[1], n, seed=n),
                                                                    prec, "half"))
        B = torch.from_numpy(int_dense(small.shape[1], 33, seed=3)).cuda().to(dt)
        p(B)
        assert p.stats["schedule_by_n"][33]["variant"]["slice_s"] == 1  # odd n: the element path's slices
    with accspmm.plan(big, device="gpu", precision=prec, format="bittcf") as p:
        B = torch.randn(big.shape[1], 512, device="cuda").to(dt)
        p(B)
        rep = p.stats["schedule_by_n"][512]
        slices = -(-512 // _tf32.slice_cols(_tf32.ELEM[prec], 1))
        assert rep["tasks"] * slices >= _tf32.REF_SMS * _tf32.WAVE_BLOCKS_PER_SM, rep
        assert rep["variant"]["slice_s"] == 1, rep
    tri = sp.diags([np.ones(2999), np.ones(3000), np.ones(2999)], [-1, 0, 1], format="csr", dtype=np.float32)
    with accspmm.plan(tri, device="gpu", precision=prec, format="bittcf") as p:  # windows of one or two blocks
        B = torch.from_numpy(int_dense(3000, 128, seed=5)).cuda().to(dt)
        C = p(B)
        rep = p.stats["schedule_by_n"][128]
        steps = _tf32.narrow_steps(128, _tf32.ELEM[prec], rep["tasks"] * 2, p._runner._longest(rep["cap"]))
        assert (rep["variant"]["slice_s"] == 0) == steps, rep
        assert np.array_equal(C.double().cpu().numpy(), half_ref(tri, int_dense(3000, 128, seed=5), prec, "half"))


# ---- torch.ops.accspmm.spmm with half plans ----------------------------------------------------

def _compile_check(p, B, backend):
    """f(B) = sum of p(p^T-free chain) through torch.compile(fullgraph=True) equals eager, values and
    gradient (integer data: exact in both)."""
    def f(X):
        return p.transposed()(torch.relu(p(X))).float().sum()

    Xe = B.detach().clone().requires_grad_()
    eager = f(Xe)
    eager.backward()
    Xc = B.detach().clone().requires_grad_()
    out = torch.compile(f, fullgraph=True, backend=backend)(Xc)
    out.backward()
    assert out.item() == eager.item()
    assert torch.equal(Xc.grad, Xe.grad) and Xc.grad.dtype == B.dtype


@pytest.mark.parametrize("prec", PRECS)
def test_torch_op_opcheck(prec):
    A = odd_matrix()
    p = accspmm.plan(A, device="cpu", precision=prec)
    dt = TORCH_DT[prec]
    for transpose, rows in ((False, A.shape[1]), (True, A.shape[0])):
        B = torch.from_numpy(int_dense(rows, 5, seed=1)).to(dt).requires_grad_()
        torch.library.opcheck(torch.ops.accspmm.spmm.default, (B, p.handle, transpose))
    C = torch.ops.accspmm.spmm(torch.from_numpy(int_dense(A.shape[1], 3)), p.handle, False)
    assert C.dtype == torch.float32  # a float32 B is rounded by the call, C keeps FP32


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("prec", PRECS)
def test_torch_compile_fullgraph_half(prec, backend):
    A = odd_matrix()
    p = accspmm.plan(A, device="cpu", precision=prec)
    _compile_check(p, torch.from_numpy(int_dense(A.shape[1], 6, seed=2)).to(TORCH_DT[prec]), backend)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
def test_gpu_torch_compile_fullgraph_half(fmt):
    A = hub_matrix()
    p = gpu_half_plan(A, "fp16", fmt)
    _compile_check(p, torch.from_numpy(int_dense(A.shape[1], 64, seed=3)).cuda().half(), "inductor")


def _adversarial(name):
    rng = np.random.default_rng(11)
    if name == "tall":
        A = sp.random(30000, 3, density=0.5, format="csr", random_state=np.random.default_rng(1))
    elif name == "star":
        A = sp.lil_matrix((5000, 5000))
        A[0, 1:] = 1
        A[1:, 0] = 1
    elif name == "dense_row":
        A = sp.random(4000, 20000, density=2e-4, format="lil", random_state=np.random.default_rng(2))
        A[777, :] = 1
    elif name == "dense_col":
        A = sp.random(20000, 4000, density=2e-4, format="lil", random_state=np.random.default_rng(3))
        A[:, 123] = 1
    elif name == "empty_tail":
        A = sp.random(9000, 3000, density=2e-3, format="lil", random_state=np.random.default_rng(4))
        A[6000:, :] = 0
    else:  # wide, int64 indices
        A = sp.random(100, 50000, density=0.01, format="csr", random_state=np.random.default_rng(5))
    A = sp.csr_matrix(A, dtype=np.float32)
    A.data = rng.integers(-4, 5, A.nnz).astype(np.float32)
    A.eliminate_zeros()
    if name == "wide_int64":
        A.indices, A.indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
    return A


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["auto", "bsr16-pairs"])
@pytest.mark.parametrize("prec", PRECS)
@pytest.mark.parametrize("name", ["tall", "star", "dense_row", "dense_col", "empty_tail", "wide_int64"])
def test_gpu_adversarial_shapes_exact(name, prec, fmt):
    """Hub rows and columns, a tall K = 3 matrix, an empty tail, int64 indices: the default GPU half
    plan is bit-exact at widths of every path (element, predicated 16-byte, full slices), with FP32
    and half outputs (sums up to 2^24: the half output is the exact sum rounded once, inf above the range)."""
    A = _adversarial(name)
    p = accspmm.plan(A, device="gpu", precision=prec) if fmt == "auto" else gpu_half_plan(A, prec, fmt)
    dt = TORCH_DT[prec]
    for n in (1, 7, 16, 64, 100):
        B = np.random.default_rng(n).integers(-2, 3, (A.shape[1], n)).astype(np.float32)
        ref = A.astype(np.float64) @ B.astype(np.float64)
        Bt = torch.from_numpy(B.astype(np.float32)).cuda().to(dt)
        out = poisoned((A.shape[0], n), torch.float32)
        p(Bt, out=out)
        assert np.array_equal(out.double().cpu().numpy(), ref), (name, n)
        assert torch.equal(p(Bt).cpu(), torch.from_numpy(ref).to(dt)), (name, n)
