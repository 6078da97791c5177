"""Algorithmic unit tests of multiple-instance learning (Raff & Holt, NeurIPS 2023).

Each generator draws bags of instances (a ragged list of 2-D arrays, the
layout of every estimator here) together with each instance's kind, so that a
model can be scored on its bag labels and on the instances it points at.
Background instances are ``N(0, I_d)``; concept k is ``N(separation * e_k,
I_d)`` and the *poison* ``N(separation * e_0, I_d)``, for orthonormal
directions ``e_0, e_1, ...`` drawn once per call.

The tests tell a model that respects an assumption from one that exploits a
shortcut of the training data:

- :func:`make_mil_presence` (standard assumption): a bag is positive when it
  holds a concept instance.  The poison sits in every negative *training*
  bag and in every positive *test* bag: a model that learns "poison means
  negative" scores worse than chance on the test split.
- :func:`make_mil_multi_concept` (presence-based assumption): a bag is
  positive when it holds instances of both concepts; a negative bag holds
  one of them.  Poisoned as above.
- :func:`make_mil_threshold` (threshold-based assumption): a bag is positive
  when it holds at least ``threshold`` concept instances; a negative bag
  holds ``threshold - 1``, so that presence alone says nothing.
"""

import numbers

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["make_mil_presence", "make_mil_multi_concept", "make_mil_threshold"]

#: Instance kinds in the returned ``instances`` arrays.
BACKGROUND, POISON = 0, -1


def _check_args(n_bags, bag_size, n_features, n_concepts, separation, split):
    if not isinstance(n_bags, numbers.Integral) or n_bags < 2:
        raise ValueError(f"n_bags must be an int >= 2, got {n_bags!r}")
    if not isinstance(n_features, numbers.Integral) or n_features < n_concepts + 1:
        raise ValueError(
            f"n_features must be an int >= {n_concepts + 1} (one direction per concept "
            f"and one for the poison), got {n_features!r}"
        )
    if not (isinstance(separation, numbers.Real) and np.isfinite(separation) and separation > 0):
        raise ValueError(f"separation must be a finite number > 0, got {separation!r}")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if isinstance(bag_size, numbers.Integral):
        bag_size = (bag_size, bag_size)
    try:
        low, high = (int(v) for v in bag_size)
    except (TypeError, ValueError):
        raise ValueError(f"bag_size must be an int or (low, high), got {bag_size!r}") from None
    if not 1 <= low <= high:
        raise ValueError(f"bag_size=(low, high) needs 1 <= low <= high, got {bag_size!r}")
    return low, high


def _directions(n_features, k, rng):
    """``k`` orthonormal directions, shape (k, d)."""
    q, _ = np.linalg.qr(rng.standard_normal((n_features, k)))
    return q.T


def _bags(kinds_per_bag, size, directions, separation, rng):
    """Bags whose first instances have the given kinds, the rest background, shuffled."""
    X, instances = [], []
    d = directions.shape[1]
    for i, kinds in enumerate(kinds_per_bag):
        p = rng.randint(size[0], size[1] + 1)
        if p < len(kinds):
            raise ValueError(
                f"bag {i} needs {len(kinds)} special instances but bag_size allows {p}"
            )
        kind = np.zeros(p, np.int64)
        kind[: len(kinds)] = kinds
        kind = kind[rng.permutation(p)]
        # Row j of ``directions`` is the poison (0) or concept j.
        row = np.where(kind == POISON, 0, kind)
        means = np.where(kind[:, None] == BACKGROUND, 0.0, separation * directions[row])
        X.append(means + rng.standard_normal((p, d)))
        instances.append(kind)
    return X, instances


