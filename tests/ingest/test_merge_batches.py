"""``assemble.merge_batches``: a pool worker merges its task's events batches; the frame built from
the merged batch must be the frame built from the batches one by one (values, missing rows, dtypes,
category order), and what cannot be merged exactly is left alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from denpex_nb.ingest.assemble import Coded, Const, Nullable, build_frame, merge_batches


def _batch(n, rank, file, *, pg=("0", "1"), seq_missing=False, shapes=(((4,),), ((2, 2),))):
    codes = np.arange(n) % len(pg)
    return {
        "rank": Const(rank, n),
        "pg": Coded(codes.astype(np.int8), list(pg)),
        "seq": Nullable(np.arange(n, dtype=np.int16), (np.arange(n) % 3 == 0) if seq_missing else None),
        "seq_kind": Const("fr", n),
        "op": Coded(np.where(np.arange(n) % 2 == 0, 0, -1).astype(np.int8), ["all_reduce"]),
        "in_shapes": Coded((np.arange(n) % len(shapes)).astype(np.int8), list(shapes)),
        "source": Const("fr_pickle", n),
        "file": Const(file, n),
        "line": np.arange(n, dtype=np.int16),
        "is_p2p": np.zeros(n, dtype=bool),
        "retired": Nullable(np.ones(n, dtype=bool), np.arange(n) == 1),
        "_t_wall_ns": Nullable(np.arange(n, dtype=np.int64) + 10**18, None),
    }


def _same(batches):
    one_by_one = build_frame("events", batches)
    merged = merge_batches("events", batches)
    assert len(merged) == 1
    pd.testing.assert_frame_equal(build_frame("events", merged), one_by_one, check_categorical=True)
    for c in ("file", "pg", "op"):
        assert list(build_frame("events", merged)[c].cat.categories) == list(one_by_one[c].cat.categories)


def test_dumps_of_different_ranks_files_and_groups_merge_into_the_same_frame():
    _same(
        [
            _batch(5, 3, "z_last_name", seq_missing=True),
            _batch(4, None, "a_first_name", pg=("1", "7")),
            _batch(6, 2**40, "m_middle", shapes=(((4,),), ((8,),))),  # a rank past Int32: missing there
        ]
    )


def test_one_value_everywhere_stays_a_constant():
    merged = merge_batches("events", [_batch(3, 1, "f"), _batch(2, 1, "f")])
    assert isinstance(merged[0]["rank"], Const) and merged[0]["rank"].n == 5
    assert isinstance(merged[0]["file"], Const)


@pytest.mark.parametrize(
    ("ranks", "width"),
    [((3, 100), np.int8), ((3, 16383), np.int16), ((-5, 70000), np.int32), ((0, 2**40), np.int64)],
)
def test_merged_integers_travel_as_narrow_as_they_fit_and_build_the_same_frame(ranks, width):
    """A dump's rank is one constant; merged, the task's ranks become a column that travels back
    from a worker: in the narrowest integer dtype that holds them, widened again by build_frame."""
    batches = [_batch(4, r, f"f{r}") for r in ranks]
    merged = merge_batches("events", batches)
    assert merged[0]["rank"].values.dtype == width
    assert merged[0]["seq"].values.dtype == np.int8  # int16 parts holding 0..3
    _same(batches)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda b: b.pop("line"),  # a column one batch lacks
        lambda b: b.__setitem__("rank", Const(True, len(b["line"]))),  # a bool where an int belongs
        lambda b: b.__setitem__("rank", [1] * len(b["line"])),  # a plain list
        lambda b: b.__setitem__("in_shapes", Coded(np.zeros(len(b["line"]), np.int8), [[4]])),  # unhashable
        lambda b: b.__setitem__("in_shapes", Coded(np.zeros(len(b["line"]), np.int8), [((True,),)])),  # not a shape
        lambda b: b.__setitem__("pg", Coded(np.zeros(len(b["line"]), np.int8), [float("nan")])),
    ],
)
def test_what_cannot_be_merged_exactly_is_left_alone(spoil):
    batches = [_batch(3, 0, "a"), _batch(3, 1, "b")]
    spoil(batches[1])
    assert merge_batches("events", batches) is batches


def test_a_pool_load_of_dumps_gives_the_serial_frames(tmp_path):
    import denpex_nb as dx
    from denpex_nb.testing.frcompare import write_synthetic_dumps

    write_synthetic_dumps(tmp_path, 24, 9, "size", plant_rank=5)  # 24 files on 2 workers: 3 per task
    serial = dx.load(str(tmp_path), jobs=1, progress=False)
    pooled = dx.load(str(tmp_path), jobs=2, progress=False)
    pd.testing.assert_frame_equal(serial.events, pooled.events, check_categorical=True)
    assert list(serial.events["file"].cat.categories) == list(pooled.events["file"].cat.categories)
