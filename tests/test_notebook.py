"""notebooks/reordering_quality.ipynb runs top to bottom on the CPU (nbclient), on the bundled matrix
and on a directory of matrices, and is committed without outputs."""

import os

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from conftest import REPO

# in the [test] extra; a bare environment (e.g. the GPU machine) skips with the reason
nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOK = os.path.join(REPO, "notebooks", "reordering_quality.ipynb")


def _run(env: dict):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}}).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb


def _outputs(nb, kind):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == kind]


def test_committed_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, "strip the notebook's outputs before committing"


def test_runs_on_bundled_matrix():
    nb = _run({"ACCSPMM_DATA_DIR": ""})
    text = "".join(o.text for o in _outputs(nb, "stream") if o.name == "stdout")
    assert "wiki-Vote" in text and "bit-exact against scipy" in text
    images = [o for o in _outputs(nb, "display_data") if "image/png" in o.data]
    assert len(images) == 3  # spy plots, MeanNNZTC bars, time vs nnz


def test_runs_on_a_directory(tmp_path):
    rng = np.random.default_rng(0)
    for name, (m, k) in {"small_square": (120, 120), "small_rect": (64, 200)}.items():
        A = sp.random(m, k, density=0.05, random_state=rng, format="csr")
        scipy.io.mmwrite(str(tmp_path / f"{name}.mtx"), A)
    nb = _run({"ACCSPMM_DATA_DIR": str(tmp_path)})
    text = "".join(o.text for o in _outputs(nb, "stream") if o.name == "stdout")
    assert "2 matrices" in text and "small_rect" in text and "bit-exact against scipy" in text
