"""The structured simulator's family: low signal-to-noise presets and t or clustered backgrounds."""

import numpy as np
import pytest
from scipy.stats import multivariate_normal, multivariate_t

from skdiagatt.bayes import bayes_localize, bayes_predict, bayes_row_scores, gaussian_background_truth
from skdiagatt.datasets import BACKGROUNDS, SIGNAL_STRUCTURES, SNR_PRESETS, make_structured_regression
from skdiagatt.metrics import crlr, rmse

SMALL = dict(n_rows=(10, 20), n_features=6)

# For 30 samples at random_state=0, measured before the backgrounds existed:
# the first signal rows, y[:3] and the first three features of X[0]'s first
# row.  Floats are compared to 1e-9: their last bits follow the machine's
# BLAS, while a change in what is drawn moves them at the first digit.
BEFORE = {
    "subspace": ([7, 87, 81, 35, 21], [-10.922237384355322, -13.119521444435044, -1.3931733967823587],
                 [-0.3424547574536419, -1.5315800348756787, 0.6020644208537306]),
    "location": ([50, 68, 46, 62, 75], [5.787071024094447, 16.317435129713036, 4.377330566166158],
                 [1.331868074545393, 0.8254643556795002, 1.279847362294072]),
    "sparse": ([57, 63, 64, 11, 98], [12.68334887946171, 1.0978780281712013, -9.078535743317202],
               [-0.4930661636460582, 0.38153392828986366, 0.45859804927418324]),
}


@pytest.mark.parametrize("structure", SIGNAL_STRUCTURES)
def test_the_gaussian_background_draws_what_it_drew_before(structure):
    X, y, rows, truth = make_structured_regression(30, structure, random_state=0)
    first_rows, first_y, first_x = BEFORE[structure]
    assert rows[:5].ravel().tolist() == first_rows
    np.testing.assert_allclose(y[:3], first_y, rtol=1e-9)
    np.testing.assert_allclose(X[0][0, :3], first_x, rtol=1e-9)
    assert truth.background == "gaussian" and "df" not in truth


@pytest.mark.parametrize("background", BACKGROUNDS)
@pytest.mark.parametrize("snr", list(SNR_PRESETS))
def test_every_option_is_reproducible_with_its_shapes(background, snr):
    X, y, rows, truth = make_structured_regression(40, "sparse", snr=snr, background=background,
                                                   random_state=3, **SMALL)
    again = make_structured_regression(40, "sparse", snr=snr, background=background, random_state=3, **SMALL)
    assert all(np.array_equal(a, b) for a, b in zip(X, again[0])) and np.array_equal(y, again[1])
    assert len(X) == 40 and y.shape == (40,) and rows.shape == (40, 1)
    assert all(10 <= x.shape[0] <= 20 and x.shape[1] == 6 for x in X)
    assert truth.background == background and truth.shift == SNR_PRESETS[snr]["sparse"]
    if background == "clusters":
        assert truth.cluster_weights.shape == (4,) and truth.cluster_means.shape == (4, 6)
        assert truth.cluster_covs.shape == (4, 6, 6)
        assert np.isclose(truth.cluster_weights.sum(), 1.0)
        assert np.allclose(truth.cluster_weights @ truth.cluster_means, truth.mu)


def test_one_seed_gives_one_signal_law_on_every_background():
    truths = [make_structured_regression(5, background=b, random_state=1, **SMALL)[3] for b in BACKGROUNDS]
    for key in ("mu", "Sigma", "beta", "signal_mean", "signal_cov"):
        assert all(np.array_equal(truths[0][key], t[key]) for t in truths[1:])


@pytest.mark.parametrize("structure", SIGNAL_STRUCTURES)
def test_low_snr_puts_the_bayes_localizer_near_seventy_percent(structure):
    # The preset is meant for the default sizes, 100 rows of 70 features.
    X, _, rows, truth = make_structured_regression(300, structure, snr="low", random_state=0)
    assert 0.6 <= crlr(rows, bayes_localize(X, truth)) <= 0.8


