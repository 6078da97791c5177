import numpy as np
import pytest

from skdiagatt._shared.ragged import (
    COARSE,
    ONE_BUCKET_ROWS,
    bucket_length,
    check_ragged,
    make_buckets,
    padded_lengths,
    unpad,
)


def test_accepts_list_tuple_and_3d_array():
    a = np.ones((3, 2))
    assert len(check_ragged([a, a[:1]])) == 2
    assert len(check_ragged((a, a))) == 2
    out = check_ragged(np.zeros((4, 5, 2)))
    assert len(out) == 4 and out[0].shape == (5, 2) and out[0].dtype == np.float32


@pytest.mark.parametrize(
    "X, match",
    [
        ([np.ones((3, 4)), np.ones((2, 4)), np.ones((2, 4)), np.ones((1, 5))],
         r"X\[3\] has 5 features, expected 4"),
        ([np.ones((3, 2)), np.ones((0, 2))], r"X\[1\] is empty"),
        ([np.ones((3, 2)), np.array([[1.0, np.nan]])], r"X\[1\] contains NaN at row 0, column 1"),
        ([np.array([[np.inf, 1.0]])], r"X\[0\] contains infinity"),
        ([np.ones(3)], r"X\[0\] must be a 2-D array"),
        (np.ones((3, 2)), r"3-D array"),
        ([], r"no samples"),
        ([np.array([[1e300]])], r"value too large"),
    ],
)
def test_bad_input_names_the_sample(X, match):
    with pytest.raises(ValueError, match=match):
        check_ragged(X)


@pytest.mark.parametrize("X", ["abc", None, 3.0, {"a": 1}, [np.array([["a", "b"]])]])
def test_non_numeric_is_a_type_error(X):
    with pytest.raises(TypeError):
        check_ragged(X)


def test_feature_count_checked_against_fit():
    with pytest.raises(ValueError, match=r"X\[0\] has 2 features, expected 3 \(as seen in fit\)"):
        check_ragged([np.ones((2, 2))], n_features=3)


def test_bucket_grid_is_fixed_and_bounded():
    lengths = np.arange(1, 2000)
    buckets = np.array([bucket_length(p) for p in lengths])
    assert np.all(buckets >= lengths)
    # waste stays below the grid ratio plus rounding to 8 rows
    assert np.all(buckets[lengths > 40] / lengths[lengths > 40] < 1.25)
    assert len(np.unique(buckets)) < 40


def test_coarse_grid_has_fewer_buckets_and_bounded_padding():
    lengths = np.arange(1, 2000)
    fine = np.array([bucket_length(p) for p in lengths])
    coarse = np.array([bucket_length(p, COARSE) for p in lengths])
    assert np.all(coarse >= lengths)
    assert np.all(coarse[lengths > 40] / lengths[lengths > 40] < 1.6)
    assert len(np.unique(coarse)) < len(np.unique(fine)) * 0.6
    samples = [np.ones((int(p), 2), np.float32) for p in (3, 20, 33, 50, 90)]
    assert [b.length for b in make_buckets(samples, COARSE, one_bucket_rows=0).buckets] == [4, 24, 48, 64, 96]


def test_a_small_data_set_is_one_bucket_of_its_longest_length():
    lengths = [3, 9, 30, 5]
    assert padded_lengths(lengths).tolist() == [32] * 4
    assert padded_lengths(lengths, one_bucket_rows=0).tolist() == [bucket_length(p) for p in lengths]
    # Past the threshold each sample keeps its own bucket of the grid.
    many = lengths * (ONE_BUCKET_ROWS // 32 // 4 + 1)
    assert padded_lengths(many).tolist() == [bucket_length(p) for p in many]
    samples = [np.full((p, 2), float(p), np.float32) for p in lengths]
    (bucket,) = make_buckets(samples).buckets
    assert bucket.length == 32 and bucket.where.sum(axis=1).tolist() == lengths
    for x, back in zip(samples, unpad(make_buckets(samples), [bucket.X[:, :, 0]])):
        np.testing.assert_array_equal(back, x[:, 0])


def test_buckets_and_unpad_round_trip():
    rng = np.random.RandomState(0)
    # Buckets of samples all at the bucket's length (1, 24: copied in one
    # stack) and of mixed lengths (8: 7 and 8 rows; 16; 32).
    samples = [rng.randn(p, 3).astype(np.float32) for p in (1, 7, 9, 30, 8, 24, 24)]
    b = make_buckets(samples, one_bucket_rows=0)
    assert [x.length for x in b.buckets] == [1, 8, 16, 24, 32]
    assert sorted(np.concatenate([x.index for x in b.buckets]).tolist()) == list(range(7))
    for bucket in b.buckets:
        for k, i in enumerate(bucket.index):
            p = samples[i].shape[0]
            np.testing.assert_array_equal(bucket.X[k, :p], samples[i])
            assert bucket.where[k, :p].all() and not bucket.where[k, p:].any()
            assert np.all(bucket.X[k, p:] == 0)
    rows = unpad(b, [x.X[..., 0] for x in b.buckets])
    for s, r in zip(samples, rows):
        np.testing.assert_array_equal(s[:, 0], r)
    per_sample = unpad(b, [x.index * 10 for x in b.buckets], rows=False)
    np.testing.assert_array_equal(per_sample, np.arange(7) * 10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.bool_])
def test_a_3d_array_gives_what_its_samples_give_as_a_list(dtype):
    X = (np.random.RandomState(0).randn(5, 4, 3) * 3).astype(dtype)
    whole, listed = check_ragged(X), check_ragged(list(X))
    assert len(whole) == len(listed) == 5
    for a, b in zip(whole, listed):
        assert a.dtype == b.dtype == np.float32
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "value, match",
    [(np.nan, r"X\[2\] contains NaN at row 1, column 0"),
     (np.inf, r"X\[2\] contains infinity at row 1, column 0"),
     (1e39, r"X\[2\] contains infinity at row 1, column 0 after conversion to float32 \(value too large\)")],
)
def test_bad_values_in_a_3d_array_name_the_sample(value, match):
    X = np.ones((4, 3, 2))
    X[2, 1, 0] = value
    with pytest.raises(ValueError, match=match):
        check_ragged(X)


def test_a_3d_array_is_checked_against_the_features_seen_in_fit():
    with pytest.raises(ValueError, match=r"X\[0\] has 2 features, expected 3 \(as seen in fit\)"):
        check_ragged(np.ones((4, 3, 2)), n_features=3)
    with pytest.raises(ValueError, match=r"X\[0\] is empty"):
        check_ragged(np.ones((4, 0, 2)))


@pytest.mark.parametrize("as_list", [False, True])
def test_a_non_finite_output_names_its_sample(as_list):
    from skdiagatt._shared.base import check_finite_output

    values = np.ones((5, 2))
    assert check_finite_output(list(values) if as_list else values) is not None
    values[3, 1] = np.inf
    values[4, 0] = np.nan
    with pytest.raises(ValueError, match=r"X\[3\] gives a non-finite prediction"):
        check_finite_output(list(values) if as_list else values)


def test_a_3d_array_is_checked_for_nan_in_every_slice():
    from skdiagatt._shared.ragged import _all_finite

    X = np.zeros((50, 4, 3), np.float32)
    assert _all_finite(X, block=24)  # slices of 2 samples
    X[49, 3, 2] = np.nan
    assert not _all_finite(X, block=24)
    with pytest.raises(ValueError, match=r"X\[49\] contains NaN at row 3, column 2"):
        check_ragged(X)
