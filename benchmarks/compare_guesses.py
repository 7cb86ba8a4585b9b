"""Two builds' default-plan kernels from benchmarks/variant_guess.py runs:

    python benchmarks/compare_guesses.py OLD.json[,OLD2.json...] NEW.json[,NEW2.json...]

Per (matrix, n), the guess's kernel time (``guess_ms``), the minimum over each side's runs; prints the
geometric mean of old/new over every case and over the matrices of at least 100k nonzeros at
N >= 128 (issue 16's steady-state set), then every case whose guess changed or moved by more than 5%.
An A/A (runs of one build on both sides) shows the noise floor."""
import json, math, sys
olds, news = sys.argv[1].split(","), sys.argv[2].split(",")
def load(fs):
    out = {}
    for f in fs:
        for c in json.load(open(f))["cases"]:
            k = (c["matrix"], c["n"])
            t = c["guess_ms"]
            if k not in out or t < out[k][0]:
                out[k] = (t, c["guess"], c["nnz"])
    return out
o, n = load(olds), load(news)
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
r = {k: o[k][0] / n[k][0] for k in o if k in n}
big = [r[k] for k in r if o[k][2] >= 100_000 and k[1] >= 128]
print(f"old/new guess time: geomean {gm(list(r.values())):.4f} over {len(r)}; "
      f">=100k nnz, N>=128: {gm(big):.4f} over {len(big)}")
for k in sorted(r, key=r.get):
    if o[k][1] != n[k][1] or abs(r[k] - 1) > 0.05:
        print(f"  {k[0]:16s} {k[1]:4d} old {o[k][0] * 1e3:8.1f} {o[k][1]:24s} "
              f"new {n[k][0] * 1e3:8.1f} {n[k][1]:24s} {r[k]:.3f}")
