"""``traceql.model.detach``: a small frame cut from a large one, copied into buffers of its own, is the same
frame (values and dtypes: strings, categoricals, lists, structs), in a dataclass's fields and tuples too (what
it saves is measured by bench/scale.py: the 32-rank run's `collectives`)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from traceql.model.detach import detached, detached_fields


def _large() -> pl.DataFrame:
    n = 200_000
    return pl.DataFrame({
        "name": [f"a long kernel name number {i % 1000} of the run" for i in range(n)],
        "n": pl.int_range(n, eager=True),
        "tags": [[f"tag of a kernel {i % 7}"] for i in range(n)],
    }).with_columns(pl.col("name").cast(pl.Categorical).alias("cat"),
                    pl.struct(pl.col("name"), pl.col("n")).alias("both"))


def test_a_detached_frame_is_the_same_frame() -> None:
    small = _large().filter(pl.col("n") % 1000 == 3)
    out = detached(small)
    assert out.schema == small.schema and out.equals(small) and out.height == 200


def test_frames_in_fields_and_tuples_are_detached() -> None:
    @dataclass(frozen=True)
    class Parts:
        one: pl.DataFrame
        two: tuple[pl.DataFrame, pl.DataFrame]
        count: int

    small = _large().filter(pl.col("n") < 10).select("name")
    got = detached_fields(Parts(small, (small, small), 3))
    assert got.count == 3 and got.one.equals(small) and all(f.equals(small) for f in got.two)
    assert got.one is not small and got.two[0] is not small  # copies, not the frame given


def test_a_detached_slice_holds_no_column_of_the_frame_it_was_cut_from() -> None:
    """Rows sliced from a frame (polars shares the larger frame's buffers with them, every column) detached: their
    columns' buffers lie outside the larger frame's."""
    large = _large()
    first = large.slice(5, 10)

    def buffer(frame: pl.DataFrame) -> tuple[int, int]:
        data = frame["n"].to_arrow().buffers()[1]
        assert data is not None
        return data.address, data.size

    start, size = buffer(large)
    assert start <= buffer(first)[0] < start + size  # the slice: inside the larger frame's buffer
    out = detached(first)
    assert out.equals(first) and out.schema == first.schema
    assert not start <= buffer(out)[0] < start + size