def _split_setup(n_bags, bag_size, n_features, n_concepts, separation, split, random_state):
    """Checked bag sizes, the directions, the bags' generator and balanced labels."""
    size = _check_args(n_bags, bag_size, n_features, n_concepts, separation, split)
    # One draw seeds both parts: the train and test splits of one int seed
    # share their concepts and poison while drawing different bags.
    seeds = check_random_state(random_state).randint(2**31 - 2, size=2)
    directions = _directions(n_features, n_concepts + 1, np.random.RandomState(seeds[0]))
    rng = np.random.RandomState(seeds[1] + (split == "test"))
    y = np.zeros(n_bags, np.int64)
    y[rng.permutation(n_bags)[: n_bags // 2]] = 1
    return size, directions, rng, y


def _poisoned(y, split):
    """Which bags carry the poison: the negatives in training, the positives in test."""
    return y == (1 if split == "test" else 0)


def make_mil_presence(n_bags=1000, *, bag_size=(10, 20), n_features=10, separation=5.0,
                      split="train", random_state=None):
    """Single-concept presence test of the standard MIL assumption, with a poison.

    A positive bag holds one concept instance; a negative bag none.  In the
    training split every negative bag holds one poison instance, in the test
    split every positive bag does.  A model under the standard assumption
    (a bag is positive because of a positive instance; no instance is
    evidence of the negative class) cannot use the poison and scores on the
    test split as it would without it.

    Parameters
    ----------
    n_bags : int, default=1000
        Bags, half of them positive.
    bag_size : int or (int, int), default=(10, 20)
        Instances per bag, or an inclusive range drawn uniformly per bag.
    n_features : int, default=10
    separation : float, default=5.0
        Distance of the concept's and the poison's means from the background's.
    split : {"train", "test"}, default="train"
        Which side the poison is on.  The two splits of one int
        ``random_state`` share the concept and the poison and draw different
        bags.
    random_state : int, RandomState instance or None

    Returns
    -------
    X : list of ndarray, each of shape (p_i, n_features)
    y : ndarray of shape (n_bags,), values in {0, 1}
    instances : list of ndarray of int, each of shape (p_i,)
        The kind of each instance: 1 the concept, 0 background, -1 poison.

    Examples
    --------
    >>> from skdiagatt.datasets import make_mil_presence
    >>> X, y, instances = make_mil_presence(6, bag_size=4, n_features=3, random_state=0)
    >>> [int((k == 1).sum()) for k in instances] == y.tolist()
    True
    >>> all(((k == -1).sum() == 1) == (label == 0) for k, label in zip(instances, y))
    True
    """
    size, directions, rng, y = _split_setup(
        n_bags, bag_size, n_features, 1, separation, split, random_state
    )
    poison = _poisoned(y, split)
    kinds = [[1] * int(y[i]) + [POISON] * int(poison[i]) for i in range(n_bags)]
    X, instances = _bags(kinds, size, directions, separation, rng)
    return X, y, instances


def make_mil_multi_concept(n_bags=1000, *, bag_size=(10, 20), n_features=10, separation=5.0,
                           split="train", random_state=None):
    """Two-concept presence test: a positive bag needs instances of both concepts, with a poison.

    A positive bag holds one instance of concept 1 and one of concept 2; a
    negative bag one instance of either (chosen at random).  The poison is
    placed as in :func:`make_mil_presence`.  No single instance tells the
    classes apart: a model needs one detector per concept and a read-out
    that requires both.

    Parameters
    ----------
    n_bags, bag_size, n_features, separation, split, random_state
        As in :func:`make_mil_presence`.

    Returns
    -------
    X : list of ndarray, each of shape (p_i, n_features)
    y : ndarray of shape (n_bags,), values in {0, 1}
    instances : list of ndarray of int, each of shape (p_i,)
        1 or 2 the concept, 0 background, -1 poison.

    Examples
    --------
    >>> from skdiagatt.datasets import make_mil_multi_concept
    >>> X, y, instances = make_mil_multi_concept(6, bag_size=5, n_features=4, random_state=0)
    >>> [int(set(k.tolist()) >= {1, 2}) for k in instances] == y.tolist()
    True
    """
    size, directions, rng, y = _split_setup(
        n_bags, bag_size, n_features, 2, separation, split, random_state
    )
    poison = _poisoned(y, split)
    one = 1 + rng.randint(2, size=n_bags)  # the concept of a negative bag
    kinds = [
        ([1, 2] if y[i] else [int(one[i])]) + [POISON] * int(poison[i]) for i in range(n_bags)
    ]
    X, instances = _bags(kinds, size, directions, separation, rng)
    return X, y, instances


def make_mil_threshold(n_bags=1000, *, threshold=2, bag_size=(10, 20), n_features=10,
                       separation=5.0, split="train", random_state=None):
    """Threshold (counting) test: a bag is positive when it holds ``threshold`` concept instances.

    A positive bag holds exactly ``threshold`` concept instances, a negative
    bag ``threshold - 1``, so that the concept's presence alone says nothing
    (for ``threshold >= 2``).  There is no poison; ``split`` only draws other
    bags.  A model under the standard assumption is not expected to pass:
    the test documents which assumption a model makes.

    Parameters
    ----------
    threshold : int, default=2
        Concept instances of a positive bag (>= 1).
    n_bags, bag_size, n_features, separation, split, random_state
        As in :func:`make_mil_presence`.

    Returns
    -------
    X : list of ndarray, each of shape (p_i, n_features)
    y : ndarray of shape (n_bags,), values in {0, 1}
    instances : list of ndarray of int, each of shape (p_i,)
        1 the concept, 0 background.

    Examples
    --------
    >>> from skdiagatt.datasets import make_mil_threshold
    >>> X, y, instances = make_mil_threshold(6, threshold=3, bag_size=5, n_features=2,
    ...                                      random_state=0)
    >>> [int((k == 1).sum()) for k in instances] == (2 + y).tolist()
    True
    """
    if not isinstance(threshold, numbers.Integral) or threshold < 1:
        raise ValueError(f"threshold must be an int >= 1, got {threshold!r}")
    size, directions, rng, y = _split_setup(
        n_bags, bag_size, n_features, 1, separation, split, random_state
    )
    kinds = [[1] * (threshold - 1 + int(y[i])) for i in range(n_bags)]
    X, instances = _bags(kinds, size, directions, separation, rng)
    return X, y, instances