def test_the_t_scores_are_exact_log_likelihood_ratios():
    X, _, _, truth = make_structured_regression(3, background="t", df=4.0, **SMALL, random_state=0)
    background = multivariate_t(truth.mu, truth.Sigma, df=4.0)
    signal = multivariate_normal(truth.signal_mean[0], truth.signal_cov[0])
    for x, score in zip(X, bayes_row_scores(X, truth)):
        assert np.allclose(score[0], signal.logpdf(x) - background.logpdf(x))


def test_the_cluster_scores_are_exact_log_likelihood_ratios():
    X, _, _, truth = make_structured_regression(3, background="clusters", n_clusters=3, **SMALL, random_state=0)
    signal = multivariate_normal(truth.signal_mean[0], truth.signal_cov[0])
    for x, score in zip(X, bayes_row_scores(X, truth)):
        mix = sum(w * multivariate_normal(m, c).pdf(x)
                  for w, m, c in zip(truth.cluster_weights, truth.cluster_means, truth.cluster_covs))
        assert np.allclose(score[0], signal.logpdf(x) - np.log(mix))


def test_the_moments_of_the_gaussian_stand_in_are_those_of_the_rows():
    X, _, rows, truth = make_structured_regression(1000, background="clusters", **SMALL, random_state=0)
    approx = gaussian_background_truth(truth)
    background = np.concatenate([np.delete(x, j, axis=0) for x, j in zip(X, rows[:, 0])])
    assert np.allclose(background.mean(0), approx.mu, atol=0.1)
    assert np.allclose(np.cov(background.T), approx.Sigma, atol=0.3)
    t = make_structured_regression(2, background="t", df=5.0, **SMALL, random_state=0)[3]
    assert np.allclose(gaussian_background_truth(t).Sigma, 5 / 3 * t.Sigma)


# The t law at the default sizes, where the radius of a Gaussian row is
# concentrated and a t row's is not; the clusters in 8 features, where their
# directions are a large share of the space, at low signal-to-noise.
@pytest.mark.parametrize("structure", SIGNAL_STRUCTURES)
@pytest.mark.parametrize("background, options", [
    ("t", dict(n_samples=200)),
    ("clusters", dict(n_samples=400, n_rows=30, n_features=8, snr="low", cluster_separation=5.0)),
])
def test_the_exact_background_beats_its_gaussian_stand_in(structure, background, options):
    X, y, rows, truth = make_structured_regression(structure=structure, background=background,
                                                   random_state=0, **options)
    exact = crlr(rows, bayes_localize(X, truth))
    gaussian = crlr(rows, bayes_localize(X, gaussian_background_truth(truth)))
    assert exact > gaussian + 0.01
    assert rmse(y, bayes_predict(X, truth)) < y.std()


@pytest.mark.parametrize("kw, match", [
    (dict(snr="medium"), "snr must be"),
    (dict(background="laplace"), "background must be"),
    (dict(background="t", df=0.0), "df must be"),
    (dict(df=np.inf), "df must be"),
    (dict(background="clusters", n_clusters=0), "n_clusters must be"),
    (dict(n_clusters=2.5), "n_clusters must be"),
    (dict(cluster_separation=-1.0), "cluster_separation must be"),
])
def test_bad_options_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        make_structured_regression(10, **kw)


def test_a_t_background_without_covariance_has_no_gaussian_stand_in():
    truth = make_structured_regression(2, background="t", df=2.0, **SMALL, random_state=0)[3]
    with pytest.raises(ValueError, match="no covariance"):
        gaussian_background_truth(truth)


def test_an_unknown_background_in_truth_is_refused_by_the_bayes_references():
    X, _, _, truth = make_structured_regression(2, **SMALL, random_state=0)
    truth.background = "laplace"
    with pytest.raises(ValueError, match="truth.background"):
        bayes_localize(X, truth)
